"""Normalised notebooks are byte-stable: how the kernel happened to chunk a cell's prints is not kept."""

from __future__ import annotations

from kgqa_lib.notebooks import dumps, normalize


def _nb(outputs):
    return {"cells": [{"cell_type": "code", "source": "print(1)", "metadata": {}, "outputs": outputs,
                       "execution_count": 1}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_adjacent_prints_become_one_stream_whatever_the_chunking():
    one = _nb([{"output_type": "stream", "name": "stdout", "text": ["a\n", "b\n"]}])
    split = _nb([{"output_type": "stream", "name": "stdout", "text": ["a\n"]},
                 {"output_type": "stream", "name": "stderr", "text": ["progress\n"]},
                 {"output_type": "stream", "name": "stdout", "text": "b\n"}])
    assert dumps(normalize(one)) == dumps(normalize(split))
    assert normalize(split)["cells"][0]["outputs"] == [{"output_type": "stream", "name": "stdout", "text": ["a\n", "b\n"]}]


def test_a_display_between_prints_keeps_them_apart():
    nb = _nb([{"output_type": "stream", "name": "stdout", "text": ["a\n"]},
              {"output_type": "display_data", "data": {"text/plain": ["x"]}, "metadata": {}},
              {"output_type": "stream", "name": "stdout", "text": ["b\n"]}])
    assert [o["output_type"] for o in normalize(nb)["cells"][0]["outputs"]] == ["stream", "display_data", "stream"]
