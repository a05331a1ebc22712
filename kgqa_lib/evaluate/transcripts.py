"""The recorded LLM calls: one reader of the committed transcripts (``data/llm_cache/<model>.jsonl``).

Every default notebook run replays from these transcripts; what a recorded call took the model when it
was made (``response["seconds"]``) is what the same call costs live. A notebook's cost section reads them
here, by model and prompt, instead of parsing the files itself."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

from ..paths import data_dir


def recorded_calls(model_id: str, system: str | Collection[str] | None = None, contains: str | None = None,
                   folder: str | Path | None = None) -> list[dict[str, Any]]:
    """The recorded calls of ``model_id`` (one per cache key, the last recording of a key wins), in file
    order: ``{"key", "request", "response"}`` dicts. ``system``: keep only calls whose system prompt is
    that text (or one of those texts); ``contains``: whose last message contains that text. ``folder``:
    the transcripts (default ``data/llm_cache``)."""
    systems = None if system is None else {system} if isinstance(system, str) else set(system)
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(Path(folder or data_dir() / "llm_cache").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            e = json.loads(line)
            r, msgs = e["request"], e["request"].get("messages") or []
            if r.get("model") != model_id or not msgs:
                continue
            if systems is not None and (msgs[0].get("role") != "system" or msgs[0].get("content") not in systems):
                continue
            if contains is not None and contains not in (msgs[-1].get("content") or ""):
                continue
            found[e["key"]] = {"key": e["key"], "request": r, "response": e["response"]}
    return list(found.values())


def recorded_seconds(calls: list[dict[str, Any]]) -> float:
    """What ``calls`` took the model when they were recorded (seconds): what they cost live."""
    return sum(float(c["response"].get("seconds") or 0.0) for c in calls)
