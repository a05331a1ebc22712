"""Library helpers the notebooks call, tested here and not only through the notebooks' replay: notebook 33's
decomposers (training examples, question sample, Table 8, the four decomposers, a run of them and the replayed
summary), notebook 10's cost note, notebook 41's judged stop depths, and the PG&AKV tables of notebooks 12–14
(the demo's questions, the verifier's table, what verification changed on the open set, the chosen examples)."""

from __future__ import annotations

import json

import pytest

from kgqa_lib.bench import baselines as B
from kgqa_lib.bench import pgakv as P
from kgqa_lib.evaluate import keqing_lora as L
from kgqa_lib.evaluate import pgakv_analysis as A


# ---------------------------------------------------------------- notebook 33: the decomposers
def test_training_examples_are_the_pools_gold_decompositions():
    from kgqa_lib.methods.keqing import gold_chain, pool_for

    examples, pool = L.training_examples(), pool_for(L.KG)
    assert len(examples) == len(pool) > 0
    (system, user), answer = examples[0][0], examples[0][1]
    assert system["role"] == "system" and user == {"role": "user", "content": f"Question: {pool[0].question}"}
    subs = json.loads(answer)
    assert len(subs) == len(gold_chain(pool[0]))  # one sub-question per hop of the gold path


def test_sample_questions_per_hop_seeded():
    qs = L.sample_questions([1, 3], 2, seed=0)
    assert [q.metadata["hops"] for q in qs] == [1, 1, 3, 3]
    assert [q.qid for q in qs] == [q.qid for q in L.sample_questions([1, 3], 2, seed=0)]
    assert [q.qid for q in qs] != [q.qid for q in L.sample_questions([1, 3], 2, seed=1)]
    every = L.sample_questions([2], None, seed=0)
    assert len(every) > 2 and all(q.metadata["hops"] == 2 for q in every)


def test_record_file_and_table8(tmp_path, monkeypatch):
    from types import SimpleNamespace

    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path))
    assert L.record_file("abc") == tmp_path / "bench" / "keqing_lora_abc.json"
    recipe = SimpleNamespace(batch=4, steps=16, rank=8, alpha=16, targets=("q_proj", "v_proj"), lr=3e-4)
    t = L.table8(None, recipe, 32)
    assert t.loc["LoRA rank / α / targets / learning rate"].tolist() == ["not given", "8 / 16 / q, v / 0.0003"]
    assert list(t.columns) == ["Keqing paper, Table 8 (MetaQA)", "ours"]
    assert t.loc["epochs", "ours"] == 2.0 and t.loc["training time", "ours"] == "not trained yet"
    assert t.loc["training examples", "Keqing paper, Table 8 (MetaQA)"] == 32927
    assert L.table8(SimpleNamespace(seconds=41.6), recipe, 32).loc["training time", "ours"] == "42 s (recorded)"


def test_template_overlap_counts_the_test_questions_whose_template_the_pool_holds():
    from kgqa_lib.embed.embedder import Embedder

    questions = L.sample_questions([1, 2, 3], 2, 0)
    text = L.template_overlap(questions, 4, Embedder())
    assert text.startswith("The 28 pool questions the training examples come from hold 14 question templates (2 each); "
                           "6 of the 6 test")
    assert text.endswith("the test questions are new, their templates are not.")
    assert "for 0 of them" not in text  # the closest worked examples are the same template's pool questions


def test_the_four_decomposers_share_the_base_weights_and_name_the_adapters(tmp_path):
    from kgqa_lib.llm.chat import LLMCache

    icl = object()
    d = L.decomposers(icl, None, None, "k1", LLMCache(tmp_path / "c.sqlite", transcripts=None), "replay", 4)
    assert list(d) == list(L.DECOMPOSERS)
    assert d["ICL, 1.5B"] == (icl, 4) and d["ICL, 0.5B"][1] == 4 and d["zero-shot, 0.5B"][1] == 0
    assert d["ICL, 0.5B"][0] is d["zero-shot, 0.5B"][0] and d["ICL, 0.5B"][0].model_id == L.BASE_ID
    assert d["LoRA, 0.5B"][0].model_id == f"{L.BASE_ID}+lora-k1" and d["LoRA, 0.5B"][1] == 0


