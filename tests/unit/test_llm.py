import json
import threading

import pytest

from kgqa_lib.llm.chat import LLM, ChatRequest, LLMCache, ReplayMiss, make_llm, resolve_mode, track_usage


class EchoBackend:
    """A deterministic stand-in backend for testing the cache logic (the real backends are
    exercised in tests/live and tests/servers)."""

    model_id = "echo"

    def __init__(self):
        self.calls = 0

    def complete(self, req: ChatRequest):
        self.calls += 1
        text = f"{req.messages[-1][1]}#{req.temperature}#{req.sample_index}#{self.calls}"
        return {"text": text, "prompt_tokens": 10, "completion_tokens": 3, "finish_reason": "stop"}


def make(tmp_path, mode="auto", backend=None):
    cache = LLMCache(tmp_path / "c.sqlite", transcripts=tmp_path / "tr")
    b = backend or EchoBackend()
    return LLM(b, b.model_id, cache, mode), b


def test_key_is_canonical_and_covers_every_field():
    base = ChatRequest("m", (("user", "hi"),))
    assert base.key == ChatRequest("m", (("user", "hi"),)).key
    variants = [
        ChatRequest("m2", (("user", "hi"),)),
        ChatRequest("m", (("user", "hi!"),)),
        ChatRequest("m", (("system", "hi"),)),
        ChatRequest("m", (("user", "hi"),), temperature=0.7),
        ChatRequest("m", (("user", "hi"),), top_p=0.9),
        ChatRequest("m", (("user", "hi"),), max_tokens=5),
        ChatRequest("m", (("user", "hi"),), stop=("\n",)),
        ChatRequest("m", (("user", "hi"),), seed=1),
        ChatRequest("m", (("user", "hi"),), sample_index=1),
    ]
    keys = {v.key for v in variants} | {base.key}
    assert len(keys) == len(variants) + 1
    assert json.loads(base.canonical())["messages"] == [{"role": "user", "content": "hi"}]


def test_auto_mode_caches_and_counts(tmp_path):
    llm, b = make(tmp_path)
    with track_usage() as u:
        r1 = llm.chat("q", max_tokens=8)
        r2 = llm.chat("q", max_tokens=8)
    assert (r1.text, r1.cache_hit, r2.cache_hit) == (r2.text, False, True)
    assert b.calls == 1
    assert (u.calls, u.cache_hits, u.prompt_tokens, u.completion_tokens) == (2, 1, 20, 6)


def test_self_consistency_samples_are_distinct_and_replay_identically(tmp_path):
    llm, b = make(tmp_path)
    first = [llm.chat("q", temperature=0.7, sample_index=i).text for i in range(3)]
    assert len(set(first)) == 3
    replay = LLM(None, "echo", LLMCache(tmp_path / "c.sqlite", transcripts=tmp_path / "tr"), "replay")
    assert [replay.chat("q", temperature=0.7, sample_index=i).text for i in range(3)] == first


def test_replay_miss_names_key_and_how_to_record(tmp_path):
    llm, _ = make(tmp_path, mode="replay")
    with pytest.raises(ReplayMiss) as ei:
        llm.chat("never recorded question")
    msg = str(ei.value)
    req = llm.request("never recorded question")
    assert req.key[:16] in msg and "LLM_MODE='auto'" in msg and "never recorded question" in msg


def test_live_mode_always_calls(tmp_path):
    llm, b = make(tmp_path, mode="live")
    llm.chat("q")
    llm.chat("q")
    assert b.calls == 2


