"""Keqing's reports as data (the tables notebooks 31, 32 and 90 show are the reports' own tables), the
summaries those notebooks print from the records, Keqing on GrailQA in the cross-paper overview, and the
helpers moved out of notebooks 30, 32 and 33 — on synthetic stripped records in a temporary results folder."""

from __future__ import annotations

import gzip
import json
import math
from types import SimpleNamespace

import pandas as pd
import pytest

from kgqa_lib.bench import core, overview
from kgqa_lib.bench import keqing as K
from kgqa_lib.bench import keqing_grailqa as G


def _rec(qid: str, hit: float, *, chain_ok: bool = True, gold_in: int = 1, calls: int = 3, cands: int = 2,
         grailqa: dict | None = None) -> dict:
    r = {"qid": qid, "kind": "factoid", "metrics": {"hits@1": hit, "f1": hit}, "seconds": 5.0,
         "prediction": ["x"] if hit else [], "error": None,
         "llm": {"calls": calls, "prompt_tokens": 700, "completion_tokens": 100, "recorded_seconds": 4.0,
                 "seconds": 4.0, "cache_hits": 0},
         "diagnostics": {"decomposition": {"predicted_chain": ["r"], "chain_correct": chain_ok,
                                           "seed_correct": True, "correct": chain_ok}},
         "selection": {"n_gold": 1, "gold_in_candidates": gold_in, "gold_selected": int(hit), "n_candidates": cands,
                       "candidates_listed": cands, "n_selected": 1},
         "reasoning": [{"mode": "select", "n_candidates": cands, "calls": 1}],
         "stages": {"calls": {"decompose": 1, "reasoning": 1, "respond": 1}},
         "response_check": {"names_top1": bool(hit)}}
    if grailqa is not None:
        r["grailqa"] = grailqa
    return r


def _save(table: core.Table, cell: str, records: list[dict]) -> None:
    table.records_dir.mkdir(parents=True, exist_ok=True)
    with gzip.open(table.records_dir / f"{cell}.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)


@pytest.fixture
def results(tmp_path, monkeypatch):
    """An empty results folder, and no gold-path ceiling or gold paths read from the data (no data needed)."""
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path))
    monkeypatch.setattr(K, "compute_ceiling", lambda hops, qids: (float("nan"), 0))
    monkeypatch.setattr(K, "gold_chains_of", lambda hops: None)
    return tmp_path


def _metaqa(results, full_hits=(1.0, 0.9, 0.8), dec_hits=(1.0, 1.0, 1.0), n=200):
    """keqing_full and keqing_metaqa: ``n`` questions per hop, the first ``hits * n`` right."""
    for h, fh, dh in zip(K.HOPS, full_hits, dec_hits):
        _save(K.TABLE_FULL, f"keqing_full_{h}hop",
              [_rec(f"m{h}-{i}", float(i < fh * n), gold_in=int(i < fh * n)) for i in range(n)])
        _save(K.TABLE, f"keqing_metaqa_{h}hop", [_rec(f"m{h}-{i}", float(i < dh * n)) for i in range(n)])


def _md_in(t, text):
    assert K._md(t) in text, t.name  # the report prints the table as it is, not a copy


def _same_rows(t, df):
    assert len(df) == len(t.rows) and list(df.columns) == list(t.columns[1:])
    assert [str(i) for i in df.index] == [str(r[0]) for r in t.rows]


def test_the_metaqa_reports_render_the_tables_the_notebooks_get(results):
    _metaqa(results)
    for name, report in (("keqing_metaqa", K.report), ("keqing_full", K.report_full)):
        table = core.get_table(name)
        tables = K.BUILDERS[name](core.Records(table))
        text = report(core.Records(table))
        frames = K.frames(name)
        assert list(frames) == list(tables)
        for t in tables.values():
            _md_in(t, text)
            _same_rows(t, frames[t.name])
    four = K.frames("keqing_full")["four_stages"]
    # the notebooks' frames give shares in points, like the gains (the report keeps fractions)
    assert four.loc[3, "Hits@1 [95% CI]"].startswith("80.0 [") and four.loc[3, "gain [95% CI]"].startswith("-20.0 [")
    assert four.loc[3, "paper"] == "99.6" and "| 3 | 200 | 0.800 [" in K.report_full(core.Records(K.TABLE_FULL))
    assert list(K.frames("keqing_full")["disagreements"].loc[3, ["lost", "won"]]) == [40, 0]
    # an empty cell is written `| |`, as the report always wrote it
    assert "| 1 | 0 | (not run: keqing_metaqa_1hop.jsonl) | 0.984 | | | | | | | | |" in K.report(lambda c: [])


