"""The fault benchmark (``kgqa bench run faults``, :mod:`kgqa_lib.bench.speed.faults`): its report is a
function of its JSON alone, its verdict fails a row that scored a fault, stalled or lost an answer, and a
reduced run — an HTML reply, a full disk under the run file, a read-only cache — measures what it says,
end to end through the CLI into a temporary results folder. (The locked cache waits out SQLite's 30 s
busy timeout and the killed ``kgqa bench run`` is tested on its own in ``test_bench_interrupt.py``:
both are left to the full measurement.)"""

from __future__ import annotations

import copy
import json
import sys

import pytest

from kgqa_lib.bench import measure
from kgqa_lib.bench.speed import faults
from kgqa_lib.cli import main


def _row(key: str, **over) -> dict:
    r = {"key": key, "fault": faults.SCENARIOS[key][0], "made_by": faults.SCENARIOS[key][1], "exit": 3, "scored": 0,
         "one_line": True, "message": "error: 3 questions not answered (…): the run file <tmp>/results/run.jsonl "
                                      "cannot be used (No space left on device) …", "seconds": 5.2, "requests": 1,
         "resume_exit": 0, "resume_seconds": 4.0, "questions": 3, "answered": 3, "duplicates": 0,
         "resume_message": ""}
    r.update(over)
    r["ok"] = faults.verdict_row(r)
    return r


DATA = {"questions": 3, "measured_at": "2026-11-29 10:00",
        "machine": {"cpus": 2, "python": "3.11.7", "platform": "Linux"},
        "rows": [_row("disk-run"),
                 _row("kill", exit=143, message="faults_stop: stopped by SIGTERM; the answers so far are saved (stop_io)",
                      questions=6, answered=6, orphans=0, answered_before=2, saved_before=2, saved_is_answered=True)]}


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "results" / "bench"


def test_the_report_is_the_json_s_and_check_catches_a_changed_number(results, capsys):
    results.mkdir(parents=True)
    (results / "faults.json").write_text(json.dumps(DATA))
    assert main(["bench", "report", "faults"]) == 0
    md = (results / "faults.md").read_text()
    assert "| full disk under the run file | " in md and "| 3 | 0 | yes | 5.2 | 0 | 3/3 | 0 | yes |" in md
    assert "| killed `kgqa bench run` | " in md and "| 143 | 0 | yes |" in md
    assert "saved = answered: yes" in md and "alive 5 s after it exited: 0" in md
    assert md.rstrip().endswith("resume answers every question once: **yes**")
    assert main(["bench", "report", "--check", "faults"]) == 0
    again = copy.deepcopy(DATA)
    again["rows"][0]["seconds"] = 9.9
    (results / "faults.json").write_text(json.dumps(again))
    capsys.readouterr()
    assert main(["bench", "report", "--check", "faults"]) == 1
    assert "faults.md differs from what faults.json gives" in capsys.readouterr().out


@pytest.mark.parametrize("change", [
    {"exit": 0},  # scored as answers: the command said all was well
    {"exit": None},  # a hang
    {"scored": 2},  # the fault was recorded as answers
    {"one_line": False},  # a traceback, or several lines
    {"resume_exit": 3},  # the resume did not finish
    {"answered": 2},  # a question lost
    {"duplicates": 1},  # a question answered twice
    {"orphans": 1},  # a `kgqa run` outlived its killed parent
    {"saved_is_answered": False},  # the saved records are not the answers given
], ids=lambda c: next(iter(c)))
def test_the_verdict_fails_a_row_that_missed_any_part(change):
    kill = {k: v for k, v in DATA["rows"][1].items() if k not in ("key", "fault", "made_by", "ok")}
    base = kill if set(change) & {"orphans", "saved_is_answered"} else {}
    assert faults.verdict_row(_row("disk-run")) and faults.verdict_row(_row("kill", **base))
    bad = _row("kill" if base else "disk-run", **{**base, **change})
    assert not bad["ok"]
    data = {**DATA, "rows": [DATA["rows"][0], bad]}
    assert not faults.all_ok(data)
    assert "| **NO** |" in faults.report(data) and faults.report(data).rstrip().endswith("**NO**")
    assert not faults.all_ok({"rows": []})


@pytest.mark.skipif(sys.platform != "linux", reason="/dev/full and capabilities are Linux's")
def test_a_reduced_run_end_to_end(results, capsys):
    code = main(["bench", "run", "faults", "--only", "html,disk-run,read-only", "--yes"])
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads((results / "faults.json").read_text())
    assert measure.check(measure.MEASUREMENTS["faults"]) is None
    rows = {r["key"]: r for r in data["rows"]}
    assert list(rows) == ["html", "disk-run", "read-only"]
    for r in rows.values():
        assert r["ok"] and r["exit"] == 3 and r["scored"] == 0 and r["one_line"], r
        assert r["resume_exit"] == 0 and r["answered"] == r["questions"] == 3 and r["duplicates"] == 0, r
        assert "<tmp>" in r["message"] or "127.0.0.1:<port>" in r["message"], r["message"]
        assert "/tmp/" not in r["message"]
    assert "not a chat completion" in rows["html"]["message"]
    assert "No space left on device" in rows["disk-run"]["message"]
    assert "readonly database" in rows["read-only"]["message"]
    assert rows["html"]["requests"] == 3 and rows["disk-run"]["requests"] == 1  # stopped at the first failure


def test_bad_options_are_one_line():
    from kgqa_lib.errors import UsageError

    with pytest.raises(UsageError, match="--only: expects items of disk-run,"):
        measure.parse_options(measure.MEASUREMENTS["faults"], ["--only", "tmpfs"])
    opts = measure.parse_options(measure.MEASUREMENTS["faults"], [])
    assert opts.only == list(faults.SCENARIOS)
    assert "9 fault scenario(s)" in faults.estimate(opts, {})
