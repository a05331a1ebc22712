"""What notebooks 00, 40, 41 and 90 print beside their tables: comparisons worded from paired 95% CIs, one name per
setting, the paper's values under the right headings, and a key for every id a table shows."""

from __future__ import annotations

import gzip
import json
import math
import re

import pandas as pd
import pytest

from kgqa_lib.bench import baselines as B
from kgqa_lib.bench import core, overview
from kgqa_lib.bench import fusic as F
from kgqa_lib.bench import keqing as K
from kgqa_lib.evaluate import pgakv_analysis as pa


def _record(qid: str, f1: float, seconds: float = 5.0) -> dict:
    return {"qid": qid, "kind": "factoid", "metrics": {"hits@1": f1, "f1": f1}, "seconds": seconds,
            "llm": {"calls": 1, "prompt_tokens": 100, "completion_tokens": 10, "recorded_seconds": seconds - 1,
                    "seconds": seconds - 1, "cache_hits": 0}}


def _save(table: core.Table, cell: str, records: list[dict]) -> None:
    table.records_dir.mkdir(parents=True, exist_ok=True)
    with gzip.open(table.records_dir / f"{cell}.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path))
    return tmp_path


# ---------------------------------------------------------------- the summary's wording (notebook 90)
def _gtech(dense: list[float], both: list[float]) -> pd.DataFrame:
    _save(F.TABLE, "gtech.fs_dense", [_record(f"g{i}", x) for i, x in enumerate(dense)])
    _save(F.TABLE, "gtech.fs_both", [_record(f"g{i}", x) for i, x in enumerate(both)])
    fu = pd.DataFrame(overview.fusic_rows(), columns=list(overview.COLUMNS))
    return fu[(fu["status"] == "complete") & fu["cell"].str.startswith("gtech.") & fu["paper value"].notna()]


def test_fusic_order_is_the_paired_difference_worded_from_its_interval(results):
    n = F.TABLE.cell("gtech.fs_dense").planned
    dense = [float(i % 2 == 0) for i in range(n)]
    text = overview.fusic_order(_gtech(dense, [float(i % 4 == 0) for i in range(n)]))  # lower on a quarter
    g = F.paired_f1(F.cell_records(core.Records(F.TABLE), "gtech.fs_both"),
                    F.cell_records(core.Records(F.TABLE), "gtech.fs_dense"))
    assert g[2] < 0 and f"{100 * g[0]:+.1f} [{100 * g[1]:+.1f}, {100 * g[2]:+.1f}] F1 points against our best (paired, n={n})" in text
    assert ": the other way from the paper's order. Neither is a held-out estimate: our best is picked on" in text
    assert text.endswith("(`results/bench/fusic.md`, the section on those choices).")
    worse, better = {0, 2, 4, 6}, {1, 3, 5}  # a few questions each way: the interval reaches 0
    both = [0.0 if i in worse else 1.0 if i in better else x for i, x in enumerate(dense)]
    assert ": unclear (the paired 95% CI reaches 0). Neither is" in overview.fusic_order(_gtech(dense, both))


def test_summary_words_pgakv_against_qsm_from_the_paired_intervals(monkeypatch):
    monkeypatch.setattr(overview, "other_way", lambda *a, **k: "")
    ov = pd.DataFrame(columns=list(overview.COLUMNS))
    monkeypatch.setattr(overview, "pgakv_qsm_gains", lambda: {"simple": (-0.478, -0.575, -0.389, 113),
                                                              "multihop": (-0.226, -0.371, -0.097, 62)})
    text = overview.summary(ov, pts=pd.DataFrame())
    assert ("simple -47.8 [-57.5, -38.9] (n=113), multihop -22.6 [-37.1, -9.7] (n=62) Hits@1 points (paired) — the "
            "other way from the paper (its Table 2, GPT-3.5: +6.8 on SimpleQuestions, +14.4 on QALD-10)") in text
    monkeypatch.setattr(overview, "pgakv_qsm_gains", lambda: {"simple": (-0.478, -0.575, -0.389, 113),
                                                              "multihop": (-0.05, -0.12, 0.02, 62)})
    assert ("— simple: the other way from the paper; multihop: unclear (the paired 95% CI reaches 0)"
            in overview.summary(ov, pts=pd.DataFrame()))


def test_pgakv_against_qsm_is_notebook_11s_paired_difference():
    from kgqa_lib.bench import pgakv as P
    from kgqa_lib.evaluate.report import format_gain

    gains = overview.pgakv_qsm_gains()
    if not gains:
        pytest.skip("no saved PG&AKV and QSM records")
    text = P.summary_main_results()
    assert all(f"{s} {format_gain(g)}" in text for s, g in gains.items())


# ---------------------------------------------------------------- names, headings and notes of the tables
def test_one_short_name_per_setting_in_tables_and_the_figure():
    clean, tuned = f"{pa.ROWS['pgakv']}, {pa.CLEAN_ROW}", f"{pa.ROWS['pgakv_thr05']}, {pa.NOT_HELD_OUT}"
    metaqa_07, metaqa_05 = pa.ROWS["pgakv"], "PG&AKV (threshold 0.5, chosen on a held-out dev part)"
    assert overview.display_method(clean) == "PG&AKV (threshold 0.7, the paper's)"
    assert overview.display_method(tuned) == f"PG&AKV (threshold 0.5, {pa.NOT_HELD_OUT_TAG})"
    assert overview.display_method(pa.ROWS["pgakv_pg"]) == overview.PSEUDO_GRAPH
    names = overview.setting_names([clean, tuned, metaqa_07, metaqa_05, "QSM"])
    assert len({names[m] for m in (clean, tuned, metaqa_07, metaqa_05)}) == 2 and names["QSM"] == "QSM"
    assert names[tuned] == names[metaqa_05] == "PG&AKV, threshold 0.5 (chosen on dev; on the mini-world not held out)"
    assert overview.setting_names([metaqa_05])[metaqa_05] == "PG&AKV, threshold 0.5 (chosen on dev)"
    assert "the clean test row" in overview.settings_key() and pa.NOT_HELD_OUT_TAG in overview.settings_key()


def test_the_figure_has_one_legend_entry_per_setting_and_wrapped_set_names():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def r(s, m, v):
        return overview.row("PG&AKV", s, m, "hits@1", [], 1, v) | {"status": "complete", "value": 40.0,
                                                                    "ci_low": 30.0, "ci_high": 50.0}
    rows = pd.DataFrame([r("mini-world simple (test)", f"{pa.ROWS['pgakv']}, {pa.CLEAN_ROW}", 34.3),
                         r("mini-world simple (test)", f"{pa.ROWS['pgakv_thr05']}, {pa.NOT_HELD_OUT}", 34.3),
                         r("MetaQA dev (our reported part), 1-hop", pa.ROWS["pgakv"], 34.3),
                         r("MetaQA dev (our reported part), 1-hop",
                           "PG&AKV (threshold 0.5, chosen on a held-out dev part)", 34.3)],
                        columns=list(overview.COLUMNS))
    fig, ax = plt.subplots()
    overview.plot(ax, rows)
    labels = ax.get_legend_handles_labels()[1]
    assert len(labels) == 3 and "paper" in labels  # two settings, the paper's tick
    assert all(len(line) <= 18 for t in ax.get_xticklabels() for line in t.get_text().splitlines())
    plt.close(fig)


def test_fusic_table_short_pair_names_with_a_key_and_its_paper_column_named(results):
    ov = overview.main_rows(pd.DataFrame(overview.fusic_rows(), columns=list(overview.COLUMNS)))
    [t] = overview.paper_tables(ov)
    pairs = [p for p in F.PAIRS if any(ov["cell"].str.startswith(f"{p}."))]
    assert list(t.columns[1:-1]) == [F.SHORT[p] for p in pairs]
    assert t.columns[-1] == f"paper: {F.PAPER_COLUMN}, beside every set"  # one value per method, one column
    [key] = overview.table_notes(t)
    assert key.startswith("Pairs (source → target): ")
    assert all(f"{F.SHORT[p]}: {overview.short_set(F.PAIRS[p][4])}" in key for p in pairs)


def test_notes_say_where_paper_values_come_from(results):
    by = {t.name: t for t in overview.paper_tables(overview.overview())}
    notes = overview.table_notes(by["PG&AKV Hits@1"])
    assert notes[0] == overview.settings_key()
    assert overview.tog_paper_note() in notes and "GPT-4" in overview.tog_paper_note()
    assert "sec. 4.4.1" in overview.tog_paper_note() and "54.7" in overview.tog_paper_note()
    assert overview.table_notes(by["Keqing F1"]) == []  # no GrailQA records: no level sizes to print
    g = lambda level, chain=True, covered=False: {"qid": f"{level}{chain}{covered}", "metrics": {"f1": 0.0},  # noqa: E731
                                                   "grailqa": {"level": level, "chain": chain, "covered": covered}}
    recs = [g("i.i.d.", covered=True), g("i.i.d."), g("i.i.d.", chain=False), g("zero-shot"), g("zero-shot", False)]
    note = overview.grailqa_levels_note(lambda name: recs)
    assert note.startswith("GrailQA dev levels, of the linked default's 5 questions: i.i.d. n=3, zero-shot n=2.")
    assert "Of the 3 i.i.d. questions, 2 are relation chains from one entity, and the template bank covers every hop of 1 of those" in note and "keqing_grailqa.md" in note


def test_a_methods_cells_say_which_metric_and_column_the_paper_value_is(results):
    rows = pd.DataFrame([r for r in overview.keqing_rows() if r["method"] == "KB-BINDER"]
                        + [r for r in overview.fusic_rows() if r["cell"].endswith(".kbbinder_fs")])
    t = overview.method_table(rows, "KB-BINDER").frame()
    hits = t[t["metric"] == "Hits@1"]
    assert (hits["paper"] == "—").all() and (hits["paper's table, column"] == "—").all()
    exact = t[t["metric"] == "exact set"]
    assert list(exact["paper"]) == [f"{B.PAPER_KBBINDER_METAQA[h]:.1f}" for h in B.HOPS]
    assert exact["paper's table, column"].iloc[0] == "Keqing Table 2, MetaQA 1-hop"
    notes = overview.method_notes(rows)
    assert notes[0] == overview.KBBINDER_NOTE
    fusic = rows[rows["cell"].str.endswith(".kbbinder_fs")]
    value = fusic["paper value"].iloc[0]
    assert (f"{value:.1f} (FuSIC-KBQA Table 2, few-shot, {F.PAPER_COLUMN}) is one number of the paper's, beside each of our "
            f"{len(fusic)} sets") in notes[1]
    tog = pd.DataFrame([r for r in overview.pgakv_rows() if r["method"] == "Think-on-Graph"])
    assert overview.method_notes(tog) == [overview.tog_paper_note()]
    assert overview.paper_where("PG&AKV paper, sec. 4.4.1: ToG with GPT-4 on QALD-10 (Hit@1)") == \
        "PG&AKV paper, sec. 4.4.1: ToG with GPT-4 on QALD-10"
    assert overview.paper_where(float("nan")) == "—"
    # the setting stays: Table 2's KB-Binder row is 68.0 few-shot and 33.6 zero-shot
    assert overview.paper_where("FuSIC-KBQA paper, Table 2, zero-shot, KB-Binder, column W→GI-T (F1): 33.6") == \
        "FuSIC-KBQA Table 2, zero-shot, W→GI-T"
    assert overview.paper_where("Keqing paper, Table 2, row KB-BINDER, column MetaQA 1-hop (exact set)") == \
        "Keqing Table 2, MetaQA 1-hop"


# ---------------------------------------------------------------- keys, hours, headline lines (notebook 90)
def test_every_cell_id_a_table_shows_is_in_the_key():
    patterns = overview.cell_patterns()
    key = overview.cells_key()
    for t in core.tables():
        for c in t.cells:
            assert any(re.fullmatch(rx, c.name) for rx, _, _ in patterns), c.name
            if c.name.startswith("t2_"):  # a run and its suffixes, each explained
                run = c.name.split(".")[1]
                for suffix in overview.PGAKV_SUFFIXES:
                    run = run.replace(f"_{suffix}", "")
                assert run in overview.PGAKV_RUNS, c.name
    assert all(shown in key for _, shown, _ in patterns) and "qwen2.5-0.5b" in key


def test_not_run_tables_collapse_into_one_line():
    frame = pd.DataFrame([{"table": "a", "cell": "x", "metric": "hits@1", "m": "1"},
                          {"table": "b", "cell": "(every cell)", "metric": "hits@1", "m": "not run"},
                          {"table": "c", "cell": "(every cell)", "metric": "f1", "m": "not run"}])
    parts, line = overview.split_not_run(frame)
    assert [name for name, _ in parts] == ["a"] and list(parts[0][1].index) == ["x"]
    assert line == "Not run with another model: b, c."
    assert overview.split_not_run(frame.iloc[:1])[1] == ""
    two = frame.rename(columns={"m": "big"}).assign(small="not run", **{"small − big (paired)": ""})
    assert overview.split_not_run(two)[1] == "Not run with small: b, c."


def test_total_hours_and_headline_lines(results):
    full = K.TABLE_FULL
    for h in (1, 2):
        _save(full, f"keqing_full_{h}hop", [_record(f"q{i}", 1.0, seconds=9.0) for i in range(400)])
    line = overview.total_hours_line(["keqing_full", "keqing_metaqa"])
    assert line == "Together: 2.0 h live, over the 2 tables' records."  # 800 answers × 9 s
    assert math.isclose(sum(overview.recorded_hours(core.get_table(n)) for n in ("keqing_full", "keqing_metaqa")), 2.0)
    ov = overview.overview()
    rows = overview.headline_rows(ov)
    assert [m for m, _ in rows] == list(overview.HEADLINE_CELLS.values())
    assert " / ".join(v for _, v in rows) == overview.headline_cross_paper(ov)[1]
    assert "Benchmark tables:" in overview.tables_key(["keqing_full"]) and full.title in overview.tables_key(["keqing_full"])


# ---------------------------------------------------------------- notebook 40: the figure says what SPARQL does
def test_kbbinder_figure_says_which_way_r_is_followed():
    from kgqa_lib.evaluate import walkthrough as W
    from kgqa_lib.kg.sexpr import to_sparql
    from kgqa_lib.methods.kbbinder import Draft, Outcome

    forward = to_sparql("(JOIN (R ns:r) ns:e)", prefixes={"ns": "http://x/"})
    assert "ns:e ns:r ?x" in forward  # X's r-values: r followed forward from X
    assert "?x ns:r ns:e" in to_sparql("(JOIN ns:r ns:e)", prefixes={"ns": "http://x/"})
    titles = W.kbbinder_layers([Outcome(Draft(0, "?", error="no_sexpr"), status="no_sexpr")])[2]
    assert "(JOIN (R r) X) follows r forward from X" in titles[0] and "backwards" not in titles[0]


# ---------------------------------------------------------------- notebook 00
def test_quickstart_shows_points_and_names():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kgqa_lib.bench.result_table import table
    from kgqa_lib.bench.quickstart import SECONDS_NOTE, demo_table, io_cot_readable, points_bars

    report = pd.DataFrame({"method": ["io", "cot"], "n": [10, 10], "hits@1": [0.4, 0.3],
                           "hits@1_ci": [(0.1, 0.7), (0.1, 0.6)], "f1": [0.42, 0.32],
                           "f1_ci": [(0.15, 0.72), (0.08, 0.6)], "lenient": [0.5, 0.4], "errors": [0, 0],
                           "calls/q": [1.0, 1.0], "tokens/q": [190.5, 388.1]})
    t = demo_table(report)
    assert list(t.index) == ["IO", "CoT"] and t.loc["IO", "Hits@1 (points) [95% CI]"] == "40.0 [10.0, 70.0]"
    assert t.loc["CoT", "F1 (points) [95% CI]"] == "32.0 [8.0, 60.0]" and t.loc["IO", "lenient, ToG's (points)"] == 50.0
    fig, ax = plt.subplots()
    points_bars(ax, report)
    assert [x.get_text() for x in ax.get_xticklabels()] == ["IO", "CoT"] and ax.get_ylim() == (0, 100)
    assert [round(p.get_height(), 1) for p in ax.patches] == [40.0, 30.0] and "points" in ax.get_ylabel()
    plt.close(fig)
    r = io_cot_readable(table("io_cot", "t", ["method", "hits@1", "LLM calls/q", "s/q live"],
                              [["io", "1", 1.0, 0.9], ["cot", "2", 1.0, 1.5], ["CoT − IO (paired)", "x", "", ""]]))
    assert [x[0] for x in r.rows] == ["IO", "CoT", "CoT − IO (paired)"] and r.columns[-1] == "s/q (recorded)"
    assert SECONDS_NOTE.startswith("s/q (recorded): ") and "load" in SECONDS_NOTE


def test_quickstart_try_this_says_what_each_suggestion_runs():
    from kgqa_lib.bench.pgakv import demo_qids
    from kgqa_lib.bench.quickstart import try_this

    load = lambda part, run: [_record(f"{part}-{i}", 1.0, seconds=30.0) for i in range(5)]  # noqa: E731  30 s/q
    text = try_this("miniworld:simple", 10, 0, load, metaqa=12.0).splitlines()
    new = len(demo_qids(["miniworld:simple"], 20, 0)["simple"] - demo_qids(["miniworld:simple"], 10, 0)["simple"])
    assert text[0].startswith('KG = "miniworld:freebase": no LLM call changes')
    assert text[1].startswith(f"N_QUESTIONS = 20: {new} questions more, {2 * new} LLM calls live")
    assert f"≈ {new * 60 / 60:.1f} min of model time" in text[1]  # IO and CoT, 30 s each per question
    assert text[2].startswith('DATASET = "miniworld:multihop": every call live, 21 LLM calls, ≈ 10.0 min')
    assert text[3].startswith("kgqa run --method cot --dataset metaqa:1hop:dev --sample 50: 50 LLM calls live, ≈ 10.0 min")
    assert "KGQA_DATA_DIR" in text[3] and "section External benchmarks" in text[3] and "../shared" not in text[3]