def test_the_ablations_report_renders_its_tables_and_by_hop_indexes_them(results):
    _metaqa(results)
    abl = K.TABLE_ABLATIONS
    for h in K.HOPS:
        _save(abl, f"keqing_k2_{h}hop", [_rec(f"m{h}-{i}", float(i < 90)) for i in range(100)])
    tables = K.ablation_tables(core.Records(abl))
    text = K.report_ablations(core.Records(abl))
    for t in tables.values():
        _md_in(t, text)
    frame = K.by_hop(K.frames("keqing_ablations")["ablations"])
    assert frame.index.names == ["hops", "configuration"] and not any(str(c).startswith("**") for _, c in frame.index)
    assert sorted(set(frame.index.get_level_values(0))) == [1, 2, 3]
    assert frame.loc[(2, "K = 2"), "n"] == 100 and frame.loc[(2, "K = 4"), "Hits@1 [95% CI]"] == "not run yet"
    assert frame.loc[(3, K.DEFAULT_LABEL), "n"] == 100  # keqing_full on the ablation's questions


def test_summary_words_the_selection_stage_from_its_paired_intervals(results):
    assert "not run yet" in K.summary()  # nothing saved
    _metaqa(results, full_hits=(1.0, 0.9, 0.8))
    text = K.summary()
    assert "score Hits@1 100.0 / 90.0 / 80.0" in text and "+1.6 / -9.9 / -19.6 points from the paper" in text
    assert "+0.0 [+0.0, +0.0] / -10.0 [" in text
    assert ("lower at 2/3-hop (paired 95% CI below 0; of the 40 3-hop questions it loses, all: an earlier selection "
            "dropped the path); none at 1-hop (every question scored the same) — the paper gives no result without "
            "this stage") in text
    assert "other way" not in text  # the paper never runs without the stage: no claim about the paper
    assert "GrailQA dev has not run yet" in text
    # 3-hop: 2 of 200 lost — an interval reaching 0 is no clear difference, never "lower"
    _metaqa(results, full_hits=(1.0, 1.0, 0.99))
    text = K.summary()
    assert "no clear difference at 3-hop (paired 95% CI reaching 0)" in text and "lower" not in text


def _grailqa(results, n=200):
    """keqing_grailqa's linked cell: a quarter i.i.d. (wrong), the rest zero-shot; covered chains right."""
    recs = []
    for i in range(n):
        iid = i < n // 4
        g = {"level": "i.i.d." if iid else "zero-shot", "chain": True, "hops": 1, "covered": not iid,
             "decomposition": {"chain_correct": not iid, "seed_correct": True, "correct": not iid},
             "gold_chain": {"hits@1": 1.0, "f1": 1.0}, "topics": {"chain_topic_linked": True}}
        recs.append(_rec(f"g{i}", 0.0 if iid else 1.0, grailqa=g))
    _save(G.TABLE, G.LINKED, recs)
    return recs


def test_grailqa_report_renders_its_tables_and_the_summary_names_the_gap(results):
    _grailqa(results)
    tables = G.result_tables(core.Records(G.TABLE))
    text = G.report(core.Records(G.TABLE))
    assert list(tables)[:5] == ["settings", "linked", "linked_levels", "linked_decomposition", "linked_cost"]
    assert "oracle" in tables and "oracle_levels" not in tables  # a cell without records: its first table only
    for t in tables.values():
        _md_in(t, text)
    frames = G.frames()
    _same_rows(tables["linked"], frames["linked"])
    assert frames["settings"].loc["linked (default)", "F1 [95% CI]"].startswith("75.0 [")  # points, as the gains
    assert frames["settings"].loc["linked (default)", "chain topic linked"] == "200/200"
    assert frames["linked"].loc["all", "paper Keqing-LLaMA (Ours): F1 (EM)"] == "77.8 (72.5)"
    # the paper's Overall values, the same on every setting, are said once under the settings table, not repeated per row
    assert not any(c.startswith("paper ") for c in frames["settings"].columns)
    assert "Keqing-LLaMA (Ours) 77.8% (72.5%), KB-BINDER (Li et al., 2023a) 56.0% (50.6%); the same for every row" \
        in G.legend("settings")
    assert frames["linked"].loc["i.i.d.", "share"] == "25.0" and frames["linked"].loc["all", "n"] == 200
    text = K.summary()
    assert "F1 75.0 against the paper's 77.8, and 0.0 on i.i.d. questions against 85.6" in text
    assert "score Hits@1 100.0, the others 0.0, and 0 of the 50 i.i.d. chain questions are covered" in text


