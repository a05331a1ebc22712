"""The committed notebooks read well: results first, short prose, whole tables, no long logic in cells.

Checks over the committed ``.ipynb`` files (no execution):
- no cell's text output exceeds 10k characters and no DataFrame repr is cut (``...`` rows or columns);
- markdown words over all notebooks ≤ 12,000;
- no function or class defined in a notebook is longer than 5 lines (logic lives in ``kgqa_lib``);
- every notebook opens with its front matter and closes with references and a versions cell;
- every results notebook has a Summary printed by code near the top, and records its headline metric (computed,
  never typed in) in its metadata;
- one name for the sample size (``N_QUESTIONS``), every parameter commented."""

from __future__ import annotations

import ast
import json
import re

import pytest

from kgqa_lib.notebooks import headlines, notebook_paths

MAX_OUTPUT = 10_000
MAX_WORDS = 12_000
MAX_DEF_LINES = 5
FRONT = ("What you will learn", "Level", "Prerequisites", "Time")
RESULTS = ("11_", "12_", "13_", "14_", "21_", "22_", "31_", "32_", "33_", "90_")
OLD_SAMPLE_NAMES = ("N_PER_SET", "N_PER_HOP")

PATHS = notebook_paths()


def _nb(path):
    return json.loads(path.read_text())


def _src(cell) -> str:
    return "".join(cell["source"])


def _text(output) -> str:
    if "text" in output:
        t = output["text"]
    else:
        t = output.get("data", {}).get("text/plain", "")
    return "".join(t) if isinstance(t, list) else t


def _code(source: str) -> str:
    """Cell source without IPython magics and shell lines (not Python)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_outputs_are_whole_and_short(path):
    bad = []
    for i, c in enumerate(_nb(path)["cells"]):
        for o in c.get("outputs", []):
            t = _text(o)
            if len(t) > MAX_OUTPUT:
                bad.append(f"cell {i}: {len(t)} characters of text output (> {MAX_OUTPUT})")
            if re.search(r"^\s*\.\.\.(\s|$)|\s\.\.\.\s*$|\s\.\.\.\s+\S", t, re.M) and "[" in t and "rows x" in t:
                bad.append(f"cell {i}: a DataFrame cut with '...' (show it whole, or link the report)")
            elif re.search(r"^\.\.\.\s+\.\.\.", t, re.M):
                bad.append(f"cell {i}: a DataFrame cut with '...' rows")
    assert not bad, "; ".join(bad)


def test_markdown_words_within_budget():
    words = {p.name: sum(len(_src(c).split()) for c in _nb(p)["cells"] if c["cell_type"] == "markdown") for p in PATHS}
    total = sum(words.values())
    assert total <= MAX_WORDS, f"{total} markdown words (> {MAX_WORDS}): " + ", ".join(
        f"{k} {v}" for k, v in sorted(words.items(), key=lambda kv: -kv[1]))


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_no_long_definitions_in_cells(path):
    long = []
    for i, c in enumerate(_nb(path)["cells"]):
        if c["cell_type"] != "code":
            continue
        tree = ast.parse(_code(_src(c)))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_DEF_LINES:
                    long.append(f"cell {i}: {node.name} ({n} lines)")
    assert not long, "move into kgqa_lib (tested) and call it: " + "; ".join(long)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_front_matter_and_closing(path):
    cells = _nb(path)["cells"]
    first = _src(cells[0])
    missing = [k for k in FRONT if f"**{k}" not in first]
    assert not missing, f"the first cell lacks {missing} (front matter: what you will learn, level, prerequisites, time)"
    assert any(c["cell_type"] == "markdown" and re.search(r"^## References", _src(c), re.M) for c in cells[-4:]), \
        "a '## References' cell near the end (the papers' titles)"
    last = cells[-1]
    assert last["cell_type"] == "code" and "versions(" in _src(last) and last.get("outputs"), \
        "the last cell prints the versions (kgqa_lib.notebooks.versions())"


@pytest.mark.parametrize("path", [p for p in PATHS if p.name.startswith(RESULTS)], ids=lambda p: p.name)
def test_results_notebooks_open_with_a_summary_printed_by_code(path):
    cells = _nb(path)["cells"]
    head = [i for i, c in enumerate(cells[:6]) if c["cell_type"] == "markdown" and re.search(r"^## Summary", _src(c), re.M)]
    assert head, "a '## Summary' section among the first cells"
    nxt = cells[head[0] + 1]
    assert nxt["cell_type"] == "code" and any(_text(o).strip() for o in nxt.get("outputs", [])), \
        "the Summary is printed by a code cell (from the records), with its output committed"


@pytest.mark.parametrize("path", [p for p in PATHS if p.name.startswith(RESULTS)], ids=lambda p: p.name)
def test_results_notebooks_record_their_headline_metric(path):
    nb = _nb(path)
    recorded = nb["metadata"].get("kgqa", {}).get("headline")
    assert recorded, ("no headline metric in the notebook's metadata: call kgqa_lib.notebooks.headline(metric, value) "
                      "with a value computed from the records, then re-execute (kgqa reproduce --only NAME)")
    assert recorded == headlines(nb), "the metadata's headline is not the one the outputs show: re-execute the notebook"
    assert all(h["metric"].strip() and h["value"].strip() for h in recorded)
    sources = "\n".join(_src(c) for c in nb["cells"] if c["cell_type"] == "code")
    typed = [h["value"] for h in recorded if h["value"] in sources]
    assert not typed, f"headline values typed into a cell: {typed} (compute them with a library function)"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_parameters_have_one_meaning_and_a_comment(path):
    cell = next(c for c in _nb(path)["cells"] if "parameters" in c["metadata"].get("tags", []))
    src = _src(cell)
    old = [n for n in OLD_SAMPLE_NAMES if re.search(rf"^{n}\s*=", src, re.M)]
    assert not old, f"{old}: the sample size is called N_QUESTIONS in every notebook"
    tree = ast.parse(src)
    lines = src.splitlines()
    bare = [t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
            if isinstance(t, ast.Name) and "#" not in "".join(lines[node.lineno - 1:node.end_lineno])]
    assert not bare, f"parameters without a comment: {bare}"