class _Decomposer:
    """Writes the gold decomposition of the questions in ``right``, prose otherwise."""

    def __init__(self, right: dict[str, str]) -> None:
        self.right = right

    def complete(self, request):
        q = request.messages[-1][1].split("Question:", 1)[1].strip()
        return {"text": self.right.get(q, "I would look it up."), "prompt_tokens": 5, "completion_tokens": 5,
                "finish_reason": "stop"}


def test_decompose_all_scores_each_decomposer_against_the_gold_path(tmp_path, tmp_cache):
    from kgqa_lib.embed.embedder import Embedder
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods.keqing import bank_for, format_decomposition, gold_chain, gold_decomposition

    questions = L.sample_questions([1, 2], 1, seed=0)
    bank = bank_for(L.KG)
    gold = {q.question: format_decomposition(gold_decomposition(q, bank)) for q in questions}
    cache = LLMCache(tmp_path / "c.sqlite", transcripts=None)
    good = LLM(_Decomposer(gold), "scripted-good", cache)
    bad = LLM(_Decomposer({}), "scripted-bad", cache)
    runs, usage = L.decompose_all({"good": (good, 0), "bad": (bad, 0)}, questions, Embedder())
    assert list(runs.columns) == ["decomposer", "qid", "hops", "correct", "parse", "predicted chain", "output"]
    good_rows, bad_rows = runs[runs.decomposer == "good"], runs[runs.decomposer == "bad"]
    assert good_rows["correct"].all() and not bad_rows[bad_rows.hops > 1]["correct"].any()
    assert list(good_rows["predicted chain"]) == [" / ".join(gold_chain(q)) for q in questions]
    assert (bad_rows["parse"] == "fallback").all()  # prose is not a decomposition: the question itself is its one step
    assert usage["good"].calls == usage["bad"].calls == len(questions)


def test_recorded_summary_says_what_is_missing_when_not_recorded(tmp_path, tmp_cache, monkeypatch):
    from types import SimpleNamespace

    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path))
    monkeypatch.setattr(L, "training_examples", lambda: [])
    recipe = SimpleNamespace(key=lambda examples: "no-such-recipe")
    from kgqa_lib.errors import UserError

    def missing(*args):
        raise UserError("not recorded: key 1234")

    monkeypatch.setattr(L, "_recorded", missing)
    text = L.recorded_summary([1], 1, 0, recipe, 4)
    assert text.startswith("These settings are not recorded yet (UserError: not recorded: key 1234)")
    metric, value = L.recorded_headline([1], 1, 0, recipe, 4)
    assert "in context with 4 worked examples" in metric and value.startswith("These settings are not recorded yet")


# ---------------------------------------------------------------- notebooks 10 and 41: costs and stop depths
def _pg_rec(qid, trace_seconds=(("generate_pseudo_graph", 6.0), ("semantic_query", 0.5), ("verify", 8.0),
                                ("answer", 2.0)), cache_hits=0):
    return {"qid": qid, "gold": ["x"], "kind": "factoid", "metrics": {"hits@1": 1.0}, "error": None, "seconds": 17.0,
            "response": "", "trace": [{"name": n, "seconds": s} for n, s in trace_seconds],
            "llm": {"calls": 3, "prompt_tokens": 100, "completion_tokens": 20, "recorded_seconds": 16.0,
                    "cache_hits": cache_hits}}