def test_overview_shows_keqing_on_grailqa_per_level_and_metaqa_as_dev(results):
    _grailqa(results)
    ov = overview.overview()
    kq = ov[ov["paper"] == "Keqing"]
    assert set(kq[kq["metric"] == "Hits@1"]["set"]) == {f"MetaQA dev (our reported part), {h}-hop" for h in K.HOPS}
    grail = kq[kq["metric"] == "F1"]
    assert all(overview.FRAGMENT in s for s in grail["set"])
    linked = grail[(grail["cell"] == G.LINKED) & grail["set"].str.startswith("GrailQA dev (")].iloc[0]
    assert linked["status"] == "complete" and linked["value"] == pytest.approx(75.0) and linked["paper value"] == 77.8
    levels = grail[grail["set"].str.startswith("GrailQA dev, ")].set_index("set")
    assert len(levels) == 2  # the levels the records hold
    iid = levels.loc[f"GrailQA dev, i.i.d. ({overview.FRAGMENT})"]
    assert iid["value"] == 0.0 and iid["n"] == iid["planned"] == 50 and iid["paper value"] == 85.6
    assert "Table 6, column IID" in iid["paper source"]
    assert grail[grail["cell"] == G.DENSE].iloc[0]["status"] == "not run"
    # not complete: no level rows, the cell reads partial
    _save(G.TABLE, G.LINKED, [_rec("g0", 1.0, grailqa={"level": "i.i.d."})])
    rows = pd.DataFrame(overview.grailqa_rows())
    assert len(rows) == 3 and rows.iloc[0]["status"] == "partial 1/200"


def test_paper_tables_cost_summary_and_the_files(results, tmp_path):
    _metaqa(results)
    _grailqa(results)
    ov = overview.overview()
    tables = overview.paper_tables(overview.main_rows(ov))
    by = {t.name: t for t in tables}
    assert "Keqing Hits@1" in by and "Keqing F1" in by and overview.FRAGMENT in by["Keqing F1"].title
    t2 = by["Keqing Hits@1"].frame()
    assert "on MetaQA dev (our reported part)" in by["Keqing Hits@1"].title  # the sets' shared part
    assert list(t2.columns) == [*(f"{h}-hop" for h in K.HOPS), *(f"paper: {h}-hop" for h in K.HOPS)]
    assert t2.loc["Keqing, four stages", "paper: 2-hop"] == "99.9"
    assert t2.loc["Keqing, four stages", "3-hop"].startswith("80.0 [")
    assert t2.loc["Think-on-Graph", "1-hop"] == "not run"
    assert list(by["Keqing F1"].frame().columns)[:2] == ["GrailQA dev", "GrailQA dev, i.i.d."]
    assert overview.short_set(f"GrailQA dev ({overview.FRAGMENT})") == "GrailQA dev"
    cost = overview.cost_table(ov).frame()
    four = cost[cost["method"] == "Keqing, four stages"].iloc[0]
    assert four["cells"] == 3 and four["questions"] == 600 and four["calls/q"] == "3.00" and four["KG"] == "MetaQA KB"
    assert [overview.kg_of(s) for s in ("mini-world simple (test)", "mini-world (Wikidata-style) → MetaQA dev, 1-hop",
                                        f"GrailQA dev ({overview.FRAGMENT})", "MetaQA dev (our reported part), 2-hop")] \
        == ["mini-world", "MetaQA KB", "GrailQA fragment", "MetaQA KB"]  # a method's cost is per KG
    text = overview.summary(ov)
    assert "Keqing: the four stages are -19.6 to +1.6 points from" in text and "F1 75.0 against the paper's 77.8" in text
    md, csv = overview.write_compare_all(ov, tmp_path / "tables")
    written = md.read_text(encoding="utf-8")
    headline = written.split("## Headline results")[1].split("\n## ")[0]
    assert [line for line in headline.splitlines() if "GrailQA dev" in line]
    sets = [line.split(" | ")[1] for line in headline.splitlines() if line.startswith("| Keqing |")]
    assert all(overview.FRAGMENT in s for s in sets if "GrailQA" in s)
    assert by["Keqing F1"].markdown() in written and pd.read_csv(csv).shape[0] == len(ov)
    assert "\n## Models\n" in written  # the model axis: which tables another model has records for
    # the paper's columns are named by the paper's own column where ours stand for another dataset
    assert overview.paper_column(["PG&AKV paper, Table 2, GPT-3.5, row IO, column SimpleQuestions (Hit@1)"],
                                 "simple (test)") == "SimpleQuestions"
    assert overview.paper_column(["Keqing paper, Table 2, row X, column MetaQA 1-hop (Hits@1)"], "1-hop") == "1-hop"


