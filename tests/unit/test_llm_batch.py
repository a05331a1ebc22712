"""Samples of one prompt decoded together (``local?batch=N``): options and model ids, the LLM layer
(cache hits served, only misses handed to the backend at once), self-consistency and KB-BINDER sampling
through it, the bookkeeping of :func:`kgqa_lib.llm.chat._decode_together` on a scripted stand-in for
llama-cpp-python, and (when the 0.5B GGUF is present) answers against one request at a time on the real model."""

from __future__ import annotations

import numpy as np
import pytest

from kgqa_lib.errors import UsageError
from kgqa_lib.llm import chat
from kgqa_lib.llm.chat import (BATCHED_SUFFIX, EXACT_BATCH_ROWS, LLM, ChatRequest, LLMCache, LocalBackend, ReplayMiss,
                               chat_samples, llm_model_id, make_llm, split_llm_name, track_usage)

ID_05 = "qwen2.5-0.5b-instruct-q4"


def _replay(name: str):
    return make_llm(name, "replay", cache=LLMCache(":memory:", transcripts=None))


@pytest.fixture(autouse=True)
def _no_batch_environment(monkeypatch):
    for var in ("KGQA_LLM_BATCH", "KGQA_LLM_BATCH_ROWS", "KGQA_LLM_PREFIX_CACHE"):
        monkeypatch.delenv(var, raising=False)


# ------------------------------------------------------------------------------ options, ids
def test_batch_options_and_model_ids(monkeypatch):
    assert split_llm_name("local:qwen2.5-0.5b?batch=6&batch_rows=3") == ("local:qwen2.5-0.5b",
                                                                          {"batch": 6, "batch_rows": 3})
    b = _replay("local:qwen2.5-0.5b").backend
    assert (b.batch, b.batch_rows, b.batches) == (0, EXACT_BATCH_ROWS, False)  # off by default
    b = _replay("local:qwen2.5-0.5b?batch=6").backend
    assert (b.batch, b.batch_rows, b.batches, b.model_id) == (6, EXACT_BATCH_ROWS, True, ID_05)
    assert "decoded together" in b.engine and "one request at a time" in _replay("local").backend.engine
    # rows beyond the exact ones: other answers, so another id (cache, transcripts, run folders)
    assert _replay("local:qwen2.5-0.5b?batch=6&batch_rows=6").model_id == ID_05 + BATCHED_SUFFIX
    assert llm_model_id("local:qwen2.5-0.5b?batch=6&batch_rows=8") == ID_05 + BATCHED_SUFFIX
    assert llm_model_id("local:qwen2.5-0.5b?batch=3&batch_rows=8") == ID_05  # never more rows than sequences
    assert llm_model_id("local:qwen2.5-0.5b?batch=1&batch_rows=8") == ID_05  # batch 1: one at a time
    assert llm_model_id("local:qwen2.5-0.5b?batch=6") == ID_05
    monkeypatch.setenv("KGQA_LLM_BATCH", "4")
    monkeypatch.setenv("KGQA_LLM_BATCH_ROWS", "4")
    assert llm_model_id("local:qwen2.5-0.5b") == ID_05 + BATCHED_SUFFIX
    assert _replay("local:qwen2.5-0.5b").backend.batch == 4
    assert llm_model_id("local:qwen2.5-0.5b?batch_rows=3") == ID_05  # the name wins over the environment


@pytest.mark.parametrize("name", ["local?batch=-1", "local?batch=17", "local?batch=six", "local?batch_rows=0",
                                  "local?batch_rows=", "openai:gpt-4o-mini?batch=2"])
def test_bad_batch_options(name):
    with pytest.raises(UsageError) as err:
        split_llm_name(name)
    assert "\n" not in str(err.value) and "batch" in str(err.value)


def test_batch_and_prefix_cache_are_not_combined(monkeypatch):
    with pytest.raises(UsageError, match="cannot be combined") as err:
        _replay("local?batch=4&prefix_cache=2")
    assert "\n" not in str(err.value)
    monkeypatch.setenv("KGQA_LLM_BATCH", "lots")
    with pytest.raises(UsageError, match="KGQA_LLM_BATCH expects a whole number"):
        _replay("local")


