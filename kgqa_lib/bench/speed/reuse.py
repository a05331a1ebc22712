"""``prompt_reuse``: every method's recorded requests, in the order a run sent them, through the three ways
the embedded model can serve them (``kgqa bench run prompt_reuse``).

A method's consecutive requests share long parts (a system prompt, exemplars; a feedback turn repeats the
conversation before it). How much of a prompt is evaluated again depends on the engine:

- **in-process, one request at a time** (``local``, how every table runs): llama-cpp-python keeps the context
  of the last prompt only, so a prompt reuses what it shares with the request just before it;
- **in-process with saved prefix states** (``local?prefix_cache=8``): the model state after each of the last 8
  calls is kept, and a prompt starts from the one sharing its longest prefix;
- **the managed llama.cpp server** (``server``: 1 slot, its prompt cache on, numerics as in-process): the
  server keeps earlier prompts' states in memory and reuses the longest match.

Per method (IO, CoT, Self-Consistency's samples, ToG, Keqing, PG&AKV, FuSIC, KB-BINDER): the first
``--requests`` recorded requests of the measured model's transcript (``data/llm_cache/<model>.jsonl``) whose
system prompt is one of the method's, each sent through every route (the routes take turns going first, so
drifting load favours none), with wall seconds, prompt tokens sent and (in-process) evaluated, and the answers
identical to the one-at-a-time route's. The ratio of the seconds is the LLM's speed-up; the suite line weighs
it by each method's recorded LLM seconds per question in the committed records. Routes that change answers
carry their own model id in a run (``…@llama-server``), and a report never pairs them silently."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from ...errors import UserError
from ..measure import Measurement, Option, register
from .throughput import _cpu_sample, other_cpu_share, recorded_seconds_per_question
from .timing import load_average, md_table, progress

#: method → its prompts (the system prompts that identify its requests in a transcript)
METHODS = {
    "io": ("io", "io_open"), "cot": ("cot", "cot_open"),
    "tog": ("tog_relations", "tog_entities", "tog_judge", "tog_answer", "tog_answer_open"),
    "keqing": ("keqing_decompose", "keqing_select", "keqing_select_text", "keqing_chain", "keqing_reason",
               "keqing_respond"),
    "pgakv": ("pgakv_pseudo", "pgakv_verify", "pgakv_answer", "pgakv_answer_open"),
    "fusic": ("fusic_rerank", "fusic_sparql", "fusic_sexpr", "fusic_naive"),
    "kbbinder": ("kbbinder_draft",),
}
NAMES = {"io": "IO", "cot": "CoT and Self-Consistency", "tog": "Think-on-Graph", "keqing": "Keqing",
         "pgakv": "PG&AKV", "fusic": "FuSIC-KBQA", "kbbinder": "KB-BINDER"}
ROUTES = ("one", "prefix", "server")
ROUTE_NAMES = {"one": "in-process, one request at a time (every table)",
               "prefix": "in-process, saved prefix states (`local?prefix_cache=8`)",
               "server": "managed llama.cpp server, 1 slot, prompt cache (`server`)"}
#: the records' methods a measured method stands for in the suite line (SC sends CoT's prompts)
SUITE_METHODS = {"io": "io", "qsm": "io", "cot": "cot", "sc": "cot", "tog": "tog", "keqing": "keqing",
                 "pgakv": "pgakv", "fusic": "fusic", "kbbinder": "kbbinder", "langchain_sparql": None}


def recorded_sequences(model_id: str, n: int) -> dict[str, list[dict[str, Any]]]:
    """Per method: its first ``n`` recorded requests of ``model_id``, in transcript order."""
    from ...evaluate.transcripts import recorded_calls
    from ...llm.prompting import load_prompt

    out = {}
    for method, prompts in METHODS.items():
        calls = recorded_calls(model_id, system=[load_prompt(p).system for p in prompts])
        if calls:
            out[method] = calls[:n]
    return out


def _request(call: dict[str, Any], model_id: str):
    from ...llm.chat import ChatRequest

    r = call["request"]
    return ChatRequest(model_id, tuple((m["role"], m["content"]) for m in r["messages"]),
                       temperature=r["temperature"], top_p=r["top_p"], max_tokens=r["max_tokens"],
                       stop=tuple(r["stop"]), seed=r["seed"], sample_index=r.get("sample_index", 0))


def _backends(model: str, threads: int) -> dict[str, Any]:
    from ...llm.chat import LocalBackend
    from ...llm.server import ServerBackend

    return {"one": LocalBackend(model, n_threads=threads, batch=0, prefix_cache=0),
            "prefix": LocalBackend(model, n_threads=threads, batch=0, prefix_cache=8),
            "server": ServerBackend(model, threads=threads)}


def measure(opts: SimpleNamespace, previous: dict[str, Any]) -> dict[str, Any]:
    from ...llm import models
    from ...llm.chat import default_threads

    spec = models.get_spec(opts.model)
    sequences = recorded_sequences(spec.model_id, opts.requests)
    if not sequences:
        raise UserError(f"no recorded requests of {spec.model_id} in data/llm_cache/: nothing to measure")
    threads = opts.threads or default_threads()
    backends = _backends(spec.name, threads)
    from ...llm.chat import ChatRequest

    for b in backends.values():  # loaded (the server started) before any clock starts
        b.complete(ChatRequest(b.model_id, (("user", "Hi"),), max_tokens=1))
    load0, cpu0, started = load_average(), _cpu_sample(), time.time()
    todo = [(m, c) for m, calls in sequences.items() for c in calls]
    measured: dict[str, list[dict[str, Any]]] = {m: [] for m in sequences}
    for i, (method, call) in enumerate(progress(todo, "recorded requests", unit="request")):
        order = ROUTES[i % 3:] + ROUTES[:i % 3]
        row: dict[str, Any] = {"recorded_text": call["response"]["text"]}
        for route in order:
            b = backends[route]
            s0 = b.prefix_stats()["evaluated"] if route != "server" else None
            t = time.perf_counter()
            res = b.complete(_request(call, b.model_id))
            row[route] = {"seconds": round(time.perf_counter() - t, 3), "text": res["text"],
                          "prompt_tokens": res.get("prompt_tokens"), "completion_tokens": res.get("completion_tokens"),
                          "evaluated": None if s0 is None else b.prefix_stats()["evaluated"] - s0}
        measured[method].append(row)
    out = {"model": spec.name, "model_id": spec.model_id, "threads": threads, "requests": opts.requests,
           "engines": {r: backends[r].engine for r in ROUTES}, "minutes": round((time.time() - started) / 60, 1),
           "load_average": [load0, load_average()], "other_cpu": other_cpu_share(cpu0, _cpu_sample()),
           "summary": summarise(measured), "recorded_per_question": recorded_seconds_per_question(spec.model_id)}
    return out


def summarise(measured: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per method and route: requests, seconds, prompt tokens sent and evaluated, answers identical to the
    one-at-a-time route's and to the recording, and the ratio of seconds to one at a time."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for method, rows in measured.items():
        if not rows:
            continue
        one = sum(r["one"]["seconds"] for r in rows)
        out[method] = {}
        for route in ROUTES:
            secs = sum(r[route]["seconds"] for r in rows)
            ev = [r[route]["evaluated"] for r in rows]
            out[method][route] = {
                "requests": len(rows), "seconds": round(secs, 2),
                "prompt_tokens": sum(r[route]["prompt_tokens"] or 0 for r in rows),
                "evaluated": None if any(e is None for e in ev) else sum(ev),
                "ratio": round(one / secs, 2) if secs else None,
                "identical_to_one": sum(r[route]["text"] == r["one"]["text"] for r in rows),
                "identical_to_recorded": sum(r[route]["text"] == r["recorded_text"] for r in rows)}
    return out


def suite(d: dict[str, Any]) -> dict[str, Any] | None:
    """Per route: the committed records' LLM hours one request at a time, and with each measured method's
    ratio on that route (methods not measured keep theirs), and the share of measured requests whose answer
    is identical to one at a time."""
    per_q, summary = d.get("recorded_per_question") or {}, d.get("summary") or {}
    total = sum(r["questions"] * r["seconds"] for r in per_q.values())
    if total <= 0 or not summary:
        return None
    out = {"hours": round(total / 3600, 1), "routes": {}}
    for route in ROUTES[1:]:
        hours = 0.0
        for m, r in per_q.items():
            measured = summary.get(SUITE_METHODS.get(m) or "", {}).get(route)
            hours += r["questions"] * r["seconds"] / (measured["ratio"] if measured and measured["ratio"] else 1.0)
        n = sum(s[route]["requests"] for s in summary.values())
        same = sum(s[route]["identical_to_one"] for s in summary.values())
        out["routes"][route] = {"hours": round(hours / 3600, 1), "ratio": round(total / hours, 2),
                                "identical": same, "requests": n}
    return out


def report(d: dict[str, Any]) -> str:
    rows = []
    for method, routes in d["summary"].items():
        for route, s in routes.items():
            ev = "—" if s["evaluated"] is None else f"{s['evaluated']:,}"
            rows.append([NAMES[method], ROUTE_NAMES[route], s["requests"], f"{s['prompt_tokens']:,} → {ev}",
                         f"{s['seconds'] / s['requests']:.2f}", "1" if route == "one" else f"**{s['ratio']}×**",
                         "—" if route == "one" else f"{s['identical_to_one']}/{s['requests']}",
                         f"{s['identical_to_recorded']}/{s['requests']}"])
    lines = [
        "# Prompt reuse: every method's recorded requests through the three engines", "",
        f"`kgqa bench run prompt_reuse`: the embedded model `{d['model_id']}` ({d['threads']} thread(s)) answers "
        f"the first {d['requests']} recorded requests of each method (its transcript, in the order a run sent "
        "them) once per route, the routes taking turns going first. In-process one at a time reuses only what a "
        "prompt shares with the request just before it; saved prefix states keep the last 8 calls' states; the "
        "server keeps earlier prompts in its prompt cache. Answers are compared byte for byte (a sampled request "
        "is seeded the same way on every route, but the server samples with its own code). Routes that change "
        "answers run under their own model id, so their records never mix with the default's.", "",
        md_table(["method", "route", "requests", "prompt tokens sent → evaluated", "s / request",
                  "speed vs one at a time", "identical to one at a time", "identical to the recording"], rows), ""]
    s = suite(d)
    if s:
        parts = "; ".join(f"{ROUTE_NAMES[r].split(' (')[0]} ≈ {v['hours']} h (**{v['ratio']}×**, "
                          f"{v['identical']}/{v['requests']} measured answers identical)" for r, v in s["routes"].items())
        lines += [f"The whole suite (the committed records' LLM time, {s['hours']} h one request at a time, each "
                  f"method weighted by its recorded seconds per question): {parts}. Neither route keeps every answer "
                  "identical, so neither counts towards the identical-answer target of `throughput.md`; a table "
                  "run through one is a run of its own (`--llm server`), compared question by question in the "
                  "report's *Models* section.", ""]
    eng = "; ".join(f"{ROUTE_NAMES[r].split(' (')[0]}: {e}" for r, e in d["engines"].items())
    lines += [f"Engines: {eng}.", "",
              f"Measured {d.get('measured_at', '')} in {d['minutes']} min; load average {d['load_average'][0]} → "
              f"{d['load_average'][1]}, other processes used "
              f"{'an unknown share' if d.get('other_cpu') is None else format(100 * d['other_cpu'], '.0f') + ' %'} "
              "of the CPU "
              "meanwhile (a busy machine stretches every route; compare the ratios). Raw numbers: `prompt_reuse.json`.",
              ""]
    return "\n".join(lines)


def estimate(opts: SimpleNamespace, previous: dict[str, Any]) -> str:
    from ...llm import models

    spec = models.get_spec(opts.model)
    seqs = recorded_sequences(spec.model_id, opts.requests)
    n = sum(len(v) for v in seqs.values())
    rec = sum(float(c["response"].get("seconds") or 0.0) for v in seqs.values() for c in v)
    return (f"{n} recorded request(s) of {spec.model_id} ({', '.join(f'{NAMES[m]} {len(v)}' for m, v in seqs.items())}), "
            f"3 routes: one at a time they took {rec / 60:.0f} min when recorded, so ≈ {3 * rec / 60:.0f} min at "
            "most; the server is started on 127.0.0.1 and stopped at the end; run it on an idle machine")


TABLE = register(Measurement(
    name="prompt_reuse", title="every method's recorded requests: in-process one at a time vs saved prefix states vs "
                               "the managed llama.cpp server",
    data="prompt_reuse.json", output="prompt_reuse.md", report=report, measure=measure, estimate=estimate,
    options=(Option("--model", "qwen2.5-coder-1.5b", "the embedded model measured (its transcript gives the requests)"),
             Option("--requests", 8, "recorded requests per method", low=1),
             Option("--threads", 0, "threads of each engine (0: the cores available)", low=0)),
    requires="the embedded model and llama-server (`make llama-server`)"))
