"""The reports' pipe tables are :class:`ResultTable` values rendered by one function: the model axis every
report ends with, the MetaQA baselines (a row without records renders like any other row), and the speed
reports (``md_table`` is :meth:`ResultTable.markdown`)."""

from __future__ import annotations

from kgqa_lib.bench import core
from kgqa_lib.bench.result_table import table
from kgqa_lib.bench.speed import hostile_parsers, timing


def test_md_table_is_the_result_tables_markdown():
    rows = [["a", 1, "x | y".replace("|", "/")], ["b", 2.5, ""]]
    assert timing.md_table(["k", "n", "note"], rows) == table("t", "", ["k", "n", "note"], rows).markdown()
    assert timing.md_table(["k", "n"], [["a", 1]]).splitlines() == ["| k | n |", "|---|---|", "| a | 1 |"]


def test_the_parser_report_renders_its_rows_as_a_table():
    rows = [{"parser": "p", "inputs": 3, "crashes": 0, "categories": {"empty": 2, "garbled": 1}, "slowest_s": 0.014,
             "examples": []}]
    assert hostile_parsers.markdown(rows).splitlines() == [
        "| parser | inputs | crashes | error categories (counts) | slowest input (CPU s) |", "|---|---|---|---|---|",
        "| p | 3 | 0 | empty 2, garbled 1 | 0.01 |"]


def test_the_models_section_is_its_two_tables(monkeypatch):
    t = core.get_table("keqing_full")
    d = core.default_key()
    monkeypatch.setattr(core, "models_rows", lambda table, others: [
        {"table": table.name, "cell": "c1", "metric": "hits@1", d: "50.0 [40.0, 60.0] (n=100)", "m2": "not run",
         f"m2 − {d} (paired)": "—", f"m2: same answer as {d}": "—", "m2: errors": "—"}])
    monkeypatch.setattr(core, "_engine", lambda recs: "engine")
    served, models = core.models_tables(t, ["m2"])
    assert served.rows == ((d, "engine"), ("m2", "engine"))
    assert models.columns == ("cell", "metric", d, "m2", f"m2 − {d} (paired)", f"m2: same answer as {d}",
                              "m2: errors")
    assert models.rows == (("c1", "hits@1", "50.0 [40.0, 60.0] (n=100)", "not run", "—", "—", "—"),)
    text = core.models_section(t, ["m2"])
    assert text.startswith("\n## Models\n") and models.markdown() + "\n" in text
    assert served.markdown() in text and models.frame().index.tolist() == ["c1"]
    effects = core.effects_table(t, [d, "m2"])  # (keqing_full checks Keqing above KB-BINDER: its table ends the section)
    assert text.endswith(effects.markdown() + "\n") and "m2" in effects.columns


def test_a_baselines_row_without_records_is_an_ordinary_row():
    from kgqa_lib.bench import baselines as B

    class Empty:
        def __call__(self, name):
            return []

    keqing = core.Records(core.get_table("keqing_full"))
    t = B.metaqa_table(Empty(), keqing)
    assert t.rows and all(r[2] == 0 for r in t.rows)
    lines = t.markdown().splitlines()
    assert all(line.count("|") == len(t.columns) + 1 for line in lines[2:])  # every row has every cell
    report = B.report_metaqa(Empty())
    assert t.markdown() in report and B.floor_table(Empty(), keqing).markdown() in report