def test_walkthrough_cost_reads_the_records_of_the_same_set():
    recs = [_pg_rec(f"q{i}") for i in range(4)]
    text = P.walkthrough_cost("miniworld:simple", "q2", lambda part, run: recs if (part, run) == ("simple", "pgakv") else [])
    lines = text.splitlines()
    assert lines[0].startswith("From the benchmark's saved records of PG&AKV on every question of miniworld:simple")
    assert "pgakv_t2: the paper's Table 2" in lines[0]  # the table's id, explained
    assert "retrieval (≈ 0.5 s)" in lines[1]
    assert lines[2] == "Live, this question's 3 calls took 16.0 s."
    assert "3 live calls, ≈ 16 s (the mean per question over the 4 questions of the set whose calls all ran live; " \
           "median 16 s)" in lines[3] and "run live, ≈ 10 s (mean)" in lines[3]
    assert lines[4].startswith("Every question of miniworld:simple: ") and "(12 calls)" in lines[4]
    slow = recs[:3] + [_pg_rec("q3", (("generate_pseudo_graph", 100.0), ("verify", 80.0), ("answer", 20.0)))]
    line = P.walkthrough_cost("miniworld:simple", "q2", lambda p, r: slow).splitlines()[3]
    assert "≈ 62 s (the mean" in line and "median 16 s" in line  # one slow question moves the mean, not the median
    cached = recs[:3] + [_pg_rec("q3", cache_hits=3)]
    assert "over the 3 questions of the set" in P.walkthrough_cost("miniworld:simple", "q2", lambda p, r: cached)
    assert "Live, this question" not in P.walkthrough_cost("miniworld:simple", "other", lambda p, r: recs)
    assert P.walkthrough_cost("miniworld:simple", "q2", lambda p, r: []).startswith("No benchmark records")


def test_judged_stop_depths_counts_the_judges_stops_only():
    def rec(stopped, depth):
        return {"summary": {"tog": {"stopped": stopped, "depth_reached": depth}}}

    recs = [rec("judged_sufficient", 1), rec("judged_sufficient", 1), rec("judged_sufficient", 3),
            rec("max_depth", 3), rec("beam_empty", 2), {"summary": {}}]
    got = B.judged_stop_depths(recs)
    assert got == {1: 2, 3: 1} and got[2] == 0


# ---------------------------------------------------------------- notebooks 12–14: PG&AKV tables
def test_demo_qids_are_the_notebooks_sample():
    from kgqa_lib.data.datasets import load_dataset

    got = P.demo_qids(["miniworld:simple", "miniworld:multihop", "metaqa:1hop"], 3, 0)
    assert set(got) == {"simple", "multihop"} and all(len(v) == 3 for v in got.values())
    assert got["simple"] == {q.qid for q in load_dataset("miniworld:simple", sample=3, seed=0)}


def _traced(qid, sketch, ground, final, deleted=(), added=(), rouge=None, pred=("x",)):
    trace = [{"name": "cypher_to_triples", "output": {"triples": [list(t) for t in sketch]}, "seconds": 0.0},
             {"name": "prune", "output": {"triples": [list(t) for t in ground]}, "seconds": 0.0},
             {"name": "verify", "output": {"triples": [list(t) for t in final], "deleted": [list(t) for t in deleted],
                                           "added": [list(t) for t in added]}, "seconds": 0.0}]
    metrics = {"rouge_l": rouge} if rouge is not None else {"hits@1": 1.0}
    return {"qid": qid, "question": f"question {qid}", "gold": ["g"], "prediction": list(pred), "metrics": metrics,
            "trace": trace, "response": "", "error": None}


@pytest.fixture
def tests_only(monkeypatch):
    """Every question is a test question; no run chosen on dev (the paper's threshold run only)."""
    monkeypatch.setattr(A, "complete_only", lambda load: load)
    monkeypatch.setattr(A, "choose_pruning", lambda *a, **k: (_ for _ in ()).throw(ValueError("no dev runs")))
    monkeypatch.setattr(A, "split_qids", lambda part: (set(), {f"{part}-{i}" for i in range(4)}))


def test_verifier_table_shares(tests_only):
    t1 = ("a", "r", "b")
    simple = [_traced("simple-0", [t1], [], [t1]), _traced("simple-1", [t1], [t1], [t1]),
              _traced("simple-2", [t1], [t1], [("a", "r", "c")], deleted=[t1], added=[("a", "r", "c")]),
              _traced("simple-3", [t1], [], [t1])]
    t = P.verifier_table(lambda part, run: simple if (part, run) == ("simple", "pgakv") else [])
    rows = {r[1]: r for r in t.rows}
    # half had an empty G_g; of the 2 shown, one came back unchanged (questions, with their percent)
    assert rows["simple"][2:] == (4, "2 (50 %)", "1 of 2 (50 %)")
    assert rows["multihop"][2] == P.NOT_RUN and rows["multihop"][3] == ""
    assert P.verifier_reading(lambda part, run: simple if (part, run) == ("simple", "pgakv") else []) == ""
    multihop = [dict(r, qid=r["qid"].replace("simple", "multihop")) for r in simple]
    both = lambda part, run: {"simple": simple, "multihop": multihop}[part] if run == "pgakv" else []  # noqa: E731
    text = P.verifier_reading(both)
    assert text.startswith("What verification had to work with, on the test questions:\n- PG&AKV (threshold 0.7")
    assert "G_g is empty for 50% and 50% of the simple and multihop test questions" in text
    assert text.endswith("returns the sketch unchanged for 50% and 50%.")