# ---------------------------------------------------------------------------- the LLM layer
class Together:
    """A backend that answers several requests at once and says what it was handed."""

    model_id = "together"
    batches = True

    def __init__(self):
        self.handed: list[list[int]] = []
        self.singles = 0

    def complete(self, r):
        self.singles += 1
        return self._answer(r)

    def complete_many(self, requests):
        self.handed.append([r.sample_index for r in requests])
        return [self._answer(r) for r in requests]

    @staticmethod
    def _answer(r):
        return {"text": f"{r.messages[-1][1]}#{r.sample_index}", "prompt_tokens": 7, "completion_tokens": 2,
                "finish_reason": "stop"}


class OneByOne(Together):
    batches = False


def _llm(tmp_path, backend, mode="auto"):
    return LLM(backend, backend.model_id, LLMCache(tmp_path / "c.sqlite", transcripts=tmp_path / "tr"), mode)


def test_only_misses_reach_the_backend_and_all_at_once(tmp_path):
    backend = Together()
    llm = _llm(tmp_path, backend)
    llm.chat("q", temperature=0.7, sample_index=1)  # one sample recorded already (a single call)
    assert backend.singles == 1
    with track_usage() as u:
        out = llm.chat_many("q", 4, temperature=0.7)
    assert [r.text for r in out] == [f"q#{i}" for i in range(4)]
    assert backend.handed == [[0, 2, 3]]  # the recorded one was served from the cache
    assert [r.cache_hit for r in out] == [False, True, False, False]
    assert (u.calls, u.cache_hits, u.prompt_tokens) == (4, 1, 28)
    again = llm.chat_many("q", 4, temperature=0.7)  # everything recorded: nothing generated again
    assert backend.handed == [[0, 2, 3]] and all(r.cache_hit for r in again)
    assert [r.text for r in again] == [r.text for r in out]
    lines = (tmp_path / "tr" / "together.jsonl").read_text().splitlines()
    assert len(lines) == 4  # each answer transcribed once
    assert llm.batches and not _llm(tmp_path, OneByOne()).batches


def test_without_a_batching_backend_each_request_runs_alone(tmp_path):
    backend = OneByOne()
    llm = _llm(tmp_path, backend)
    out = llm.chat_many("q", 3, temperature=0.7)
    assert backend.handed == [] and backend.singles == 3
    assert [r.text for r in out] == ["q#0", "q#1", "q#2"]
    with pytest.raises(TypeError):
        llm.chat_many("q", 2, sample_index=1)


def test_replay_serves_recordings_and_names_the_first_miss(tmp_path):
    llm = _llm(tmp_path, Together())
    llm.chat_many("q", 2, temperature=0.7)
    replay = LLM(None, "together", LLMCache(tmp_path / "c.sqlite", transcripts=tmp_path / "tr"), "replay")
    assert [r.text for r in replay.chat_many("q", 2, temperature=0.7)] == ["q#0", "q#1"]
    with pytest.raises(ReplayMiss):
        replay.chat_many("q", 3, temperature=0.7)
    backend = Together()
    replay_with_backend = _llm(tmp_path, backend, mode="replay")
    with pytest.raises(ReplayMiss):
        replay_with_backend.chat_many("q", 3, temperature=0.7)
    assert backend.handed == []


def test_chat_samples_falls_back_to_one_chat_per_sample():
    class Plain:  # a test double or a call recorder: no chat_many of its own
        def __init__(self):
            self.calls = []

        def chat(self, messages, **kwargs):
            self.calls.append(kwargs["sample_index"])
            return kwargs["sample_index"]

        def __getattr__(self, name):  # forwards like kgqa_lib.notebooks.CallRecorder
            raise AttributeError(name)

    p = Plain()
    assert chat_samples(p, "q", 3, temperature=0.7) == [0, 1, 2] and p.calls == [0, 1, 2]


