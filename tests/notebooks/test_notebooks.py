"""Notebook tiers that nbval does not cover: papermill smoke runs with small overridden
parameters (in replay mode: every call must come from the committed transcripts), and the check
that committed notebooks are normalised."""

from __future__ import annotations

import json

import pytest

from kgqa_lib.notebooks import execute, normalize_file, notebook_paths

# small overrides per notebook (the CI file of stellargraph's demos, as a dict)
SMOKE_PARAMETERS = {
    "00_quickstart.ipynb": {"N_QUESTIONS": 3, "LLM_MODE": "replay"},
    "10_pgakv_walkthrough.ipynb": {"LLM_MODE": "replay"},
    "11_pgakv_main_results.ipynb": {"N_QUESTIONS": 2, "METHODS": ["io", "qsm", "pgakv"], "LLM_MODE": "replay"},
    "12_pgakv_ablations.ipynb": {"N_QUESTIONS": 3, "THRESHOLDS": [0.7], "K_SUBJECTS": [None], "LLM_MODE": "replay"},
    "13_pgakv_kg_sources.ipynb": {"N_QUESTIONS": 2, "SETS": ["miniworld:simple"], "LLM_MODE": "replay"},
    "14_pgakv_errors.ipynb": {"N_QUESTIONS": 2, "LLM_MODE": "replay"},
    "20_fusic_walkthrough.ipynb": {"LLM_MODE": "replay"},
    "21_fusic_transfer.ipynb": {"N_QUESTIONS": 1, "TASKS": ["geo-wd>cinema-fb"], "SHOTS_SWEEP": [5], "LLM_MODE": "replay"},
    "22_fusic_ablations.ipynb": {"N_QUESTIONS": 1, "SHOTS_SWEEP": [5], "LLM_MODE": "replay"},
    "30_keqing_walkthrough.ipynb": {"LLM_MODE": "replay"},
    "31_keqing_results.ipynb": {"N_QUESTIONS": 1, "METHODS": ["io", "keqing"], "LLM_MODE": "replay"},
    "32_keqing_ablations.ipynb": {"N_QUESTIONS": 1, "K_SWEEP": [1, 2], "LLM_MODE": "replay"},
    "33_keqing_lora.ipynb": {"N_QUESTIONS": 1, "LLM_MODE": "replay"},
    "40_kbbinder_walkthrough.ipynb": {"SAMPLES": 2, "LLM_MODE": "replay"},  # samples 0-1 of the recorded 6
    "41_tog_walkthrough.ipynb": {"LLM_MODE": "replay"},
    "90_compare_all.ipynb": {"TABLES_DIR": None},  # from the saved records only: no LLM, no sample
}


def test_every_notebook_has_smoke_parameters():
    names = {p.name for p in notebook_paths()}
    assert names, "no notebooks found"
    assert names <= set(SMOKE_PARAMETERS), f"add smoke parameters for {sorted(names - set(SMOKE_PARAMETERS))}"


@pytest.mark.parametrize("name", sorted(SMOKE_PARAMETERS))
def test_papermill_smoke(name, tmp_path):
    src = next(p for p in notebook_paths() if p.name == name)
    out = tmp_path / name
    res = execute(src, output=out, parameters=SMOKE_PARAMETERS[name])
    assert res.error is None, res.error
    nb = json.loads(out.read_text())
    injected = [c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert injected, "papermill did not inject the overridden parameters"
    errors = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_committed_notebooks_are_normalised_and_have_outputs(path):
    assert not normalize_file(path, check=True), f"run `kgqa notebooks normalize {path.name}` and commit"
    nb = json.loads(path.read_text())
    params = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged 'parameters'"
    checked = [c for c in nb["cells"] if "nbval-check-output" in c["metadata"].get("tags", [])]
    assert checked and all(c.get("outputs") for c in checked), "result cells must be tagged and committed with outputs"
    assert "sys.path" not in path.read_text()
