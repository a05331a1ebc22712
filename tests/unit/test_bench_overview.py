"""The overview of notebook 90: values only for cells holding their planned questions; a cell still
running reads "partial n/planned", a cell without records "not run"; the paper's value beside ours."""

from __future__ import annotations

import gzip
import json
import math

import pytest

from kgqa_lib.bench import core, overview
from kgqa_lib.bench import keqing as bench_keqing


def _record(qid: str, hit: float) -> dict:
    return {"qid": qid, "kind": "factoid", "metrics": {"hits@1": hit, "f1": hit}, "seconds": 5.0,
            "llm": {"calls": 3, "prompt_tokens": 700, "completion_tokens": 100, "recorded_seconds": 4.0,
                    "seconds": 4.0, "cache_hits": 0}}


def _save(table: core.Table, cell: str, records: list[dict]) -> None:
    table.records_dir.mkdir(parents=True, exist_ok=True)
    with gzip.open(table.records_dir / f"{cell}.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path))
    return tmp_path


def test_complete_partial_and_missing_cells(results, monkeypatch):
    monkeypatch.delitem(core.TABLES, "fusic", raising=False)  # a registry without the FuSIC table
    full = bench_keqing.TABLE_FULL
    planned = full.cell("keqing_full_1hop").planned
    _save(full, "keqing_full_1hop", [_record(f"q{i}", float(i % 4 != 0)) for i in range(planned)])  # 3 of 4 right
    _save(full, "keqing_full_2hop", [_record(f"q{i}", 1.0) for i in range(50)])
    df = overview.overview().set_index("cell")

    one = df.loc["keqing_full_1hop"]
    assert one["status"] == "complete" and one["n"] == planned
    assert one["value"] == pytest.approx(75.0)
    assert one["ci_low"] < 75.0 < one["ci_high"]
    assert one["calls/q"] == pytest.approx(3.0) and one["tokens/q"] == pytest.approx(800.0)
    assert one["s/q"] == pytest.approx(4.0 + 1.0)  # recorded LLM time + time outside the LLM
    assert one["paper value"] == bench_keqing.PAPER[1] and "Table 2" in one["paper source"]

    two = df.loc["keqing_full_2hop"]
    assert two["status"] == f"partial 50/{planned}"
    assert all(math.isnan(two[c]) for c in ("value", "ci_low", "ci_high", "calls/q", "tokens/q", "s/q"))

    for cell in ("keqing_full_3hop", "keqing_metaqa_1hop", "kbbinder_metaqa_1hop", "t2_simple.pgakv", "tog_multihop",
                 "pgakv_1hop"):  # KB-BINDER's cell is two rows: Hits@1 and exact set
        rows = df.loc[[cell]]
        assert (rows["status"] == "not run").all() and rows["value"].isna().all(), cell
    assert (df["paper"] != "FuSIC-KBQA").all()
    # a pruning setting tried on dev only (no test cell on any set) is no row of the overview
    from kgqa_lib.evaluate import pgakv_analysis as pa

    dev_only = [run for run in pa.PRUNING_RUNS.values()
                if not any(c.name.startswith("t2_") and c.name.endswith(f".{run}")
                           for t in (core.TABLES["pgakv_t2"], core.TABLES["pgakv_test"]) for c in t.cells)]
    assert dev_only  # pgakv_thr05_k1: chosen against on dev, or not yet run on test
    assert not any(cell.endswith(f".{run}") for cell in df.index for run in dev_only)


def test_complete_records_hide_cells_still_running(results):
    full = bench_keqing.TABLE_FULL
    _save(full, "keqing_full_2hop", [_record(f"q{i}", 1.0) for i in range(10)])
    assert core.Records(full)("keqing_full_2hop") and overview.complete_records(full)("keqing_full_2hop") == []


# What overview.fusic_rows reads from the module of a fusic table's report (this one, in the test).
PAIRS = {"p": ("task", "fusic:x", 4, (), "a pair")}
CONFIGS = {"a": ("fusic", (), "config A"), "b": ("fusic", (), "config B"), "abl": ("fusic", (), "an ablation")}
PAPER = {"a": ("Table 2, row A", "74.6"), "b": ("sec. 4, B", "< 5.0")}
PAPER_COLUMN = "W→GI-T"
ABLATIONS = ("abl",)


def test_fusic_rows_when_the_table_exists(results, monkeypatch):
    cells = tuple(core.Cell(f"p.{c}", "fusic", "fusic:x", 4) for c in ("a", "b", "abl")) + (core.Cell("q.a", "fusic", "fusic:y", 4),)
    table = core.Table(name="fusic", title="t", cells=cells, report=_report, output="fusic_test_overview.md")
    monkeypatch.setitem(core.TABLES, "fusic", table)
    _save(table, "p.a", [_record(f"q{i}", 0.5) for i in range(4)])
    rows = {r["cell"]: r for r in overview.fusic_rows()}
    assert set(rows) == {"p.a", "p.b", "q.a"}  # the ablation is notebook 22's
    a = rows["p.a"]
    assert (a["set"], a["method"], a["metric"]) == ("a pair", "config A", "F1")
    assert a["value"] == pytest.approx(50.0) and a["paper value"] == 74.6 and "W→GI-T" in a["paper source"]
    b = rows["p.b"]
    assert b["status"] == "not run" and math.isnan(b["paper value"]) and "< 5.0" in b["paper source"]
    assert rows["q.a"]["set"] == "fusic:y"  # a pair the module does not declare: its dataset


def _report(records) -> str:  # a report function of this module, so the constants above are its table's
    return ""


def _chain_points(gains, lows=None, highs=None, n=100):
    import pandas as pd

    lows = [g - 2.0 for g in gains] if lows is None else lows  # an interval around each gain
    highs = [g + 2.0 for g in gains] if highs is None else highs
    return pd.DataFrame({"configuration": bench_keqing.CHAIN_LABEL, "hops": [1, 2, 3], "gain": gains,
                         "gain_low": lows, "gain_high": highs, "n": n})


LORA_METRIC = "Keqing decomposer, multi-hop questions decomposed right"


def test_other_way_names_each_reversal_from_the_records():
    chain_ahead = _chain_points([0.0, 1.0, 8.0], [0.0, -1.0, 3.0], [0.0, 3.0, 13.0])  # 3-hop: CI above 0
    text = overview.other_way(chain_ahead, (LORA_METRIC, "0 of 6 / 0 of 6 / 6 of 6"),
                              {"simple": (-0.097, -0.159, -0.044, 113), "open": (-0.01, -0.033, 0.012, 50)})
    assert text.startswith("Also the other way from the papers: ") and text.endswith(".")
    assert "+0.0 [+0.0, +0.0] / +1.0 [-1.0, +3.0] / +8.0 [+3.0, +13.0] Hits@1 points on MetaQA dev" in text
    assert "it goes the other way from the paper at 3-hop" in text and "unclear at 2-hop" in text
    assert "decomposes 0 of 6 multi-hop mini-world questions right against 6 of 6 in context" in text
    assert "-9.7 points on simple (paired 95% CI [-15.9, -4.4])" in text and "+10.1 on SimpleQuestions" in text
    assert "on open" not in text  # its interval crosses zero: no direction to reverse


def test_the_chain_is_no_reversal_while_every_interval_reaches_zero():
    """Keqing's Fig. 6 with the chain level or ahead but every paired CI reaching 0 (the committed records'
    case): worded from the intervals as not reproducing the paper's lead, never as the other way."""
    pts = _chain_points([0.0, 1.0, 3.0], [0.0, 0.0, 0.0], [0.0, 3.0, 6.0])
    assert overview.other_way(pts, (LORA_METRIC, "6 of 6 / 0 of 6 / 5 of 6"), {"simple": None}) == ""
    text, reversed_ = overview.fig6_text(pts)
    assert not reversed_ and "+0.0 [+0.0, +0.0] / +1.0 [+0.0, +3.0] / +3.0 [+0.0, +6.0]" in text
    assert text.endswith(bench_keqing.fig6_wording(pts.set_index("hops")))  # the ablations notebook's words
    assert "does not reproduce the paper's lead for sub-questions" in text
    # a LoRA count that does not force every paired difference the same way is no reversal either
    assert overview.other_way(pts, (LORA_METRIC, "2 of 6 / 0 of 6 / 5 of 6"), {"simple": None}) == ""


def test_other_way_is_empty_when_ours_goes_the_papers_way():
    assert overview.other_way(_chain_points([-2.0, -1.0, 0.0]), (LORA_METRIC, "6 of 6 / 0 of 6 / 5 of 6"),
                              {"simple": (0.05, 0.01, 0.09, 100), "open": None}) == ""
    # not recorded: the headline's value is a message, not counts
    assert overview.other_way(_chain_points([-1.0, -1.0, -1.0]), (LORA_METRIC, "not recorded: run notebook 33"),
                              {"simple": None, "open": None}) == ""


def test_summary_ends_with_the_other_way_sentence(monkeypatch):
    import pandas as pd

    monkeypatch.setattr(overview, "other_way", lambda *a, **k: "Also the other way from the papers: X.")
    monkeypatch.setattr(overview, "pgakv_qsm_gains", lambda: {})
    ov = pd.DataFrame({"paper": ["Keqing"], "metric": ["Hits@1"], "status": ["partial"], "method": ["CoT"],
                       "set": ["MetaQA"], "cell": ["x"], "value": [1.0], "paper value": [2.0]})
    assert overview.summary(ov, pts=pd.DataFrame()).endswith("\nAlso the other way from the papers: X.")


def test_lora_settings_are_notebook_33s_defaults():
    from kgqa_lib.notebooks import notebook_paths

    path = next(p for p in notebook_paths() if p.name.startswith("33_"))
    cell = next(c for c in json.loads(path.read_text())["cells"] if "parameters" in c["metadata"].get("tags", []))
    ns: dict = {}
    exec("".join(cell["source"]), ns)
    st = overview.LORA_SETTINGS
    assert (st["hops"], st["n_questions"], st["seed"], st["n_exemplars"], st["llm"]) == \
        (ns["HOPS"], ns["N_QUESTIONS"], ns["SEED"], ns["N_EXEMPLARS"], ns["LLM"])
    assert st["recipe"] == {"rank": ns["RANK"], "lr": ns["LR"], "steps": ns["STEPS"], "seed": ns["SEED"]}


# ---------------------------------------------------------------- KB-BINDER's metric, ToG's note, PG&AKV on MetaQA
def _kb(qid: str, hit: float, exact: float) -> dict:
    r = _record(qid, hit)
    r["metrics"]["exact_match"] = exact
    return r


def test_kbbinder_paper_value_sits_beside_our_exact_set_not_our_hits(results, monkeypatch, tmp_path):
    """Keqing's Table 2 row KB-BINDER is exact-set accuracy from KB-BINDER's own scripts: the overview puts it
    beside our exact set; our Hits@1 row carries no paper value."""
    from kgqa_lib.bench import baselines as B

    monkeypatch.delitem(core.TABLES, "fusic", raising=False)
    base = B.TABLE_METAQA
    for h in B.HOPS:
        n = base.cell(f"kbbinder_metaqa_{h}hop").planned
        _save(base, f"kbbinder_metaqa_{h}hop", [_kb(f"k{h}-{i}", 1.0, float(i % 2)) for i in range(n)])
    rows = [r for r in overview.keqing_rows() if r["method"] == "KB-BINDER"]
    assert len(rows) == 2 * len(B.HOPS)
    for h in B.HOPS:
        hits, exact = (next(r for r in rows if r["cell"] == f"kbbinder_metaqa_{h}hop" and r["metric"] == m)
                       for m in ("Hits@1", "exact set"))
        assert hits["value"] == pytest.approx(100.0) and math.isnan(hits["paper value"])
        assert exact["value"] == pytest.approx(50.0) and exact["paper value"] == B.PAPER_KBBINDER_METAQA[h]
        assert "exact-set accuracy" in exact["paper source"] and f"column MetaQA {h}-hop" in exact["paper source"]
    ov = overview.overview()
    by = {t.name: t for t in overview.paper_tables(ov)}
    hits_t, exact_t = by["Keqing Hits@1"].frame(), by["Keqing exact set"].frame()
    assert hits_t.loc["KB-BINDER", "paper: 1-hop"] == "—"  # no paper value beside our Hits@1
    assert exact_t.loc["KB-BINDER", "1-hop"].startswith("50.0 [")
    assert [exact_t.loc["KB-BINDER", f"paper: {h}-hop"] for h in B.HOPS] == [
        f"{B.PAPER_KBBINDER_METAQA[h]:.1f}" for h in B.HOPS]
    assert overview.KBBINDER_NOTE in overview.table_notes(by["Keqing exact set"])
    cost = overview.cost_table(ov).frame().reset_index()
    kb = cost[(cost["paper"] == "Keqing") & (cost["method"] == "KB-BINDER")].iloc[0]
    assert kb["cells"] == len(B.HOPS)  # two rows per cell, one cost
    md, _ = overview.write_compare_all(ov, tmp_path / "tables")
    assert overview.KBBINDER_NOTE in md.read_text(encoding="utf-8")


def _tog(qid: str, hit: float, depth: int, prompt: str = "e817") -> dict:
    r = _record(qid, hit)
    r["summary"] = {"tog": {"stopped": "judged_sufficient", "depth_reached": depth}}
    r["config"] = {"prompts": {"tog_entities": prompt}}
    return r


def test_the_tog_note_counts_early_stops_and_says_how_far_the_depth_floor_is(results, monkeypatch, tmp_path):
    from kgqa_lib.bench import baselines as B

    monkeypatch.delitem(core.TABLES, "fusic", raising=False)
    base = B.TABLE_METAQA
    assert overview.tog_metaqa_note() == ""  # no ToG records: nothing to say
    n = base.cell("tog_metaqa_2hop").planned
    _save(base, "tog_metaqa_2hop", [_tog(f"t{i}", 0.0, 1 if i < 60 else 2) for i in range(n)])
    _save(base, "tog_floor_metaqa_2hop", [_tog(f"t{i}", 1.0, 2) for i in range(10)])
    note = overview.tog_metaqa_note()
    assert f"On 60 of {n} 2-hop questions ToG's judge" in note and "not ToG's search" in note
    assert "departs from the published one: its wording was chosen on these reported MetaQA questions" in note
    assert f"all {n} ToG records were made with this same prompt" in note
    assert f"2-hop partial 10/{n}" in note and "3-hop not run" in note  # a partial cell gives no number
    _save(base, "tog_floor_metaqa_2hop", [_tog(f"t{i}", 1.0, 2) for i in range(n)])
    assert f"2-hop +100.0 [+100.0, +100.0] Hits@1 points (paired, n={n})" in overview.tog_metaqa_note()
    ov = overview.overview()
    keqing = next(t for t in overview.paper_tables(ov) if t.name == "Keqing Hits@1")
    assert overview.tog_metaqa_note() in overview.table_notes(keqing)
    md, _ = overview.write_compare_all(ov, tmp_path / "tables")
    assert overview.tog_metaqa_note() in md.read_text(encoding="utf-8")


def test_pgakv_on_the_metaqa_kb_is_its_own_table_beside_the_papers_columns(results, monkeypatch):
    from kgqa_lib.bench import pgakv_metaqa as PM

    monkeypatch.delitem(core.TABLES, "fusic", raising=False)
    _save(PM.TABLE, "pgakv_1hop", [_record(f"p{i}", float(i < 25)) for i in range(PM.REPORTED)])
    rows = {(r["cell"]): r for r in overview.pgakv_metaqa_rows()}
    one, two = rows["pgakv_1hop"], rows["pgakv_2hop"]
    assert one["value"] == pytest.approx(25.0) and one["paper value"] == PM.PAPER_TABLE2["pgakv"][0]
    assert "column SimpleQuestions" in one["paper source"]
    assert two["status"] == "not run" and two["paper value"] == PM.PAPER_TABLE2["pgakv"][1]
    assert math.isnan(rows["pgakv_pg_1hop"]["paper value"]) and rows["pgakv_pg_2hop"]["paper value"] == PM.PAPER_TABLE4_QALD[1]
    by = {t.name: t for t in overview.paper_tables(overview.overview())}
    assert "PG&AKV Hits@1" in by and "PG&AKV Hits@1 on MetaQA" in by
    t = by["PG&AKV Hits@1 on MetaQA"]
    assert list(t.columns[1:4]) == ["1-hop", "2-hop", "3-hop"] and "on MetaQA dev (our reported part)" in t.title
    assert list(t.columns[4:]) == ["paper: SimpleQuestions", "paper: QALD-10 for 2-hop, 3-hop"]  # one column a value
    assert not any(s.startswith("MetaQA") for s in by["PG&AKV Hits@1"].columns)


def test_cost_reading_names_each_papers_method_against_io_on_the_same_kg():
    from kgqa_lib.bench.result_table import table

    cols = ["paper", "method", "KG", "cells", "questions", "calls/q", "tokens/q", "s/q", "hours"]
    rows = [["PG&AKV", "IO", "mini-world", 3, 225, "1.00", "200", "1.8", "0.11"],
            ["PG&AKV", "PG&AKV (threshold 0.7, the paper's)", "mini-world", 3, 225, "2.96", "1200", "41.7", "2.60"],
            ["Keqing", "Keqing, four stages", "MetaQA KB", 3, 600, "3.25", "1214", "21.8", "3.64"],
            ["Keqing", "Keqing, four stages, ORACLE topics", "MetaQA KB", 1, 200, "2.12", "9999", "13.4", "0.74"],
            ["FuSIC-KBQA", "FuSIC, dense retriever (≈ FuSIC(T)), zero-shot", "MetaQA KB", 3, 300, "3.26", "4464", "19", "1.6"]]
    text = overview.cost_reading(table("cost", "t", cols, rows))
    lines = text.splitlines()
    assert lines[1] == ("- PG&AKV's method (PG&AKV (threshold 0.7, the paper's)), per question: mini-world 2.96 calls "
                        "and 1,200 tokens, 6.0× IO's tokens.")
    assert lines[2] == "- Keqing's method (Keqing, four stages), per question: MetaQA KB 3.25 calls and 1,214 tokens."
    assert not any("FuSIC-KBQA's method" in x for x in lines)  # its zero-shot row is not the paper's main setting
    assert lines[-1] == ("- From 200 tokens a question (IO, mini-world) to 9,999 (Keqing, four stages, ORACLE topics, "
                         "MetaQA KB), 50 times as many.")
    assert overview.cost_reading(table("cost", "t", cols, [])) == ""