def test_status_lines_count_the_tables_own_cells(results):
    _grailqa(results)
    [line] = overview.status_lines(["keqing_grailqa"])
    assert line.startswith("keqing_grailqa: 1/3 cells complete, 200/600 questions")
    assert "`kgqa bench run keqing_grailqa`" in line


def test_ablation_points_and_summary(results):
    _metaqa(results, full_hits=(1.0, 1.0, 0.45))  # 3-hop: 90 of the ablation's 100 questions right
    abl = K.TABLE_ABLATIONS
    assert "No Keqing ablation cell" in K.ablations_summary()
    qids = [f"m3-{i}" for i in range(100)]  # the ablation's questions: a subset of keqing_full's
    _save(abl, "keqing_k2_3hop", [_rec(q, float(i < 90), cands=4) for i, q in enumerate(qids)])
    _save(abl, "keqing_chain_3hop", [_rec(q, float(i < 95), calls=2) for i, q in enumerate(qids)])
    pts = K.ablation_points().set_index(["hops", "configuration"])
    assert list(pts.index) == [(3, K.DEFAULT_LABEL), (3, "K = 2"), (3, K.CHAIN_LABEL)]
    assert pts.loc[(3, "K = 2"), "gain"] == pytest.approx(0.0) and pts.loc[(3, "K = 2"), "candidates / sub-q"] == 4
    chain = pts.loc[(3, K.CHAIN_LABEL)]
    assert chain["gain"] == pytest.approx(5.0) and chain["gain_low"] > 0 and chain["calls/q"] == 2
    assert K.fig5_reading().startswith("With K = 1 the decomposition's relation chain is already the gold one for "
                                       "100 of 100 questions on 3-hop")
    assert K.fig5_reading().endswith("Every K > 1 lies within 0.0 points of K = 1, and together their paired 95% CIs "
                                     "span +0.0 to +0.0 points.")
    text = K.ablations_summary()
    assert "K = 2 change Hits@1 by +0.0 to +0.0 points from K = 1 (every paired 95% CI includes 0)" in text
    assert "the logical chain written directly minus sub-questions is +5.0 [+" in text and "points on 3-hop" in text
    assert "here it goes the other way from the paper at 3-hop (the chain ahead, paired 95% CI above 0)." in text
    assert "21 of the table's 23 cells have not run yet" in text and "chain minus last-only" not in text
    _save(abl, "keqing_last_3hop", [_rec(q, float(i < 95), calls=2) for i, q in enumerate(qids)])
    text = K.ablations_summary()
    assert "chain minus last-only is +0.0 [+0.0, +0.0] on 3-hop, level within every paired 95% CI" in text
    _save(abl, "keqing_last_3hop", [_rec(q, float(i < 80), calls=2) for i, q in enumerate(qids)])
    text = K.ablations_summary()
    assert "chain minus last-only is +15.0 [" in text and "level within" not in text


