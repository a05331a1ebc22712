"""What the FuSIC report's rows say about themselves (kgqa_lib.bench.fusic): a cell still running — its
records hold some but not all of its planned questions — reads ``partial k/N`` wherever a number computed
from it would stand, in every section (F1, gains, costs, counts, the MetaQA target, the choices made); and
every row on GrailQA-Tech, including the per-cell tables keyed by ``gtech.…`` cell names, says that its KB
is the gold-fact fragment."""

from __future__ import annotations

import re

import pytest

from kgqa_lib.bench import fusic as B
from kgqa_lib.bench.overview import FRAGMENT

PLANNED = {c.name: c.planned for c in B.CELLS}


def _rec(qid, f1, feedback_s=4.0, calls=3):
    """A stripped FuSIC record with one dense path retrieved, ``calls`` LLM calls and ``feedback_s`` seconds of
    feedback."""
    return {"qid": qid, "metrics": {"f1": f1, "hits@1": f1}, "seconds": 10.0, "error": None,
            "llm": {"calls": calls, "prompt_tokens": 100, "completion_tokens": 10, "recorded_seconds": 8.0,
                    "seconds": 8.0, "cache_hits": 0},
            "stages": {"calls": {"rerank": 2, "generation": 1, "feedback": calls - 3, "total": calls},
                       "seconds": {"retrieval": 1.0, "rerank": 2.0, "exemplars": 0.5, "generation": 3.0,
                                   "feedback": feedback_s}},
            "attempts": [{"status": "ok" if f1 else "empty", "repeat": False}],
            "gold_analysis": {"topic_linked": True, "mentions": 1, "gold_hops": 3, "query_gold_relations": [1, 1],
                              "query_relation_patterns": 3,
                              "retrieval": [{"retriever": "dense", "aspect": "path", "top_K": True, "before": True,
                                             "after": True}]}}


def _complete(cell: str, f1: float = 1.0) -> list[dict]:
    return [_rec(f"q{i}", f1) for i in range(PLANNED[cell])]


# partial cells: 7 of MetaQA 3-hop's 100 with max_path_hops=3, 61 of GrailQA-Tech's 124 with GrailQA's own SPARQL;
# their F1 (37/70 = 52.9), their feedback seconds (77.7) and their LLM calls (5.00) appear in no complete cell
PAIRS3 = [_rec(f"q{i}", 1.0 if i < 3 else 0.0, 77.7, 5) for i in range(6)] + [_rec("q6", 0.7, 77.7, 5)]
DSEX = [_rec(f"q{i}", 1.0 if i < 30 else 0.0, 77.7, 5) for i in range(60)] + [_rec("q60", 0.7, 77.7, 5)]


@pytest.fixture(scope="module")
def report():
    have = {c: _complete(c) for c in ("metaqa3.fs_dense", "gtech.fs_dense", "metaqa3.fs_bm25", "gtech.fs_dense_noegf")}
    have.update({"metaqa3.fs_dense_paths3": PAIRS3, "gtech.fs_dense_dsex": DSEX,
                 "metaqa3.fs_dense_noegf": PAIRS3[:4]})  # a partial ablation: Table 3 and the rounds' check
    return B.report(lambda c: have.get(c, []))


def _section(text: str, title: str) -> str:
    return text.split(title, 1)[1].split("\n## ", 1)[0]


def test_the_partial_cells_are_what_the_test_says():
    assert B.cell_records(lambda c: PAIRS3, "metaqa3.fs_dense_paths3").partial == "partial 7/100"
    assert B.cell_records(lambda c: DSEX, "gtech.fs_dense_dsex").partial == "partial 61/124"
    assert B.cell_records(lambda c: _complete("metaqa3.fs_dense"), "metaqa3.fs_dense").partial is None
    assert B.cell_records(lambda c: [], "metaqa3.fs_dense").partial is None  # not run: no records, not partial
    assert B._f1(PAIRS3).startswith("52.9 [") and B._f1(DSEX).startswith("50.3 [")  # (as plain lists: numbers)


