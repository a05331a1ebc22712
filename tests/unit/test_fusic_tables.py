"""The FuSIC report's tables as data (kgqa_lib.bench.fusic): the report renders the very tables the
notebooks get; the notebooks' views of them (per-pair parts, main rows, Table 7's main cells, figures);
the summaries of notebooks 21 and 22, printed from the records; and the record readers that moved out of
the notebooks (F1 after k feedback rounds and feedback statistics on whole run records)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from kgqa_lib.bench import fusic as B  # noqa: E402
from kgqa_lib.bench.result_table import ResultTable  # noqa: E402


@pytest.fixture(autouse=True)
def _any_size_is_complete(monkeypatch):
    """These tests score a few made-up records per cell: every cell counts as complete at any size here (a
    cell's planned questions, and the report's ``partial k/N`` for a cell still running, are tested in
    test_fusic_report_labels.py)."""
    import dataclasses

    monkeypatch.setattr(B, "CELL_OF", {n: dataclasses.replace(c, planned=1) for n, c in B.CELL_OF.items()})


def _rec(qid, f1, statuses=("ok",), retrieval=None, hops=1, calls=4):
    """A stripped FuSIC record: its attempts' statuses, F1, costs per stage and gold-element counts."""
    return {"qid": qid, "metrics": {"f1": f1, "hits@1": f1}, "seconds": 10.0, "error": None,
            "llm": {"calls": calls, "prompt_tokens": 100, "completion_tokens": 10, "recorded_seconds": 8.0,
                    "seconds": 8.0, "cache_hits": 0},
            "stages": {"calls": {"rerank": 2, "generation": 1, "feedback": len(statuses) - 1, "total": 2 + len(statuses)},
                       "seconds": {"retrieval": 1.0, "rerank": 2.0, "exemplars": 0.5, "generation": 3.0, "feedback": 4.0}},
            "attempts": [{"status": s, "repeat": False} for s in statuses],
            "gold_analysis": {"topic_linked": True, "mentions": 1, "gold_hops": hops, "query_gold_relations": [1, 1],
                              "query_relation_patterns": hops,
                              "retrieval": retrieval if retrieval is not None else [
                                  {"retriever": "dense", "aspect": "path", "top_K": True, "before": True, "after": True}]}}


def _cells(full_f1=(1.0, 0.0, 1.0, 1.0), **more):
    """Records for a few cells: FuSIC(T) few-shot on MetaQA 1-hop and GrailQA-Tech and whatever ``more`` names."""
    full = [_rec(f"q{i}", f) for i, f in enumerate(full_f1)]
    have = {"metaqa1.fs_dense": full, "gtech.fs_dense": full, **more}
    return lambda cell: have.get(cell, [])


def test_the_report_renders_the_same_tables_the_notebooks_get():
    records = _cells(**{"metaqa1.fs_dense_norr": [_rec(f"q{i}", 0.0) for i in range(4)],
                        "metaqa1.zs_dense": [_rec(f"q{i}", 1.0, ("empty", "ok")) for i in range(4)]})
    tables = B.result_tables(records)
    text = B.report(records)
    assert list(tables) == ["questions", "table2", "deviations", "target", "funnel", "depth", "kbbinder", "langchain",
                            "cost", "table3", "shots", "exemplars", "table3_zero_shot", "gfllm", "rounds", "table7"]
    for name, t in tables.items():
        assert isinstance(t, ResultTable) and t.rows, name
        if name != "target":  # the target is rendered as a list (below)
            assert B._md(t, "  | | |  |" if name == "table2" else None) in text, name
            assert f"## {t.title}" in text or f"### {t.title}" in text or name == "funnel", name
    goal = tables["target"].frame()
    assert "not run yet" in set(goal["target"]) and "  - mini-world (Wikidata-style) → MetaQA dev (our reported part), 1-hop: F1 " \
        "75.0, 3.00 LLM calls/q (re-rank + generation + feedback) — not met (n=4)" in text
    # the same values reach a notebook as a DataFrame: the w/o re-ranking row's paired gain, the cost row
    t3 = tables["table3"].frame()
    row = t3[t3["ablation"] == "w/o re-ranking"].iloc[0]
    assert row["n paired"] == 4 and row["ablation − full [95% CI]"].startswith("-75.0 [")
    cost = tables["cost"].frame().loc["metaqa1.fs_dense"]
    assert list(cost.iloc[:4]) == [4, "2.00", "1.00", "0.00"]
    assert not hasattr(B, "report_section")  # notebooks get tables, not Markdown sections to split


