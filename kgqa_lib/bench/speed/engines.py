"""``engines``: with N cores and a queue of questions to answer with the embedded model, run one engine with all
N threads answering one request at a time, or split the questions across k engines (separate processes) of
N/k threads each, running together? (``kgqa bench run engines``)

The requests are ``prompt_reuse``'s (:func:`.reuse.recorded_sequences`): per method, its first ``--requests``
recorded requests of the measured model's transcript, in the order a run sent them, method after method.

- **one engine** (route ``one``): one child process (:mod:`.engines_child`) with ``--threads`` threads (default:
  the cores available) answers them all in that order;
- **k engines** (route ``split<k>``, for each k of ``--engines``): k child processes of ``max(1, threads // k)``
  threads each; engine j gets the requests at positions j, j+k, j+2k… of that order, so within each method it
  gets every k-th request and its consecutive requests still share their prompts' long parts.

Every engine of a route loads the model and answers a warm-up first; when all are ready they are told to go at
once, and the route's wall is from then until the last one finishes. With ``--repeats`` > 1 the routes take turns
going first. Answers are compared byte for byte with one engine's and with the recording.

The ratio of a route is its questions per hour ÷ one engine's: one engine's wall ÷ the route's wall for the same
requests. Per method (the engines of a split route answer different methods at the same time), it comes from
each request's own seconds instead: one engine's seconds for the method ÷ (the k engines' seconds for it ÷ k),
i.e. as if the k engines stayed equally busy on that method. The suite line weighs each method's ratio by its
recorded LLM seconds per question in the committed records (as ``prompt_reuse``'s does; a method not measured
takes the route's overall ratio)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

from ...errors import UserError
from ..measure import Measurement, Option, register
from . import reuse
from .scaleout import _BOOT
from .throughput import _cpu_sample, other_cpu_share, recorded_seconds_per_question
from .timing import load_average, md_table

CHILD = Path(__file__).with_name("engines_child.py")


# ---------------------------------------------------------------------------------- the routes
def ordered(sequences: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The requests in the order one engine answers them (method after method, transcript order within each):
    entries of the children's requests file."""
    out = []
    for method, calls in sequences.items():
        for i, call in enumerate(calls):
            req = dataclasses.asdict(reuse._request(call, ""))
            del req["model_id"]
            out.append({"method": method, "index": i, "request": req})
    return out


def split(todo: Sequence[Any], k: int) -> list[list[Any]]:
    """``todo`` dealt round-robin to ``k`` engines: engine j gets positions j, j+k, j+2k…, in order."""
    return [list(todo[j::k]) for j in range(k)]


def route_name(k: int) -> str:
    return "one" if k == 1 else f"split{k}"


def route_label(route: dict[str, Any]) -> str:
    k, t = route["engines"], route["threads_each"]
    return f"one engine, {t} thread(s)" if k == 1 else f"{k} engines × {t} thread(s)"


def _read_ready(proc: subprocess.Popen, stderr: Path) -> dict[str, Any]:
    """The child's ready line (its other stdout lines, if any, are skipped); its failure as an error."""
    while True:
        line = proc.stdout.readline()
        if not line:
            proc.wait()
            tail = stderr.read_text(encoding="utf-8", errors="replace")[-1500:].strip()
            raise RuntimeError(f"an engine process exited ({proc.returncode}) before it was ready: {tail or '(no output)'}")
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and msg.get("error"):
            proc.wait()
            if msg.get("user_error"):
                raise UserError(f"an engine process could not start: {msg['error']}")
            raise RuntimeError(f"an engine process could not start: {msg['error']}")
        if isinstance(msg, dict) and msg.get("ready"):
            return msg


