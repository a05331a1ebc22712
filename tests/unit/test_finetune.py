"""LoRA fine-tuning code path on a tiny randomly initialised Qwen2 (the real 0.5B run is notebook 33)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from kgqa_lib.llm import models

    try:
        path = models.model_path("qwen2.5-0.5b", progress=False)
    except Exception as exc:  # noqa: BLE001 - the parts are not installed: say so
        pytest.skip(f"embedded 0.5B model not available: {exc}")
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    return Qwen2ForCausalLM(cfg).eval(), tok


def test_train_lora_and_answer_through_the_cache(tiny, tmp_path, tmp_cache):
    from kgqa_lib.llm.finetune import HFChatBackend, LazyBackend, LoraRecipe, Training, train_lora
    from kgqa_lib.llm.chat import LLM, LLMCache

    model, tok = tiny
    examples = [([{"role": "system", "content": "Reply with JSON."}, {"role": "user", "content": f"Question: q{i}"}],
                 f'[{{"question": "a{i} [mask]", "id": 0}}]') for i in range(5)]
    recipe = LoraRecipe(steps=6, batch=2, lr=5e-3)
    tuned, rec = train_lora(model, tok, examples, recipe, progress=False, reuse=False)
    assert len(rec.losses) == 6 and all(l == l and l > 0 for l in rec.losses)  # finite, positive
    assert rec.losses[-1] < rec.losses[0]  # it learns the five answers
    assert 0 < rec.trainable < rec.total and rec.key == recipe.key(examples)
    assert LoraRecipe(steps=7, batch=2, lr=5e-3).key(examples) != rec.key
    rec.save(tmp_path / "t.json")
    assert Training.load(tmp_path / "t.json") == rec
    # the adapter was kept: the same recipe on the same data loads it instead of training again
    again, rec2 = train_lora(model, tok, examples, recipe, progress=False)
    assert rec2 == rec
    ids = tok("Question: q1", return_tensors="pt")
    with torch.no_grad():
        assert torch.allclose(again(**ids).logits, tuned(**ids).logits, atol=1e-5)

    built = []
    llm = LLM(LazyBackend(lambda: built.append(1) or HFChatBackend(tuned, tok, "tiny")), "tiny-lora",
              LLMCache(tmp_path / "c.sqlite", transcripts=None))
    r = llm.chat(examples[0][0], max_tokens=5)
    assert built == [1] and r.completion_tokens <= 5 and isinstance(r.text, str)
    again = llm.chat(examples[0][0], max_tokens=5)
    assert again.cache_hit and again.text == r.text
    replay = LLM(LazyBackend(lambda: pytest.fail("a replay must not build the model")), "tiny-lora",
                 LLMCache(tmp_path / "c.sqlite", transcripts=None), mode="replay")
    assert replay.chat(examples[0][0], max_tokens=5).text == r.text


def test_tuned_llm_switches_the_adapters_off_and_never_builds_in_a_replay(tiny, tmp_path, tmp_cache):
    from kgqa_lib.errors import SetupError
    from kgqa_lib.llm.chat import LLMCache, ReplayMiss
    from kgqa_lib.llm.finetune import LoraRecipe, train_lora, tuned_llm

    model, tok = tiny
    examples = [([{"role": "user", "content": f"Question: q{i}"}], f"answer {i}") for i in range(4)]
    tuned, _ = train_lora(model, tok, examples, LoraRecipe(steps=4, batch=2, lr=5e-3), progress=False, reuse=False)
    cache = lambda name: LLMCache(tmp_path / f"{name}.sqlite", transcripts=None)  # noqa: E731
    question = examples[0][0]
    with tuned.disable_adapter():  # the untuned weights, by hand
        expected = tuned_llm("by-hand", tuned, tok, cache("a")).chat(question, max_tokens=6).text
    off = tuned_llm("tiny-off", tuned, tok, cache("b"), adapters=False)
    assert off.chat(question, max_tokens=6).text == expected
    # not loaded: a recorded answer replays, an unrecorded one says how to load the model
    assert tuned_llm("tiny-off", None, None, cache("b"), "replay").chat(question, max_tokens=6).text == expected
    with pytest.raises(ReplayMiss):
        tuned_llm("tiny-off", None, None, cache("b"), "replay").chat(examples[1][0], max_tokens=6)
    with pytest.raises(SetupError, match="TRAIN=True"):
        tuned_llm("tiny-off", None, None, cache("b")).chat(examples[1][0], max_tokens=6)
