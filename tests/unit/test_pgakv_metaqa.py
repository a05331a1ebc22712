"""PG&AKV on the MetaQA KB: semantic querying over every triple of a KG (``search_scope=kg``), the dev
part disjoint from the reported questions, the threshold chosen by the rule fixed with the grid, and
stripped records that keep the funnel but no question text or gold."""

from __future__ import annotations

import pytest

from kgqa_lib.bench import core
from kgqa_lib.bench import pgakv_metaqa as PM
from kgqa_lib.data.datasets import Question
from kgqa_lib.methods import pgakv as P

SKETCH = """```cypher
CREATE (f:Film {name: 'Inception'})-[:DIRECTED_BY]->(p:Person {name: 'Christopher Nolan'})
```"""


class Scripted:
    def __init__(self):
        self.calls = []

    def complete(self, request):
        self.calls.append(request.messages)
        reply = SKETCH if len(self.calls) == 1 else "{Christopher Nolan}"
        return {"text": reply, "prompt_tokens": 5, "completion_tokens": 2, "finish_reason": "stop"}


@pytest.fixture(scope="module")
def tiny():
    from kgqa_lib.kg.sources import load_named

    return load_named("tiny")


def _ctx(tmp_path, kg, **settings):
    from kgqa_lib.embed.embedder import Embedder
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context

    return Context(llm=LLM(Scripted(), "scripted", LLMCache(tmp_path / "llm.sqlite", transcripts=None)), kg=kg,
                   embedder=Embedder(), settings={"kg": "tiny", **settings})


def test_search_scope_kg_searches_every_triple_not_only_g_base(tmp_path, tmp_cache, tiny):
    q = Question("t1", "who directed Inception", ["Christopher Nolan"], [])  # no annotated topic: G_base is small
    base = P.pgakv(q, _ctx(tmp_path / "a", tiny, verify=False))
    every = P.pgakv(q, _ctx(tmp_path / "b", tiny, verify=False, search_scope="kg"))
    ret_base = next(s.output for s in base.trace if s.name == "semantic_query")
    ret_kg = next(s.output for s in every.trace if s.name == "semantic_query")
    assert ret_kg.candidates == len(tiny.all_triples()) > ret_base.candidates
    assert any(tuple(h["triple"]) == ("Inception", "directed by", "Christopher Nolan") for h in ret_kg.hits)
    assert every.answers == ["Christopher Nolan"]


def test_qsm_searches_the_whole_kg_with_the_same_setting(tmp_path, tmp_cache, tiny):
    q = Question("t1", "who directed Inception", ["Christopher Nolan"], [])
    ret = P.match_question(q, _ctx(tmp_path, tiny, search_scope="kg"), 5)
    assert ret.candidates == len(tiny.all_triples()) and len(ret.hits) == 5


def test_the_chosen_threshold_is_what_the_rule_gives_on_the_dev_records():
    scores = PM.dev_scores(core.Records(PM.TABLE))
    rule = PM.choose(scores)
    assert PM.CHOSEN == rule, (f"the dev cells give {rule}: set CHOSEN to it" if rule is not None
                               else "CHOSEN is set before every dev cell is complete")
    assert PM.PAPER_THRESHOLD in PM.GRID


def test_the_rule_takes_the_best_pooled_dev_score_and_ties_go_to_the_papers_value():
    def scores(values):
        return {t: {"pooled": v, "n": PM.DEV * len(PM.HOPS), "per_hop": {}} for t, v in zip(PM.GRID, values)}

    assert PM.choose(scores([0.3, 0.5, 0.4, 0.2])) == 0.6
    assert PM.choose(scores([0.5, 0.5, 0.5, 0.5])) == 0.7
    short = scores([0.9, 0.1, 0.1, 0.1])
    short[0.5]["n"] -= 1
    assert PM.choose(short) is None  # no choice before every dev question is answered


def test_dev_cells_come_first_and_reported_cells_hold_baselines_questions():
    names = [c.name for c in PM.TABLE.cells]
    assert all(n.startswith("dev_") for n in names[:len(PM.GRID) * len(PM.HOPS)])
    tog = {c.dataset: c.args for c in core.get_table("baselines_metaqa").cells if c.method == "tog"}
    for c in PM.TABLE.cells:
        if not c.name.startswith("dev_"):
            assert c.dataset in tog and c.args[:2] == tog[c.dataset][:2]  # the same seeded sample