def test_what_differs_from_the_paper_is_printed_once_per_deviation():
    """Table 2's rows carry no repeated note: one deviation table gives each note once, with the rows it
    applies to; the two gf-LLM notes are one, the zero-shot one saying only what changes."""
    records = _cells()
    t2 = B.result_tables(records)["table2"]
    assert "what differs" not in t2.columns and list(t2.columns[-4:]) == ["calls/q", "tokens/q", "s/q", "cache hits"]
    text = B.report(records)
    run = [c for c in B.CONFIGS if any(B.cell_name(p, c) in B._NAMES for p in B.PAIRS)]
    for note in [*B.PAIR_NOTE.values(), *(B.RETRIEVER_NOTE[c] for c in run)]:
        assert text.count(f"| {note} |") == 1, note[:60]  # a cell of the deviation table, and no other
    dev = {r[0]: r[1] for r in B.deviations_table().rows}
    assert all(any(f"`{c}` {B.CONFIGS[c][2]}" in k for k in dev) for c in run)  # every configuration has its row
    assert dev["every configuration on MetaQA 1-hop, MetaQA 2-hop, MetaQA 3-hop"] == B.PAIR_NOTE["metaqa"]
    gf = [v for k, v in dev.items() if "gf-LLM" in k]
    assert len(gf) == 2 and gf[1].startswith("as fs_gfllm, zero-shot") and len(gf[1]) < len(gf[0]) / 3
    assert text.count("gf-LLM as the paper runs it") == 1


def test_md_keeps_the_reports_layout_of_rows_without_records():
    t = B.table("x", "X", ["cell", "n", "a", "b"], [["c1", "not run yet", "", ""], ["c2", 3, "1.0", "2.0"]])
    assert B._md(t) == "| cell | n | a | b |\n|---|---|---|---|\n| c1 | not run yet | | |\n| c2 | 3 | 1.0 | 2.0 |"
    assert B._md(t, tail=" (none) |").splitlines()[2] == "| c1 | not run yet | (none) |"


def test_per_pair_parts_main_rows_and_table7_main_cells():
    retrieval = [{"retriever": "dense", "aspect": "path", "top_K": True, "before": False, "after": True}]
    both = [{"retriever": r, "aspect": "path", "top_K": True, "before": True, "after": r == "dense"} for r in ("bm25", "dense")]
    records = _cells(**{"metaqa2.fs_dense": [_rec("a", 1.0, retrieval=retrieval), _rec("b", 0.0, retrieval=retrieval)],
                        "metaqa2.fs_both": [_rec("a", 1.0, retrieval=both)]})
    tables = B.result_tables(records)
    parts = B.sub_tables(tables["table2"], B.TABLE2_COLUMNS, B.TABLE2_CONFIGS)
    assert list(parts) == [B.PAIRS[p][4] for p in B.PAIRS]  # one part per pair, in the report's order
    one = parts[B.PAIRS["metaqa1"][4]]
    assert list(one.columns) == list(B.TABLE2_COLUMNS) and len(one) == len(B.TABLE2_CONFIGS)
    assert set(one["configuration"]) == {B.CONFIGS[c][2] for c in B.TABLE2_CONFIGS}
    assert len(parts[B.PAIRS["gtech"][4]]) == len(B.TABLE2_CONFIGS) - 2  # IO and LangChain run on MetaQA only
    assert one.iloc[0]["F1 [95% CI]"].startswith("75.0 [")
    rounds = B.only_configs(tables["rounds"], ("fs_dense",))
    assert [r[0] for r in rounds.rows] == [B.cell_label(c.name) for c in B.CELLS if c.name.endswith(".fs_dense")]
    main = B.table7_main(tables["table7"])
    assert B.cell_label("gtech.fs_dense") == f"gtech.fs_dense ({B.FRAGMENT})"  # GrailQA-Tech's rows say what its KB is
    assert {(B.cell_of(r[0]), r[1], r[2]) for r in main.rows} == {("metaqa1.fs_dense", "dense", "all aspects"),
                                                        ("gtech.fs_dense", "dense", "all aspects"),
                                                        ("metaqa2.fs_dense", "dense", "all aspects"),
                                                        ("metaqa2.fs_both", "all retrievers", "all aspects")}
    row = next(r for r in main.rows if r[0] == "metaqa2.fs_dense")
    assert row[3:] == (2, "0.0", "100.0", "0.0")  # re-ranking brought the gold path back into the prompt
    assert all(r in tables["table7"].rows for r in main.rows)  # the report's own rows


