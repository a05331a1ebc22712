"""User-facing text speaks of the project and the papers, never of its own history: no "issue N",
"stop N", "session N" or commit hashes in the committed reports, tables, notebooks (sources and
outputs), the README, or what the CLI prints of tables and settings."""

from __future__ import annotations

import json
import re

import pytest

from kgqa_lib.paths import repo_root

HISTORY = re.compile(r"\b(issues?|stops?|sessions?) #?\d+\b|\bcommits? [0-9a-f]{7,40}\b|\bthe issue'?s?\b"
                     r"|\bacceptance (list|criteria)\b", re.I)


def _hits(text: str) -> list[str]:
    return [text[max(0, m.start() - 40):m.end() + 20].replace("\n", " ") for m in HISTORY.finditer(text)]


def _files():
    root = repo_root()
    yield from sorted((root / "results" / "bench").glob("*.md"))
    yield from sorted((root / "results" / "tables").glob("*.md"))
    yield root / "README.md"


@pytest.mark.parametrize("path", list(_files()), ids=lambda p: p.name)
def test_reports_and_readme_hold_no_project_history(path):
    assert not _hits(path.read_text(encoding="utf-8")), _hits(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", sorted((repo_root() / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebooks_hold_no_project_history(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = []
    for i, cell in enumerate(nb["cells"]):
        texts = ["".join(cell.get("source", []))]
        for out in cell.get("outputs", []):
            texts.append("".join(out.get("text", [])))
            texts += ["".join(v) if isinstance(v, list) else str(v) for k, v in (out.get("data") or {}).items()
                      if k.startswith("text/")]
        found += [f"cell {i}: {h}" for t in texts for h in _hits(t)]
    assert not found, found


def test_what_the_cli_prints_of_tables_and_settings_holds_no_project_history():
    from kgqa_lib import bench
    from kgqa_lib.cli import settings_help
    from kgqa_lib.methods import method_names

    texts = [settings_help(m) for m in method_names()]
    for t in bench.tables():
        texts += [t.title, t.source, t.provenance, *(c.optional for c in t.cells)]
    found = [h for t in texts for h in _hits(t)]
    assert not found, found


LIBRARY_FILES = sorted([*(repo_root() / "kgqa_lib").rglob("*.py"), *(repo_root() / "kgqa_lib" / "prompts").glob("*.txt"),
                        repo_root() / "Makefile", repo_root() / "pyproject.toml"])


@pytest.mark.parametrize("path", LIBRARY_FILES, ids=lambda p: str(p.relative_to(repo_root())))
def test_library_sources_hold_no_project_history(path):
    """Docstrings, comments and messages say what a thing does and which paper section it follows."""
    assert not _hits(path.read_text(encoding="utf-8"))
