"""The embedded model's opt-in prefix-state cache (``local?prefix_cache=N``): option parsing, the
longest-prefix / LRU bookkeeping and the backend's accounting without a model, and (when the 0.5B
GGUF is present) cache on vs off on the real model."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kgqa_lib.errors import UsageError
from kgqa_lib.llm import chat
from kgqa_lib.llm.chat import (ChatRequest, LLMCache, LocalBackend, PrefixStateCache, common_prefix, make_llm,
                               reused_tokens, split_llm_name)


def _replay(name: str):
    return make_llm(name, "replay", cache=LLMCache(":memory:", transcripts=None))


# ------------------------------------------------------------------------------------- options
def test_prefix_cache_options(monkeypatch):
    monkeypatch.delenv("KGQA_LLM_PREFIX_CACHE", raising=False)
    monkeypatch.delenv("KGQA_LLM_PREFIX_CACHE_MIN", raising=False)
    b = _replay("local").backend
    assert (b.prefix_cache, b.prefix_cache_min, b._states) == (0, chat.PREFIX_CACHE_MIN, None)  # off by default
    assert split_llm_name("local:qwen2.5-0.5b?prefix_cache=4&prefix_cache_min=50&threads=2") == (
        "local:qwen2.5-0.5b", {"prefix_cache": 4, "prefix_cache_min": 50, "threads": 2})
    llm = _replay("local:qwen2.5-0.5b?prefix_cache=4&prefix_cache_min=50")
    assert (llm.backend.prefix_cache, llm.backend.prefix_cache_min) == (4, 50)
    assert llm.backend._states.capacity == 4 and llm.backend._states.min_gain == 50
    assert llm.model_id == "qwen2.5-0.5b-instruct-q4"  # options never reach ids, keys or configs
    assert _replay("local?prefix_cache=0").backend._states is None

    monkeypatch.setenv("KGQA_LLM_PREFIX_CACHE", "3")
    monkeypatch.setenv("KGQA_LLM_PREFIX_CACHE_MIN", "20")
    b = _replay("local").backend
    assert (b.prefix_cache, b.prefix_cache_min) == (3, 20)
    b = _replay("local?prefix_cache=2").backend  # the name wins over the environment
    assert (b.prefix_cache, b.prefix_cache_min) == (2, 20)


@pytest.mark.parametrize("name", ["local?prefix_cache=-1", "local?prefix_cache=many", "local?prefix_cache=1.5",
                                  "local?prefix_cache=", "local?prefix_cache_min=0", "local?prefix_size=2",
                                  "openai:gpt-4o-mini?prefix_cache=2"])
def test_prefix_cache_bad_options(name):
    with pytest.raises(UsageError) as err:
        split_llm_name(name)
    assert "\n" not in str(err.value) and "prefix" in str(err.value)


@pytest.mark.parametrize("var,value", [("KGQA_LLM_PREFIX_CACHE", "lots"), ("KGQA_LLM_PREFIX_CACHE", "-2"),
                                       ("KGQA_LLM_PREFIX_CACHE_MIN", "0")])
def test_prefix_cache_bad_environment(monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    with pytest.raises(UsageError, match=f"{var} expects a whole number ≥ [01].*, got {value!r}") as err:
        _replay("local")
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------------ lookup bookkeeping
def test_common_prefix_and_reused_tokens():
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix(np.array([1, 2, 3], dtype=np.intc), [1, 2, 3, 4]) == 3
    assert common_prefix([], [1]) == 0 and common_prefix([5], [1]) == 0
    # llama-cpp-python's generate(): a whole-prompt match re-evaluates the last token ...
    assert reused_tokens([1, 2, 3, 9], [1, 2, 3]) == 2
    assert reused_tokens([1, 2, 3], [1, 2, 3], fresh_logits=False) == 2
    # ... unless the context is exactly the prompt, with logits from a live decode
    assert reused_tokens([1, 2, 3], [1, 2, 3], fresh_logits=True) == 3
    assert reused_tokens([1, 2, 7], [1, 2, 3, 4]) == 2 and reused_tokens([], [1, 2]) == 0


def test_lookup_takes_the_longest_prefix_and_beats_the_live_context_by_min_gain():
    c = PrefixStateCache(capacity=4, min_gain=3)
    c.add([1, 2, 3, 4, 5, 6], "a")
    c.add([1, 2, 3, 9, 9, 9], "b")
    c.add([7, 7, 7, 7], "c")
    assert c.lookup([1, 2, 3, 4, 5, 0]) == ("a", 5)
    assert c.lookup([1, 2, 3, 9, 9, 0]) == ("b", 5)
    assert c.lookup([7, 7, 7, 1]) == ("c", 3)
    assert c.lookup([1, 2, 3, 4, 5, 0], live=2) == ("a", 5)  # 5 ≥ 2 + 3
    assert c.lookup([1, 2, 3, 4, 5, 0], live=3) is None  # 5 < 3 + 3: the live context is good enough
    assert c.lookup([8, 8, 8, 8]) is None  # nothing shared
    assert PrefixStateCache(2, 1).lookup([1, 2]) is None  # empty
    assert c.best([1, 2, 3, 4]) == ("a", 4) and c.best([0]) in (("a", 0), ("b", 0), ("c", 0))


def test_ties_go_to_the_most_recently_used():
    c = PrefixStateCache(capacity=3, min_gain=2)
    c.add([1, 2, 3, 4], "old")
    c.add([1, 2, 3, 5], "new")
    assert c.lookup([1, 2, 3, 6]) == ("new", 3)
    assert c.lookup([1, 2, 3, 4, 0]) == ("old", 4)  # longer wins; "old" is now the most recent
    assert c.lookup([1, 2, 3, 6]) == ("old", 3)


def test_lru_eviction_counts_lookups_as_use():
    c = PrefixStateCache(capacity=2, min_gain=2)
    c.add([1, 1, 1], "a")
    c.add([2, 2, 2], "b")
    assert c.lookup([1, 1, 1, 0]) == ("a", 3)  # a used: b is now the least recently used
    c.add([3, 3, 3], "c")
    assert len(c) == 2 and c.values() == ["a", "c"]
    c.add([4, 4, 4], "d")
    assert c.values() == ["c", "d"]


def test_dominated_and_short_states_are_not_kept():
    c = PrefixStateCache(capacity=4, min_gain=3)
    assert c.add([1, 2, 3], "short prompt") is True
    assert c.add([1, 2, 3, 4, 5], "longer") is True  # the first is a prefix of this one: dropped
    assert c.values() == ["longer"]
    assert c.add([1, 2, 3, 4], "shorter") is True  # not a prefix-superset: both kept
    assert c.values() == ["longer", "shorter"]
    assert c.add([9, 9], "too short to ever beat the live context by 3") is False
    assert len(c) == 2
    tokens = np.array([5, 6, 7, 8], dtype=np.intc)
    c.add(tokens, "copied")
    tokens[:] = 0  # the live context changes after the save: the entry keeps its own copy
    assert c.lookup([5, 6, 7, 8, 1]) == ("copied", 4)
    with pytest.raises(ValueError):
        PrefixStateCache(0)


# ------------------------------------------------- the backend's hook and accounting, no model
class FakeLlama:
    """Just enough of llama_cpp.Llama: the chat handler tokenizes (one token per character) and calls
    create_completion with the tokens; generation reuses the common prefix as Llama.generate does,
    appends a 3-token answer (the last one, as in llama.cpp, not evaluated)."""

    def __init__(self):
        self.input_ids = np.zeros(4096, dtype=np.intc)
        self.n_tokens = 0
        self._requires_eval = True
        self.evaluated: list[int] = []
        self.loads = 0

    @property
    def _input_ids(self):
        return self.input_ids[: self.n_tokens]

    def create_chat_completion(self, messages, **kwargs):
        tokens = [ord(ch) for m in messages for ch in f"<{m['role']}>{m['content']}"]
        self.create_completion(prompt=tokens, **kwargs)
        return {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(tokens), "completion_tokens": 3}}

    def create_completion(self, prompt, **kwargs):
        reused = reused_tokens(self._input_ids, prompt, fresh_logits=not self._requires_eval)
        self.evaluated.append(len(prompt) - reused)
        context = list(prompt) + [1, 2]
        self.input_ids[: len(context)] = context
        self.n_tokens, self._requires_eval = len(context), False

    def load_state(self, state):
        self.input_ids = state.input_ids.copy()
        self.n_tokens, self._requires_eval = state.n_tokens, True
        self.loads += 1


def _fake_backend(monkeypatch, prefix_cache: int, prefix_cache_min: int = 20) -> tuple[LocalBackend, FakeLlama]:
    monkeypatch.setattr(chat, "_trimmed_state", lambda llama: SimpleNamespace(
        input_ids=llama.input_ids.copy(), n_tokens=llama.n_tokens, llama_state=b"\0" * (10 * llama.n_tokens),
        scores=np.zeros((1, 8), dtype=np.single), seed=0))
    b = LocalBackend("qwen2.5-0.5b", n_threads=1, prefix_cache=prefix_cache, prefix_cache_min=prefix_cache_min)
    fake = FakeLlama()
    b._llama = fake
    if b._states is not None:
        b._hook(fake)
    return b, fake


SYSTEM = "You translate questions into queries. " * 4  # 152 characters, shared by the generation calls
CALLS = [(("system", SYSTEM), ("user", "Question: who directed Inception")),
         (("system", "Re-rank these."), ("user", "a b c")),
         (("system", SYSTEM), ("user", "Question: who wrote Memento")),
         (("system", "Re-rank these."), ("user", "d e f")),
         (("system", SYSTEM), ("user", "Question: who scored Tenet"))]


def _run(b: LocalBackend) -> None:
    for messages in CALLS:
        b.complete(ChatRequest(b.model_id, messages))


def test_backend_off_counts_reuse_and_saves_nothing(monkeypatch):
    b, fake = _fake_backend(monkeypatch, prefix_cache=0)
    assert "create_completion" not in vars(fake)  # no hook: the call path is the stock one
    _run(b)
    s = b.prefix_stats()
    assert s["calls"] == 5 and s["evaluated"] == sum(fake.evaluated)
    assert s["prompt_tokens"] == s["evaluated"] + s["reused"]
    assert (s["state_loads"], s["state_saves"], s["states"], s["reused_from_states"], fake.loads) == (0, 0, 0, 0, 0)


def test_backend_on_loads_the_generation_prefix_back(monkeypatch):
    off, fake_off = _fake_backend(monkeypatch, prefix_cache=0)
    _run(off)
    on, fake_on = _fake_backend(monkeypatch, prefix_cache=2)
    _run(on)
    s, s_off = on.prefix_stats(), off.prefix_stats()
    assert s["evaluated"] == sum(fake_on.evaluated)  # the accounting mirrors what generate() evaluated
    assert s["state_loads"] == fake_on.loads == 2  # the 2nd and 3rd generation call
    assert s["state_saves"] == 5 and s["states"] == 2  # capacity 2, least recently used dropped
    assert s["state_bytes"] > 0 and s["prompt_tokens"] == s_off["prompt_tokens"]
    shared = len(f"<system>{SYSTEM}<user>Question: who ")
    # each load saves what the re-rank call in between had displaced: the shared prefix less the
    # live context's ("<system>" is shared with the re-rank prompt)
    assert s["reused_from_states"] == 2 * (shared - len("<system>"))
    assert s["evaluated"] == s_off["evaluated"] - s["reused_from_states"]
    assert fake_on.evaluated[2] == len(f"<system>{SYSTEM}<user>Question: who wrote Memento") - shared


def test_backend_loads_only_beyond_min_gain(monkeypatch):
    gain = len(f"<system>{SYSTEM}<user>Question: who ") - len("<system>")  # what a load would add
    b, fake = _fake_backend(monkeypatch, prefix_cache=4, prefix_cache_min=gain + 1)
    _run(b)
    assert fake.loads == 0 and b.prefix_stats()["reused_from_states"] == 0 and b.prefix_stats()["states"] > 0
    b, fake = _fake_backend(monkeypatch, prefix_cache=4, prefix_cache_min=gain)
    _run(b)
    assert fake.loads == 2 and b.prefix_stats()["reused_from_states"] == 2 * gain


# ------------------------------------------------------------------------- the real 0.5B model
def _gguf_or_skip():
    from kgqa_lib.llm import models

    spec = models.get_spec("qwen2.5-0.5b")
    try:
        path = models.model_path("qwen2.5-0.5b", progress=False)
    except Exception as exc:  # noqa: BLE001 - the parts are not installed: say so
        pytest.skip(f"embedded 0.5B model not available: {exc}")
    pytest.importorskip("llama_cpp")
    return spec, path


REAL = [(("system", "You answer questions about films with one short sentence. " * 18),
         ("user", "Who directed Inception?")),
        (("system", "You list three words."), ("user", "Colours?")),
        (("system", "You answer questions about films with one short sentence. " * 18),
         ("user", "Who directed Jaws?"))]


@pytest.mark.live
def test_cache_on_and_off_on_the_real_model():
    """Measured on this model (greedy, 2-3 tiny prompts): the same texts with the cache on and off;
    the 3rd call loads the 1st call's state and evaluates only its question. A state is its KV
    cache plus one row of scores (not Llama.save_state's (n_batch, n_vocab) float32 copy)."""
    _gguf_or_skip()
    texts, stats = {}, {}
    for n in (0, 2):
        b = LocalBackend("qwen2.5-0.5b", n_ctx=2048, n_threads=1, prefix_cache=n, prefix_cache_min=16)
        texts[n] = [b.complete(ChatRequest(b.model_id, m, max_tokens=12))["text"] for m in REAL]
        stats[n] = b.prefix_stats()
        if n:
            n_vocab = b._llama.n_vocab()
            for state in b._states.values():
                assert state.scores.shape == (1, n_vocab)
                assert len(state.llama_state) < state.n_tokens * 13 * 1024 + 2 * n_vocab * 4  # 12 KiB a token
        del b
    assert stats[2]["state_loads"] == 1 and stats[2]["reused_from_states"] > 100
    assert stats[2]["evaluated"] == stats[0]["evaluated"] - stats[2]["reused_from_states"]
    assert all(texts[0]) and texts[0] == texts[2]