def test_figures_are_titled_and_labelled():
    records = _cells()
    tables = B.result_tables(records)
    fig = B.figure_table7(tables["table7"])
    ax = fig.axes[0]
    assert "Table 7" in ax.get_title() and len(ax.get_yticklabels()) == 2
    assert "% of questions" in fig.axes[1].get_ylabel()
    fig = B.figure_costs(tables["cost"])
    ax = fig.axes[0]
    assert "seconds per question" in ax.get_xlabel() and ax.get_title()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["paper, A.5 (GPT-4)", "metaqa1.fs_dense (n=4)",
                                                           "gtech.fs_dense (n=4)"]
    widths = [p.get_width() for p in ax.patches]
    assert sum(widths) == pytest.approx(14.4 + 9.6 + 14.4 + 18.9 + 2 * (1.0 + 2.0 + 0.5 + 3.0 + 4.0))
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "exemplars" in legend  # 0.5 s of 10.5 shows
    fig = B.figure_ablations(records)
    assert fig.axes[1].get_ylabel() == "F1 gained over round 0 (points)" and fig.axes[2].get_ylabel()


def test_the_cost_figure_draws_what_a_question_takes_live_when_calls_came_from_the_cache():
    cached = []
    for i in range(4):
        r = _rec(f"q{i}", 1.0)
        r["llm"].update(cache_hits=2, calls=4, recorded_seconds=30.0)  # two calls replayed: 22 s not spent here
        r["stages"]["seconds"]["exemplars"] = 0.0001
        cached.append(r)
    records = _cells(**{"metaqa1.fs_dense": cached, "gtech.fs_dense": cached})
    assert B.live_seconds(cached) == (pytest.approx(31.0001), 0.5)  # retrieval 1 + exemplars + 30 s of LLM calls
    assert B.live_seconds([{"stages": None}]) is None
    # the 2 hits are the re-rank stage's 2 calls (its calls ran fastest per call): the 22 cached seconds go there
    live = B.live_stage_seconds(cached)
    assert live == pytest.approx({"retrieval": 1.0, "rerank": 24.0, "exemplars": 0.0001, "generation": 3.0,
                                  "feedback": 4.0})
    fig = B.figure_costs(B.result_tables(records)["cost"], records=records)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()][1] == "metaqa1.fs_dense (n=4, 50% of calls from the cache)"
    bar = [p.get_width() for p in ax.patches if round(p.get_y() + p.get_height() / 2) == 1]
    assert bar == pytest.approx([live[k] for k in B.STAGES])  # the bar is the live seconds, stage by stage
    assert not ax.collections  # no separate tick: the bar itself is what a question takes live
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "exemplars" not in legend and "re-rank" in legend


