"""No API key leaks: with a sentinel OPENAI_API_KEY, every path — the OpenAI backend against an
unreachable port and against a real local HTTP server that answers 200/401/500 (and echoes the
Authorization header in its errors, as some proxies do), exception str/repr/tracebacks, log
records at DEBUG, captured stdout/stderr, cache rows, transcripts, request canonical forms, run
records — is searched for the sentinel. And .gitignore covers secrets files and local caches."""

from __future__ import annotations

import http.server
import json
import logging
import socket
import subprocess
import threading
import traceback

import pytest

from kgqa_lib.data.datasets import Dataset, Question
from kgqa_lib.evaluate.runner import run
from kgqa_lib.llm.chat import LLM, ChatRequest, LLMEndpointError, LLMCache, OpenAIBackend, ReplayMiss, make_llm
from kgqa_lib.methods import Context
from kgqa_lib.paths import repo_root

SENTINEL = "sk-kgqa-SENTINEL-7f3a9c1e5b2d4680aa11"


class _Handler(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        auth = self.headers.get("authorization", "")
        _Handler.seen.append(auth)
        if self.path.startswith("/401/"):
            code, body = 401, {"error": {"message": f"Incorrect API key provided: {auth}", "code": "invalid_api_key"}}
        elif self.path.startswith("/500/"):
            code, body = 500, {"error": {"message": f"upstream failed for {auth}"}}
        else:
            code, body = 200, {"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
                               "choices": [{"index": 0, "message": {"role": "assistant", "content": "{Paris}"},
                                            "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def sentinel(monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                "KGQA_LLM_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    caplog.set_level(logging.DEBUG)
    _Handler.seen.clear()
    return SENTINEL


def _dead_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _assert_clean(*texts):
    for t in texts:
        assert SENTINEL not in t


def _files_text(folder) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("where", ["unreachable", "401", "500"])
def test_failing_endpoint_never_shows_the_key(sentinel, server, where, caplog, capfd):
    base = f"http://127.0.0.1:{_dead_port()}/v1" if where == "unreachable" else f"{server}/{where}/v1"
    backend = OpenAIBackend("m", base_url=base, timeout=3, max_retries=0)
    with pytest.raises(Exception) as ei:
        backend.complete(ChatRequest("openai:m", (("user", "capital of France?"),), max_tokens=5))
    exc = ei.value
    if where != "unreachable":
        assert _Handler.seen[-1] == f"Bearer {SENTINEL}"  # the key was really sent, and echoed back
        assert isinstance(exc, LLMEndpointError) and exc.status_code == int(where)
        assert "<redacted API key>" in str(exc) and where in str(exc)
        assert exc.__context__ is None and exc.__cause__ is None
    logging.getLogger("kgqa").exception("the call failed", exc_info=exc)  # as a user's logger would
    out, err = capfd.readouterr()
    _assert_clean(str(exc), repr(exc), "".join(traceback.format_exception(exc)), caplog.text, out, err,
                  repr(backend), repr(vars(backend)))


def test_recorded_calls_hold_no_key(sentinel, server, tmp_path, caplog, capfd):
    cache = LLMCache(tmp_path / "cache" / "llm_cache.sqlite", transcripts=tmp_path / "tr")
    llm = make_llm("openai:m", "auto", cache=cache, base_url=f"{server}/ok/v1", max_retries=0, timeout=5)
    r = llm.chat("capital of France?", max_tokens=5)
    assert r.text == "{Paris}" and _Handler.seen == [f"Bearer {SENTINEL}"]
    request = llm.request("capital of France?", max_tokens=5)
    replay = LLM(None, "openai:m", LLMCache(tmp_path / "other.sqlite", transcripts=None), "replay")
    with pytest.raises(ReplayMiss) as miss:
        replay.chat("never recorded")
    cache._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    out, err = capfd.readouterr()
    _assert_clean(request.canonical(), request.key, repr(request), repr(r), repr(llm), json.dumps(cache.stats()),
                  str(miss.value), _files_text(tmp_path), caplog.text, out, err)


@pytest.mark.parametrize("where", ["ok", "401"])
def test_run_records_hold_no_key(sentinel, server, tmp_path, where, caplog, capfd):
    llm = make_llm("openai:m", "auto", cache=LLMCache(tmp_path / "c.sqlite", transcripts=tmp_path / "tr"),
                   base_url=f"{server}/{where}/v1", max_retries=0, timeout=5)
    ds = Dataset("toy", [Question("q0", "What is the capital of France?", ["Paris"])])
    out_file = tmp_path / "runs" / "toy.jsonl"
    if where == "ok":
        records = run("io", ds, Context(llm), out_file, progress=False)
        assert records[0]["prediction"] == ["Paris"]
        shown = json.dumps(records)
    else:  # an endpoint failure is not an answer: no record, and the run's summary has the key redacted
        from kgqa_lib.evaluate.runner import RunIncomplete, read_records

        with pytest.raises(RunIncomplete) as ei:
            run("io", ds, Context(llm), out_file, progress=False)
        assert read_records(out_file) == [] and "<redacted API key>" in str(ei.value)
        shown = str(ei.value) + "".join(traceback.format_exception(ei.value))
    out, err = capfd.readouterr()
    _assert_clean(shown, _files_text(tmp_path), caplog.text, out, err)


def test_gitignore_covers_secrets_and_local_caches():
    root = repo_root()
    ignored = [".env", ".env.local", "config/.env.production", "openai.key", "server.pem", "secrets.yaml",
               "secrets/token.txt", "credentials.json", "api_key.txt", "llm_cache.sqlite", "llm_cache.sqlite-wal",
               "embeddings.sqlite-shm", "llm_cache.sqlite.corrupt-20250101T000000-1", ".cache/kgqa/llm_cache.sqlite",
               ".venv/bin/python", "results/runs/x.jsonl"]
    kept = ["kgqa_lib/llm/chat.py", "data/llm_cache/qwen2.5-coder-1.5b-instruct-q4_k_m.jsonl", ".env.example",
            "tests/unit/test_secrets.py", "README.md"]
    for path in ignored:
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=root).returncode == 0, f"{path} is not ignored"
    for path in kept:
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=root).returncode == 1, f"{path} is ignored"
