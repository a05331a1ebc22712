"""The managed llama-server engine (``--llm server…``, kgqa_lib.llm.server): its names resolve to the
embedded model's id, and a real server on the 0.5B model answers concurrent requests, is stopped by
its pid, and dies with the process that started it. The real-server tests skip where the binary is
not built (``make llama-server``) or the 0.5B model is not installed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from kgqa_lib.errors import SetupError, UsageError
from kgqa_lib.llm import server as srv
from kgqa_lib.llm.chat import LLMCache, check_llm, llm_model_id, make_llm

MODEL = "qwen2.5-0.5b"
REPO = Path(__file__).resolve().parents[2]


def _need_server() -> Path:
    try:
        binary = srv.find_binary()
    except SetupError as exc:
        pytest.skip(str(exc))  # "llama-server is not built: `make llama-server` builds it …"
    from kgqa_lib.llm import models

    try:
        models.part_files(models.get_spec(MODEL))
    except models.ModelNotAvailable as exc:
        pytest.skip(f"the 0.5B model is not installed ({exc})")
    return binary


def _gone(pid: int) -> bool:
    """No such process, or only its zombie (an orphan waiting for PID 1 to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not _gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _port_free(port: int) -> bool:
    """Nothing listens on 127.0.0.1:port, and a new listener can take it."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except ConnectionRefusedError:
        pass
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the closed connections' TIME_WAIT is no listener
        s.bind(("127.0.0.1", port))
        s.listen()
    return True


# ---------------------------------------------------------------- names (no server needed)
def test_server_names_are_the_embedded_models_under_their_own_id_and_folder():
    """The same weights under another engine: their own cached answers and records, so a table run both
    ways is compared question by question (the report's Models section)."""
    from kgqa_lib.bench.core import model_key

    assert llm_model_id("server") == llm_model_id("local") + "@llama-server" == "qwen2.5-coder-1.5b-instruct-q4_k_m@llama-server"
    assert llm_model_id(f"server:{MODEL}?slots=2&ctx=1024") == "qwen2.5-0.5b-instruct-q4@llama-server"
    assert model_key("server:qwen2.5-coder-1.5b?slots=2") == model_key("server") != model_key("local")
    for bad, said in (("server:nope", "Unknown model"), ("server?slots=0", "slots"), ("server?fast=1", "unknown option"),
                      ("server?numerics=fast", "numerics")):
        with pytest.raises(UsageError, match=said):
            check_llm(bad, "replay")


def test_a_missing_binary_names_the_make_target_and_replay_needs_none(tmp_path, monkeypatch):
    monkeypatch.delenv("KGQA_LLAMA_SERVER", raising=False)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SetupError, match="make llama-server"):
        check_llm("server", "live")
    check_llm("server", "replay")  # recorded answers need no server
    llm = make_llm("server", "replay", cache=LLMCache(tmp_path / "c.sqlite", transcripts=None))
    assert llm.backend is None and llm.model_id == "qwen2.5-coder-1.5b-instruct-q4_k_m@llama-server"


def test_the_command_gives_each_slot_its_context_and_the_in_process_numerics():
    s = srv.ManagedServer(MODEL, slots=3, ctx=1024, threads=2, binary="/opt/llama-server")
    argv = s.command("/m/q.gguf", 4321)
    pairs = {flag: value for flag, value in zip(argv, argv[1:]) if flag.startswith("-")}
    assert argv[0] == "/opt/llama-server" and pairs["-m"] == "/m/q.gguf"
    assert (pairs["--host"], pairs["--port"], pairs["-np"], pairs["-c"]) == ("127.0.0.1", "4321", "3", "3072")
    assert (pairs["-t"], pairs["-tb"], pairs["-fa"], pairs["-b"], pairs["-ub"]) == ("2", "2", "off", "256", "256")
    assert "--cache-prompt" in argv
    assert "-fa" not in srv.ManagedServer(MODEL, numerics="server", binary="/x").command("/m", 1)


# ---------------------------------------------------------------- a real server
def test_the_server_answers_concurrent_requests_and_is_stopped_by_its_pid(tmp_path):
    _need_server()
    name = f"server:{MODEL}?slots=2&ctx=1024&threads=2"
    cache = LLMCache(tmp_path / "llm_cache.sqlite", transcripts=None)  # a probe: nothing recorded
    llm = make_llm(name, "live", cache=cache)
    assert llm.model_id == "qwen2.5-0.5b-instruct-q4@llama-server"
    assert "llama-server" in llm.engine and "2 slot(s)" in llm.engine
    prompts = ["What is 2 + 2? Reply with the number only.", "Name the capital of France in one word.",
               "Say hello.", "Continue the count: 1, 2, 3,"]
    requests = [llm.request(p, max_tokens=8) for p in prompts]
    results: list = [None] * len(requests)
    errors: list = []
    go = threading.Barrier(len(requests))

    def ask(i: int) -> None:
        try:
            go.wait()
            results[i] = llm.run(requests[i])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    try:
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(requests))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert not errors, errors
        for r in results:
            assert isinstance(r.text, str) and r.text.strip(), r
            assert 1 <= r.completion_tokens <= 8 and r.prompt_tokens > 10, r
            assert r.finish_reason in ("stop", "length") and not r.cache_hit, r
        assert "4" in results[0].text and "paris" in results[1].text.lower(), [r.text for r in results]

        (server,) = srv.running()  # one server for the process, however many threads asked
        pid, port = server.pid, server.port
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert b"127.0.0.1" in cmdline and any(a.endswith(b"qwen2.5-0.5b-instruct-q4.gguf") for a in cmdline)
        again = make_llm(name, "live", cache=cache)
        assert again.run(again.request("Say yes.", max_tokens=4)).text
        assert [s.pid for s in srv.running()] == [pid]

        server.stop()
        assert _gone(pid) and _port_free(port)
        assert srv.running() == []
    finally:
        for s in srv.running():
            s.stop()


CHILD = textwrap.dedent("""
    import sys, threading
    from kgqa_lib.llm.server import ManagedServer

    s = ManagedServer("qwen2.5-0.5b", ctx=512, threads=1)
    t = threading.Thread(target=s.start)  # started from a thread that ends right after
    t.start()
    t.join()
    print(s.pid, s.port, s.log_path, flush=True)
    sys.stdin.readline()  # then exit normally (the test writes a line), or be killed
""")


@pytest.mark.parametrize("end", ["exit", "SIGKILL"])
def test_the_server_ends_with_the_process_that_started_it(end):
    _need_server()
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    pid = log = None
    try:
        line = child.stdout.readline()
        assert line, f"the child printed nothing (exit code {child.wait(30)})"
        pid, port, log = line.split()
        pid, port = int(pid), int(port)
        time.sleep(1.0)
        assert not _gone(pid), "the server died with the thread that started it"
        if end == "exit":
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.wait(60) == 0
        else:
            child.send_signal(signal.SIGKILL)  # no atexit: the parent-death signal must do it
            child.wait(30)
        assert _wait_gone(pid, 30), f"llama-server (pid {pid}) outlived its parent ({end})"
        deadline = time.monotonic() + 10
        while not _port_free(port):
            assert time.monotonic() < deadline, f"port {port} still taken"
            time.sleep(0.2)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if pid is not None and not _gone(pid):
            os.kill(pid, signal.SIGKILL)  # the server this test's child started
        if log:
            Path(log).unlink(missing_ok=True)  # (a killed parent cannot remove its server's log)
