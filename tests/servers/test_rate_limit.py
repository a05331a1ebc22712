"""The client-side rate limit of the openai backend against the fake OpenAI-compatible server:
one process-wide limiter per endpoint and model, and a 429's Retry-After holds every worker."""

from __future__ import annotations

import threading
import time

import pytest

from kgqa_lib.llm import chat as llm_mod
from kgqa_lib.llm.chat import LLMCache, make_llm
from kgqa_lib.servers import FakeChatServer

pytestmark = pytest.mark.server


@pytest.fixture(autouse=True)
def _fresh_limiters(monkeypatch):
    monkeypatch.setattr(llm_mod, "_LIMITERS", {})
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("KGQA_LLM_RPM", raising=False)
    monkeypatch.delenv("KGQA_LLM_TPM", raising=False)


def _llm(server, tmp_path, name="openai:fake", **kw):
    return make_llm(name, "live", cache=LLMCache(tmp_path / "c.sqlite", transcripts=None),
                    base_url=server.base_url, **kw)


def test_requests_per_minute_are_shared_by_all_workers(tmp_path):
    with FakeChatServer(latency=0.0) as server:
        llm = _llm(server, tmp_path, "openai:fake?rpm=240")  # 4 a second, burst of 4
        other = _llm(server, tmp_path, "openai:fake?rpm=240")  # another backend, same endpoint: same limiter
        limiter = llm.backend.limiter
        assert limiter is other.backend.limiter
        # the limiter's own grant times (the clock reading under its lock when a request is let go):
        # the server's arrival times add the HTTP send's scheduling delays, which a loaded machine
        # stretches for the first requests (a 12th arrival 1.5 s after a late 1st was seen under load)
        seen, grants = threading.local(), []

        def clock():
            seen.now = time.monotonic()
            return seen.now

        def acquire(tokens=0.0, _acquire=limiter.acquire):
            waited = _acquire(tokens)
            grants.append(seen.now)
            return waited

        limiter.clock, limiter.acquire = clock, acquire
        threads = [threading.Thread(target=(llm if i % 2 else other).chat, args=(f"q{i}",)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(server.times) == 12
        times = sorted(grants)
        assert len(times) == 12
        # 4 at once, then one every 0.25 s: the 12th no earlier than 2 s after the first
        assert times[-1] - times[0] >= 1.9
        assert all(times[i + 8] - times[i] >= 0.9 for i in range(len(times) - 8))  # ≤ burst + rate·T in any T
        assert limiter.waited >= 1.9  # the 8 after the burst waited (the last alone about 2 s)


def test_retry_after_holds_every_worker(tmp_path):
    # the first request gets 429 with Retry-After: 1.5; a request from another thread sent meanwhile waits too
    with FakeChatServer(latency=0.0, fail=lambda n: 429 if n == 1 else None, retry_after=1.5) as server:
        llm = _llm(server, tmp_path, max_retries=2)
        first = threading.Thread(target=llm.chat, args=("first",))
        first.start()
        while server.requests < 1:
            time.sleep(0.01)
        time.sleep(0.2)  # the 429 is back: the limiter is paused
        t = time.monotonic()
        assert llm.chat("second").text.startswith("Answer")
        first.join()
        assert time.monotonic() - t >= 1.1
        assert server.requests == 3  # the 429, its retry, the second question
        assert min(server.times[1:]) - server.times[0] >= 1.4
