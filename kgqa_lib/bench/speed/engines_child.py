"""One engine of the ``engines`` measurement: a child process that loads the embedded model with a given number
of threads, answers its share of the recorded requests one at a time, and writes what it answered.

Protocol (:func:`kgqa_lib.bench.speed.engines.run_engines` is the other side):

1. ``--requests FILE``: a JSON list of ``{"method", "index", "request"}`` (``request``: the fields of a
   :class:`kgqa_lib.llm.chat.ChatRequest` but its model id);
2. the child loads the model and answers a warm-up ``Hi`` (1 token): the load stays outside the clock;
3. it prints one line ``{"ready": true, "engine": …, "model_id": …, "load_s": …}`` on stdout and waits for a
   line ``go`` on stdin (anything else, or the end of stdin: it exits with code 1, answering nothing);
4. it answers its requests in order and writes ``--out FILE``: ``{"seconds", "cpu_seconds", "rows"}``, a row
   per request (method, index, seconds, text, prompt_tokens, completion_tokens).

A failure before the ready line is printed as ``{"error": …}`` (code 1). ``--backend MODULE:NAME`` builds the
engine from another class with :class:`~kgqa_lib.llm.chat.LocalBackend`'s constructor (default: that class).

Run alone as a file (:mod:`.engines` starts it the way :mod:`.scaleout` starts its children), so a child
imports the LLM layer only, not the benchmark tables; it therefore uses absolute names only."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_BACKEND = "kgqa_lib.llm.chat:LocalBackend"


def load_backend(spec: str, model: str, threads: int) -> Any:
    """The engine: ``MODULE:NAME(model, n_threads=threads, batch=0, prefix_cache=0)``, one request at a time."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)(model, n_threads=threads, batch=0, prefix_cache=0)


def as_request(model_id: str, fields: dict[str, Any]):
    """The :class:`~kgqa_lib.llm.chat.ChatRequest` of one entry of the requests file."""
    from kgqa_lib.llm.chat import ChatRequest

    return ChatRequest(model_id, tuple((role, content) for role, content in fields["messages"]),
                       temperature=fields["temperature"], top_p=fields["top_p"], max_tokens=fields["max_tokens"],
                       stop=tuple(fields["stop"]), seed=fields["seed"], sample_index=fields["sample_index"])


def answer(backend: Any, todo: list[dict[str, Any]]) -> dict[str, Any]:
    """Every request of ``todo`` in order, each timed."""
    rows = []
    started, cpu = time.perf_counter(), time.process_time()
    for item in todo:
        t = time.perf_counter()
        res = backend.complete(as_request(backend.model_id, item["request"]))
        rows.append({"method": item["method"], "index": item["index"], "seconds": round(time.perf_counter() - t, 3),
                     "text": res["text"], "prompt_tokens": res.get("prompt_tokens"),
                     "completion_tokens": res.get("completion_tokens")})
    return {"seconds": round(time.perf_counter() - started, 3), "cpu_seconds": round(time.process_time() - cpu, 3),
            "rows": rows}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="one engine of `kgqa bench run engines`")
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--requests", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--backend", default=DEFAULT_BACKEND)
    args = ap.parse_args(argv)
    try:
        t = time.perf_counter()
        todo = json.loads(Path(args.requests).read_text(encoding="utf-8"))
        backend = load_backend(args.backend, args.model, args.threads)
        from kgqa_lib.llm.chat import ChatRequest

        backend.complete(ChatRequest(backend.model_id, (("user", "Hi"),), max_tokens=1))
        load_s = round(time.perf_counter() - t, 3)
    except Exception as exc:  # noqa: BLE001 - the parent shows it in one line
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}", "user_error": _is_user_error(exc)}), flush=True)
        return 1
    print(json.dumps({"ready": True, "engine": getattr(backend, "engine", args.backend),
                      "model_id": backend.model_id, "load_s": load_s}), flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    out = answer(backend, todo)
    Path(args.out).write_text(json.dumps(out, ensure_ascii=False), encoding="utf-8")
    return 0


def _is_user_error(exc: BaseException) -> bool:
    from kgqa_lib.errors import UserError

    return isinstance(exc, UserError)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