def test_summaries_print_the_records_numbers_and_where_ours_goes_the_other_way():
    assert "not run yet" in B.summary_transfer(lambda cell: [])
    f1s = (1.0, 0.0) * 10
    zero = [_rec(f"q{i}", 1.0) for i in range(20)]
    naive = [_rec(f"q{i}", 0.0) for i in range(20)]
    records = _cells(f1s, **{"metaqa1.zs_dense": zero, "gtech.zs_dense": zero, "metaqa1.fs_naive": naive,
                             "metaqa1.fs_both": zero, "gtech.fs_both": naive})
    text = B.summary_transfer(records)
    assert "F1 50.0/—/—/50.0 on MetaQA dev (our reported part)" in text and "naive FS-ICL baseline) F1 is 0.0/—/—/—" in text
    assert "FuSIC(T) few-shot is above it on MetaQA 1-hop (paired 95% CIs above 0)" in text
    assert "Few-shot minus zero-shot FuSIC(T), paired (the paper, W→GI-T: 70.8 vs 68.4): MetaQA 1-hop -50.0 [" in text
    assert "the other way from the paper; MetaQA 2-hop not run yet" in text
    assert "MetaQA 3-hop not run yet; GrailQA-Tech -50.0 [" in text  # few − zero-shot on GrailQA-Tech too
    assert "above it on MetaQA 1-hop, below on GrailQA-Tech (95% CIs excluding 0)" in text
    paras = [x for x in text.splitlines() if not x.startswith("- ")]  # one paragraph per line, "- " its list items
    assert 4 <= len(paras) <= 6 and "" not in text.splitlines()
    metric, value = B.headline_transfer(records)
    assert "few-shot answer F1" in metric and value == "50.0/—/—/50.0"

    def cell(name):
        if name.endswith(".fs_dense_noegf"):
            return [_rec(f"q{i}", 0.0) for i in range(5)]
        if name.endswith(".fs_dense"):
            return [_rec(f"q{i}", 1.0, ("empty", "ok") if i < 2 else ("ok",)) for i in range(5)]
        return []
    text = B.summary_ablations(cell)
    assert "w/o EGF —/—/—/—" not in text and "w/o EGF -100.0/-100.0/-100.0/-100.0 (the paper: -4.2)" in text
    assert "\n- Removing a component gains on no pair (no 95% CI above 0)." in text
    assert ("\n- As in the paper, removing the component costs points (95% CI below 0): w/o EGF on MetaQA 1-hop -100.0 "
            "[-100.0, -100.0], MetaQA 2-hop") in text
    assert "on MetaQA 1-hop F1 goes 60.0 → 100.0 from round 0 to 4" in text and "0 of 2 on 1-hop" in text
    assert "Table 7 (FuSIC(T) few-shot" in text and "MetaQA 1-hop 0.0 → 0.0" in text


def test_the_ablation_summary_names_the_components_whose_removal_does_not_cost():
    """The paper's Table 3 read from its numbers (not every ablation costs points there); ours by one rule on each
    paired 95% CI: every pair × ablation with records in exactly one list (gains, costs, unclear by the mean's sign)."""
    n = 20
    full = [_rec(f"q{i}", float(i % 2)) for i in range(n)]
    have = {f"{p}.fs_dense": full for p in (*B.METAQA, "gtech")}
    have["metaqa1.fs_dense_norr"] = [_rec(f"q{i}", 1.0) for i in range(n)]  # removing re-ranking gains: +50
    have["gtech.fs_dense_sexpr"] = list(full)  # the same answers: +0.0 [+0.0, +0.0]
    have["metaqa2.fs_dense_noegf"] = [_rec(f"q{i}", 0.0) for i in range(n)]  # removing EGF costs: -50
    have["metaqa3.fs_dense_noegf"] = [_rec(f"q{i}", float(i % 2) if i != 1 else 0.0) for i in range(n)]  # -5, CI incl. 0
    text = B.summary_ablations(lambda cell: have.get(cell, []))
    assert ("removing a component costs points in 23 of its 24 cases; not in w/o SPARQL, few-shot, W→Gp-P (53.9 vs "
            "the full model's 52.3; sec. 4.2.2") in text
    assert "In its column W→GI-T, the one ours are compared with, every ablation costs points, few- and zero-shot." in text
    assert "In the paper every ablation costs points" not in text
    assert ("Ours, by each paired 95% CI:\n- The other way from the paper, removing the component gains (95% CI above 0): "
            "w/o re-ranking on MetaQA 1-hop +50.0 [") in text
    assert "As in the paper, removing the component costs points (95% CI below 0): w/o EGF on MetaQA 2-hop -50.0 [" in text
    assert "Unclear (95% CI including 0), below 0 in the mean: w/o EGF on MetaQA 3-hop -5.0 [" in text
    assert ("No difference: every question scored the same with and without the component: w/o SPARQL "
            "(s-expressions) on GrailQA-Tech +0.0 [+0.0, +0.0].") in text
    assert [B.ablation_side(g) for g in ((0.1, 0.05, 0.2, 9), (0.0, 0.0, 0.0, 9), (-0.1, -0.2, -0.01, 9),
                                         (-0.1, -0.2, 0.05, 9), (0.02, -0.01, 0.05, 9), None)] == \
        ["gains", "same", "costs", "unclear, below 0", "unclear, above 0", None]


