"""`kgqa reproduce --set/--grid` refuse a parameter that no selected notebook declares (a typo would
run the defaults in a folder named after a value never applied), in one line naming the notebooks'
parameters, before any notebook runs."""

from __future__ import annotations

import pytest

from kgqa_lib import cli, reproduce
from kgqa_lib.notebooks import Executed


@pytest.fixture
def ran(tmp_path, monkeypatch):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    calls = []

    def fake_execute(path, output=None, parameters=None, failed_copy=None, **kw):
        calls.append((path.name, dict(parameters or {})))
        return Executed(path=path, seconds=0.0)

    monkeypatch.setattr(reproduce, "execute", fake_execute)
    return calls


@pytest.mark.parametrize("argv", [["--set", "N_QUESTINS=50"], ["--grid", "N_QUESTINS=4,50"],
                                  ["--set", "N_QUESTIONS=5", "--grid", "SEDE=1,2"]])
def test_an_undeclared_parameter_is_refused_before_anything_runs(ran, argv, capsys):
    assert cli.main(["reproduce", "--only", "00_quickstart", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: no selected notebook declares")
    assert "N_QUESTIONS" in err and "DATASET" in err  # the notebooks' parameters, to pick from
    assert ran == []


def test_a_declared_parameter_still_goes_to_its_notebook(ran):
    assert reproduce.reproduce(only=["00_quickstart"], params={"N_QUESTIONS": 2}) == 0
    assert ran == [("00_quickstart.ipynb", {"N_QUESTIONS": 2})]