def test_self_consistency_and_kbbinder_sample_through_chat_many(tmp_path):
    from kgqa_lib.data.datasets import Question
    from kgqa_lib.methods import Context
    from kgqa_lib.methods.kbbinder import generate_drafts
    from kgqa_lib.methods.pgakv import self_consistency

    backend = Together()
    llm = _llm(tmp_path, backend)
    res = self_consistency(Question("q1", "Who directed Jaws?", ["Steven Spielberg"]), Context(llm=llm))
    assert backend.handed == [[0, 1, 2]] and backend.singles == 0
    assert [s.name for s in res.trace] == ["sample_0", "sample_1", "sample_2", "vote"]
    drafts = generate_drafts("Who directed Jaws?", Context(llm=llm), [], samples=6, temperature=0.7)
    assert backend.handed[-1] == [0, 1, 2, 3, 4, 5] and [d.index for d in drafts] == list(range(6))
    generate_drafts("Who directed Alien?", Context(llm=llm), [], samples=1)  # one greedy draft: one request
    assert backend.handed[-1] == [0]


# ----------------------------------------- _decode_together's bookkeeping, on a scripted stand-in
EOS = 99


class FakeContext:
    def __init__(self, log):
        self.log, self.ctx, self.memory = log, object(), object()

    def kv_cache_seq_rm(self, seq, p0, p1):
        self.log.append(("rm", max(seq, 0), p0, p1))
        return True


class FakeLlama:
    """Enough of ``llama_cpp.Llama`` for :func:`chat._decode_together`: tokens are their own text, and each
    sampler replays a script of (decode-call index → token) its seed names."""

    def __init__(self, scripts):
        self.log: list = []
        self._ctx = FakeContext(self.log)
        self._n_ctx = 512
        self.n_tokens, self._requires_eval = 0, True
        self.input_ids = np.zeros(512, dtype=np.intc)
        self.scores = np.zeros((4, 8), dtype=np.single)
        self.scripts, self.seed, self.decodes = scripts, None, 0
        self._model = type("M", (), {"vocab": None})()

    @property
    def _input_ids(self):
        return self.input_ids[:self.n_tokens]

    def reset(self):
        self.n_tokens = 0

    def eval(self, tokens):
        self.log.append(("eval", list(tokens)))
        self.input_ids[self.n_tokens:self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)
        self.decodes += 1
        self._requires_eval = False

    def set_seed(self, seed):
        self.seed = seed

    def detokenize(self, tokens, prev_tokens=None):
        return b"".join(b"<%d>" % t for t in tokens)

    def _init_sampler(self, **kwargs):
        llama, script = self, list(self.scripts[self.seed])

        class Sampler:
            def sample(self, ctx, idx):
                decode, token = script.pop(0)
                assert decode == llama.decodes, f"sampled after decode {llama.decodes}, scripted for {decode}"
                return token

        return Sampler()


@pytest.fixture()
def fake_llama_cpp(monkeypatch):
    llama_cpp = pytest.importorskip("llama_cpp")
    state = {"llama": None}

    class Batch:
        def __init__(self, n):
            self.n_tokens = 0
            self.token, self.pos, self.n_seq_id, self.logits = [0] * n, [0] * n, [0] * n, [0] * n
            self.seq_id = [[0] for _ in range(n)]

    def decode(ctx, batch):
        llama = state["llama"]
        llama.decodes += 1
        llama.log.append(("decode", [(batch.token[i], batch.pos[i], batch.seq_id[i][0]) for i in range(batch.n_tokens)]))
        return 0

    monkeypatch.setattr(llama_cpp, "llama_vocab_is_eog", lambda vocab, t: t == EOS)
    monkeypatch.setattr(llama_cpp, "llama_batch_init", lambda n, e, s: Batch(n))
    monkeypatch.setattr(llama_cpp, "llama_batch_free", lambda b: None)
    monkeypatch.setattr(llama_cpp, "llama_decode", decode)
    monkeypatch.setattr(llama_cpp, "llama_memory_seq_rm", lambda mem, s, p0, p1: state["llama"].log.append(("rm", s, p0, p1)))
    monkeypatch.setattr(llama_cpp, "llama_state_seq_get_size", lambda ctx, seq: 8)
    monkeypatch.setattr(llama_cpp, "llama_state_seq_get_data", lambda ctx, buf, size, seq: state.update(src=seq) or size)
    monkeypatch.setattr(llama_cpp, "llama_state_seq_set_data",
                        lambda ctx, buf, n, seq: state["llama"].log.append(("cp", state["src"], seq)) or n)
    return state