def run_engines(model: str, parts: list[list[dict[str, Any]]], threads: int, *, backend: str | None = None,
                env: dict[str, str] | None = None) -> dict[str, Any]:
    """One child process per part, each with ``threads`` threads; all are started and loaded, then told to go at
    once. Returns the wall from go until the last one finished, the share of the CPU other processes used
    meanwhile, and per engine its ready line, wall, CPU seconds and answered rows."""
    from ...paths import repo_root

    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="kgqa-engines-") as tmp:
        try:
            for j, part in enumerate(parts):
                req, out, err = (Path(tmp) / f"{name}{j}" for name in ("requests", "answers", "stderr"))
                req.write_text(json.dumps(part, ensure_ascii=False), encoding="utf-8")
                args = [sys.executable, "-c", _BOOT, str(CHILD), "--model", model, "--threads", str(threads),
                        "--requests", str(req), "--out", str(out)] + (["--backend", backend] if backend else [])
                with open(err, "w", encoding="utf-8") as fh:
                    procs.append(subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=fh,
                                                  text=True, cwd=repo_root(), env=env))
            ready = [_read_ready(p, Path(tmp) / f"stderr{j}") for j, p in enumerate(procs)]
            ends: list[float] = [0.0] * len(procs)

            def finish(j: int) -> None:
                procs[j].stdout.read()  # (drained: nothing more is expected)
                procs[j].wait()
                ends[j] = time.perf_counter()

            waiters = [threading.Thread(target=finish, args=(j,), daemon=True) for j in range(len(procs))]
            machine0, own0 = _cpu_sample()[0], _self_cpu()
            go = time.perf_counter()
            for p in procs:
                p.stdin.write("go\n")
                p.stdin.close()
            for w in waiters:
                w.start()
            for w in waiters:
                w.join()
            machine1, own1 = _cpu_sample()[0], _self_cpu()
            engines = []
            for j, p in enumerate(procs):
                if p.returncode != 0:
                    tail = (Path(tmp) / f"stderr{j}").read_text(encoding="utf-8", errors="replace")[-1500:].strip()
                    raise RuntimeError(f"an engine process failed ({p.returncode}) while answering: {tail or '(no output)'}")
                answers = json.loads((Path(tmp) / f"answers{j}").read_text(encoding="utf-8"))
                engines.append({"engine": ready[j]["engine"], "model_id": ready[j]["model_id"],
                                "load_s": ready[j]["load_s"], "wall": round(ends[j] - go, 3), **answers})
        finally:
            for p in procs:  # (only when something failed: they have all exited otherwise)
                if p.poll() is None:
                    p.kill()
                    p.wait()
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    children = sum(e["cpu_seconds"] for e in engines)
    return {"wall": round(max(ends) - go, 3) if ends else 0.0, "engines": engines,
            "other_cpu": other_cpu_share((machine0, 0), (machine1, round((own1 - own0 + children) * tick)))}


def _self_cpu() -> float:
    """This process's own CPU seconds (its children's are counted from what they report)."""
    t = os.times()
    return t.user + t.system