def test_open_changes_and_examples_pick_by_gain(tests_only):
    t1, t2 = ("a", "r", "b"), ("a", "s", "c")
    pg = [_traced(f"open-{i}", [t1], [t2], [t1, t2], added=[t2], rouge=0.1 * i, pred=(f"answer {i}",)) for i in range(4)]
    io = [dict(_traced(f"open-{i}", [], [], [], rouge=0.2), trace=[]) for i in range(4)]
    load = {("open", "pgakv"): pg, ("open", "io"): io}
    t = P.open_changes_table(lambda part, run: load.get((part, run), []))
    measures = {r[0]: r[1] for r in t.rows}
    assert measures["questions"] == 4 and measures["added from G_g"] == 4 and measures["kept"] == 4
    text = P.open_examples(lambda part, run: load.get((part, run), []))
    order = [line.split(" ")[1] for line in text.splitlines() if line.startswith("=== ")]
    assert order == ["open-3", "open-2", "open-0"]  # largest gain over IO, the median, the smallest
    assert P.open_examples(lambda part, run: []).startswith("The open set: PG&AKV or IO")


def test_schema_example_is_the_first_question_whose_ground_graphs_differ(tests_only, monkeypatch):
    monkeypatch.setattr(A, "SCHEMA_RUNS", {"wikidata": "wd", "freebase": "fb"})
    t1, t2 = ("France", "capital", "Paris"), ("m.france", "location.country.capital", "m.paris")
    wd = [_traced("simple-0", [], [t1], []), _traced("simple-1", [], [t1], [])]
    fb = [_traced("simple-0", [], [t1], []), _traced("simple-1", [], [t2], [])]
    load = {("simple", "wd"): wd, ("simple", "fb"): fb}
    text = P.schema_example(lambda part, run: load.get((part, run), []))
    lines = text.splitlines()
    assert lines[0] == "question simple-1 | gold: g"
    assert lines[1].startswith("[Wikidata-like]") and lines[2] == "  France | capital | Paris"
    assert lines[3].startswith("[Freebase-like]") and "m.paris" in lines[4]
    assert "no question whose ground graphs differ" in P.schema_example(lambda part, run: wd if run == "wd" else wd)



# ---------------------------------------------------------------- walkthrough pictures and the answer's source
def test_keqing_layers_follow_the_chosen_groups_to_the_kept_answers():
    from types import SimpleNamespace as NS

    from kgqa_lib.evaluate.walkthrough import keqing_layers

    # the groups' triples name their entities by label, as retrieve_candidates writes them
    g1 = NS(triples=[("t", "directed_by", "a"), ("t", "directed_by", "b")], reached=["ex://A", "ex://B"],
            chain=("directed_by",), stated=[])
    g2 = NS(triples=[("a", "born_in", "Paris")], reached=["Paris"], chain=("born_in",), stated=[])
    steps = [NS(seeds=["ex://T"], sub=NS(id="s1"), groups=[g1], reasoning=NS(answers=["ex://A"], chosen=[0])),
             NS(seeds=["ex://A"], sub=NS(id="s2"), groups=[NS(triples=[], reached=[], chain=("x",), stated=[]), g2],
                reasoning=NS(answers=["Paris"], chosen=[1]))]
    layers, edges, titles = keqing_layers(steps, lambda v: v.removeprefix("ex://").lower())
    assert layers == [["t"], ["a", "b (not selected)"], ["Paris"]]  # B was reached but not kept: drawn, marked
    assert edges == [(0, "t", "a"), (0, "t", "b (not selected)"), (1, "a", "Paris")]  # every edge joins drawn boxes
    assert titles == ["topic entity", "s1: directed_by", "s2: born_in"]