def test_dev_part_is_disjoint_from_every_reported_metaqa_question(data_dir_or_skip):
    if not (data_dir_or_skip / "metaqa").is_dir():
        pytest.skip("MetaQA not under KGQA_DATA_DIR")
    from kgqa_lib.registry import load_dataset

    for h in PM.HOPS:
        dev = {q.qid for q in load_dataset(f"pgakv:metaqa:{h}hop:dev")}
        reported = {q.qid for q in load_dataset(f"keqing:metaqa:{h}hop")}  # every table's MetaQA questions
        assert len(dev) > PM.DEV and not dev & reported


def test_strip_keeps_the_funnel_and_no_text(tmp_path, tmp_cache, tiny):
    from kgqa_lib.evaluate.runner import _jsonable

    q = Question("t1", "who directed Inception", ["Christopher Nolan"], [])
    res = P.pgakv(q, _ctx(tmp_path, tiny, search_scope="kg"))
    record = {"qid": "t1", "question": q.question, "gold": q.answers, "prediction": res.answers, "metrics": {"hits@1": 1.0},
              "trace": _jsonable(res.trace), "llm": {"calls": 3, "seconds": 1.0}, "seconds": 2.0}
    s = PM.strip(record)
    assert s["funnel"]["gold"]["G_t"] and s["funnel"]["sizes"]["searched"] == len(tiny.all_triples())
    assert "question" not in s and "gold" not in s and s["prediction"] == ["Christopher Nolan"]


def test_the_report_renders_the_same_tables_the_notebooks_get():
    tables = PM.result_tables(core.Records(PM.TABLE))
    text = PM.report(core.Records(PM.TABLE))
    frames = PM.frames()
    assert list(frames) == list(tables) == ["dev", "results", "claims", "mini_world", "funnel", "gains"]
    for name, t in tables.items():
        assert t.markdown() in text  # the report shows the table as it is, not a copy
        df = frames[name]
        assert len(df) == len(t.rows) and list(df.columns) == list(t.columns[1:])
        assert [str(i) for i in df.index] == [str(r[0]) for r in t.rows]


# ---------------------------------------------------------------- one rule: a cell counts only when complete
def _rec(qid, hit):
    return {"qid": qid, "metrics": {"hits@1": hit}, "seconds": 2.0, "error": None,
            "llm": {"calls": 3, "prompt_tokens": 10, "completion_tokens": 2, "seconds": 1.0, "recorded_seconds": 1.0,
                    "cache_hits": 0},
            "funnel": {"gold": {"G_p": False, "G_t": True, "G_g": hit > 0, "G_f": hit > 0},
                       "sizes": {"searched": 10, "G_t": 5, "G_g": 2, "G_f": 1}, "cypher_error": False}}


def _synthetic(pgakv_questions):
    """IO, CoT, SC and QSM complete on 1-hop (QSM right on 71 of 100), PG&AKV right on none of its
    ``pgakv_questions`` 1-hop questions; every other cell empty."""
    cells = {f"{m}_1hop": [_rec(f"q{i}", float(i < k)) for i in range(PM.REPORTED)]
             for m, k in (("io", 10), ("cot", 8), ("sc", 5), ("qsm", 71))}
    cells["pgakv_1hop"] = [_rec(f"q{i}", 0.0) for i in range(pgakv_questions)]
    return lambda name: cells.get(name, [])


def test_an_incomplete_cell_reads_running_and_no_verdict_or_gain_is_drawn_from_it():
    records = _synthetic(75)
    t = PM.result_tables(records)
    results = {r[0]: r for r in t["results"].rows}
    assert results[PM.ROWS["pgakv"]][1] == "running: 75 of 100"
    assert results[PM.ROWS["qsm"]][1].startswith("71.0 [") and results[PM.ROWS["pgakv"]][2] == "not run yet"
    claims = " ".join(str(c) for r in t["claims"].rows for c in r[1:])
    assert "reversed" not in claims and "holds" not in claims and "unclear" not in claims and "points" not in claims
    assert "not measured yet (PG&AKV (threshold 0.7) running: 75 of 100)" in claims
    gains = [r[1] for r in t["gains"].rows if r[0].startswith(PM.ROWS["pgakv"])]
    assert gains and all(g.startswith("— (") and "[" not in g for g in gains)
    mini = {r[0]: r for r in t["mini_world"].rows}
    assert mini[PM.ROWS["pgakv"]][3] == "running: 75 of 100" and mini["PG&AKV − QSM (paired)"][3].startswith("— (")
    assert t["funnel"].rows[0][1] == "running: 75 of 100" and t["funnel"].rows[0][2] == "—"
    frames = {name: tab.frame() for name, tab in t.items()}
    assert frames["results"].loc[PM.ROWS["pgakv"], "1-hop"] == "running: 75 of 100"  # the notebook sees the same