def test_each_sample_starts_where_a_one_at_a_time_run_would(fake_llama_cpp):
    """Sample 0 ends at its first token: sample 1 takes the same prompt logits and sequence 0. Sample 1
    goes on: samples 2-4 take the prompt's last token evaluated again (once, in sequence 1); sample 2 ends
    at once, 3 decodes in sequence 1, 4 in a copy of it (sequence 2). Rows: at most 2 a decode call."""
    prompt = [11, 12, 13]
    scripts = {0: [(1, EOS)],  # decode 1 = the prompt
               1: [(1, 21), (3, 22), (5, EOS)],
               2: [(2, EOS)],  # decode 2 = the last prompt token again
               3: [(2, 31), (3, 32), (5, 33), (6, EOS)],
               4: [(2, 41), (4, EOS)]}
    llama = FakeLlama(scripts)
    fake_llama_cpp["llama"] = llama
    kwargs = {"prompt": prompt, "max_tokens": 10, "stop": [], "temperature": 0.7}
    answers, counts = chat._decode_together(llama, kwargs, [0, 1, 2, 3, 4], sequences=5, rows=2)
    assert [a["text"] for a in answers] == ["", "<21><22>", "", "<31><32><33>", "<41>"]
    assert [a["finish_reason"] for a in answers] == ["stop"] * 5
    assert [a["completion_tokens"] for a in answers] == [0, 2, 0, 3, 1]
    log = llama.log
    assert log[0] == ("eval", prompt)
    assert log[1:5] == [("rm", 1, -1, -1), ("cp", 0, 1), ("rm", 1, 2, -1), ("decode", [(13, 2, 1)])]  # once, alone, in a copy
    assert ("cp", 1, 2) in log  # sample 4's sequence: a copy of the re-evaluated prompt
    decodes = [e[1] for e in log if e[0] == "decode"][1:]
    assert decodes[0] == [(21, 3, 0), (31, 3, 1)] and decodes[1] == [(41, 3, 2)]  # ≤ 2 rows a call
    assert decodes[2] == [(22, 4, 0), (32, 4, 1)] and decodes[3] == [(33, 5, 1)] and len(decodes) == 4
    assert counts == {"prompt_tokens": 3, "evaluated": 4, "decode_calls": 4, "decode_rows": 6}
    # afterwards sequence 0 holds what the last sample's run leaves: prompt + its evaluated token
    assert log[-7:-4] == [("rm", 0, -1, -1), ("cp", 2, 0), ("rm", 0, 4, -1)]
    assert list(llama._input_ids) == [11, 12, 13, 41] and llama._requires_eval and llama.seed == 4


def test_stop_strings_max_tokens_and_empty_answers(fake_llama_cpp):
    scripts = {0: [(1, 5), (3, 6), (4, 7)], 1: [(2, 5), (3, 8)], 2: [(2, 9)]}
    llama = FakeLlama(scripts)
    fake_llama_cpp["llama"] = llama
    kwargs = {"prompt": [1, 2], "max_tokens": 3, "stop": ["<8>", "<9>"], "temperature": 0.7}
    answers, counts = chat._decode_together(llama, kwargs, [0, 1, 2], sequences=3, rows=3)
    assert [(a["text"], a["finish_reason"], a["completion_tokens"]) for a in answers] == [
        ("<5><6><7>", "length", 3), ("<5>", "stop", 2), ("", "stop", 1)]
    assert counts["decode_rows"] == 2 + 1  # the stop string's token is never evaluated


