"""Baselines that answer from the LLM alone: IO (direct few-shot) and CoT (step by step).

Both are two stages: ``generate`` (one LLM call with a few-shot prompt written by us) and
``parse_answers`` (answers marked in braces; a malformed output is counted, never fatal)."""

from __future__ import annotations

from dataclasses import dataclass

from ..data.datasets import Question
from ..llm.parse import Parsed, extract_braced_answers
from ..llm.prompting import load_prompt
from .base import Context, MethodResult, Settings, Tracer, register_method, setting


@dataclass
class Generation:
    prompt: str
    text: str
    prompt_tokens: int
    completion_tokens: int
    cache_hit: bool

    def as_dict(self):
        return {"prompt": self.prompt, "text": self.text, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cache_hit": self.cache_hit}


def generate(question: str, ctx: Context, prompt_name: str, max_tokens: int = 256,
             temperature: float = 0.0, sample_index: int = 0) -> Generation:
    """Fill the few-shot prompt with the question and ask the LLM once."""
    prompt = load_prompt(prompt_name)
    messages = prompt.messages(question=question)
    r = ctx.llm.chat(messages, max_tokens=max_tokens, temperature=temperature, seed=ctx.seed,
                     sample_index=sample_index)
    return Generation(messages[-1]["content"], r.text, r.prompt_tokens, r.completion_tokens, r.cache_hit)


def generate_samples(question: str, ctx: Context, prompt_name: str, max_tokens: int, temperature: float,
                     n: int) -> list[tuple[Generation, float]]:
    """``n`` samples of the same few-shot prompt (sample indices 0..n-1), each with the seconds its call
    took: one call per sample, or all at once when the LLM decodes samples together
    (:func:`~kgqa_lib.llm.chat.chat_samples`)."""
    from ..llm.chat import chat_samples

    prompt = load_prompt(prompt_name)
    messages = prompt.messages(question=question)
    replies = chat_samples(ctx.llm, messages, n, max_tokens=max_tokens, temperature=temperature, seed=ctx.seed)
    return [(Generation(messages[-1]["content"], r.text, r.prompt_tokens, r.completion_tokens, r.cache_hit),
             r.seconds) for r in replies]


def parse_answers(generation: Generation) -> Parsed:
    """Pull the answers out of the response (``{...}``), or say why not."""
    return extract_braced_answers(generation.text)


def open_text(text: str) -> str:
    """The prose of an open answer: what follows ``Answer:`` (CoT lists facts first), else all of it."""
    return text.split("Answer:", 1)[1].strip() if "Answer:" in text else text.strip()


def _answer_with(prompt_name: str, q: Question, ctx: Context, max_tokens: int) -> MethodResult:
    tr = Tracer()
    if q.kind == "open":  # open-ended questions: a prose prompt, no braces; scored with ROUGE-L
        gen = tr.record("generate", generate, q.question, ctx, prompt_name + "_open", max(max_tokens, 160))
        text = open_text(gen.text)
        return MethodResult([text] if text else [], text, tr.stages, None if text else "empty")
    gen = tr.record("generate", generate, q.question, ctx, prompt_name, max_tokens)
    parsed = tr.record("parse_answers", parse_answers, gen)
    return MethodResult(parsed.items, gen.text, tr.stages, parsed.error)


@dataclass(frozen=True)
class IOSettings(Settings):
    max_tokens: int = setting(64, "tokens of the answer (open questions: at least 160)", min=1)


@dataclass(frozen=True)
class CoTSettings(Settings):
    max_tokens: int = setting(256, "tokens of the reasoning and answer (open questions: at least 160)", min=1)


@register_method("io", prompts=("io", "io_open"), settings=IOSettings)
def io(q: Question, ctx: Context) -> MethodResult:
    """IO prompting: six question→answer exemplars, then the question (open questions: two
    exemplars of short prose answers)."""
    return _answer_with("io", q, ctx, IOSettings.of(ctx).max_tokens)


@register_method("cot", prompts=("cot", "cot_open"), settings=CoTSettings)
def cot(q: Question, ctx: Context) -> MethodResult:
    """Chain-of-thought: six exemplars with short reasoning, then ``Answer: {...}`` (open
    questions: the facts needed, then a prose answer)."""
    return _answer_with("cot", q, ctx, CoTSettings.of(ctx).max_tokens)
