"""The openai backend against a real OpenAI-compatible server on 127.0.0.1 (llama.cpp's server
running the small embedded model), not a mock."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from kgqa_lib.llm import models
from kgqa_lib.llm.chat import LLMCache, make_llm, track_usage

pytestmark = pytest.mark.server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server():
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] not installed")
    path = models.model_path("qwen2.5-0.5b", progress=False)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", "qwen-small",
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "2", "--verbose", "false"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("llama_cpp.server exited: " + proc.stderr.read().decode()[-2000:])
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        raise RuntimeError("llama_cpp.server did not come up in 120 s")
    yield url + "/v1"
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_openai_backend_against_local_server(llama_server, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cache = LLMCache(tmp_path / "c.sqlite", transcripts=tmp_path / "tr")
    llm = make_llm("openai:qwen-small", "auto", cache=cache, base_url=llama_server, timeout=120)
    with track_usage() as u:
        r = llm.chat("What is the capital of France? Answer with one word.", max_tokens=8)
        again = llm.chat("What is the capital of France? Answer with one word.", max_tokens=8)
    assert "paris" in r.text.lower()
    assert r.prompt_tokens > 5 and r.completion_tokens >= 1 and not r.cache_hit
    assert again.cache_hit and again.text == r.text
    assert (u.calls, u.cache_hits) == (2, 1)
    assert llm.model_id == f"openai:qwen-small@{llama_server}"  # the endpoint is part of the id
    assert (tmp_path / "tr" / f"openai_qwen-small_{llama_server.replace(':', '_').replace('/', '_')}.jsonl").exists()


def test_concurrent_calls_through_the_pool(llama_server, tmp_path):
    cache = LLMCache(tmp_path / "c.sqlite", transcripts=None)
    llm = make_llm("openai:qwen-small", "auto", cache=cache, base_url=llama_server, timeout=120)
    reqs = [llm.request(f"Say the number {i} and nothing else.", max_tokens=6) for i in range(4)]
    out = llm.map(reqs, workers=4)
    assert len(out) == 4 and all(not r.cache_hit for r in out)
    assert sum(str(i) in r.text for i, r in enumerate(out)) >= 3


def test_runner_workers_against_the_llama_server(llama_server, tmp_path):
    """The runner's concurrent questions through a real model server (the server queues them)."""
    from kgqa_lib.data.datasets import load_dataset
    from kgqa_lib.evaluate.runner import run
    from kgqa_lib.methods import Context

    llm = make_llm("openai:qwen-small", "auto", cache=LLMCache(tmp_path / "c.sqlite", transcripts=None),
                   base_url=llama_server, timeout=120)
    ds = load_dataset("tiny:films", limit=2)
    recs = run("io", ds, Context(llm=llm, seed=0), tmp_path / "r.jsonl", progress=False, workers=2)
    assert [r["qid"] for r in recs] == [q.qid for q in ds]
    assert all(r["error"] is None and r["llm"]["calls"] == 1 and not r["llm"]["cache_hits"] for r in recs)
