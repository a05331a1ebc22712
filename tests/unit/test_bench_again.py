"""`kgqa bench run TABLE --again`: a complete cell is re-run from scratch into a live file of its own, saved
beside its records every batch; the records (and so every report) stay as they were until every planned
question is answered, then the side file takes their place. A stopped re-run resumes, on another machine
too; an estimate says what and why; a cell that is not complete is refused."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess

import pytest

from kgqa_lib import bench
from kgqa_lib.bench import core

OLD_PROMPT = "000000000000"  # a prompt hash no prompt file has today


def _strip(r):
    return core.keep_prediction({k: r[k] for k in ("qid", "llm", "seconds", "metrics", "config") if k in r}
                                | {"stripped": True}, r)


def _table(tmp_path, monkeypatch):
    """fake_a and fake_b complete (5 of 5; fake_a's records from older code without predictions, fake_b's with
    them but older prompts), fake_c begun (2 of 5). The report counts the predictions it can read."""
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    cells = tuple(core.Cell(n, "io", "tiny:films", 5, ("--llm-mode", "replay")) for n in ("fake_a", "fake_b", "fake_c"))

    def report(rs):
        return "".join(f"{n}: {len(rs(n))} records, {sum(r['prediction'] != ['(answered)'] for r in rs(n))} "
                       "predictions\n" for n in ("fake_a", "fake_b", "fake_c"))

    t = core.Table(name="rerun_t", title="fake", cells=cells, report=report, output="rerun_t.md", strip=_strip)
    monkeypatch.setitem(core.TABLES, t.name, t)
    _save(t, "fake_a", [_old(i) for i in range(5)])
    _save(t, "fake_b", [dict(_new(i), config={"prompts": {"io": OLD_PROMPT}}) for i in range(5)])
    _save(t, "fake_c", [_old(i) for i in range(2)])
    core.write_report(t)
    return t


def _old(i):  # a record saved by older code: its prediction dropped
    return {"qid": f"q{i}", "llm": {"calls": 2}, "seconds": 3.0, "metrics": {"hits@1": 1.0},
            "prediction": ["(answered)"], "stripped": True}


def _new(i):  # today's `kgqa run` record, before stripping
    return {"qid": f"q{i}", "question": "secret text", "llm": {"calls": 1}, "seconds": 1.0,
            "metrics": {"hits@1": 0.0}, "prediction": [f"answer {i}"]}


def _save(t, cell, recs):
    folder = t.model_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / f"{cell}.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)


def _read(path):
    return [json.loads(x) for x in gzip.decompress(path.read_bytes()).decode().splitlines()]


class _FakeRun:
    """`kgqa run` appending today's records to its --out, one per poll; ``stop_at``: raise (a kill of `kgqa
    bench run`) once that many questions are in the file. Records what it was started on."""

    started: list = []
    stop_at: int | None = None
    during: list = []  # a check run at every poll, while the re-run is under way

    def __init__(self, argv, env=None):
        self.out = argv[argv.index("--out") + 1]
        _FakeRun.started.append((self.out, sum(1 for _ in open(self.out)) if _exists(self.out) else 0))

    def wait(self, timeout=None):
        if getattr(self, "stopped", False):  # (`kgqa bench run` waiting for it after the kill)
            return -signal.SIGTERM
        n = sum(1 for _ in open(self.out)) if _exists(self.out) else 0
        for check in _FakeRun.during:
            check()
        if n >= 5:
            return 0
        if _FakeRun.stop_at is not None and n >= _FakeRun.stop_at:
            self.stopped = True
            raise core.Interrupted(signal.SIGTERM)
        with open(self.out, "a") as fh:
            fh.write(json.dumps(_new(n)) + "\n")
        raise subprocess.TimeoutExpired("kgqa", timeout)

    def poll(self):
        return -signal.SIGTERM if getattr(self, "stopped", False) else None

    def terminate(self):
        self.stopped = True


def _exists(path):
    from pathlib import Path

    return Path(path).exists()


@pytest.fixture
def fake_run(monkeypatch):
    _FakeRun.started, _FakeRun.stop_at, _FakeRun.during = [], None, []
    monkeypatch.setattr(core.subprocess, "Popen", _FakeRun)
    return _FakeRun


def test_a_rerun_keeps_the_records_until_complete_resumes_after_a_kill_then_replaces_them(tmp_path, monkeypatch, fake_run):
    t = _table(tmp_path, monkeypatch)
    a = t.cell("fake_a")
    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    old_live = runs / "fake_a.jsonl"  # the old live file (old records): neither resumed nor saved
    old_live.write_text("".join(json.dumps(_old(i)) + "\n" for i in range(5)))
    old_records, old_report = t.saved(a).read_bytes(), t.output_path.read_text()
    assert "fake_a: 5 records, 0 predictions" in old_report

    def records_unchanged():
        assert t.saved(a).read_bytes() == old_records and t.output_path.read_text() == old_report

    fake_run.during.append(records_unchanged)
    fake_run.stop_at = 3  # killed after three questions
    with pytest.raises(core.Interrupted):
        bench.run(t, runs, batch=2, poll=0, echo=lambda _: None, cells=["fake_a"], again=True)
    assert fake_run.started == [(str(runs / "fake_a.again.jsonl"), 0)]  # from scratch, in a file of its own
    records_unchanged()
    side = t.again_file(a)
    assert side == t.model_dir() / "fake_a.again.jsonl.gz"
    assert [r["qid"] for r in _read(side)] == ["q0", "q1", "q2"]  # what was answered, saved and stripped
    assert all("question" not in r and r["prediction"] for r in _read(side))
    assert bench.check(t) is None  # the report is still what the records give; the side file is not read
    listing = "\n".join(core.status_table(t, runs))
    assert "re-running: 3/5, saved beside the records" in listing

    # another machine: only the committed files (the records and the side file), no live re-run file
    (runs / "fake_a.again.jsonl").unlink()
    fake_run.started, fake_run.stop_at = [], None
    assert bench.run(t, runs, batch=2, poll=0, echo=lambda _: None, cells=["fake_a"], again=True) == 0
    assert fake_run.started == [(str(runs / "fake_a.again.jsonl"), 3)]  # resumed from the side file
    new = _read(t.saved(a))
    assert [r["qid"] for r in new] == [f"q{i}" for i in range(5)]
    assert [r["prediction"] for r in new] == [[f"answer {i}"] for i in range(5)]
    assert not side.exists() and not (runs / "fake_a.again.jsonl").exists()
    assert [json.loads(x)["prediction"] for x in old_live.read_text().splitlines()] == [[f"answer {i}"] for i in range(5)]
    assert "fake_a: 5 records, 5 predictions" in t.output_path.read_text() and bench.check(t) is None
    assert "re-running" not in "\n".join(core.status_table(t, runs))
    # the other cells were not touched, and nothing is left to re-run without --cells
    assert [r["prediction"] for r in _read(t.saved(t.cell("fake_b")))][0] == ["answer 0"]
    assert core.again_plan(t, runs) == []


def test_a_rerun_stopped_after_its_last_answer_is_completed_without_running_again(tmp_path, monkeypatch, fake_run):
    t = _table(tmp_path, monkeypatch)
    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    (runs / "fake_a.again.jsonl").write_text("".join(json.dumps(_new(i)) + "\n" for i in range(5)))
    messages = []
    assert bench.run(t, runs, poll=0, echo=messages.append, again=True) == 0
    assert fake_run.started == []
    assert [r["prediction"] for r in _read(t.saved(t.cell("fake_a")))][4] == ["answer 4"]
    assert any("re-run complete (5 questions)" in m for m in messages)


def test_without_again_nothing_changes_and_the_side_file_is_left_alone(tmp_path, monkeypatch, fake_run):
    t = _table(tmp_path, monkeypatch)
    runs = tmp_path / "results" / "runs"
    side = t.again_file(t.cell("fake_a"))
    side.write_bytes(gzip.compress(json.dumps(_strip(_new(0))).encode() + b"\n"))
    before = side.read_bytes()
    assert core.render(t) == t.output_path.read_text() and bench.check(t) is None
    assert t.models() == [core.default_key()]
    assert bench.run(t, runs, batch=2, poll=0, echo=lambda _: None) == 0
    assert [out for out, _ in fake_run.started] == [str(runs / "fake_c.jsonl")]  # only the incomplete cell
    assert side.read_bytes() == before and len(_read(t.saved(t.cell("fake_a")))) == 5
    assert not (runs / "fake_a.again.jsonl").exists()


def test_the_estimate_names_each_cell_why_and_what_it_costs(tmp_path, monkeypatch, capsys, fake_run):
    from kgqa_lib.cli import main

    t = _table(tmp_path, monkeypatch)
    before = sorted(p for p in (tmp_path / "results").rglob("*"))
    assert main(["bench", "run", t.name, "--again"]) == 0
    out = capsys.readouterr().out
    assert "only its complete cells whose saved records lack predictions (name others with --cells)" in out
    assert "  fake_a: re-run: 5 questions (its records lack predictions), ≈ 10 LLM calls, ≈ 0.0 h" in out
    assert "fake_b" not in out and "fake_c" not in out  # its records keep predictions; not complete
    assert f"`kgqa bench run {t.name} --again --yes`" in out

    assert main(["bench", "run", t.name, "--cells", "fake_b", "--again"]) == 0
    out = capsys.readouterr().out
    assert "fake_b: re-run: 5 questions (made by an earlier version of its prompts: io), ≈ 5 LLM calls" in out
    assert "fake_a" not in out and f"--cells fake_b --again --yes" in out
    assert sorted(p for p in (tmp_path / "results").rglob("*")) == before  # an estimate writes nothing
    assert fake_run.started == []

    # a re-run under way: the questions left, and those re-run already
    t.again_file(t.cell("fake_a")).write_bytes(
        gzip.compress("".join(json.dumps(_strip(_new(i))) + "\n" for i in range(2)).encode()))
    assert main(["bench", "run", t.name, "--again"]) == 0
    assert "fake_a: re-run: 3 questions (its records lack predictions), 2 re-run already, ≈ 6 LLM calls" in \
        capsys.readouterr().out


def test_incomplete_cells_and_measurement_tables_are_refused(tmp_path, monkeypatch, capsys, fake_run):
    from kgqa_lib.cli import main

    t = _table(tmp_path, monkeypatch)
    assert main(["bench", "run", t.name, "--cells", "fake_a", "fake_c", "--again", "--yes"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --again re-runs complete cells only, and fake_c 2/5 is not complete: run it "
                          "without --again") and len(err.strip().splitlines()) == 1
    assert fake_run.started == [] and not t.again_file(t.cell("fake_a")).exists()
    assert main(["bench", "run", "embed", "--again"]) == 2
    assert "--again are for the papers' tables" in capsys.readouterr().err
    with pytest.raises(core.UsageError):
        bench.run(t, tmp_path / "results" / "runs", cells=["fake_c"], again=True, echo=lambda _: None)


def test_the_report_names_the_cells_whose_records_keep_no_predictions(tmp_path, monkeypatch, fake_run):
    """Where old records cannot give their answers back, every report says which cells, and how many of their
    records; a re-run that replaces them takes the cell off the list."""
    t = _table(tmp_path, monkeypatch)
    text = core.render(t)
    tail = text.split("\n## Records without predictions\n")[1]
    assert "`fake_a` (5 of 5), `fake_c` (2 of 2)." in tail and "fake_b" not in tail
    assert f"`kgqa bench run {t.name} --again --yes`" in tail
    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    assert bench.run(t, runs, batch=5, poll=0, echo=lambda _: None, cells=["fake_a"], again=True) == 0
    tail = core.render(t).split("\n## Records without predictions\n")[1]
    assert "`fake_a`" not in tail and "`fake_c` (2 of 2)." in tail