def test_a_complete_cell_gives_its_verdicts_and_gains():
    t = PM.result_tables(_synthetic(PM.REPORTED))
    claims = {r[0]: r for r in t["claims"].rows}
    assert claims["PG&AKV above QSM (Table 2)"][1].startswith("reversed (-71.0 points, CI below 0, n=100)")
    # the project's three words, and the best KG-free baseline named per hop
    assert claims["PG&AKV above the best KG-free baseline (Table 2)"][1] == (
        "vs IO, the best KG-free at 1-hop: reversed (-10.0 points, CI below 0, n=100)")
    assert claims["Pseudo-Graph above CoT (Table 4)"][1] == "not measured yet"
    assert next(r for r in t["results"].rows if r[0] == PM.ROWS["pgakv"])[1].startswith("0.0 [0.0, 0.0] (n=100)")
    assert t["funnel"].rows[0][1] == 100


def test_the_claims_and_the_funnel_in_words_follow_their_tables():
    words = PM.claims_in_words(_synthetic(PM.REPORTED))
    items = words.split("\n- ")[1:]
    assert len(items) == 4 and items[1] == "PG&AKV above QSM (Table 2): is reversed (the other way) at 1-hop; is not " \
                                           "measured yet at 2-hop and 3-hop."
    assert items[0].startswith("PG&AKV above the best KG-free baseline (Table 2; here IO at every hop): is reversed")
    assert "is not measured yet at 1-hop, 2-hop and 3-hop." in items[2]
    running = PM.claims_in_words(_synthetic(75))
    assert "holds" not in running and "reversed" not in running and "unclear" not in running
    assert PM.funnel_in_words(_synthetic(75)) == ""  # no PG&AKV cell complete: nothing to say
    funnel = PM.funnel_in_words(_synthetic(PM.REPORTED))
    # QSM's 71 hits do not matter here: PG&AKV's own records, gold in G_t always, in G_g never (no hit)
    assert "(10 triples searched per question)" in funnel and "into G_t for 100% of the 1-hop questions" in funnel
    assert "pruning keeps it in G_g for 0%" in funnel and "a question takes 1.0 s" in funnel
    assert PM.funnel_reading(_synthetic(PM.REPORTED)) == funnel  # no gold in G_f without G_g here: no second note


def test_the_summary_says_what_is_complete_and_what_is_running():
    from kgqa_lib.bench import pgakv as P

    text = P._metaqa_sentence(_synthetic(75))
    assert "not run yet" in text and "PG&AKV and QSM are not run yet" not in text
    assert "MetaQA dev (our reported part)" in text and "IO 10.0 [" not in text  # the gaps only: the cells are in the table
    assert "still running: PG&AKV (threshold 0.7) 1-hop (75 of 100)" in text
    assert "PG&AKV − QSM is not measured until both cells of a hop are complete" in text
    assert "best KG-free" not in text  # PG&AKV's cell is not complete: no gap is drawn from it
    done = PM.summary(_synthetic(PM.REPORTED))
    assert "PG&AKV − QSM is -71.0 [" in done and "on 1-hop, not measured yet on 2-hop" in done
    assert "PG&AKV − the best KG-free baseline is -10.0 [" in done and "(IO) on 1-hop, not measured yet on 2-hop" in done
    assert "still running" not in done and "no cell is complete yet" not in done
    assert "no cell is complete yet" in PM.summary(lambda name: [])


# ---------------------------------------------------------------- the dev choice's margin, the funnel's G_f
def _dev(right: dict[float, int]):
    """Every dev cell complete; threshold t right on the first ``right[t]`` of the pooled dev questions."""
    qids = [f"{h}-{i}" for h in PM.HOPS for i in range(PM.DEV)]
    cells = {}
    for t, k in right.items():
        rank = {q: j for j, q in enumerate(qids)}
        for h in PM.HOPS:
            cells[f"dev_thr{PM._thr(t)}_{h}hop"] = [_rec(q, float(rank[q] < k)) for q in qids if q.startswith(f"{h}-")]
    return lambda name: cells.get(name, [])