def _whole(qid, f1, statuses):
    """A whole run record (a notebook's demo): the attempts in the trace's generate_and_execute stage."""
    return {"qid": qid, "metrics": {"f1": f1}, "llm": {"calls": 3},
            "trace": [{"name": "generate_and_execute", "output": [{"status": s, "answers": []} for s in statuses]}]}


def test_feedback_readers_work_on_whole_and_stripped_records_alike():
    whole = [_whole("a", 1.0, ("ok",)), _whole("b", 1.0, ("empty", "unanchored", "ok")), _whole("c", 0.0, ("empty",) * 5)]
    stripped = [dict(w, attempts=[{"status": a["status"]} for a in w["trace"][0]["output"]], trace=[]) for w in whole]
    assert B.f1_after_rounds(whole) == B.f1_after_rounds(stripped) == [1 / 3, 1 / 3, 2 / 3, 2 / 3, 2 / 3]
    stats = B.feedback_stats(whole)
    assert stats == B.feedback_stats(stripped) == {"feedback rounds/q": 2.0, "final query ok": 2 / 3}
    io = [{"qid": "x", "metrics": {"f1": 1.0}, "trace": [{"name": "answer", "output": "A"}]}]
    assert all(v != v for v in B.feedback_stats(io).values())  # NaN: no attempts to count
    assert B.attempts_of(io[0]) == []


def test_feedback_rescues_are_the_questions_a_failed_first_query_then_f1_1():
    rescued = _rec("r", 1.0, ("empty", "ok"))
    records = lambda cell: {"geo2cinema.fs_bm25": [rescued, _rec("s", 1.0), _rec("t", 0.0, ("empty", "ok"))],  # noqa: E731
                            "cinema2geo.zs_both": [_rec("u", 1.0, ("parse_error", "unanchored", "ok"))]}.get(cell, [])
    found = B.feedback_rescues(records)
    assert [(x["cell"], x["qid"], x["attempts"]) for x in found] == [
        ("geo2cinema.fs_bm25", "r", ["empty", "ok"]), ("cinema2geo.zs_both", "u", ["parse_error", "unanchored", "ok"])]
    assert found[0]["task"] == "geo-wd>cinema-fb" and found[0]["LLM calls"] == 4


def test_the_ablations_headline_is_what_egf_gains_paired():
    full = [_rec(f"q{i}", 1.0) for i in range(10)]
    records = lambda cell: {  # noqa: E731
        "metaqa1.fs_dense": full, "metaqa1.fs_dense_noegf": [_rec(f"q{i}", float(i < 7)) for i in range(10)],
        "gtech.fs_dense": full[:8], "gtech.fs_dense_noegf": [_rec(f"q{i}", float(i < 2)) for i in range(10)],
        "metaqa2.fs_dense": full}.get(cell, [])
    metric, value = B.headline_ablations(records)
    assert "EGF's gain (full − w/o EGF)" in metric and "GrailQA-Tech (gold-fact fragment)" in metric
    parts = value.split(" / ")
    assert parts[0].startswith("+30.0 [") and parts[0].endswith("(n=10)")  # 3 of 10 questions need the feedback
    assert parts[1:3] == ["—", "—"] and parts[3].startswith("+75.0 [") and parts[3].endswith("(n=8)")  # 6 of 8 shared


def test_table7_reading_counts_where_re_ranking_lowers_the_miss_rate():
    from kgqa_lib.bench.result_table import table

    cols = ("cell", "retriever", "aspect", "n", "not in top K", "not in top k (before re-ranking)",
            "not in LLM top k (after)")
    rows = [("metaqa1.fs_dense", "dense", "all aspects", 100, "0.0", "5.0", "3.0"),
            ("metaqa1.zs_dense", "dense", "all aspects", 100, "0.0", "5.0", "7.0"),
            ("metaqa3.fs_dense", "dense", "all aspects", 100, "100.0", "100.0", "100.0")]
    text = B.table7_reading(table("table7", "t", list(cols), rows))
    assert text.startswith("Re-ranking by the LLM lowers the share of questions missing gold elements in 1 of the 3 "
                           "main cells, raises it in 1 and leaves it in 1")
    assert text.endswith("In metaqa3.fs_dense no question has its gold elements in the top K, so re-ranking has "
                         "nothing to bring back.")
    assert B.table7_reading(table("table7", "t", list(cols), [])) == ""