def test_tog_answer_reports_the_methods_choice_and_the_answering_reply():
    from types import SimpleNamespace as NS

    from kgqa_lib.evaluate.walkthrough import tog_answer

    summary = NS(name="summary", output={"answer_from": "own_knowledge", "stopped": "max_depth", "depth_reached": 3,
                                          "calls": {"relations": 3, "judge": 3}})
    asked = NS(name="answer_from_own_knowledge", output=NS(text="I think {Paris}.\n"))
    text = tog_answer(NS(answers=["Paris"], trace=[summary, asked]), ["Paris", "Lyon"])
    lines = text.splitlines()
    assert lines[0].startswith("answer from own knowledge: ['Paris'] {'hits@1': 1.0, 'f1': 0.66")  # 1 of 2 gold
    assert lines[1] == "search stopped: max_depth after 3 depth(s) | LLM calls: {'relations': 3, 'judge': 3}"
    assert lines[2] == "the answering call replied: I think {Paris}."
    judged = NS(name="summary", output={**summary.output, "answer_from": "judge", "stopped": "judged_sufficient"})
    assert len(tog_answer(NS(answers=[], trace=[judged]), ["x"]).splitlines()) == 2  # the judge answered: no call


# ---------------------------------------------------------------- the figures moved out of notebooks 12, 14, 20, 90
@pytest.fixture
def agg():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


def test_pruning_sweep_draws_a_line_per_k_and_the_two_thresholds(agg, monkeypatch):
    import pandas as pd

    from kgqa_lib import viz

    monkeypatch.setattr(A, "gold_funnel", lambda r: {"G_t": r["gt"]})
    sweep = pd.DataFrame([("simple", k, th, 0.5) for k in (1, 3) for th in (0.3, 0.7)],
                         columns=["set", "k", "threshold", "gold in G_g"])
    fig = viz.pruning_sweep(sweep, {"simple": [{"gt": 1.0}, {"gt": 0.0}]}, 0.7, 0.5)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["k = 1", "k = 3", "gold among retrieved (G_t)", "the paper's threshold", "chosen on dev"]
    assert list(ax.get_lines()[2].get_ydata()) == [0.5, 0.5]  # the ceiling: the mean share among retrieved
    assert ax.get_title() == "simple, dev questions (n=2)" and "G_g" in ax.get_ylabel()


def test_gold_funnel_lines_one_line_per_set(agg):
    import pandas as pd

    from kgqa_lib import viz

    frame = pd.DataFrame({"run": ["pgakv", "pgakv"], "n": [10, 20], "G_p": [0.9, 0.8], "G_t": [0.8, 0.7],
                          "G_g": [0.5, 0.4], "G_f": [0.4, 0.3]}, index=pd.Index(["simple", "multihop"], name="set"))
    ax = viz.gold_funnel_lines(frame).axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["simple, pgakv (n=10)", "multihop, pgakv (n=20)"]
    assert list(ax.get_lines()[1].get_ydata()) == [0.8, 0.7, 0.4, 0.3] and ax.get_ylim() == (0, 1)


def test_retrieved_paths_mark_the_gold_path_and_each_scale(agg):
    import pandas as pd

    from kgqa_lib import viz

    t = pd.DataFrame([("bm25", "x → a.b.directed_by", 7.5, False), ("bm25", "x → a.b.born_in", 6.0, True),
                      ("dense", "x → a.b.born_in", 0.8, True)], columns=["retriever", "path", "score", "gold"])
    fig = viz.retrieved_paths(t, ["bm25", "dense"], 2, "Where was the director born?")
    bm25, dense = fig.axes
    assert [tick.get_text() for tick in bm25.get_yticklabels()] == ["directed_by", "born_in"]
    assert [p.get_facecolor()[:3] for p in bm25.patches][1] != [p.get_facecolor()[:3] for p in bm25.patches][0]
    assert "BM25" in bm25.get_xlabel() and dense.get_xlabel() == "cosine similarity"
    assert bm25.get_title() == "bm25: top 2 paths (red = the gold path)" and fig._suptitle.get_text().startswith("Where")