# ---------------------------------------------------------------- helpers moved out of notebooks
def test_lora_outcomes_accuracy_and_summary():
    from kgqa_lib.evaluate import keqing_lora as L

    assert L.outcome("a / ^b", ("a", "^b")) == "right"
    assert L.outcome("a", ("a", "b")) == "too few hops" and L.outcome("a / b / c", ("a", "b")) == "too many hops"
    assert L.outcome("a / b", ("a", "^b")) == "a hop reversed" and L.outcome("a / c", ("a", "b")) == "another relation"
    assert L.outcome("", ("a",), parse="fallback") == "unparseable"
    qs = [SimpleNamespace(qid=f"q{h}", metadata={"hops": h}) for h in (1, 2, 3)]
    gold = {"q1": "a", "q2": "a / b", "q3": "a / b / c"}
    wrote = {"ICL, 1.5B": gold, "ICL, 0.5B": gold, "zero-shot, 0.5B": {"q1": "a", "q2": "a", "q3": "a"},
             "LoRA, 0.5B": {"q1": "a", "q2": "a / ^b", "q3": "a / b"}}
    runs = pd.DataFrame([(d, q.qid, q.metadata["hops"], chains[q.qid] == gold[q.qid], "", chains[q.qid], "…")
                         for d, chains in wrote.items() for q in qs],
                        columns=["decomposer", "qid", "hops", "correct", "parse", "predicted chain", "output"])
    import kgqa_lib.methods.keqing as M

    orig = M.gold_chain
    M.gold_chain = lambda q: tuple(gold[q.qid].split(" / "))
    try:
        acc = L.accuracy(runs)
        assert list(acc.index) == list(L.DECOMPOSERS)
        assert list(acc.columns) == ["1-hop (n=1)", "2-hop (n=1)", "3-hop (n=1)", "all (n=3)", "unparseable outputs"]
        assert acc.loc["LoRA, 0.5B", "all (n=3)"] == "33.3 [6.1, 79.2]"  # points, 95% Wilson interval
        assert acc.loc["ICL, 1.5B", "1-hop (n=1)"] == "100.0 [20.7, 100.0]" and acc.loc["LoRA, 0.5B", "unparseable outputs"] == 0
        table = L.outcome_table(runs, qs)
        assert list(table.index.names) == ["decomposer", "questions"]
        assert table.loc[("LoRA, 0.5B", "multi-hop"), "a hop reversed"] == 1
        assert table.loc[("zero-shot, 0.5B", "multi-hop"), "too few hops"] == 2
        training = SimpleNamespace(examples=28, steps=16, seconds=550.0)
        text = L.summary(runs, qs, training, 4)
    finally:
        M.gold_chain = orig
    assert "gets 1 of 1 one-hop and 0 of 2 multi-hop" in text
    assert "the adapters show no gain here" in text and "other way" not in text
    assert "0 of 2 tuned (95% Wilson interval 0–66%) against 2 of 2 in context (34–100%) overlap, so" in text
    assert "32,927 MetaQA examples" in text and "(sec. 3.1)" in text
    assert "a hop reversed 1, too few hops 1" in text and "the untuned 0.5B gets 2 of 2" in text
    apart = L._apart(0, 6, 6)  # the notebook's counts: the intervals no longer overlap
    assert apart == ("0 of 6 tuned (95% Wilson interval 0–39%) against 6 of 6 in context (61–100%) are apart, so the "
                     "in-context 0.5B is ahead on these questions only")


