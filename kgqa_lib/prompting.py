"""Prompt files (``kgqa_lib/prompts/*.txt``): a system part and a user template, split by ``---``.

Placeholders are written ``<<name>>`` (curly braces are free for answers and Cypher)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

from .paths import prompts_dir


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
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.render(**values)}]


@lru_cache(maxsize=None)
def load_prompt(name: str) -> Prompt:
    path = prompts_dir() / f"{name}.txt"
    raw = path.read_text(encoding="utf-8")
    system, sep, template = raw.partition("\n---\n")
    if not sep:
        system, template = "", raw
    return Prompt(name, system.strip(), template.strip(), hashlib.sha256(raw.encode()).hexdigest()[:12])
