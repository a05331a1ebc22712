"""What every method shares: the context it runs in, its stages and its result."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..datasets import Question


@dataclass
class Context:
    """What a method may use. Methods that need no KG (IO, CoT) ignore ``kg``/``embedder``."""

    llm: Any  # kgqa_lib.llm.LLM
    kg: Any = None  # kgqa_lib.kg.KnowledgeGraph
    embedder: Any = None  # kgqa_lib.embed.Embedder
    settings: dict[str, Any] = field(default_factory=dict)
    seed: int = 0

    def get(self, key: str, default: Any = None) -> Any:
        return self.settings.get(key, default)


@dataclass
class Stage:
    """One stage's output, as recorded in the trace."""

    name: str
    output: Any
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        out = self.output
        if hasattr(out, "as_dict"):
            out = out.as_dict()
        return {"name": self.name, "output": out, "seconds": round(self.seconds, 4)}


@dataclass
class MethodResult:
    answers: list[str]
    response: str = ""
    trace: list[Stage] = field(default_factory=list)
    error: str | None = None  # category of a recoverable failure (malformed output, ...)

    def __str__(self) -> str:
        return " | ".join(self.answers) or "(no answer)"


class Tracer:
    """Times named stages and collects them: ``with tracer.stage("generate") as rec: rec.output = ...``."""

    def __init__(self) -> None:
        self.stages: list[Stage] = []

    def record(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        out = fn(*args, **kwargs)
        self.stages.append(Stage(name, out, time.perf_counter() - t))
        return out


MethodFn = Callable[[Question, Context], MethodResult]
_METHODS: dict[str, MethodFn] = {}


def register_method(name: str, prompts: tuple[str, ...] = ()) -> Callable[[MethodFn], MethodFn]:
    """Register a method under ``name``; ``prompts`` names the prompt files it uses (their
    hashes go into the run config, so editing a prompt starts a new run)."""

    def deco(fn: MethodFn) -> MethodFn:
        fn.prompts = prompts  # type: ignore[attr-defined]
        _METHODS[name] = fn
        return fn

    return deco


def get_method(name: str) -> MethodFn:
    if name not in _METHODS:
        raise ValueError(f"Unknown method {name!r}; known: {', '.join(method_names())}")
    return _METHODS[name]


def method_names() -> list[str]:
    return sorted(_METHODS)
