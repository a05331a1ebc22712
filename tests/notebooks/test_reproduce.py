"""`kgqa reproduce` with parameters: executed copies elsewhere, a summary with LLM accounting,
and --resume skipping what already ran."""

from __future__ import annotations

import json
import subprocess
import sys

from kgqa_lib.paths import notebooks_dir
from kgqa_lib.reproduce import declared_parameters


def test_declared_parameters():
    names = declared_parameters(notebooks_dir() / "00_quickstart.ipynb")
    assert {"N_QUESTIONS", "SEED", "LLM", "LLM_MODE"} <= set(names)


def test_grid_summary_and_resume(tmp_path, monkeypatch):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    before = (notebooks_dir() / "00_quickstart.ipynb").read_bytes()
    cmd = [sys.executable, "-m", "kgqa_lib.cli", "reproduce", "--only", "00_quick", "--grid", "N_QUESTIONS=2,3",
           "--llm-mode", "replay", "--set", "NOT_DECLARED=1", "--out", str(tmp_path / "out")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (notebooks_dir() / "00_quickstart.ipynb").read_bytes() == before  # the committed notebook is untouched
    summaries = sorted((tmp_path / "results" / "reproduce").glob("*/summary.json"))
    assert len(summaries) == 2
    for s in summaries:
        row = json.loads(s.read_text())["notebooks"][0]
        assert row["status"] == "ok" and row["llm_calls"] > 0 and row["cache_hits"] == row["llm_calls"]
        assert "NOT_DECLARED" not in row["parameters"] and row["parameters"]["N_QUESTIONS"] in (2, 3)
        executed = json.loads((tmp_path / "out" / s.parent.name / "00_quickstart.ipynb").read_text())
        assert any("injected-parameters" in c["metadata"].get("tags", []) for c in executed["cells"])
    r = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.count("already done, skipped") == 2