def test_overview_panels_skip_fusic_and_shorten_the_fragments_name(agg, monkeypatch):
    import pandas as pd

    from kgqa_lib import viz
    from kgqa_lib.bench import overview as O

    drawn = []
    monkeypatch.setattr(O, "plot", lambda ax, rows, title: drawn.append((list(rows["set"]), title)) or
                        ax.bar([0], [1], label="ours"))
    ov = pd.DataFrame([("Keqing", "Hits@1", f"GrailQA ({O.FRAGMENT})", "a"), ("Keqing", "Hits@1", "MetaQA 1-hop", "b"),
                       ("FuSIC-KBQA", "F1", "a → b", "a"), ("PG&AKV", "Hits@1", "simple", "IO"),
                       ("PG&AKV", "Hits@1", "MetaQA 1-hop", "IO")], columns=["paper", "metric", "set", "method"])
    fig = viz.overview_panels(ov)
    assert len(fig.axes) == 2 and [t for _, t in drawn][0].endswith("; GrailQA on a gold-fact fragment")
    assert drawn[0][0] == ["GrailQA", "MetaQA 1-hop"] and drawn[1][1].startswith("PG&AKV, Hits@1 (IO only): ours")
    assert drawn[1][1].endswith("the paper's ticks: SimpleQuestions beside simple and 1-hop, QALD-10 beside the others")


# ---------------------------------------------------------------- small readers the results notebooks print
def test_completeness_line_and_cell_text():
    from kgqa_lib.bench.core import completeness_line, get_table
    from kgqa_lib.bench.overview import cell_text

    t = get_table("keqing_full")
    k = {"complete": 3, "cells": 4, "questions": 250, "planned": 400, "needed complete": 2, "needed": 3}
    assert completeness_line(t, k=k) == "3/4 cells complete, 250/400 questions (cells the table needs: 2/3 complete)"
    assert completeness_line(t, k={**k, "needed": 4}) == "3/4 cells complete, 250/400 questions"
    assert cell_text({"status": "complete", "value": 97.04, "ci_low": 94.0, "ci_high": 99.0}) == "97.0 [94.0, 99.0]"
    assert cell_text({"status": "partial 13/100", "value": 50.0, "ci_low": 0.0, "ci_high": 1.0}) == "partial 13/100"


def test_ci_cell_in_points():
    from kgqa_lib.evaluate.report import ci_cell

    recs = [{"qid": f"q{i}", "metrics": {"hits@1": float(i < 3)}, "seconds": 1.0,
             "llm": {"calls": 1, "prompt_tokens": 1, "completion_tokens": 1, "recorded_seconds": 1.0, "cache_hits": 1}}
            for i in range(4)]
    text = ci_cell(recs, "hits@1")
    assert text.startswith("75.0 [") and text.endswith("] (n=4)")
    lo, hi = (float(x) for x in text.split("[")[1].split("]")[0].split(", "))
    assert 0.0 <= lo <= 75.0 <= hi <= 100.0
    assert ci_cell([], "hits@1", empty="not run") == "not run" and "(n=" not in ci_cell(recs, "hits@1", with_n=False)


def test_tog_deeper_explores_and_judges_until_a_stop(monkeypatch, capsys):
    from types import SimpleNamespace as NS

    from kgqa_lib.evaluate import walkthrough as W
    from kgqa_lib.methods import tog as T

    verdicts = iter([False, True])
    asked = []

    def explore(question, beam, ctx, depth, s):
        return NS(depth=depth, beam=["p"], judgement=None, judge_skipped=None)

    def judge(question, beam, ctx, max_triples):
        asked.append(max_triples)
        return NS(sufficient=next(verdicts), text="{No}" if len(asked) == 1 else "{Yes} {A}")

    monkeypatch.setattr(T, "explore_depth", explore)
    monkeypatch.setattr(T, "judge", judge)
    monkeypatch.setattr(T, "paths_text", lambda beam, kg, n: "(a | r | b)")
    for name in ("tog_relations", "tog_entities", "tog_beam"):
        monkeypatch.setattr(W, name, lambda step, name=name: f"{name} {step.depth}")
    shown = []
    s = NS(depth=3, min_depth=0, max_triples=40)
    first = NS(depth=1, beam=["p"], judgement=NS(sufficient=False))
    steps = [first]
    assert W.tog_deeper("q?", steps, None, s, None, display=lambda *a: shown.append(a)) == "judged_sufficient"
    assert [st.depth for st in steps] == [1, 2, 3] and asked == [40, 40]
    assert shown[0] == ("tog_relations 2", "tog_entities 2", "tog_beam 2")
    assert "(a | r | b)" in capsys.readouterr().out
    # the depth floor: no judge below min_depth; an empty beam stops; the last depth ends the search
    asked.clear()
    verdicts = iter([False])
    steps = [NS(depth=1, beam=["p"], judgement=None)]
    assert W.tog_deeper("q?", steps, None, NS(depth=3, min_depth=3, max_triples=9), None, display=lambda *a: None) == "max_depth"
    assert asked == [9] and steps[1].judge_skipped and steps[2].judge_skipped is None
    assert W.tog_search_state(NS(beam=[], judgement=None)) == "beam_empty"
    assert W.tog_deeper("q?", [NS(depth=1, beam=[], judgement=None)], None, s, None, display=print) == "beam_empty"


