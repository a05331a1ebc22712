"""Result tables as data: one value renders as the report's Markdown and as the notebooks' DataFrame."""

from __future__ import annotations

import pytest

from kgqa_lib.bench.result_table import ResultTable, frames, table


def test_markdown_and_frame_show_the_same_cells():
    t = table("t", "A title", ["method", "1-hop", "2-hop"], [["IO", "20.0", "10.0"], ["CoT", 21.5, None]])
    assert t.markdown() == ("| method | 1-hop | 2-hop |\n|---|---|---|\n| IO | 20.0 | 10.0 |\n| CoT | 21.5 | None |")
    df = t.frame()
    assert df.index.name == "method" and list(df.index) == ["IO", "CoT"] and df.loc["CoT", "1-hop"] == 21.5
    assert df.attrs["title"] == "A title"
    assert list(frames([t])) == ["t"]


def test_a_row_of_the_wrong_width_is_refused():
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        ResultTable("t", "x", ("a", "b", "c"), (("1", "2"),))


# ---------------------------------------------------------------- reports write their tables through ResultTable
MIGRATED = ("fusic_paths.py", "fusic_table1.py", "pgakv.py", "keqing.py")


@pytest.mark.parametrize("name", MIGRATED)
def test_these_reports_build_no_pipe_table_by_hand(name):
    from kgqa_lib.paths import repo_root

    source = (repo_root() / "kgqa_lib" / "bench" / name).read_text(encoding="utf-8")
    assert '"|---' not in source and '"| " + ' not in source and "f\"| {" not in source


def _measured_tables(module):
    from kgqa_lib.bench.measure import read

    data = read(module.TABLE)
    if not data:
        pytest.skip(f"{module.TABLE.data} not measured")
    return data, module.tables(data), (module.TABLE.output_path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("module_name", ["fusic_paths", "fusic_table1"])
def test_measurement_reports_render_their_tables_and_notebooks_get_the_same(module_name):
    import importlib

    module = importlib.import_module(f"kgqa_lib.bench.{module_name}")
    data, tables, committed = _measured_tables(module)
    frames_ = module.frames()
    assert list(frames_) == list(tables)
    for name, t in tables.items():
        assert isinstance(t, ResultTable) and t.rows and t.markdown() in committed, name
        assert len(frames_[name]) == len(t.rows) and list(frames_[name].columns) == list(t.columns[1:])
    assert module.report(data) == committed  # the committed report is its JSON's, byte for byte


def test_pgakv_table2_report_renders_its_tables():
    from kgqa_lib.bench import core
    from kgqa_lib.bench import pgakv as P

    records = core.Records(P.TABLE)
    tables = P.t2_tables(records)
    text = P.report(records)
    assert list(tables)[:3] == ["table2", "gains", "cost"]
    for name, t in tables.items():
        assert t.markdown() in text, name
    committed = P.TABLE.output_path.read_text(encoding="utf-8")  # the report, with the model line under its title
    assert committed.replace(f"\n\n{core.header_line(P.TABLE)}\n", "\n", 1).startswith(text)
    assert list(P.t2_frames()) == list(tables)
