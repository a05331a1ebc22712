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
           "--llm-mode", "replay", "--out", str(tmp_path / "out")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (notebooks_dir() / "00_quickstart.ipynb").read_bytes() == before  # the committed notebook is untouched
    summaries = sorted((tmp_path / "results" / "reproduce").glob("*/summary.json"))
    assert len(summaries) == 2
    for s in summaries:
        row = json.loads(s.read_text())["notebooks"][0]
        assert row["status"] == "ok" and row["llm_calls"] > 0 and row["cache_hits"] == row["llm_calls"]
        assert row["parameters"]["N_QUESTIONS"] in (2, 3)
        executed = json.loads((tmp_path / "out" / s.parent.name / "00_quickstart.ipynb").read_text())
        assert any("injected-parameters" in c["metadata"].get("tags", []) for c in executed["cells"])
    r = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.count("already done, skipped") == 2


def _notebook(*cells: tuple[str, list]) -> str:
    from kgqa_lib.notebooks import KERNEL, dumps

    return dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": KERNEL, "language_info": {"name": "python"}},
                  "cells": [{"cell_type": "code", "id": f"cell-{i:02d}", "metadata": {}, "execution_count": i + 1,
                             "source": src, "outputs": outs} for i, (src, outs) in enumerate(cells)]})


def test_a_failing_in_place_reproduce_keeps_the_committed_notebook(tmp_path, monkeypatch, capsys):
    """papermill clears the outputs of the file it writes when it starts: a failing in-place run
    must leave the committed notebook byte-identical and keep the failed copy elsewhere."""
    from kgqa_lib.reproduce import reproduce

    (tmp_path / "pyproject.toml").write_text("")
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    committed = _notebook(("print('committed result')", [{"output_type": "stream", "name": "stdout", "text": ["committed result\n"]}]),
                          ("raise RuntimeError('the endpoint is down')", []))
    (nbdir / "01_fails.ipynb").write_text(committed)
    (nbdir / "02_works.ipynb").write_text(_notebook(("print(6 * 7)", [])))
    monkeypatch.setenv("KGQA_HOME", str(tmp_path))  # a throw-away repository: notebooks/ and results/ live here
    monkeypatch.delenv("KGQA_RESULTS_DIR", raising=False)

    assert reproduce() == 1
    out = capsys.readouterr().out
    assert (nbdir / "01_fails.ipynb").read_text() == committed  # outputs kept, not wiped
    failed = tmp_path / "results" / "reproduce" / "default" / "failed" / "01_fails.ipynb"
    assert failed.exists() and "the endpoint is down" in failed.read_text()
    assert "notebooks/01_fails.ipynb not replaced; the failed run is in results/reproduce/default/failed/01_fails.ipynb" in out
    works = json.loads((nbdir / "02_works.ipynb").read_text())  # a success still replaces the notebook
    assert works["cells"][0]["outputs"][0]["text"] == ["42\n"]
    assert sorted(p.name for p in nbdir.iterdir()) == ["01_fails.ipynb", "02_works.ipynb"]  # no temporary left


RECORD_CELL = """
import json, os, pathlib
from kgqa_lib.paths import figures_dir
pathlib.Path(RUNS_DIR).mkdir(parents=True, exist_ok=True)
rec = lambda i, hit: {"qid": f"q{i}", "method": "toy", "dataset": "toy:set", "kind": "factoid", "seconds": 1.0,
                      "metrics": {"hits@1": hit, "f1": hit},
                      "llm": {"calls": K, "prompt_tokens": 10, "completion_tokens": 2, "recorded_seconds": 0.5, "seconds": 0.5,
                              "cache_hits": 0}}
with open(pathlib.Path(RUNS_DIR) / "toy.jsonl", "w") as fh:
    for i in range(4):
        fh.write(json.dumps(rec(i, float(i < K))) + "\\n")
(figures_dir() / "toy.txt").write_text("a figure")
"""


def test_a_grid_writes_metrics_per_parameter_and_leaves_committed_figures_alone(tmp_path, monkeypatch, capfd):
    """--grid K=1,3: a metrics table (and CSV and figure) per notebook from each combination's run
    records in the sweep's own folder; figures go under each combination's folder, not figures/;
    and no kernel-transport warning reaches the console."""
    from kgqa_lib.reproduce import reproduce

    (tmp_path / "pyproject.toml").write_text("")
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    nb = json.loads(_notebook(("K = 1\nRUNS_DIR = 'runs'", []), (RECORD_CELL, [])))
    nb["cells"][0]["metadata"]["tags"] = ["parameters"]
    (nbdir / "01_toy.ipynb").write_text(json.dumps(nb))
    monkeypatch.setenv("KGQA_HOME", str(tmp_path))
    for k in ("KGQA_RESULTS_DIR", "KGQA_FIGURES_DIR", "KGQA_TABLES_DIR"):
        monkeypatch.delenv(k, raising=False)

    assert reproduce(grid={"K": [1, 3]}) == 0
    console = capfd.readouterr()
    assert "without encryption" not in console.out + console.err
    assert not (tmp_path / "figures").exists()  # only the default run writes the committed figures
    assert len(list((tmp_path / "results" / "reproduce").glob("K=*/figures/toy.txt"))) == 2
    sweep = next((tmp_path / "results" / "reproduce").glob("sweep-*"))
    table = (sweep / "01_toy.md").read_text()
    assert "| K | run | method | dataset | n | hits@1 | f1 | calls/q | tokens/q |" in table
    assert "| 1 | toy | toy | toy:set | 4 | 0.250 [" in table and "| 3 | toy | toy | toy:set | 4 | 0.750 [" in table
    assert (sweep / "01_toy.png").stat().st_size > 0 and (sweep / "01_toy.csv").read_text().count("\n") == 3
    assert f"sweep: results/reproduce/{sweep.name}/01_toy.md" in console.out
