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
