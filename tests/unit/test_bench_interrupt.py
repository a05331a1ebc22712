"""A stopped `kgqa bench run` leaves no `kgqa run` behind, and its answers are saved.

- SIGKILL to `kgqa bench run`: its cell's `kgqa run` ends too (it asked the kernel to be signalled when
  its parent ends), and `kgqa bench list` counts only the saved records — the answers left in the live
  run file are listed as not saved yet; the next `kgqa bench run` saves them first.
- SIGTERM: the cell's process is stopped and waited for, the saved records are exactly the questions
  answered, the command exits 128 + 15; the same command then completes the table.

A tiny table (one cell, 10 tiny:films questions) runs through the CLI in a child process against the
project's fake chat server, into temporary results and cache folders."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kgqa_lib.bench import core
from kgqa_lib.servers import FakeChatServer

N = 10
SCRIPT = f"""
import sys
from kgqa_lib import cli
from kgqa_lib.bench import core

core.register(core.Table(name="stop_t", title="stop", output="stop_t.md",
                         cells=(core.Cell("st_io", "io", "tiny:films", {N}, ("--limit", "{N}", "--llm", "local",
                                                                             "--no-transcripts")),),
                         report=lambda rs: "io n=%d\\n" % len(rs("st_io"))))
sys.exit(cli.main(sys.argv[1:]))
"""


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of a process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[19])


def _children(pid: int) -> dict[int, int]:
    """Child pid → its start time, of ``pid``."""
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            st = _stat(int(d.name))
            if st and st[1] == pid:
                out[int(d.name)] = st[2]
    return out


def _alive(pid: int, started: int) -> bool:
    st = _stat(pid)
    return st is not None and st[2] == started and st[0] != "Z"


def _gone(procs: dict[int, int], within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(_alive(p, s) for p, s in procs.items()):
            return True
        time.sleep(0.1)
    return False


def _qids(path: Path) -> set[str]:
    if not path.exists():
        return set()
    data = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    out = set()
    for line in data.splitlines():
        try:
            out.add(json.loads(line)["qid"])
        except (ValueError, KeyError):
            pass  # a line cut short by a kill
    return out


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc; the parent-death signal is Linux's")
def test_a_stopped_bench_run_leaves_no_orphan_and_saves_what_was_answered(tmp_path):
    script = tmp_path / "bench_stop.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "KGQA_RESULTS_DIR": str(tmp_path / "results"), "KGQA_CACHE_DIR": str(tmp_path / "cache"),
           "KGQA_LLM_MODE": "auto", "OPENAI_API_KEY": "sk-local-test", "PYTHONPATH": str(Path(core.__file__).parents[2])}
    env.pop("KGQA_PARENT_PID", None)
    seen: dict[int, int] = {}  # every `kgqa run` started, to end them whatever happens

    with FakeChatServer(latency=1.5) as server:  # (an orphan would still be answering when checked)
        llm = f"openai:fake@{server.base_url}"
        model = core.model_key(llm)
        live = tmp_path / "results" / "runs" / model / "st_io.jsonl"
        saved = tmp_path / "results" / "bench" / "runs" / "stop_t" / model / "st_io.jsonl.gz"

        logs: list[Path] = []

        def kgqa(*args: str) -> subprocess.Popen:
            logs.append(tmp_path / f"kgqa-{len(logs)}.txt")
            with open(logs[-1], "w") as fh:  # (a file, not a pipe: an orphan holding a pipe would block reading it)
                proc = subprocess.Popen([sys.executable, str(script), *args], env=env, stdout=fh,
                                        stderr=subprocess.STDOUT, text=True)
            proc.log = logs[-1]
            return proc

        def output(proc: subprocess.Popen, timeout: float) -> str:
            proc.wait(timeout=timeout)
            return proc.log.read_text()

        def start_and_wait(more: int) -> tuple[subprocess.Popen, dict[int, int]]:
            """`kgqa bench run` started; returns once its cell's run file holds ``more`` new answers."""
            before = len(_qids(live))
            parent = kgqa("bench", "run", "stop_t", "--llm", llm, "--yes", "--batch", "100")
            deadline = time.monotonic() + 180
            while len(_qids(live)) < before + more:
                assert parent.poll() is None, output(parent, 10)
                assert time.monotonic() < deadline, "no answers within 180 s"
                seen.update(_children(parent.pid))
                time.sleep(0.1)
            kids = _children(parent.pid)
            seen.update(kids)
            assert kids, "the cell's `kgqa run` is not a child of `kgqa bench run`"
            return parent, kids

        try:
            # SIGKILL: nothing can be saved, but the cell's process ends with its parent
            parent, kids = start_and_wait(2)
            parent.kill()
            parent.wait(timeout=60)
            assert _gone(kids, within=5), "the cell's `kgqa run` outlived a killed `kgqa bench run`"
            answered = _qids(live)
            assert 2 <= len(answered) < N
            listing = output(kgqa("bench", "list", "stop_t", "--llm", llm), 120)
            line = [x for x in listing.splitlines() if "st_io" in x][-1]  # (the fake model's, after the default's)
            assert f"{len(_qids(saved))}/{N}" in line and "✓" not in line, listing  # the saved records count
            assert f"{len(answered - _qids(saved))} more answered" in line and "not saved yet" in line, listing

            # SIGTERM: the unsaved answers are saved first, the cell is stopped, what it answered is saved
            parent, kids = start_and_wait(2)
            parent.send_signal(signal.SIGTERM)
            out = output(parent, 90)
            assert _gone(kids, within=5), "the cell's `kgqa run` outlived `kgqa bench run` stopped by SIGTERM"
            assert parent.returncode == 128 + signal.SIGTERM, out
            assert "stopped by SIGTERM" in out and "saved the answers of st_io" in out, out
            answered = _qids(live)
            assert len(answered) < N, "the run finished before it was stopped: nothing was tested"
            assert _qids(saved) == answered, "the saved records are not the questions answered"

            # the same command completes the table
            resume = kgqa("bench", "run", "stop_t", "--llm", llm, "--yes")
            out = output(resume, 300)
            assert resume.returncode == 0, out
            assert len(_qids(saved)) == N
            listing = output(kgqa("bench", "list", "stop_t", "--llm", llm), 120)
            assert "✓ st_io" in listing and "not saved yet" not in listing, listing
        finally:
            for pid, started in seen.items():  # (an orphan left by a failing run: ours to end)
                if _alive(pid, started):
                    os.kill(pid, signal.SIGKILL)


