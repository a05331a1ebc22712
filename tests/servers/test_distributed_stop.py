"""A Dask driver (`python -m kgqa_lib.distributed run`) killed mid-run leaves no `kgqa run --shard`
behind: the shards' commands end with the worker processes that started them, so a re-run finds no
run file held by an orphan. Against the fake OpenAI-compatible server on 127.0.0.1 (3 s a call)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kgqa_lib.servers import FakeChatServer

pytestmark = [pytest.mark.server, pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")]


def _stat(pid: int) -> tuple[str, int, int] | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return fields[0], int(fields[1]), int(fields[19])


def _descendants(pid: int) -> dict[int, int]:
    """Every process below ``pid`` → its start time."""
    table = {int(d.name): _stat(int(d.name)) for d in Path("/proc").iterdir() if d.name.isdigit()}
    out, todo = {}, [pid]
    while todo:
        parent = todo.pop()
        for p, st in table.items():
            if st and st[1] == parent and p not in out:
                out[p] = st[2]
                todo.append(p)
    return out


def _alive(pid: int, started: int) -> bool:
    st = _stat(pid)
    return st is not None and st[2] == started and st[0] != "Z"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_stopped_driver_leaves_no_shard_command_behind(tmp_path, sig):
    pytest.importorskip("distributed", reason="Dask distributed is not installed (make setup installs it)")
    env = {**os.environ, "KGQA_RESULTS_DIR": str(tmp_path / "results"), "KGQA_CACHE_DIR": str(tmp_path / "cache"),
           "KGQA_LLM_MODE": "auto", "OPENAI_API_KEY": "sk-local-test"}
    env.pop("KGQA_PARENT_PID", None)
    files = [tmp_path / "d__shard0of2.jsonl", tmp_path / "d__shard1of2.jsonl"]
    below: dict[int, int] = {}
    with FakeChatServer(latency=3.0) as server, open(tmp_path / "driver.log", "w") as log:
        driver = subprocess.Popen([sys.executable, "-m", "kgqa_lib.distributed", "run", "--shards", "2", "--workers", "2",
                                   "--out", str(tmp_path / "d.jsonl"), "--", "--method", "io", "--dataset", "tiny:films",
                                   "--llm", f"openai:fake@{server.base_url}", "--no-transcripts"],
                                  env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 240
            while not all(f.exists() and f.read_text().count("\n") >= 1 for f in files):
                assert driver.poll() is None, (tmp_path / "driver.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "no shard answered within 240 s"
                time.sleep(0.2)
            below = _descendants(driver.pid)
            shards = [p for p in below if b"kgqa_lib.cli" in Path(f"/proc/{p}/cmdline").read_bytes()]
            assert len(shards) == 2, "the shards' `kgqa run` are not below the driver"
            driver.send_signal(sig)
            driver.wait(timeout=120)
            deadline = time.monotonic() + 8  # (a shard has 5 questions: an orphan would still be answering)
            while any(_alive(p, below[p]) for p in shards) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not [p for p in shards if _alive(p, below[p])], "a shard's `kgqa run` outlived the driver"
            assert all(f.read_text().count("\n") < 5 for f in files), "the shards finished: nothing was tested"
            if sig == signal.SIGTERM:
                assert driver.returncode == 128 + signal.SIGTERM
                assert "stopped by SIGTERM" in (tmp_path / "driver.log").read_text()
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
            time.sleep(2)  # (the cluster's own processes end after the driver; ours to end if they have not)
            for p, started in below.items():
                if _alive(p, started):
                    os.kill(p, signal.SIGKILL)
