"""User-facing text speaks of the project and the papers, never of its own history: no "issue N",
"stop N", "session N", commit hashes, a bare "acceptance" or the project's "goal" (a table states its
target, or says plainly that it is one this project set) in the committed reports, tables, notebooks
(sources and outputs), the README, the library's sources, or what the CLI prints of tables and settings."""

from __future__ import annotations

import json
import re

import pytest

from kgqa_lib.paths import repo_root

HISTORY = re.compile(r"\b(issues?|stops?|sessions?) #?\d+\b|\bcommits? [0-9a-f]{7,40}\b|\bthe issue'?s?\b"
                     r"|\bacceptance\b"  # whose? the project's own: say what a table needs instead
                     r"|\bgoals?\b",  # the project's goal: a table's target ("goalkeeper" is another word)
                     re.I)


def test_the_pattern_catches_a_projects_goal_and_a_bare_acceptance():
    for text in ("Toward the MetaQA goal below", "## MetaQA goal: F1 ≥ 0.80", "speed-up / N (goal ≥ 0.8)", "Goals:",
                 "deviations beyond the table's acceptance", "the acceptance list", "see issue 12", "stop 3"):
        assert _hits(text), text
    for text in ("the goalkeeper saved it", "moving the goalposts", "the table's target: ≥ 0.8", "accepted answers",
                 "gold answers", "a target this project set"):
        assert not _hits(text), text


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
    # `kgqa bench run`'s estimate, with an optional cell (a deviation the table does not need)
    texts.append(bench.format_estimate([{"cell": "c", "missing": 2, "basis": "c", "optional": True, "llm_calls": 2.0,
                                         "tokens": 20.0, "hours": 0.1}]))
    found = [h for t in texts for h in _hits(t)]
    assert not found, found


LIBRARY_FILES = sorted([*(repo_root() / "kgqa_lib").rglob("*.py"), *(repo_root() / "kgqa_lib" / "prompts").glob("*.txt"),
                        repo_root() / "Makefile", repo_root() / "pyproject.toml"])


@pytest.mark.parametrize("path", LIBRARY_FILES, ids=lambda p: str(p.relative_to(repo_root())))
def test_library_sources_hold_no_project_history(path):
    """Docstrings, comments and messages say what a thing does and which paper section it follows."""
    assert not _hits(path.read_text(encoding="utf-8"))