def _record(qid: str) -> dict:
    return {"qid": qid, "seconds": 1.0, "llm": {"calls": 1, "prompt_tokens": 10, "completion_tokens": 5,
                                                 "seconds": 1.0}, "metrics": {"hits@1": 1.0}}


def test_completeness_counts_saved_records_and_run_saves_live_answers_first(tmp_path, monkeypatch):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    table = core.Table(name="saved_t", title="saved", output="saved_t.md", report=lambda rs: f"n={len(rs('c'))}\n",
                       cells=(core.Cell("c", "io", "tiny:films", 3),))
    live = core.runs_dir() / "c.jsonl"
    live.parent.mkdir(parents=True)
    live.write_text("".join(json.dumps(_record(q)) + "\n" for q in ("q1", "q2", "q3")))
    core.save(table)  # the saved copy made after the first answer …
    live.write_text("".join(json.dumps(_record(q)) + "\n" for q in ("q1",)))
    core.save(table)
    live.write_text("".join(json.dumps(_record(q)) + "\n" for q in ("q1", "q2", "q3")))  # … and two answers since

    st = core.cell_status(table, table.cells[0], core.runs_dir())
    assert (st["saved"], st["present"], st["unsaved"], st["complete"]) == (1, 3, 2, False)
    assert core.completeness(table, core.runs_dir())["questions"] == 1
    [line] = [x for x in core.status_table(table, core.runs_dir()) if " c " in x]
    assert "1/3" in line and "✓" not in line and "2 more answered in results/runs/, not saved yet" in line
    assert core.unsaved(table) == ["c"]

    monkeypatch.setattr(core.subprocess, "Popen", lambda *a, **k: pytest.fail("nothing is left to run"))
    said: list[str] = []
    assert core.run(table, poll=0.1, echo=said.append) == 0
    assert any("saved the answers of c (3 records)" in s for s in said)
    assert core.cell_status(table, table.cells[0])["complete"]
    assert (core.bench_dir() / "saved_t.md").read_text() == "n=3\n"


def test_a_live_file_missing_saved_answers_is_not_saved_over_them(tmp_path, monkeypatch):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    table = core.Table(name="older_t", title="older", output="older_t.md", report=lambda rs: "",
                       cells=(core.Cell("c", "io", "tiny:films", 3),))
    live = core.runs_dir() / "c.jsonl"
    live.parent.mkdir(parents=True)
    live.write_text("".join(json.dumps(_record(q)) + "\n" for q in ("q1", "q2")))
    core.save(table)
    live.write_text(json.dumps(_record("q3")) + "\n")  # holds an answer the saved copy lacks, and lacks two it has
    assert core.cell_status(table, table.cells[0], core.runs_dir())["unsaved"] == 1
    assert core.unsaved(table) == []


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_a_child_started_with_child_env_ends_when_its_parent_is_killed(tmp_path):
    child = ("import os, time; from kgqa_lib.procs import end_with_parent; end_with_parent(); "
             "print(os.getpid(), 'KGQA_PARENT_PID' in os.environ, flush=True); time.sleep(120)")
    middle = ("import subprocess, sys, time; from kgqa_lib.procs import child_env; "
              f"subprocess.Popen([sys.executable, '-c', {child!r}], env=child_env()); time.sleep(120)")
    parent = subprocess.Popen([sys.executable, "-c", middle], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(core.__file__).parents[2])})
    pid, inherited = parent.stdout.readline().split()
    started = _stat(int(pid))[2]
    try:
        assert inherited == "False"  # read once and dropped: the child's own children do not inherit it
        parent.kill()
        parent.wait()
        assert _gone({int(pid): started}, within=10)
    finally:
        if _alive(int(pid), started):
            os.kill(int(pid), signal.SIGKILL)


def test_child_env_names_this_process():
    from kgqa_lib.procs import child_env

    assert child_env({"X": "1"}) == {"X": "1", "KGQA_PARENT_PID": str(os.getpid())}