def test_judged_stops_line_counts_the_saved_tog_records(monkeypatch):
    def rec(stopped, depth):
        return {"summary": {"tog": {"stopped": stopped, "depth_reached": depth}}, "metrics": {"hits@1": 0.0}}

    saved = {"tog_multihop": [rec("judged_sufficient", 1), rec("judged_sufficient", 2), rec("max_depth", 3)],
             "tog_metaqa_2hop": [rec("judged_sufficient", 1)], "kbbinder_metaqa_1hop": [rec("judged_sufficient", 1)]}
    monkeypatch.setattr(B, "Records", lambda table: (lambda name: saved.get(name, [])))
    assert B.judged_stops_line() == ("in the saved ToG benchmark records: 3 searches stopped by the judge, 2 of them at "
                                     "depth 1; on MetaQA dev (our reported part) it stops at depth 1, before a path can "
                                     "reach the answer, on 1 of 1 2-hop questions (Hits@1 0.0 on those, — on the "
                                     "others)")


def test_split_votes_line_counts_questions_and_every_draft_by_outcome():
    def rec(qid, statuses, sets):
        return {"qid": qid, "summary": {"vote": {"statuses": statuses, "answer_sets": sets, "winning_votes": 1}},
                "metrics": {"f1": 1.0}}

    cells = {"a.kbbinder_fs": [rec("q1", {"ok": 6}, 1), rec("q2", {"ok": 3, "no_answer": 3}, 1)],
             "b.kbbinder_fs": [rec("q3", {"ok": 4, "bad_form": 2}, 2)]}
    line = B.split_votes_line(cells)
    assert line.startswith("2 of the 3 questions of a.kbbinder_fs and b.kbbinder_fs had drafts that disagreed")
    assert "All 18 drafts of the cells by outcome: ok 13, no_answer 3, bad_form 2 — 28 % answer nothing" in line


def test_exact_gap_sorts_right_first_answers_with_a_wrong_set_by_precision_and_recall():
    def rec(hits, exact, p, r, f1):
        return {"metrics": {"hits@1": hits, "exact_match": exact, "precision": p, "recall": r, "f1": f1}}

    recs = [rec(1, 1, 1, 1, 1), rec(1, 0, 0.5, 1, 0.6), rec(1, 0, 1, 0.5, 0.8), rec(1, 0, 0.5, 0.5, 0.4),
            rec(0, 0, 0, 0, 0)]
    gap = B.exact_gap(recs)
    assert gap["f1"] == pytest.approx(60.0) and gap["f1 min"] == pytest.approx(40.0)
    assert {k: gap[k] for k in ("n", "over", "under", "both", "f1 ≥ 50")} == \
        {"n": 3, "over": 1, "under": 1, "both": 1, "f1 ≥ 50": 2}
    line = B.exact_gap_line({3: recs})
    assert "(3-hop): 3 questions have a right first answer but not the gold set; of them 1 hold every" in line
    assert line.endswith("Their F1: mean 60.0, lowest 40.0; 2 of them score F1 ≥ 50.")
    assert B.exact_gap_line({3: []}) == ""
    assert "mean —, lowest —; 0 of them" in B.exact_gap_line({3: recs[:1]})  # no such question: no number
