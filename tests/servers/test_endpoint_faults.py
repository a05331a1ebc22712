"""An OpenAI-compatible endpoint that misbehaves, on 127.0.0.1 (a small stdlib server in this
process, and the project's ``FakeChatServer``):

* an HTTP 200 that is not a chat completion (an HTML login page, a body that is not JSON, JSON with
  no or empty ``choices``, a choice without a message) is an outage (``LLMEndpointError``): no
  record, ``kgqa run`` exits 3, and the same command answers once a real server is there;
* a server sending a valid answer one byte every 0.5 s cannot hold a call past its deadline
  (``timeout``: the constructor, ``openai:MODEL?timeout=…``, ``kgqa run --llm-timeout``);
* a reply far longer than ``max_reply_chars`` is cut before it reaches the cache or the record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kgqa_lib.errors import InfrastructureError
from kgqa_lib.evaluate.runner import read_records, run
from kgqa_lib.llm.chat import ChatRequest, LLMCache, LLMEndpointError, OpenAIBackend, make_llm
from kgqa_lib.methods import Context
from kgqa_lib.registry import load_dataset
from kgqa_lib.servers import FakeChatServer, free_port

pytestmark = pytest.mark.server

COMPLETION = json.dumps({
    "id": "x", "object": "chat.completion", "created": 0, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Answer: {x}"}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()

BODIES = {
    "html-login-page": (b"<html><body>Please log in</body></html>", "text/html"),
    "not-json": (b"upstream connect error", "application/json"),
    "empty-choices": (b'{"id": "x", "object": "chat.completion", "choices": []}', "application/json"),
    "no-choices": (b'{"id": "x", "object": "chat.completion"}', "application/json"),
    "choice-without-message": (b'{"choices": [{"index": 0, "message": null}]}', "application/json"),
    "a-json-list": (b"[1, 2, 3]", "application/json"),
}


class Misbehaving:
    """``POST`` answered with ``BODIES[mode]`` (HTTP 200), or with ``COMPLETION`` one byte every
    ``drip`` seconds (``mode="drip"``); ``requests`` counts what arrived."""

    def __init__(self, mode: str, drip: float = 0.5, port: int | None = None) -> None:
        self.mode, self.drip, self.requests = mode, drip, 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests += 1
                body, ctype = (COMPLETION, "application/json") if server.mode == "drip" else BODIES[server.mode]
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    if server.mode != "drip":
                        self.wfile.write(body)
                        return
                    for i in range(len(body)):
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                        time.sleep(server.drip)
                except OSError:
                    pass  # the client gave up

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port or 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_port
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "Misbehaving":
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(autouse=True)
def _local_env(monkeypatch):
    for var in ("KGQA_LLM_BASE_URL", "OPENAI_BASE_URL", "KGQA_LLM_MODEL", "KGQA_LLM", "KGQA_LLM_TIMEOUT",
                "KGQA_LLM_MAX_REPLY_CHARS", "KGQA_LLM_MODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")


def _kgqa(args, env, timeout=300):
    return subprocess.run([sys.executable, "-m", "kgqa_lib.cli", "run", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def _env(tmp_path):
    return {**os.environ, "KGQA_CACHE_DIR": str(tmp_path / "cache"), "NO_PROXY": "127.0.0.1",
            "OPENAI_API_KEY": "sk-local-test"}


# ------------------------------------------------------------------------ a 200 that is not an answer
@pytest.mark.parametrize("mode", list(BODIES))
def test_a_200_that_is_not_a_chat_completion_is_an_outage(mode, tmp_path):
    with Misbehaving(mode) as srv:
        llm = make_llm("openai:m", "auto", cache=LLMCache(tmp_path / "c.sqlite", transcripts=None),
                       base_url=srv.base_url, max_retries=0)
        with pytest.raises(LLMEndpointError) as ei:
            llm.chat("Who directed Inception?", max_tokens=8)
    assert isinstance(ei.value, InfrastructureError)
    assert "answered HTTP 200 with something that is not a chat completion" in str(ei.value)
    assert ei.value.short() == f"LLM endpoint {srv.base_url} answered something that is not a chat completion"
    assert llm.cache.get(llm.request("Who directed Inception?", max_tokens=8).key) is None  # nothing cached


def test_kgqa_run_against_a_login_page_exits_3_then_answers_on_a_real_server(tmp_path):
    port = free_port()
    out = tmp_path / "io.jsonl"
    args = ["--method", "io", "--dataset", "tiny:films", "--limit", "3", "--llm", f"openai:fake@http://127.0.0.1:{port}/v1",
            "--llm-mode", "auto", "--no-transcripts", "--quiet", "--out", str(out)]
    with Misbehaving("html-login-page", port=port):
        bad = _kgqa(args, _env(tmp_path))
    assert read_records(out) == [], "a login page was scored as answers"
    assert bad.returncode == 3, bad.stderr[-2000:]
    line = bad.stderr.strip().splitlines()[-1]
    assert line.startswith("error: 3 questions not answered") and "not a chat completion" in line, line
    assert "Traceback" not in bad.stderr
    with FakeChatServer(port=port) as srv:
        good = _kgqa(args, _env(tmp_path))
    assert good.returncode == 0, good.stderr[-2000:]
    assert srv.requests == 3 and len(read_records(out)) == 3


# ------------------------------------------------------------------------------ a trickling server
def _timed_call(backend: OpenAIBackend, limit: float = 30.0):
    """``(seconds, exception)`` of one call, given up after ``limit`` s (the call then keeps running
    in its thread: the assertion on the seconds fails)."""
    box: dict = {}

    def call():
        t = time.monotonic()
        try:
            backend.complete(ChatRequest(backend.model_id, (("user", "hi"),)))
        except Exception as exc:  # noqa: BLE001 - reported to the test
            box["exc"] = exc
        box["seconds"] = time.monotonic() - t

    th = threading.Thread(target=call, daemon=True)
    th.start()
    th.join(limit)
    return box.get("seconds", float("inf")), box.get("exc")


@pytest.mark.parametrize("retries", [0, 2])
def test_a_trickling_server_cannot_hold_a_call_past_its_deadline(retries):
    """The whole answer, one byte every 0.5 s, takes ~2 minutes; every read is well within the timeout."""
    with Misbehaving("drip") as srv:
        backend = OpenAIBackend("m", base_url=srv.base_url, timeout=2.0, max_retries=retries)
        seconds, exc = _timed_call(backend)
    assert seconds < 6, f"a 2 s call took {seconds:.1f} s"
    assert isinstance(exc, LLMEndpointError), exc
    assert exc.short() == f"LLM endpoint {srv.base_url} gave no complete answer within 2 s"
    assert "--llm-timeout" in str(exc) and srv.requests == 1  # past the deadline: not sent again


def test_the_deadline_from_the_name_the_environment_and_the_default(monkeypatch):
    with Misbehaving("drip") as srv:
        llm = make_llm(f"openai:m@{srv.base_url}?timeout=1.5", "live", cache=LLMCache(":memory:", transcripts=None),
                       max_retries=0)
        assert llm.backend.timeout == 1.5
        seconds, exc = _timed_call(llm.backend)
        assert seconds < 5 and isinstance(exc, LLMEndpointError), (seconds, exc)
        assert make_llm(f"openai:m@{srv.base_url}?timeout=1.5", "live", cache=LLMCache(":memory:", transcripts=None),
                        timeout=7).backend.timeout == 7  # the command line's wins
    monkeypatch.setenv("KGQA_LLM_TIMEOUT", "42")
    assert OpenAIBackend("m", base_url="http://127.0.0.1:9/v1").timeout == 42
    monkeypatch.delenv("KGQA_LLM_TIMEOUT")
    assert OpenAIBackend("m", base_url="http://127.0.0.1:9/v1").timeout == 300


def test_kgqa_run_llm_timeout_bounds_a_trickling_server(tmp_path):
    out = tmp_path / "io.jsonl"
    with Misbehaving("drip") as srv:
        t = time.monotonic()
        p = _kgqa(["--method", "io", "--dataset", "tiny:films", "--limit", "2", "--llm", f"openai:fake@{srv.base_url}",
                   "--llm-mode", "auto", "--llm-timeout", "2", "--no-transcripts", "--quiet", "--out", str(out)],
                  _env(tmp_path), timeout=240)
        seconds = time.monotonic() - t
    assert p.returncode == 3, p.stderr[-2000:]
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("error: 2 questions not answered") and "gave no complete answer within 2 s" in line, line
    assert read_records(out) == [] and seconds < 60, seconds


# ------------------------------------------------------------------------------------ a huge reply
def test_a_huge_reply_is_cut_before_the_cache_and_the_record(tmp_path):
    huge = "Answer: {Christopher Nolan} " + "and so on " * 300_000  # 3 MB, whatever max_tokens said
    with FakeChatServer(reply=lambda m: huge) as srv:
        cache = LLMCache(tmp_path / "c.sqlite", transcripts=tmp_path / "tr")
        llm = make_llm("openai:fake", "auto", cache=cache, base_url=srv.base_url, max_retries=0)
        ds = load_dataset("tiny:films", limit=1)
        (rec,) = run("io", ds, Context(llm), tmp_path / "io.jsonl", progress=False)
    assert llm.max_reply_chars == 65536
    assert rec["llm"]["truncated"] == 1 and len(rec["response"]) == 65536 and rec["response"] == huge[:65536]
    assert (tmp_path / "io.jsonl").stat().st_size < 400_000
    (transcript,) = (tmp_path / "tr").glob("*.jsonl")
    assert transcript.stat().st_size < 100_000, "a huge line was written into the transcript"
    (row,) = cache._conn().execute("SELECT length(text), finish_reason FROM responses").fetchall()
    assert row == (65536, "truncated")