# ------------------------------------------------------------------------- the real 0.5B model
def _gguf_or_skip():
    from kgqa_lib.llm import models

    try:
        models.model_path("qwen2.5-0.5b", progress=False)
    except Exception as exc:  # noqa: BLE001 - the parts are not installed: say so
        pytest.skip(f"embedded 0.5B model not available: {exc}")
    pytest.importorskip("llama_cpp")


PROMPTS = [(("system", "You are a knowledgeable assistant. Think step by step, briefly, then answer in braces."),
            ("user", "Question: Who directed the film Jaws?")),
           (("system", "You translate a question into a logical form (an s-expression)."),
            ("user", "Question: Which films did Akira Kurosawa direct?"))]


def _requests(model_id, messages, n, temperature, max_tokens=8, stop=()):
    return [ChatRequest(model_id, messages, temperature=temperature, max_tokens=max_tokens, stop=stop, seed=0,
                        sample_index=i) for i in range(n)]


@pytest.mark.live
def test_decoded_together_equals_one_at_a_time_on_the_real_model():
    """Greedy and seeded sampled requests (6 samples, 3 rows a decode call): every answer is the one
    ``complete`` gives when the samples are asked one after another (measured so, and asserted: the
    rows of a call are computed one by one, so their logits are bit-identical). So are the edge cases:
    a max_tokens of 1; an empty stop string (every answer empty, each sample ends at its first token);
    a stop string some samples hit with their first token (measured: samples 0, 2, 3 and 5), so the
    later samples start from the prompt's logits or from its last token evaluated again."""
    _gguf_or_skip()
    cases = [(m, t, 8, ()) for m in PROMPTS for t in (0.0, 0.7)] + [
        (PROMPTS[0], 0.7, 1, ()), (PROMPTS[0], 0.7, 8, ("",)), (PROMPTS[1], 0.7, 8, ("The",))]
    one = LocalBackend("qwen2.5-0.5b", n_ctx=2048, n_threads=2)
    alone = [[one.complete(r) for r in _requests(one.model_id, m, 6, t, k, st)] for m, t, k, st in cases]
    del one
    b = LocalBackend("qwen2.5-0.5b", n_ctx=2048, n_threads=2, batch=6)
    together = [b.complete_many(_requests(b.model_id, m, 6, t, k, st)) for m, t, k, st in cases]
    stats = b.prefix_stats()
    assert together == alone
    assert stats["together"] == 6 * len(cases) and stats["decode_rows"] <= 3 * stats["decode_calls"]
    assert stats["evaluated"] < stats["prompt_tokens"] / 3  # each prompt evaluated once, not six times
    assert all(a["completion_tokens"] == 1 and a["finish_reason"] == "length" for a in together[-3])
    assert all((a["text"], a["completion_tokens"], a["finish_reason"]) == ("", 1, "stop") for a in together[-2])
    assert [a["text"] == "" for a in together[-1]] == [True, False, True, True, False, True]


@pytest.mark.live
def test_cached_samples_are_not_generated_again_on_the_real_model(tmp_path):
    _gguf_or_skip()
    llm = make_llm("local:qwen2.5-0.5b?batch=4&threads=2", "auto",
                   cache=LLMCache(tmp_path / "c.sqlite", transcripts=tmp_path / "tr"))
    llm.chat(PROMPTS[0][1][1], system=PROMPTS[0][0][1], temperature=0.7, max_tokens=6, sample_index=2)
    first = llm.chat_many(PROMPTS[0][1][1], 4, system=PROMPTS[0][0][1], temperature=0.7, max_tokens=6)
    stats = llm.backend.prefix_stats()
    assert [r.cache_hit for r in first] == [False, False, True, False]
    assert (stats["calls"], stats["together"]) == (4, 3)  # the single call, then the 3 misses together
    again = llm.chat_many(PROMPTS[0][1][1], 4, system=PROMPTS[0][0][1], temperature=0.7, max_tokens=6)
    assert all(r.cache_hit for r in again) and [r.text for r in again] == [r.text for r in first]
    assert llm.backend.prefix_stats()["calls"] == 4