def test_the_dev_margin_counts_the_questions_between_the_choice_and_the_runner_up():
    close = PM.dev_margin(_dev({0.5: 30, 0.6: 29, 0.7: 28, 0.8: 10}))
    assert (close["chosen"], close["runner-up"], close["right"], close["n"]) == (0.5, 0.6, (30, 29), 150)
    assert close["margin"] == 1 and close["weak"]  # one question: the paired CI reaches 0
    text = PM.dev_margin_text(_dev({0.5: 30, 0.6: 29, 0.7: 28, 0.8: 10}))
    assert "0.5 answers 30 right and the runner-up, 0.6, 29: 1 question apart" in text and "the choice is weak" in text
    clear = PM.dev_margin(_dev({0.5: 10, 0.6: 12, 0.7: 60, 0.8: 11}))
    assert (clear["chosen"], clear["runner-up"], clear["margin"], clear["weak"]) == (0.7, 0.6, 48, False)
    assert "tells the two thresholds apart" in PM.dev_margin_text(_dev({0.5: 10, 0.6: 12, 0.7: 60, 0.8: 11}))
    tie = PM.dev_margin(_dev({0.5: 20, 0.6: 20, 0.7: 20, 0.8: 20}))
    assert (tie["chosen"], tie["margin"], tie["weak"]) == (0.7, 0, True)  # ties go to the paper's value
    assert PM.dev_margin(lambda name: []) is None and PM.dev_margin_text(lambda name: []) == ""


def test_the_funnel_note_says_why_gold_is_in_g_f_but_not_in_g_g():
    def rec(i, g_p, g_g, g_f):
        r = _rec(f"q{i}", 0.0)
        r["funnel"]["gold"] = {"G_p": g_p, "G_t": True, "G_g": g_g, "G_f": g_f}
        return r

    recs = ([rec(i, True, False, True) for i in range(6)] + [rec(6, False, False, True)]
            + [rec(i, False, True, True) for i in range(7, PM.REPORTED)])
    note = PM.funnel_gf_note(PM._rows(lambda name: recs if name == "pgakv_2hop" else []))
    assert "verification rewrites the pseudo-graph G_p against G_g" in note
    assert "2-hop 7 (6 of them with it already in G_p)" in note and "1-hop 0 (0 of them" in note
    assert PM.funnel_gf_note(PM._rows(lambda name: [])) == ""


def test_the_committed_report_says_the_margin_and_why_g_f_can_exceed_g_g():
    records = core.Records(PM.TABLE)
    text = PM.report(records)
    margin, note = PM.dev_margin_text(records), PM.funnel_gf_note(PM._rows(records))
    assert margin and margin in text and note and note in text
    from kgqa_lib.paths import repo_root

    assert margin in (repo_root() / "results" / "bench" / PM.TABLE.output).read_text(encoding="utf-8")


def test_strip_keeps_what_pgakv_produced_without_prompts_or_question():
    """A stripped MetaQA record keeps the Cypher the model wrote, the retrieved triples, the kept subjects and
    the verified triples (for `kgqa bench show`), never a prompt or the question text."""
    from kgqa_lib.bench import pgakv_metaqa as P

    q = "what movies did secret person star in"
    r = {"qid": "metaqa-1hop-dev-1", "question": q, "metrics": {"hits@1": 0.0}, "prediction": ["Y"],
         "trace": [{"name": "generate_pseudo_graph", "output": {"prompt": f"Question: {q}", "text": "..."}},
                   {"name": "cypher_to_triples", "output": {"cypher": "CREATE (a {name: 'A'})", "errors": 0}},
                   {"name": "semantic_query", "output": {"candidates": 9, "hits": [
                       {"triple": ["F", "starred actors", "A"], "score": 0.75, "pseudo": 0}] * 30}},
                   {"name": "prune", "output": {"subjects": [{"label": "F", "kept": True}, {"label": "G", "kept": False}]}},
                   {"name": "verify", "output": {"triples": [["A", "starred actors", "F"]], "added": [],
                                                 "deleted": [["A", "r", "Z"]], "generation": {"prompt": q}}},
                   {"name": "answer", "output": {"prompt": f"Knowledge: ... Question: {q}"}}]}
    s = P.strip(r)
    assert q not in repr(s) and "question" not in s
    assert s["cypher"] == "CREATE (a {name: 'A'})" and s["kept_subjects"] == ["F"]
    assert len(s["retrieved"]) == P.MAX_KEPT_TRIPLES and s["retrieved"][0] == ["F", "starred actors", "A", 0.75]
    assert s["verified"] == [["A", "starred actors", "F"]] and s["verify_changes"] == {"added": [], "deleted": [["A", "r", "Z"]]}