def test_transcripts_rebuild_a_fresh_cache(tmp_path):
    llm, _ = make(tmp_path)
    text = llm.chat("remember me").text
    lines = (tmp_path / "tr" / "echo.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["response"]["text"] == text
    # a truncated line (an interrupted writer) is skipped, not fatal
    with open(tmp_path / "tr" / "echo.jsonl", "a") as fh:
        fh.write('{"key": "abc", "requ')
    fresh = LLM(None, "echo", LLMCache(tmp_path / "other.sqlite", transcripts=tmp_path / "tr"), "replay")
    assert fresh.chat("remember me").text == text


def test_an_edited_transcript_entry_is_not_served(tmp_path):
    llm, _ = make(tmp_path)
    llm.chat("original prompt")
    f = tmp_path / "tr" / "echo.jsonl"
    f.write_text(f.read_text().replace("original prompt", "edited prompt"))
    fresh = LLM(None, "echo", LLMCache(tmp_path / "other.sqlite", transcripts=tmp_path / "tr"), "replay")
    with pytest.raises(ReplayMiss):
        fresh.chat("edited prompt")


def test_map_is_concurrent_safe_and_tracks_usage(tmp_path):
    llm, b = make(tmp_path)
    reqs = [llm.request(f"q{i}") for i in range(20)]
    with track_usage() as u:
        out = llm.map(reqs, workers=4)
    assert [r.text.split("#")[0] for r in out] == [f"q{i}" for i in range(20)]
    assert u.calls == 20 and b.calls == 20


def test_modes_resolve_from_env(monkeypatch):
    monkeypatch.setenv("KGQA_LLM_MODE", "replay")
    assert resolve_mode(None) == "replay"
    assert resolve_mode("live") == "live"
    with pytest.raises(ValueError):
        resolve_mode("sometimes")


def test_replay_mode_needs_no_model_or_key(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cache = LLMCache(tmp_path / "c.sqlite", transcripts=None)
    llm = make_llm("openai:gpt-x", "replay", cache=cache)
    assert llm.backend is None and llm.model_id == "openai:gpt-x"
    local = make_llm("local", "replay", cache=cache)
    assert local.backend._llama is None  # nothing loaded


def test_a_hit_made_without_transcripts_is_transcribed_when_recording(tmp_path):
    """An answer cached by a run that kept it on this machine (``kgqa run --no-transcripts``) is
    appended to the transcript the first time a recording run (auto mode) uses it — once."""
    b = EchoBackend()
    LLM(b, "echo", LLMCache(tmp_path / "c.sqlite", transcripts=None), "auto").chat("explored")
    tr = tmp_path / "tr" / "echo.jsonl"
    LLM(None, "echo", LLMCache(tmp_path / "c.sqlite", transcripts=tmp_path / "tr"), "replay").chat("explored")
    assert not tr.exists()  # replay (the tests) never writes
    rec = LLM(None, "echo", LLMCache(tmp_path / "c.sqlite", transcripts=tmp_path / "tr"), "auto")
    rec.chat("explored")
    rec.chat("explored")
    assert len(tr.read_text().splitlines()) == 1 and b.calls == 1
    fresh = LLM(None, "echo", LLMCache(tmp_path / "other.sqlite", transcripts=tmp_path / "tr"), "replay")
    assert fresh.chat("explored").text.startswith("explored#")
    # a cache that already holds the transcript's entries does not append them again
    again = LLM(None, "echo", LLMCache(tmp_path / "other.sqlite", transcripts=tmp_path / "tr"), "auto")
    again.chat("explored")
    assert len(tr.read_text().splitlines()) == 1


def test_a_reverted_transcript_is_refilled_by_the_next_recording(tmp_path):
    """`git checkout data/llm_cache` drops entries the SQLite cache still holds; a recording run
    must append them again, or the committed notebooks would not replay."""
    import os

    llm, b = make(tmp_path)
    llm.chat("kept")
    tr = tmp_path / "tr" / "echo.jsonl"
    first = tr.read_text()
    llm.chat("dropped later")
    tr.write_text(first)  # the revert
    os.utime(tr, (1, 1))
    rec = LLM(None, "echo", LLMCache(tmp_path / "c.sqlite", transcripts=tmp_path / "tr"), "auto")
    rec.chat("dropped later")
    rec.chat("kept")
    lines = tr.read_text().splitlines()
    assert len(lines) == 2 and b.calls == 2
    fresh = LLM(None, "echo", LLMCache(tmp_path / "new.sqlite", transcripts=tmp_path / "tr"), "replay")
    assert fresh.chat("dropped later").text.startswith("dropped later#")
