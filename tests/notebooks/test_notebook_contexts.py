"""Notebooks build a run's context the way ``kgqa run`` does: through
:func:`kgqa_lib.evaluate.spec.context_for` (the one builder, :func:`~kgqa_lib.evaluate.spec.build_context`),
never by constructing :class:`kgqa_lib.methods.Context` in a cell — a hand-built context can miss the KG's
name in the settings, give a method a KG or an encoder it does not read, or skip the checks of the run."""

from __future__ import annotations

import ast
import json

import pytest

from kgqa_lib.notebooks import notebook_paths

def constructed_contexts(source: str) -> list[int]:
    """Lines of ``source`` (a code cell) that call ``Context(…)`` (or ``….Context(…)``)."""
    tree = ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and (getattr(node.func, "id", None) == "Context" or getattr(node.func, "attr", None) == "Context")]


def test_the_check_sees_a_constructed_context():
    assert constructed_contexts("ctx = Context(llm=llm, seed=SEED)") == [1]
    assert constructed_contexts("x = 1\nrun('io', ds, methods.Context(llm=llm), p)") == [2]
    assert constructed_contexts("ctx = context_for('io', ds, llm=llm)\n# Context(llm=…) in a comment") == []


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_no_notebook_builds_a_context_by_hand(path):
    cells = json.loads(path.read_text())["cells"]
    found = [f"cell {i} line {line}" for i, c in enumerate(cells) if c["cell_type"] == "code"
             for line in constructed_contexts("".join(c["source"]))]
    assert not found, (f"{path.name} builds a Context by hand ({', '.join(found)}): use "
                       "kgqa_lib.evaluate.spec.context_for(method, dataset, llm=…, graph=…, embedder=…, settings=…)")
