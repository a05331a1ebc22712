"""Prompt files (``kgqa_lib/prompts/*.txt``): a system part and a user template, split by ``---``.

Placeholders are written ``<<name>>`` (curly braces are free for answers and Cypher). A template
may hold a multi-turn few-shot dialogue: lines ``>>> user`` and ``>>> assistant`` start turns (text
before the first marker is the first user turn); small chat models follow worked examples given as
turns much better than examples inside one message."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache

from ..paths import prompts_dir


@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    template: str
    sha: str  # short hash of the file, recorded in run configs

    def render(self, **values: str) -> str:
        text = self.template
        for k, v in values.items():
            text = text.replace(f"<<{k}>>", str(v))
        missing = [seg.split(">>")[0] for seg in text.split("<<")[1:] if ">>" in seg]
        if missing:
            raise KeyError(f"prompt {self.name!r}: no value for {missing}")
        return text

    def messages(self, **values: str) -> list[dict[str, str]]:
        out = [{"role": "system", "content": self.system}]
        parts = _TURN.split(self.render(**values))
        if parts[0].strip():
            out.append({"role": "user", "content": parts[0].strip()})
        for role, content in zip(parts[1::2], parts[2::2]):
            out.append({"role": role, "content": content.strip()})
        return out


_TURN = re.compile(r"^>>> (user|assistant)[ \t]*$", re.M)


@lru_cache(maxsize=None)
def load_prompt(name: str) -> Prompt:
    path = prompts_dir() / f"{name}.txt"
    raw = path.read_text(encoding="utf-8")
    system, sep, template = raw.partition("\n---\n")
    if not sep:
        system, template = "", raw
    return Prompt(name, system.strip(), template.strip(), hashlib.sha256(raw.encode()).hexdigest()[:12])
