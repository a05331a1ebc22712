"""A notebook's headline metric: shown in its output, kept as notebook metadata when normalised, and
collected by ``kgqa reproduce`` into its summary."""

from __future__ import annotations

from kgqa_lib.notebooks import HEADLINE_MIME, headlines, normalize
from kgqa_lib.reproduce import summary_table


def _nb(value):
    out = {"output_type": "display_data", "metadata": {},
           "data": {HEADLINE_MIME: {"metric": "Hits@1", "value": value}, "text/plain": [f"Hits@1: {value}"]}}
    return {"cells": [{"cell_type": "code", "source": "headline(...)", "metadata": {}, "outputs": [out],
                       "execution_count": 1}], "metadata": {"papermill": {}}, "nbformat": 4, "nbformat_minor": 5}


def test_the_headline_becomes_notebook_metadata():
    nb = normalize(_nb("97.0 [94.0, 99.0] (n=200)"))
    assert headlines(nb) == [{"metric": "Hits@1", "value": "97.0 [94.0, 99.0] (n=200)"}]
    assert nb["metadata"]["kgqa"] == {"headline": headlines(nb)} and "papermill" not in nb["metadata"]
    assert "kgqa" not in normalize({"cells": [], "metadata": {}})["metadata"]


def test_the_reproduce_summary_shows_each_notebooks_headline():
    row = {"notebook": "31.ipynb", "status": "ok", "seconds": 1.0, "llm_calls": 0, "cache_hits": 0, "live_calls": 0,
           "tokens": 0, "parameters": {}}
    table = summary_table([{**row, "headline": "Hits@1: 97.0"}, {**row, "notebook": "10.ipynb"}])
    lines = table.splitlines()
    assert lines[0].endswith("| headline |") and lines[2].endswith("| Hits@1: 97.0 |") and lines[3].endswith("| — |")
    assert all(line.count("|") == lines[0].count("|") for line in lines)


def test_say_prints_each_line_as_its_own_filled_paragraph(capsys):
    from kgqa_lib.notebooks import paragraphs, say

    first = " ".join(["word"] * 60)  # 299 characters: three lines at width 110
    text = paragraphs(first + "\n\nSecond paragraph.\n", 110)
    blocks = text.split("\n\n")
    assert len(blocks) == 2 and blocks[1] == "Second paragraph."
    assert max(map(len, blocks[0].splitlines())) <= 110 and len(blocks[0].splitlines()) == 3
    assert blocks[0].replace("\n", " ") == first
    say("one\ntwo")
    assert capsys.readouterr().out == "one\n\ntwo\n"
    # a "- " line is an item of a list under the paragraph before it, its continuation lines indented
    listed = paragraphs("Head:\n- " + first + "\n- last.\nNext.", 110).split("\n")
    assert listed[0] == "Head:" and listed[1].startswith("- word") and listed[2].startswith("  word")
    assert listed[-3:] == ["- last.", "", "Next."]
    assert paragraphs("a " * 52 + "zero-shot", 110).splitlines()[-1] == "zero-shot"  # not broken at its hyphen
