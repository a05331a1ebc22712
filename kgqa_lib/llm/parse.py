"""Total parsers for LLM output: they never raise, they return what they found and why not.

LLM output is data. Every parser here returns a :class:`Parsed` value with the extracted items
and an ``error`` category (``None`` when the output was well formed), which the runner counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SPECIAL = re.compile(r"<\|[a-z_]+\|>")
_BRACED = re.compile(r"\{([^{}\n]{1,200})\}")
_ANSWER_LINE = re.compile(r"(?:^|\n)\s*(?:final\s+)?answer\s*(?:is)?\s*[:：]\s*(.+)", re.IGNORECASE)


@dataclass
class Parsed:
    items: list[str] = field(default_factory=list)
    error: str | None = None  # category of malformation, e.g. "no_braces", "empty"

    @property
    def ok(self) -> bool:
        return self.error is None


def clean_text(text: object) -> str:
    """Coerce to str, drop chat-template markers and surrounding whitespace."""
    if text is None:
        return ""
    return _SPECIAL.sub("", str(text)).strip()


def _dedupe(items: list[str]) -> list[str]:
    seen, out = set(), []
    for it in items:
        key = it.casefold()
        if it and key not in seen:
            seen.add(key)
            out.append(it)
    return out


def _strip_item(s: str) -> str:
    return s.strip().strip("\"'`*{}").strip().rstrip(".").strip()


def extract_braced_answers(text: object) -> Parsed:
    """Answers marked in braces, ``{Christopher Nolan}, {Jonathan Nolan}`` → two answers.

    When the output has an ``Answer:`` line, braces on the last such line win (so braces in
    the reasoning do not count). Without braces we fall back to the text of the ``Answer:`` line
    split on ``|``/``;``/`` and ``/commas (error ``no_braces``), or to the last line (error
    ``no_answer_marker``)."""
    t = clean_text(text)
    if not t:
        return Parsed([], "empty")
    lines = _ANSWER_LINE.findall(t)
    scope = lines[-1] if lines else t
    found = [_strip_item(m) for m in _BRACED.findall(scope)] or [_strip_item(m) for m in _BRACED.findall(t)]
    found = [f for f in found if f and f.lower() not in {"name", "answer", "answers", "..."}]
    if found:
        return Parsed(_dedupe(found))
    if lines:
        parts = re.split(r"\s*(?:\||;|,|\band\b)\s*", lines[-1])
        return Parsed(_dedupe([_strip_item(p) for p in parts if _strip_item(p)]), "no_braces")
    last = [ln for ln in t.splitlines() if ln.strip()][-1]
    return Parsed([_strip_item(last)] if _strip_item(last) else [], "no_answer_marker")