def test_the_mini_world_sweep_reads_the_traces():
    from kgqa_lib.evaluate import keqing_ablation as A

    def rec(qid, hit, chains, calls):
        steps = [{"match": {"chains": [list(c) if isinstance(c, tuple) else [c] for c in cs]}, "reasoning": {"calls": n}}
                 for cs, n in zip(chains, calls)]
        return {"qid": qid, "metrics": {"hits@1": hit}, "llm": {"calls": 1 + sum(calls)},
                "trace": [{"name": "execute_plan", "output": [steps, None]}]}

    import kgqa_lib.methods.keqing as M

    qs = {"a": SimpleNamespace(qid="a"), "b": SimpleNamespace(qid="b")}
    orig = M.gold_chain
    M.gold_chain = lambda q: ("r1", "r2")
    try:
        k1 = [rec("a", 1.0, [["r1"], ["r2"]], [1, 0]), rec("b", 0.0, [["r1"], ["r3"]], [1, 1])]
        k2 = [rec("a", 1.0, [["r1", "x"], ["r2", "y"]], [1, 1]), rec("b", 1.0, [["r1", "x"], ["r3", "r2"]], [1, 1])]
        chain = [rec("a", 1.0, [[("r1", "r2")]], [1]), rec("b", 0.0, [[("r1", "r3")]], [0])]
        none = [{"qid": "a", "metrics": {"hits@1": 1.0}, "llm": {"calls": 2}, "trace": []}]
        t = A.sweep_table({"K = 1": k1, "K = 2": k2, "chain": chain, "no steps": none}, qs)
    finally:
        M.gold_chain = orig
    assert t.loc["K = 1", "gold chain among candidates"] == 0.5 and t.loc["K = 2", "gold chain among candidates"] == 1.0
    assert t.loc["K = 1", "candidate chains / sub-question"] == 1.0 and t.loc["K = 2", "candidate chains / sub-question"] == 2.0
    assert t.loc["chain", "gold chain among candidates"] == 0.5 and t.loc["chain", "candidate chains / sub-question"] == 1.0
    assert t.loc["K = 1", "selection calls/q"] == 1.5 and math.isnan(t.loc["no steps", "selection calls/q"])
    assert math.isnan(t.loc["no steps", "gold chain among candidates"])
    assert t.loc["K = 2", "Hits@1"] == 1.0 and t.loc["no steps", "calls/q"] == 2.0


def test_call_recorder_keeps_every_call_and_show_prints_whole_tables(capsys):
    from kgqa_lib.bench.result_table import table
    from kgqa_lib.notebooks import CallRecorder, show

    class Echo:
        model_id = "echo"

        def chat(self, messages, **kwargs):
            return SimpleNamespace(text=messages[-1]["content"].upper())

    llm = CallRecorder(Echo())
    assert llm.chat([{"role": "user", "content": "Question: a"}]).text == "QUESTION: A"
    llm.chat([{"role": "user", "content": "Question: b"}])
    assert llm.model_id == "echo" and len(llm.calls) == 2
    assert llm.find("Question: b")[1].text == "QUESTION: B" and llm.find("Question: c") is None
    show(table("t", "A long table", ["k", "v"], [[f"row {i}", i] for i in range(80)]))
    out = capsys.readouterr().out
    assert out.startswith("A long table") and "row 79" in out and "..." not in out


def test_figure_helpers_dodge_and_group():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kgqa_lib.viz import dodged_errorbars, grouped_ci_bars

    fig, (a, b) = plt.subplots(1, 2)
    dodged_errorbars(a, {"1-hop": ([1, 2, 4], [0, 0, 1], [0, 0, 0], [0, 0, 3]),
                         "2-hop": ([1, 2, 4], [0, 0, 1], [0, 0, 0], [0, 0, 3])}, log2=True)
    xs = [c.lines[0].get_xdata() for c in a.containers]
    assert all(x0 != x1 for x0, x1 in zip(*xs))  # the same values drawn side by side, not on top of each other
    assert [t.get_text() for t in a.get_xticklabels()] == ["1", "2", "4"]
    grouped_ci_bars(b, ["1-hop", "2-hop"], {"sub-questions": [(90, 80, 95), (91, 85, 96)],
                                             "chain": [None, (93, 88, 97)]}, notes=["+0.0", "+2.0"])
    assert len(b.patches) == 3 and [t.get_text() for t in b.texts] == ["+0.0", "+2.0"]
    assert b.get_legend_handles_labels()[1] == ["sub-questions", "chain"]
    plt.close(fig)


# ---------------------------------------------------------------- headline metrics (notebooks 32, 33, 90)
def test_the_ablations_headline_is_fig6_chain_minus_sub_questions(results):
    _metaqa(results, full_hits=(1.0, 1.0, 0.45))  # 3-hop: 90 of the ablation's 100 questions right, 2-hop all
    assert K.ablations_headline()[1] == "not run yet / not run yet / not run yet"
    _save(K.TABLE_ABLATIONS, "keqing_chain_3hop", [_rec(f"m3-{i}", float(i < 95)) for i in range(100)])
    _save(K.TABLE_ABLATIONS, "keqing_chain_2hop", [_rec(f"m2-{i}", float(i < 97)) for i in range(100)])
    metric, value = K.ablations_headline()
    assert "logical chain directly − sub-questions (Fig. 6)" in metric and "MetaQA dev (our reported part)" in metric
    one, two, three = value.split(" / ")
    assert one == "not run yet" and two.startswith("-3.0 [") and three.startswith("+5.0 [")
    assert two.endswith("(n=100)") and float(three.split("[")[1].split(",")[0]) > 0  # 5 of 100 more, none fewer