def test_no_number_from_a_partial_cell_is_shown(report):
    assert "52.9" not in report and "50.3" not in report  # their F1
    assert "77.7" not in report and "5.00" not in report  # their feedback seconds and LLM calls
    assert "fs_dense on these" not in report
    t2 = _section(report, "## Table 2 analogue")
    row = next(x for x in t2.splitlines() if "3-hop | " + B.CONFIGS["fs_dense_paths3"][2] in x)
    assert "| 7 | partial 7/100 | partial 7/100 | 70.8 (" in row and row.endswith("|  | | |  |"), row  # no costs
    row = next(x for x in t2.splitlines() if B.CONFIGS["fs_dense_dsex"][2] in x)
    assert "| 61 | partial 61/124 | partial 61/124 |" in row
    goal = _section(report, "## A target on MetaQA")
    assert "  - mini-world (Wikidata-style) → MetaQA dev (our reported part), 3-hop: partial 7/100" in goal
    assert "n=7" not in report
    depth = _section(report, "## Candidate path depth")
    row = next(x for x in depth.splitlines() if x.startswith("| mini-world"))
    assert [c.strip() for c in row.split("|")[1:-1]][1:9] == ["partial 7/100"] + [""] * 7
    funnel = next(x for x in report.splitlines() if "| dense, paths ≤ 3 relations |" in x)
    assert funnel.split("| dense, paths ≤ 3 relations |")[1].startswith(" partial 7/100 |")
    for title in ("## Cost per question by stage", "## F1 after 0..4 feedback rounds", "## Table 7 analogue"):
        rows = [x for x in _section(report, title).splitlines() if x.startswith("| metaqa3.fs_dense_paths3 |")]
        assert rows and all(re.fullmatch(r"\| metaqa3\.fs_dense_paths3 \| partial 7/100 \|[ |]*", x) for x in rows), title
    choices = _section(report, "## Choices made after looking at outcomes")
    assert "with the concise ones not shown until its cell is complete (partial 61/124);" in choices
    t3 = _section(report, "## Table 3 analogue: ablations of FuSIC(T) few-shot")
    row = next(x for x in t3.splitlines() if "3-hop | w/o EGF |" in x)
    assert "| — | 100.0 [" in row and "| partial 4/100 | partial 4/100 |" in row, row
    rounds = _section(report, "## F1 after 0..4 feedback rounds")
    assert next(x for x in rounds.splitlines() if x.startswith("| metaqa3.fs_dense |")).endswith("| partial 4/100 |")


def test_a_partial_baseline_says_which_cell_is_running():
    full = [_rec(f"q{i}", 1.0) for i in range(100)]
    text = B.report(lambda c: {"metaqa1.fs_naive": full, "metaqa1.fs_dense": full[:40]}.get(c, []))
    row = next(x for x in _section(text, "## Table 2 analogue").splitlines()
               if "1-hop | " + B.CONFIGS["fs_naive"][2] in x)
    assert "| 100 | 100.0 [" in row and "| metaqa1.fs_dense: partial 40/100 |" in row, row
    assert B._f1_of(lambda c: full[:40], "metaqa1", "fs_dense") is None  # the notebooks' summaries: "—", not a number


def test_every_row_on_grailqa_tech_says_its_kb_is_the_gold_fact_fragment(report):
    rows = [x for x in report.splitlines() if x.startswith("| ")
            and any(c.strip().startswith(("gtech.", "GrailQA")) for c in x.strip("|").split("|"))]
    keyed = [x for x in rows if x.startswith("| gtech.")]
    assert len(keyed) > 40  # the per-cell tables: KB-BINDER, cost, rounds, Table 7
    assert all(FRAGMENT in x for x in rows), [x[:120] for x in rows if FRAGMENT not in x]
    assert all(x.startswith(f"| {B.cell_label(B.cell_of(x[2:]))} |") for x in keyed)
    assert B.cell_of(B.cell_label("gtech.fs_dense")) == "gtech.fs_dense" and B.cell_label("metaqa1.io") == "metaqa1.io"
    assert B.FRAGMENT is FRAGMENT and B.ON_FRAGMENT == ("gtech",)
