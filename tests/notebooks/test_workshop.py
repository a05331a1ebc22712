"""Workshop mode: stripped copies that run offline without a key, and the setup doctor."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kgqa_lib.doctor import format_checks, make_workshop, run_checks
from kgqa_lib.notebooks import execute, notebook_paths


def test_workshop_copies_have_no_outputs_and_the_quickstart_runs_offline(tmp_path, monkeypatch):
    written = make_workshop(tmp_path / "ws").written
    assert [p.name for p in written] == [p.name for p in notebook_paths()]
    for p in written:
        nb = json.loads(p.read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    monkeypatch.delenv("KGQA_LLM_MODE", raising=False)  # the copies replay by themselves: no model, no key
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = execute(tmp_path / "ws" / "00_quickstart.ipynb")
    assert res.error is None, res.error
    nb = json.loads((tmp_path / "ws" / "00_quickstart.ipynb").read_text())
    assert sum(bool(c.get("outputs")) for c in nb["cells"] if c["cell_type"] == "code") > 5


def test_workshop_copies_replay_so_another_question_stops_with_a_message(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    make_workshop(ws)
    for p in sorted(ws.glob("*.ipynb")):
        params = next(c for c in json.loads(p.read_text())["cells"] if "parameters" in c["metadata"].get("tags", []))
        src = "".join(params["source"])
        assert "LLM_MODE = None" not in src, p.name
        assert "LLM_MODE" not in src or 'LLM_MODE = "replay"' in src, p.name
    monkeypatch.delenv("KGQA_LLM_MODE", raising=False)  # unset: the copy's own default decides
    # another question (and seed, so that no recording answers it): the first LLM cell stops, no model is loaded
    res = execute(ws / "10_pgakv_walkthrough.ipynb", output=tmp_path / "run.ipynb",
                  parameters={"QID": "mw-multihop-078", "SEED": 7}, failed_copy=tmp_path / "failed.ipynb")
    assert res.error and "LLM_MODE='auto'" in res.error, res.error
    failed = json.loads((tmp_path / "failed.ipynb").read_text())
    errors = [(c, o) for c in failed["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert len(errors) == 1 and errors[0][1]["ename"] == "ReplayMiss", errors
    assert "No recorded LLM response" in errors[0][1]["evalue"] and "LLM_MODE='auto'" in errors[0][1]["evalue"]
    assert "generate_pseudo_graph" in "".join(errors[0][0]["source"])  # stopped at the sketch, the first call


def test_doctor_offline_checks_pass_here():
    checks = run_checks(model=False)
    failed = [c for c in checks if c.required and not c.ok]
    assert not failed, format_checks(checks)
    assert {c.name for c in checks} >= {"python", "packages", "transcripts", "embeddings"}


@pytest.mark.server
def test_doctor_checks_an_endpoint(tmp_path):
    from kgqa_lib.paths import data_dir
    from kgqa_lib.servers import OxigraphServer, free_port

    with OxigraphServer([data_dir() / "miniworld" / "ontology.nt"]) as srv:
        r = subprocess.run([sys.executable, "-m", "kgqa_lib.cli", "doctor", "--no-model", "--kg", srv.kg_url("wikidata")],
                           capture_output=True, text=True, timeout=120, env={**os.environ, "KGQA_DATA_DIR": ""})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[ok  ] sparql endpoint" in r.stdout and "[warn] external data" in r.stdout
    down = f"sparql+http://127.0.0.1:{free_port()}/query"
    r = subprocess.run([sys.executable, "-m", "kgqa_lib.cli", "doctor", "--no-model", "--kg", down],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "[FAIL] sparql endpoint" in r.stdout and "→ start the server" in r.stdout