def test_the_lora_headline_counts_the_multi_hop_decompositions_right():
    from kgqa_lib.evaluate import keqing_lora as L

    right = {"ICL, 1.5B": (1, 1, 1), "ICL, 0.5B": (1, 1, 1), "zero-shot, 0.5B": (1, 0, 0), "LoRA, 0.5B": (0, 0, 1)}
    runs = pd.DataFrame([(d, f"q{h}", h, bool(ok), "", "", "") for d, oks in right.items() for h, ok in zip((1, 2, 3), oks)],
                        columns=["decomposer", "qid", "hops", "correct", "parse", "predicted chain", "output"])
    metric, value = L.headline(runs, 4)
    assert "LoRA-tuned 0.5B / the same 0.5B zero-shot / in context with 4 worked examples" in metric
    assert value == "1 of 2 / 0 of 2 / 2 of 2"  # multi-hop only: q2 and q3
    import matplotlib

    matplotlib.use("Agg")
    ax = L.figure_multihop(runs).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == list(right)
    assert [round(p.get_width(), 1) for p in ax.patches] == [100.0, 100.0, 0.0, 50.0]  # the headline's, in points
    assert [t.get_text() for t in ax.texts] == ["2 of 2", "2 of 2", "0 of 2", "1 of 2"]
    assert "multi-hop" in ax.get_title() and "n=2" in ax.get_title() and "Wilson" in ax.get_xlabel()


def test_wilson_interval_of_a_few_questions():
    from kgqa_lib.evaluate.metrics import wilson_interval

    low, high = wilson_interval(0, 6)
    assert low == 0.0 and high == pytest.approx(0.390, abs=1e-3)  # 0 of 6 still leaves up to 39%
    assert wilson_interval(6, 6)[0] == pytest.approx(0.610, abs=1e-3) and wilson_interval(6, 6)[1] == 1.0
    assert wilson_interval(5, 10) == (pytest.approx(0.2366, abs=1e-3), pytest.approx(0.7634, abs=1e-3))
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_the_cross_paper_headline_is_each_papers_main_method_beside_the_paper(results):
    recs = lambda k, n: [_rec(f"q{i}", float(i < k)) for i in range(n)]  # noqa: E731
    ov = pd.DataFrame([overview.row("PG&AKV", "s", "m", "hits@1", recs(40, 100), 100, 34.3, cell="t2_simple.pgakv"),
                       overview.row("Keqing", "s", "m", "hits@1", recs(5, 5), 200, 99.6, cell="keqing_full_3hop")],
                      columns=list(overview.COLUMNS))
    metric, value = overview.headline_cross_paper(ov)
    assert metric.count(" / ") == 2 and "GrailQA-Tech (gold-fact fragment)" in metric
    pg, kq, fu = value.split(" / ")
    assert pg.startswith("40.0 [") and pg.endswith("] (paper 34.3)")
    assert kq == "partial 5/200 (paper 99.6)" and fu == "not run"


def test_the_committed_cross_paper_headline_reads_the_same_cells_as_the_papers_notebooks():
    from kgqa_lib.bench import fusic as F
    from kgqa_lib.evaluate.pgakv_analysis import cell_on_test

    pg, kq, fu = overview.headline_cross_paper(overview.overview())[1].split(" / ")
    assert pg == cell_on_test("simple", "pgakv").replace(" (n=113)", "") + " (paper 34.3)"  # notebook 11's headline
    three = core.Records(K.TABLE_FULL)("keqing_full_3hop")
    assert kq.startswith(f"{100 * sum(r['metrics']['hits@1'] for r in three) / len(three):.1f} [")
    assert fu.startswith(F.headline_transfer(core.Records(F.TABLE))[1].split("/")[-1] + " [")  # notebook 21's GrailQA-Tech