# ---------------------------------------------------------------------------------- measuring
def measure(opts: SimpleNamespace, previous: dict[str, Any], *, backend: str | None = None,
            env: dict[str, str] | None = None) -> dict[str, Any]:
    """Every route over the same requests (see the module's doc); ``backend``/``env``: the children's engine
    class and environment (:mod:`.engines_child`; default the embedded model, this process's environment)."""
    from ...llm import models
    from ...llm.chat import default_threads

    spec = models.get_spec(opts.model)
    sequences = reuse.recorded_sequences(spec.model_id, opts.requests)
    if not sequences:
        raise UserError(f"no recorded requests of {spec.model_id} in data/llm_cache/: nothing to measure")
    threads = opts.threads or default_threads()
    todo = ordered(sequences)
    recorded = {(m, i): c["response"]["text"] for m, calls in sequences.items() for i, c in enumerate(calls)}
    ks = [1] + sorted(set(opts.engines))
    routes = {route_name(k): {"engines": k, "threads_each": max(1, threads // k)} for k in ks}
    names = list(routes)
    load0, cpu0, started = load_average(), _cpu_sample(), time.time()
    runs = []
    for r in range(opts.repeats):
        order = names[r % len(names):] + names[:r % len(names)]  # the routes take turns going first
        run: dict[str, Any] = {"order": order, "routes": {}}
        for name in order:
            k = routes[name]["engines"]
            print(f"  repeat {r + 1}/{opts.repeats}: {route_label(routes[name])} …", file=sys.stderr, flush=True)
            run["routes"][name] = run_engines(spec.name, split(todo, k), routes[name]["threads_each"],
                                              backend=backend, env=env)
        runs.append(run)
    for name, route in routes.items():
        route["engine"] = runs[0]["routes"][name]["engines"][0]["engine"]
    return {"model": spec.name, "model_id": spec.model_id, "threads": threads, "requests": opts.requests,
            "repeats": opts.repeats, "routes": routes, "minutes": round((time.time() - started) / 60, 1),
            "load_average": [load0, load_average()], "other_cpu": other_cpu_share(cpu0, _cpu_sample()),
            **summarise(runs, routes, recorded), "recorded_per_question": recorded_seconds_per_question(spec.model_id)}


def summarise(runs: list[dict[str, Any]], routes: dict[str, dict[str, Any]],
              recorded: dict[tuple[str, int], str]) -> dict[str, Any]:
    """``runs`` (the raw answers) → ``walls`` (per repeat: each route's wall, its engines' walls, the CPU share
    of other processes), ``totals`` (per route: wall over the repeats, ratio to one engine, answers identical
    to one engine's and to the recording) and ``summary`` (per route and method: requests, seconds answering
    them summed over the route's engines, ratio, identical answers)."""
    walls: list[dict[str, Any]] = []
    per: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        walls.append({"order": run["order"], "routes": {
            name: {"wall": res["wall"], "engine_walls": [e["wall"] for e in res["engines"]],
                   "other_cpu": res["other_cpu"]} for name, res in run["routes"].items()}})
        one = {(row["method"], row["index"]): row["text"] for e in run["routes"]["one"]["engines"] for row in e["rows"]}
        for name, res in run["routes"].items():
            for e in res["engines"]:
                for row in e["rows"]:
                    key = (row["method"], row["index"])
                    s = per.setdefault(name, {}).setdefault(row["method"], {
                        "requests": set(), "answers": 0, "seconds": 0.0, "identical_to_one": 0, "identical_to_recorded": 0})
                    s["requests"].add(row["index"])
                    s["answers"] += 1
                    s["seconds"] += row["seconds"]
                    s["identical_to_one"] += row["text"] == one.get(key)
                    s["identical_to_recorded"] += row["text"] == recorded.get(key)
    summary: dict[str, dict[str, Any]] = {}
    for name, methods in per.items():
        k = routes[name]["engines"]
        summary[name] = {}
        for method, s in methods.items():
            base = per["one"][method]["seconds"]
            share = s["seconds"] / k
            summary[name][method] = {
                "requests": len(s["requests"]), "answers": s["answers"], "seconds": round(s["seconds"], 2),
                "ratio": round(base / share, 2) if share else None,
                "identical_to_one": s["identical_to_one"], "identical_to_recorded": s["identical_to_recorded"]}
    totals = {}
    one_wall = sum(w["routes"]["one"]["wall"] for w in walls)
    for name in routes:
        wall = sum(w["routes"][name]["wall"] for w in walls)
        totals[name] = {"wall": round(wall, 2), "ratio": round(one_wall / wall, 2) if wall else None,
                        "answers": sum(s["answers"] for s in summary[name].values()),
                        "identical_to_one": sum(s["identical_to_one"] for s in summary[name].values()),
                        "identical_to_recorded": sum(s["identical_to_recorded"] for s in summary[name].values())}
    return {"walls": walls, "totals": totals, "summary": summary}


def suite(d: dict[str, Any]) -> dict[str, Any] | None:
    """Per split route: the committed records' LLM hours with one engine (as recorded) and with each measured
    method's ratio on that route (a method not measured: the route's overall ratio)."""
    per_q, summary, totals = d.get("recorded_per_question") or {}, d.get("summary") or {}, d.get("totals") or {}
    total = sum(r["questions"] * r["seconds"] for r in per_q.values())
    if total <= 0 or not summary:
        return None
    out: dict[str, Any] = {"hours": round(total / 3600, 1), "routes": {}}
    for name in d["routes"]:
        if name == "one":
            continue
        hours = 0.0
        for m, r in per_q.items():
            measured = summary[name].get(reuse.SUITE_METHODS.get(m) or "")
            ratio = (measured or {}).get("ratio") or totals[name]["ratio"] or 1.0
            hours += r["questions"] * r["seconds"] / ratio
        out["routes"][name] = {"hours": round(hours / 3600, 1), "ratio": round(total / hours, 2)}
    return out


def conclusion(d: dict[str, Any]) -> str:
    """Which route answers more questions per hour on the measuring machine, from the walls."""
    routes, totals = d["routes"], d["totals"]
    splits = [n for n in routes if n != "one"]
    best = max(splits, key=lambda n: totals[n]["ratio"] or 0.0)
    r, one, other = totals[best]["ratio"], route_label(routes["one"]), route_label(routes[best])
    if r is None or r == 1.0:
        return f"On this machine neither route answers more questions per hour: {other} ran at {r}× {one}."
    if r < 1.0:
        rest = "" if len(splits) == 1 else " (the best of the split routes)"
        return (f"On this machine **one engine with all {d['threads']} thread(s)** answers more questions per hour: "
                f"{other}{rest} ran at {r}× its rate, so a queue of cells runs fastest one engine at a time.")
    return (f"On this machine **splitting the questions** answers more questions per hour: {other} ran at {r}× "
            f"the rate of {one}, so a queue of cells runs fastest split across {routes[best]['engines']} engines.")


def report(d: dict[str, Any]) -> str:
    routes, totals = d["routes"], d["totals"]
    ks = "; ".join(route_label(r) for n, r in routes.items() if n != "one")
    rows = []
    for name, route in routes.items():
        for method, s in d["summary"][name].items():
            rows.append([route_label(route), reuse.NAMES[method], s["requests"],
                         f"{s['seconds'] / s['answers']:.2f}", f"{s['seconds'] / route['engines'] / s['answers']:.2f}",
                         "1" if name == "one" else f"**{s['ratio']}×**",
                         "—" if name == "one" else f"{s['identical_to_one']}/{s['answers']}",
                         f"{s['identical_to_recorded']}/{s['answers']}"])
        t = totals[name]
        rows.append([route_label(route), "**all (wall)**", sum(s["requests"] for s in d["summary"][name].values()),
                     "", f"{t['wall'] / t['answers']:.2f}", "1" if name == "one" else f"**{t['ratio']}×**",
                     "—" if name == "one" else f"{t['identical_to_one']}/{t['answers']}",
                     f"{t['identical_to_recorded']}/{t['answers']}"])
    repeats = d["repeats"]
    lines = [
        "# One engine with every core, or several engines splitting the questions", "",
        f"`kgqa bench run engines`: the embedded model `{d['model_id']}` answers the first {d['requests']} recorded "
        "requests of each method (its transcript, in the order a run sent them), one request at a time per engine, "
        f"by one engine with {d['threads']} thread(s) and by k engines (separate processes) splitting the "
        f"threads and running together ({ks}), engine j answering the requests at positions j, j + k, "
        "j + 2k… (every k-th request of each method). Each engine loads the model and answers a warm-up "
        "before the clock starts; a route's wall runs from the moment all its engines are told to go until the "
        f"last one finishes ({repeats} repeat(s)" + (", the routes taking turns going first" if repeats > 1 else "")
        + "). Answers are compared byte for byte with one engine's and with the recording.", "",
        "The speed is questions per hour relative to one engine. For a whole route it is one engine's wall ÷ the "
        "route's wall (rows *all (wall)*). Per method it comes from each request's own seconds, because the "
        "engines of a split route answer different methods at the same time: one engine's seconds for the method "
        "÷ (the k engines' seconds for it ÷ k). *s / request per engine* is what one engine took per request; "
        "*route s / request* divides it by the engines answering together.", "",
        md_table(["route", "method", "requests", "s / request per engine", "route s / request",
                  "questions per hour vs one engine", "identical to one engine", "identical to the recording"], rows),
        ""]
    for name, route in routes.items():
        ws = [w["routes"][name] for w in d["walls"]]
        lines.append(f"- {route_label(route)}: wall " + "; ".join(
            f"{w['wall']:.1f} s" + (f" (engines finished after {', '.join(f'{x:.1f}' for x in w['engine_walls'])} s)"
                                    if len(w["engine_walls"]) > 1 else "") for w in ws) + f". Engine: {route['engine']}.")
    lines.append("")
    s = suite(d)
    if s:
        parts = "; ".join(f"{route_label(routes[n])} ≈ {v['hours']} h (**{v['ratio']}×**, "
                          f"{totals[n]['identical_to_one']}/{totals[n]['answers']} measured answers identical to one "
                          "engine's)" for n, v in s["routes"].items())
        lines += [f"The whole suite (the committed records' LLM time, {s['hours']} h with one engine, each method "
                  f"weighted by its recorded seconds per question; a method not measured takes its route's overall "
                  f"speed): {parts}.", ""]
    lines += [conclusion(d), ""]
    other = "an unknown share" if d.get("other_cpu") is None else f"{100 * d['other_cpu']:.0f} %"
    lines += [f"Measured {d.get('measured_at', '')} on {(d.get('machine') or {}).get('cpus', '?')} CPUs in "
              f"{d['minutes']} min; load average {d['load_average'][0]} → {d['load_average'][1]}, other processes "
              f"used {other} of the CPU meanwhile (a busy machine stretches every route). "
              "Raw numbers: `engines.json`.", ""]
    return "\n".join(lines)


def estimate(opts: SimpleNamespace, previous: dict[str, Any]) -> str:
    from ...llm import models

    spec = models.get_spec(opts.model)
    seqs = reuse.recorded_sequences(spec.model_id, opts.requests)
    n = sum(len(v) for v in seqs.values())
    rec = sum(float(c["response"].get("seconds") or 0.0) for v in seqs.values() for c in v)
    ks = sorted(set(opts.engines))
    routes = 1 + len(ks)
    loads = (1 + sum(ks)) * opts.repeats
    return (f"{n} recorded request(s) of {spec.model_id} "
            f"({', '.join(f'{reuse.NAMES[m]} {len(v)}' for m, v in seqs.items())}), {routes} routes (one engine; "
            f"{', '.join(f'{k} engines' for k in ks)}) × {opts.repeats} repeat(s): they took {rec / 60:.0f} min when "
            f"recorded, so ≈ {routes * opts.repeats * rec / 60:.0f} min if every route runs at that speed, plus "
            f"{loads} model loads; run it on an idle machine")


TABLE = register(Measurement(
    name="engines", title="one engine with every core vs several engines (processes) splitting the questions",
    data="engines.json", output="engines.md", report=report, measure=measure, estimate=estimate,
    options=(Option("--model", "qwen2.5-coder-1.5b", "the embedded model measured (its transcript gives the requests)"),
             Option("--requests", 4, "recorded requests per method", low=1),
             Option("--threads", 0, "threads of the one engine, split among the k engines (0: the cores available)",
                    low=0),
             Option("--engines", "2", "numbers of engines k splitting the questions, one route each", low=2,
                    kind="ints"),
             Option("--repeats", 1, "times each route runs (the routes take turns going first)", low=1)),
    requires="the embedded model"))
