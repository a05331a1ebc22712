"""The endpoint is part of an OpenAI-compatible model's identity (issue 18, item 12), and
``kgqa doctor --llm`` leaves the committed transcripts alone (item 13b). Real HTTP servers on
127.0.0.1 (``FakeChatServer``, in this process), no mocks."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from kgqa_lib import doctor
from kgqa_lib.evaluate.runner import config_hash, default_run_path
from kgqa_lib.llm.chat import LLMCache, ReplayMiss, make_llm
from kgqa_lib.paths import data_dir
from kgqa_lib.servers import FakeChatServer


@pytest.fixture
def no_openai_env(monkeypatch):
    for var in ("KGQA_LLM_BASE_URL", "OPENAI_BASE_URL", "KGQA_LLM_MODEL", "KGQA_LLM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")


def test_two_servers_with_the_same_model_name_do_not_share_answers(no_openai_env, tmp_path):
    cache = LLMCache(tmp_path / "c.sqlite", transcripts=tmp_path / "tr")
    with FakeChatServer(reply=lambda m: "{from A}") as a, FakeChatServer(reply=lambda m: "{from B}") as b:
        llm_a = make_llm("openai:same-name", "auto", cache=cache, base_url=a.base_url, max_retries=0)
        llm_b = make_llm("openai:same-name", "auto", cache=cache, base_url=b.base_url, max_retries=0)
        ra = llm_a.chat("Who directed Inception?", max_tokens=8)
        rb = llm_b.chat("Who directed Inception?", max_tokens=8)
        assert ra.text == "{from A}" and rb.text == "{from B}", "server B was answered from A's cache"
        assert not rb.cache_hit and (a.requests, b.requests) == (1, 1)
        assert llm_a.chat("Who directed Inception?", max_tokens=8).cache_hit and a.requests == 1  # still cached
    assert llm_a.model_id == f"openai:same-name@http://127.0.0.1:{a.port}/v1"
    assert llm_a.model_id != llm_b.model_id
    # replay (no server, no backend) finds each endpoint's own recording, and misses for a third one
    assert make_llm("openai:same-name", "replay", cache=cache, base_url=b.base_url).chat(
        "Who directed Inception?", max_tokens=8).text == "{from B}"
    with pytest.raises(ReplayMiss):
        make_llm("openai:same-name", "replay", cache=cache, base_url="http://127.0.0.1:1/v1").chat(
            "Who directed Inception?", max_tokens=8)
    # one transcript per endpoint, with a file-system-safe name
    names = sorted(p.name for p in (tmp_path / "tr").iterdir())
    assert names == sorted(f"openai_same-name_http___127.0.0.1_{s.port}_v1.jsonl" for s in (a, b))
    # the endpoint is in the run config (hash) and the default run file name
    assert config_hash({"model_id": llm_a.model_id}) != config_hash({"model_id": llm_b.model_id})
    path = default_run_path("io", "tiny:films", llm_a.model_id)
    assert path.name == f"tiny-films__io__openai-same-name-http---127.0.0.1-{a.port}-v1.jsonl"


def test_the_endpoint_id_has_no_credentials_and_openai_keeps_the_old_id(no_openai_env, monkeypatch, tmp_path):
    from kgqa_lib.llm.chat import endpoint_id, openai_model_id

    assert openai_model_id("gpt-4o-mini") == "openai:gpt-4o-mini"  # recordings made before keep replaying
    for same in ("https://api.openai.com/v1", "https://API.openai.com:443/v1/", "https://api.openai.com/v1?x=1"):
        assert openai_model_id("gpt-4o-mini", same) == "openai:gpt-4o-mini"
    cache = LLMCache(tmp_path / "c.sqlite", transcripts=None)
    assert make_llm("openai:gpt-x", "replay", cache=cache).model_id == "openai:gpt-x"
    mid = openai_model_id("m", "http://alice:s3cret@LocalHost:80//v1/?api_key=k3y#frag")
    assert mid == "openai:m@http://localhost/v1" and "s3cret" not in mid and "k3y" not in mid
    assert endpoint_id("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
    monkeypatch.setenv("KGQA_LLM_BASE_URL", "http://127.0.0.1:11434/v1")  # as the CLI and notebooks set it
    assert make_llm("openai:llama3", "replay", cache=cache).model_id == \
        "openai:llama3@http://127.0.0.1:11434/v1"
    monkeypatch.delenv("KGQA_LLM_BASE_URL")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")  # the openai client's own variable
    assert openai_model_id("m") == "openai:m@http://127.0.0.1:8000/v1"


def test_long_endpoint_urls_give_short_unique_file_names(tmp_path):
    from kgqa_lib.llm.chat import _slug, openai_model_id

    ids = [openai_model_id("m", f"https://proxy.example.org/{'x' * 300}/{i}/v1") for i in range(2)]
    runs = [default_run_path("io", "tiny:films", i).name for i in ids]
    slugs = [_slug(i) for i in ids]
    assert len(set(runs)) == len(set(slugs)) == 2
    assert all(len(n) < 200 for n in runs + slugs)
    for n in slugs:
        (tmp_path / f"{n}.jsonl").write_text("")  # a valid file name


def _snapshot(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_doctor_llm_check_writes_no_transcript(no_openai_env, tmp_cache, monkeypatch):
    """``kgqa doctor --llm openai:…`` probes the endpoint with one call: data/llm_cache/ (committed)
    stays byte-identical and no cache of the user's is written either."""
    committed = data_dir() / "llm_cache"
    before = _snapshot(committed)
    model = f"doctor-probe-{uuid.uuid4().hex[:8]}"
    try:
        with FakeChatServer(reply=lambda m: "ok") as srv:
            monkeypatch.setenv("KGQA_LLM_BASE_URL", srv.base_url)
            check = doctor._timed("llm endpoint", doctor._openai(f"openai:{model}"), "fix")
            assert check.ok and srv.requests == 1, check.detail
        assert _snapshot(committed) == before
        assert not list(tmp_cache.rglob("llm_cache.sqlite*"))
    finally:  # on the old code the probe wrote a transcript into the committed folder: remove it
        for p in committed.glob(f"*{model}*"):
            p.unlink()