def test_the_papers_effects_name_real_cells_and_the_papers_own_values():
    """Every effect checked across models compares two cells of this table, against the paper's column the hop
    stands for (1-hop: SimpleQuestions, 2/3-hop: QALD-10); Table 4's steps only where the paper reports them."""
    names = {c.name for c in PM.TABLE.cells}
    claims = [e.claim for e in PM.TABLE.effects]
    assert len(claims) == len(set(claims)) == 10
    for e in PM.TABLE.effects:
        assert e.a[0] == e.b[0] == "pgakv_metaqa" and {e.a[1], e.b[1]} <= names and e.sign == 1
    by = {e.claim: e for e in PM.TABLE.effects}
    one = by["PG&AKV above QSM, MetaQA 1-hop"]
    assert "SimpleQuestions" in one.paper and f"PG&AKV {PM.PAPER_TABLE2['pgakv'][0]} vs QSM {PM.PAPER_TABLE2['qsm'][0]}" in one.paper
    three = by["PG&AKV above QSM, MetaQA 3-hop"]
    assert "QALD-10" in three.paper and f"PG&AKV {PM.PAPER_TABLE2['pgakv'][1]} vs QSM {PM.PAPER_TABLE2['qsm'][1]}" in three.paper
    assert (one.a, one.b) == (("pgakv_metaqa", "pgakv_1hop"), ("pgakv_metaqa", "qsm_1hop"))
    assert not any("Pseudo-Graph" in c and "1-hop" in c for c in claims)  # Table 4 has no SimpleQuestions column
    assert by["PG&AKV above Pseudo-Graph, MetaQA 2-hop"].b == ("pgakv_metaqa", "pgakv_pg_2hop")
    assert f"Pseudo-Graph {PM.PAPER_TABLE4_QALD[1]} vs CoT {PM.PAPER_TABLE4_QALD[0]}" in by[
        "Pseudo-Graph above CoT, MetaQA 3-hop"].paper


def test_qsm_gaps_are_the_reports_paired_differences_and_none_where_a_model_has_no_run():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kgqa_lib.viz import gain_bars

    d = core.default_key()
    gaps = PM.qsm_gaps([d, "no-such-model"])
    assert gaps["groups"] == ["mini-world simple", "mini-world multi-hop", "MetaQA 1-hop", "MetaQA 2-hop", "MetaQA 3-hop"]
    assert gaps["paper"] == [6.8, 14.4, 6.8, 14.4, 14.4]  # Table 2: PG&AKV − QSM, SimpleQuestions / QALD-10
    assert gaps["series"]["no-such-model"] == [None] * 5
    rows = PM._rows(core.Records(PM.TABLE, d))
    for i, h in enumerate(PM.HOPS, start=2):
        g = PM._compared(rows, "pgakv", "qsm", h)
        assert gaps["series"][d][i] == (None if g is None else tuple(100 * x for x in g[:3]))
    fig, ax = plt.subplots()
    gain_bars(ax, gaps, "points")
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("not run yet") == 5 + sum(c is None for c in gaps["series"][d])
    plt.close(fig)


def test_another_models_pgakv_minus_qsm_is_said_once_both_cells_of_a_hop_are_complete(tmp_path, monkeypatch):
    import gzip
    import json

    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path))

    def save(model, cell, records):
        folder = PM.TABLE.records_root / model
        folder.mkdir(parents=True, exist_ok=True)
        with gzip.open(folder / f"{cell}.jsonl.gz", "wt", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in records)

    save("other-model", "qsm_1hop", [_rec(f"q{i}", float(i < 60)) for i in range(PM.REPORTED)])
    save("other-model", "pgakv_1hop", [_rec(f"q{i}", float(i < 20)) for i in range(PM.REPORTED - 1)])
    assert PM.other_models_sentence() == ""  # PG&AKV at 99 of 100: nothing is said
    save("other-model", "pgakv_1hop", [_rec(f"q{i}", float(i < 20)) for i in range(PM.REPORTED)])
    text = PM.other_models_sentence()
    assert text.startswith("With `other-model`, PG&AKV − QSM is -40.0 [") and "on 1-hop, not measured yet on 2-hop" in text
    assert text in PM.summary(lambda name: [])