def test_langchain_reading_totals_the_chains_outcomes():
    from kgqa_lib.bench.result_table import table

    cols = ["cell", "n", "F1 [95% CI]", "Hits@1", "outcome", "code fence", "foaf:", "INSERT / DELETE"]
    rows = [["metaqa1.langchain", 10, "0.0", "0.0", "update_refused 2, parse_error 8", 10, 9, 2],
            ["metaqa2.langchain", 5, "20.0", "20.0", "parse_error 3, ok 2", 3, 5, 0],
            ["metaqa3.langchain", "not run yet", "", "", "", "", "", ""]]
    text = B.langchain_reading(table("langchain", "t", cols, rows))
    assert text == ("Of the 15 questions, 13 got a query wrapped in a code fence (which the chain passes to the KG as "
                    "it is); 11 got a query that did not parse, 2 one that asked to write to the KG (refused), and 2 one "
                    "that returned rows.")
    assert B.langchain_reading(table("langchain", "t", cols, [])) == ""


def test_short_labels_shortens_the_pairs_and_nothing_else():
    from kgqa_lib.bench.result_table import table

    t = table("x", "t", ["pair", "F1"], [[B.PAIRS["gtech"][4], "51.8"], ["metaqa1.fs_dense", 7]])
    short = B.short_labels(t)
    assert short.rows == (("GrailQA-Tech", "51.8"), ("metaqa1.fs_dense", 7)) and short.title == "t"


def test_costs_reading_gives_each_stage_beside_appendix_a5(monkeypatch):
    rec = {"qid": "q0", "metrics": {"f1": 1.0},
           "stages": {"seconds": {"retrieval": 0.5, "rerank": 4.0, "generation": 3.0, "feedback": 1.0},
                      "calls": {"rerank": 2, "generation": 1, "feedback": 1}},
           "llm": {"recorded_seconds": 8.0, "seconds": 8.0, "cache_hits": 0}}
    text = B.costs_reading(lambda c: [rec] if c == "metaqa1.fs_dense" else [], pairs=("metaqa1",))
    assert text.startswith("FuSIC(T) few-shot, seconds a question takes live by stage (MetaQA 1-hop): retrieval 0.5; "
                           "re-ranking 4.0; exemplars 0.0; generation 3.0; feedback 1.0; sum 8.5.")
    assert "(appendix A.5, GPT-4, one retriever): retrieval 14.4; re-ranking 9.6; generation 14.4; feedback 18.9; " \
           "sum 57.3." in text
    assert B.costs_reading(lambda c: [], pairs=("metaqa1",)) == ""
    import dataclasses

    monkeypatch.setitem(B.CELL_OF, "metaqa1.fs_dense", dataclasses.replace(B.CELL_OF["metaqa1.fs_dense"], planned=2))
    assert B.costs_reading(lambda c: [rec] if c == "metaqa1.fs_dense" else [], pairs=("metaqa1",)) == ""  # running


def test_shots_reading_pairs_more_shots_against_five_and_says_the_direction():
    five = [_rec(f"q{i}", 0.5) for i in range(20)]
    up = [_rec(f"q{i}", 1.0) for i in range(20)]  # every question gains 50 points
    have = {"metaqa1.fs_dense": five, "metaqa1.fs_dense_shots100": up}
    text = B.shots_reading(lambda c: have.get(c, []))
    assert "100 shots MetaQA 1-hop +50.0 [+50.0, +50.0], MetaQA 2-hop not run yet, MetaQA 3-hop not run yet" in text
    assert "Of these 1 differences, 1 lie above 0, 0 below and 0 include 0 (95% CIs): more shots help on every hop." in text
    down = {**have, "metaqa2.fs_dense": five, "metaqa2.fs_dense_shots100": [_rec(f"q{i}", 0.0) for i in range(20)]}
    assert "no direction holds across the hops" in B.shots_reading(lambda c: down.get(c, []))
    assert B.shots_reading(lambda c: []) == ""
