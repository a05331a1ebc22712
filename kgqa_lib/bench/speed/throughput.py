"""``throughput``: samples of one prompt decoded together vs one request at a time (``kgqa bench run throughput``).

Self-consistency (3 CoT samples at temperature 0.7) and KB-BINDER (6 drafts) ask the embedded model for
several samples of one prompt. One at a time, llama-cpp-python evaluates the prompt for the first sample and
only its last token again for each later one, then decodes each sample alone. With ``local?batch=N``
(:meth:`~kgqa_lib.llm.chat.LocalBackend.complete_many`) the samples are decoded together. This table measures
both on real requests:

- **the prompts:** the self-consistency and KB-BINDER requests in the committed transcript of ``--recorded``
  (``data/llm_cache/<model>.jsonl``), grouped by prompt (a group = one question's samples); with
  ``--kbbinder-metaqa N``, also N MetaQA dev questions' KB-BINDER prompts built by the method's own stages
  (its exemplar pool and BM25 selection; needs ``KGQA_DATA_DIR``), which the transcript holds few of;
- **the routes:** one request at a time (``LocalBackend.complete``, as every table runs), and decoded
  together with at most R rows a decode call for each R of ``--rows``. 3 rows (:data:`EXACT_BATCH_ROWS`)
  keep every sample identical to one at a time; more rows use a faster kernel whose answers differ
  (their model id ends in ``@batched``). Each route has its own loaded model and runs the groups in the
  same order, so each prompt starts from the context the previous group left, as in a run;
- **per group and route:** wall seconds, prompt tokens sent and evaluated, decode calls and rows, and how many
  answers are identical (byte for byte, as the library keeps them) to the live one-at-a-time answers and,
  when the measured model is the recorded one and ``--max-tokens`` is 0, to the recorded answers.

A question of these methods makes no other LLM call, so the ratio of their seconds is the ratio of questions
per hour (KB-BINDER's binding and voting take milliseconds). The other methods send one request per step:
they have no batching route; their recorded seconds per question (from the committed records) are listed.
Writes ``results/bench/throughput.json`` and ``throughput.md``; run it on an idle machine (the other CPU
load during the measurement is recorded beside the numbers)."""

from __future__ import annotations

import gzip
import json
import os
import time
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

from ...errors import UserError
from ..measure import Measurement, Option, register
from .timing import load_average, md_table, progress

#: (method, the prompts whose samples it draws) as recorded in the transcripts
METHOD_PROMPTS = {"sc": ("cot", "cot_open"), "kbbinder": ("kbbinder_draft",)}
METHOD_NAMES = {"sc": "Self-Consistency (3 CoT samples)", "kbbinder": "KB-BINDER (6 drafts)"}
TARGET_RATIO = 2.0
SUITE_TARGET = 1.3


# ---------------------------------------------------------------------------------- the requests
def recorded_groups(recorded: str, limit: int = 0) -> dict[str, list[dict[str, Any]]]:
    """The recorded self-consistency and KB-BINDER prompts of the model id ``recorded`` with more than one
    sample: per method, groups (one prompt's samples, by sample index) in transcript order, at most
    ``limit`` each (0: all)."""
    from ...evaluate.transcripts import recorded_calls
    from ...llm.prompting import load_prompt

    out: dict[str, list[dict[str, Any]]] = {}
    for method, prompts in METHOD_PROMPTS.items():
        calls = recorded_calls(recorded, system=[load_prompt(p).system for p in prompts])
        groups: dict[str, dict[str, Any]] = {}
        for c in calls:
            r = c["request"]
            key = json.dumps([r["messages"], r["temperature"], r["top_p"], r["max_tokens"], r["stop"], r["seed"]])
            g = groups.setdefault(key, {"method": method, "source": "transcript",
                                        "messages": [(m["role"], m["content"]) for m in r["messages"]],
                                        "temperature": r["temperature"], "top_p": r["top_p"],
                                        "max_tokens": r["max_tokens"], "stop": list(r["stop"]), "seed": r["seed"],
                                        "recorded": {}})
            g["recorded"][int(r["sample_index"])] = {"text": c["response"]["text"],
                                                     "seconds": float(c["response"].get("seconds") or 0.0)}
        chosen = [g for g in groups.values() if len(g["recorded"]) > 1]
        out[method] = chosen[:limit] if limit else chosen
    return out


def metaqa_kbbinder_groups(n: int) -> list[dict[str, Any]]:
    """KB-BINDER's draft prompts for the first questions of MetaQA dev (1-, 2- and 3-hop in turn), built by the
    method's own stages with its default settings (6 drafts at 0.7, 10 BM25 exemplars from its pool)."""
    from ...data.datasets import load_dataset, metaqa_kb_path
    from ...kg.graph import load_metaqa_kb
    from ...methods import kbbinder as kb

    try:
        kg = load_metaqa_kb(metaqa_kb_path())
        sets = [load_dataset(f"keqing:metaqa:{h}hop").questions for h in (1, 2, 3)]
    except UserError as exc:
        raise UserError(f"--kbbinder-metaqa needs MetaQA under KGQA_DATA_DIR ({str(exc).splitlines()[0]}); "
                        "pass --kbbinder-metaqa 0 to measure the recorded prompts only") from None
    pool = kb.exemplar_pool(kg, "metaqa")
    s = kb.KBBinderSettings()
    questions = [sets[i % 3][i // 3] for i in range(n) if i // 3 < len(sets[i % 3])]
    groups = []
    for q in questions:
        messages = kb.draft_messages(q.question, kb.select_exemplars(q, pool, s.exemplars, s.retrieve))
        groups.append({"method": "kbbinder", "source": "metaqa", "qid": q.qid,
                       "messages": [(m["role"], m["content"]) for m in messages], "temperature": s.temperature,
                       "top_p": 1.0, "max_tokens": 128, "stop": [], "seed": 0,
                       "recorded": {i: None for i in range(s.samples)}})
    return groups


# ---------------------------------------------------------------------------------- measuring
def _busy_jiffies() -> tuple[int, int] | None:
    """(busy, total) CPU jiffies of the machine from /proc/stat (None where there is none)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def _own_jiffies() -> int:
    t = os.times()
    return round((t.user + t.system + t.children_user + t.children_system) * os.sysconf("SC_CLK_TCK"))


def other_cpu_share(before: tuple, after: tuple) -> float | None:
    """The share of the machine's CPU used by other processes between two (machine, own) samples."""
    (m0, own0), (m1, own1) = before, after
    if m0 is None or m1 is None or m1[1] <= m0[1]:
        return None
    return round(max(0.0, (m1[0] - m0[0]) - (own1 - own0)) / (m1[1] - m0[1]), 3)


def _cpu_sample() -> tuple:
    return _busy_jiffies(), _own_jiffies()


def _route_name(rows: int | None) -> str:
    return "one" if rows is None else f"rows{rows}"


def _measure_group(group: dict[str, Any], backends: dict[str | int | None, Any], max_tokens: int,
                   compare_recorded: bool, first: str) -> dict[str, Any]:
    from ...llm.chat import ChatRequest

    indices = sorted(group["recorded"])
    compare_recorded = compare_recorded and all(group["recorded"][i] is not None for i in indices)
    cap = max_tokens or group["max_tokens"]
    out: dict[str, Any] = {"method": group["method"], "source": group["source"], "samples": len(indices),
                           "max_tokens": cap, "routes": {}}
    if group.get("qid"):
        out["qid"] = group["qid"]
    texts: dict[str, list[str]] = {}
    order = sorted(backends, key=lambda k: (k is not None) if first == "one" else (k is None))
    for rows in order:
        backend = backends[rows]
        if rows is not None and any(len(indices) <= r < rows for r in backends if r is not None):
            continue  # (n samples never fill more than n rows: the same decode calls as a smaller route's)
        reqs = [ChatRequest(backend.model_id, tuple(tuple(m) for m in group["messages"]), temperature=group["temperature"],
                            top_p=group["top_p"], max_tokens=cap, stop=tuple(group["stop"]), seed=group["seed"],
                            sample_index=i) for i in indices]
        stats0, cpu0 = backend.prefix_stats(), _cpu_sample()
        started = time.perf_counter()
        answers = [backend.complete(r) for r in reqs] if rows is None else backend.complete_many(reqs)
        seconds = time.perf_counter() - started
        stats1, cpu1 = backend.prefix_stats(), _cpu_sample()
        name = _route_name(rows)
        texts[name] = [a["text"] for a in answers]
        route = {"seconds": round(seconds, 3), "prompt_tokens": sum(a["prompt_tokens"] for a in answers),
                 "evaluated": stats1["evaluated"] - stats0["evaluated"],
                 "completion_tokens": sum(a["completion_tokens"] for a in answers),
                 "other_cpu": other_cpu_share(cpu0, cpu1)}
        if rows is not None:
            route["decode_calls"] = stats1["decode_calls"] - stats0["decode_calls"]
            route["decode_rows"] = stats1["decode_rows"] - stats0["decode_rows"]
        if compare_recorded:
            route["identical_to_recorded"] = sum(t == group["recorded"][i]["text"] for t, i in zip(texts[name], indices))
        out["routes"][name] = route
    for name, route in out["routes"].items():
        if name != "one":
            route["identical_to_one"] = sum(a == b for a, b in zip(texts[name], texts["one"]))
    if compare_recorded:
        out["recorded_seconds"] = round(sum(group["recorded"][i]["seconds"] for i in indices), 3)
    return out


def recorded_seconds_per_question(model_id: str) -> dict[str, dict[str, float]]:
    """Per method: questions and mean recorded LLM seconds per question in the committed benchmark records of
    ``model_id`` (``results/bench/runs/*/<model>/*.jsonl.gz``); files that cannot be read are skipped."""
    from ...llm.chat import model_slug
    from ..core import bench_dir

    acc: dict[str, list[float]] = defaultdict(list)
    calls: dict[str, list[int]] = defaultdict(list)
    for path in sorted((bench_dir() / "runs").glob(f"*/{model_slug(model_id)}/*.jsonl.gz")):
        try:
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                for line in fh:
                    r = json.loads(line)
                    llm = r.get("llm") or {}
                    if llm.get("calls") and r.get("method"):
                        acc[r["method"]].append(float(llm.get("recorded_seconds") or 0.0))
                        calls[r["method"]].append(int(llm["calls"]))
        except (OSError, ValueError, EOFError):
            continue
    return {m: {"questions": len(v), "seconds": round(sum(v) / len(v), 2),
                "calls": round(sum(calls[m]) / len(calls[m]), 2)} for m, v in sorted(acc.items())}


def measure(opts: SimpleNamespace, previous: dict[str, Any]) -> dict[str, Any]:
    """Run every group through every route (see the module's doc)."""
    from ...llm import models
    from ...llm.chat import EXACT_BATCH_ROWS, LocalBackend, default_threads

    spec = models.get_spec(opts.model)
    recorded_id = opts.recorded or spec.model_id
    groups = recorded_groups(recorded_id, opts.groups)
    if opts.kbbinder_metaqa:
        groups["kbbinder"] = groups.get("kbbinder", []) + metaqa_kbbinder_groups(opts.kbbinder_metaqa)
    todo = [g for m in METHOD_PROMPTS for g in groups.get(m, [])]
    if not todo:
        raise UserError(f"no recorded self-consistency or KB-BINDER prompts of {recorded_id} in data/llm_cache/ "
                        "(and --kbbinder-metaqa 0): nothing to measure; name another model with --recorded")
    rows = sorted(set(opts.rows))
    threads = opts.threads or default_threads()
    sequences = max(len(g["recorded"]) for g in todo)
    backends: dict[Any, Any] = {None: LocalBackend(spec.name, n_threads=threads, batch=0, prefix_cache=0)}
    for r in rows:
        backends[r] = LocalBackend(spec.name, n_threads=threads, batch=max(2, sequences), batch_rows=r, prefix_cache=0)
    compare_recorded = recorded_id == spec.model_id and not opts.max_tokens
    for backend in backends.values():  # loaded before any clock starts
        backend.load()
    load0, cpu0, started = load_average(), _cpu_sample(), time.time()
    measured = []
    for i, g in enumerate(progress(todo, "prompt groups", unit="group")):
        # the routes take turns going first, so warm caches and drifting load favour none of them
        measured.append(_measure_group(g, backends, opts.max_tokens, compare_recorded, "one" if i % 2 == 0 else "together"))
    out = {"model": spec.name, "model_id": spec.model_id, "recorded": recorded_id, "threads": threads,
           "rows": rows, "exact_rows": EXACT_BATCH_ROWS, "sequences": max(2, sequences),
           "max_tokens": opts.max_tokens, "compared_to_recorded": compare_recorded,
           "engines": {_route_name(k): b.engine for k, b in backends.items()},
           "model_ids": {_route_name(k): b.model_id for k, b in backends.items()},
           "minutes": round((time.time() - started) / 60, 1), "load_average": [load0, load_average()],
           "other_cpu": other_cpu_share(cpu0, _cpu_sample()), "groups": measured,
           "recorded_per_question": recorded_seconds_per_question(spec.model_id)}
    out["summary"] = summarise(measured)
    return out


def summarise(measured: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per method and route: groups, samples, seconds, tokens, identical answers; for the routes decoded
    together the ratio of questions per hour to one at a time (on the groups both ran)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for method in METHOD_PROMPTS:
        mine = [g for g in measured if g["method"] == method]
        if not mine:
            continue
        routes = sorted({r for g in mine for r in g["routes"]}, key=lambda r: (r != "one", len(r), r))
        out[method] = {}
        for route in routes:
            both = [g for g in mine if route in g["routes"]]
            rs = [g["routes"][route] for g in both]
            s = {"groups": len(both), "samples": sum(g["samples"] for g in both),
                 "seconds": round(sum(r["seconds"] for r in rs), 2),
                 "seconds_per_question": round(sum(r["seconds"] for r in rs) / len(both), 2),
                 "prompt_tokens": sum(r["prompt_tokens"] for r in rs), "evaluated": sum(r["evaluated"] for r in rs),
                 "completion_tokens": sum(r["completion_tokens"] for r in rs)}
            if route != "one":
                one = sum(g["routes"]["one"]["seconds"] for g in both)
                s["ratio"] = round(one / s["seconds"], 2) if s["seconds"] else None
                s["identical_to_one"] = sum(r["identical_to_one"] for r in rs)
                s["decode_calls"] = sum(r["decode_calls"] for r in rs)
                s["decode_rows"] = sum(r["decode_rows"] for r in rs)
            recorded = [(g["samples"], r["identical_to_recorded"]) for g, r in zip(both, rs) if "identical_to_recorded" in r]
            if recorded:  # (prompts built from MetaQA have no recording)
                s["recorded_samples"] = sum(n for n, _ in recorded)
                s["identical_to_recorded"] = sum(k for _, k in recorded)
            out[method][route] = s
    return out


# ------------------------------------------------------------------------------------ the whole suite
def fastest_identical(summary: dict[str, Any], exact_rows: int) -> dict[str, tuple[float, str]]:
    """Per method: (ratio, route) of the fastest route decoded together that keeps the model id (at most
    ``exact_rows`` rows a decode call: identical by construction) and whose answers were all identical to one
    request at a time here (methods without such a route, or where it was not faster, are left out)."""
    out: dict[str, tuple[float, str]] = {}
    for method, routes in (summary or {}).items():
        ok = [(s["ratio"], r) for r, s in routes.items()
              if r != "one" and int(r[4:]) <= exact_rows and s.get("ratio") and s.get("identical_to_one") == s["samples"]
              and s["ratio"] > 1]
        if ok:
            out[method] = max(ok)
    return out


def suite_projection(per_question: dict[str, dict[str, float]], summary: dict[str, Any],
                     exact_rows: int) -> dict[str, Any] | None:
    """The LLM hours of a suite of records (``per_question``: :func:`recorded_seconds_per_question`) one request
    at a time, and with each method's fastest identical-answer route (:func:`fastest_identical`, measured ratios):
    hours, ratio, the share of the hours that has such a route, and the most any route of those methods could
    give (their time gone entirely: 1 / (1 − share)). None without records."""
    total = sum(r["questions"] * r["seconds"] for r in per_question.values())
    if total <= 0:
        return None
    best = fastest_identical(summary, exact_rows)
    faster = sum(r["questions"] * r["seconds"] / (best[m][0] if m in best else 1.0) for m, r in per_question.items())
    share = sum(r["questions"] * r["seconds"] for m, r in per_question.items() if m in METHOD_PROMPTS) / total
    return {"questions": sum(int(r["questions"]) for r in per_question.values()), "hours": round(total / 3600, 1),
            "fastest_hours": round(faster / 3600, 1), "ratio": round(total / faster, 2), "batchable_share": share,
            "bound": round(1 / (1 - share), 2) if share < 1 else None,
            "routes": {m: best[m] for m in sorted(best)}}


def _suite_sentence(p: dict[str, Any], model_id: str) -> str:
    routes = "; ".join(f"{METHOD_NAMES[m].split(' (')[0]} {ratio}× (≤ {route[4:]} rows a decode call)"
                       for m, (ratio, route) in p["routes"].items())
    return (f"the committed records of `{model_id}` hold {p['questions']:,} questions whose LLM calls took "
            f"{p['hours']} h one request at a time; with the fastest route whose answers are identical "
            f"({routes or 'none measured'}) ≈ {p['fastest_hours']} h: **{p['ratio']}×**")


def suite_status(d: dict[str, Any]) -> list[str]:
    """``kgqa bench list``'s line for the table: the hours to regenerate every committed table of the measured
    model, one at a time and with the fastest identical-answer route measured here (from today's records)."""
    if not d.get("summary"):
        return []
    p = suite_projection(recorded_seconds_per_question(d["model_id"]), d["summary"], d["exact_rows"])
    return [f"  regenerating every table: {_suite_sentence(p, d['model_id'])}"] if p else []


# ------------------------------------------------------------------------------------ the report
def verdict(d: dict[str, Any]) -> bool:
    """Both methods reach the target ratio on a route whose answers are all identical to one at a time."""
    summary = d.get("summary") or {}
    return all(any(r != "one" and (s.get("ratio") or 0) >= TARGET_RATIO and s.get("identical_to_one") == s["samples"]
                   for r, s in summary.get(m, {}).items()) for m in METHOD_PROMPTS)


def _route_label(d: dict[str, Any], route: str) -> str:
    if route == "one":
        return "one request at a time"
    rows = int(route[4:])
    same = "the same model id" if rows <= d["exact_rows"] else f"model id `{d['model_ids'].get(route, '')}`"
    return f"decoded together, ≤ {rows} rows a decode call ({same})"


def report(d: dict[str, Any]) -> str:
    rows = []
    for method, routes in d["summary"].items():
        for route, s in routes.items():
            ident_one = "—" if route == "one" else f"{s['identical_to_one']}/{s['samples']}"
            ident_rec = f"{s['identical_to_recorded']}/{s['recorded_samples']}" if "identical_to_recorded" in s else "n/a"
            per_call = (f"{s['decode_rows'] / s['decode_calls']:.1f}" if route != "one" and s["decode_calls"] else "1")
            rows.append([METHOD_NAMES[method], _route_label(d, route), f"{s['groups']} × {s['samples'] // s['groups']}"
                         if s["samples"] % s["groups"] == 0 else f"{s['groups']} ({s['samples']} samples)",
                         f"{s['prompt_tokens']:,} → {s['evaluated']:,}", f"{s['completion_tokens']:,}", per_call,
                         f"{s['seconds_per_question']}", "1" if route == "one" else f"**{s['ratio']}×**",
                         ident_one, ident_rec])
    main = md_table(["method", "route", "prompts × samples", "prompt tokens sent → evaluated", "completion tokens",
                     "rows a decode call", "s / question", "questions / hour vs one at a time",
                     "identical to one at a time (live)", "identical to the recording"], rows)
    others = []
    for method, r in (d.get("recorded_per_question") or {}).items():
        route = ("samples of one prompt: decoded together with `local?batch=N`" if method in METHOD_PROMPTS
                 else "one request per step: no batching route")
        others.append([method, route, f"{r['calls']}", f"{r['seconds']}", f"{r['questions']:,}"])
    srcs = defaultdict(int)
    for g in d["groups"]:
        srcs[(g["method"], g["source"])] += 1
    where = "; ".join(f"{METHOD_NAMES[m].split(' (')[0]}: {n} prompt(s) from "
                      + ("the transcript" if s == "transcript" else "MetaQA dev (built by the method's stages)")
                      for (m, s), n in sorted(srcs.items()))
    met = verdict(d)
    lines = [
        "# LLM throughput: samples of one prompt decoded together", "",
        f"`kgqa bench run throughput`: the embedded model `{d['model_id']}` ({d['threads']} threads) answers the "
        f"self-consistency and KB-BINDER prompts recorded for `{d['recorded']}` ({where}), each prompt's samples "
        "once per route, the routes taking turns. One request at a time is how every table runs (llama-cpp-python "
        "evaluates a prompt for its first sample and only the prompt's last token again for each later one); "
        f"decoded together is `local?batch={d['sequences']}` (`LocalBackend.complete_many`): the prompt evaluated once, "
        f"the samples decoded together, each with its own sampler and seed. Up to {d['exact_rows']} rows a decode "
        "call keep every row's logits bit-identical to a lone token's; more rows use a 4-row matrix kernel whose "
        "logits differ, so those answers carry their own model id."
        + ("" if d["compared_to_recorded"] else " The answers are not compared with the recordings here (another "
           "model, or `--max-tokens` capped the answers)."), "",
        main, "",
        f"Target: ≥ {TARGET_RATIO:g}× questions per hour for both methods with answers identical to one request at a "
        f"time — **{'met' if met else 'not met'}** by these numbers. A question of these methods makes no other LLM "
        "call, so its seconds are the LLM's.", ""]
    per_q = d.get("recorded_per_question") or {}
    p = suite_projection(per_q, d["summary"], d["exact_rows"]) if per_q else None
    if p:
        lines += [
            f"The whole suite: {_suite_sentence(p, d['model_id'])} (target ≥ {SUITE_TARGET:g}×: "
            f"**{'met' if p['ratio'] >= SUITE_TARGET else 'not met'}**). Self-consistency and KB-BINDER are the only "
            "methods that draw several samples of one prompt, and they hold "
            f"{100 * p['batchable_share']:.0f} % of the suite's recorded LLM time; every other method sends one "
            "request per step, each prompt built from the replies before it, so there is nothing to decode together. "
            f"Even if their samples took no time at all, the suite would run at most {p['bound']}× faster.", ""]
    for method, routes in d["summary"].items():
        one = routes.get("one")
        if one and one["groups"]:
            n = one["samples"] / one["groups"]
            lines.append(f"Per question, {METHOD_NAMES[method].split(' (')[0]} evaluates "
                         f"{one['evaluated'] / one['groups']:.0f} prompt tokens (about the same on every route) and "
                         f"decodes {n:g} samples of {one['completion_tokens'] / one['samples']:.1f} tokens on average.")
    lines += ["",
        f"Measured {d.get('measured_at', '')} in {d['minutes']} min; load average {d['load_average'][0]} → "
        f"{d['load_average'][1]}, other processes used {_pct(d.get('other_cpu'))} of the CPU meanwhile "
        "(a busy machine stretches every route; compare the ratios). Raw numbers per prompt: `throughput.json`.", ""]
    if others:
        lines += ["## Every method's recorded seconds per question", "",
                  f"From the committed benchmark records of `{d['model_id']}` (the LLM seconds when each answer was "
                  "recorded, one request at a time). What the methods that send one request per step gain when "
                  "their prompts' shared parts are reused (saved prefix states, the managed server's prompt cache): "
                  "`prompt_reuse.md`.", "",
                  md_table(["method", "batching", "LLM calls / question", "recorded s / question", "questions"], others),
                  ""]
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "an unknown share" if x is None else f"{100 * x:.0f} %"


def estimate(opts: SimpleNamespace, previous: dict[str, Any]) -> str:
    from ...llm import models

    spec = models.get_spec(opts.model)
    recorded_id = opts.recorded or spec.model_id
    groups = recorded_groups(recorded_id, opts.groups)
    n = sum(len(v) for v in groups.values())
    rec = sum(sum(s["seconds"] for s in g["recorded"].values()) for v in groups.values() for g in v)
    routes = 1 + len(set(opts.rows))
    kbb = (f" and {opts.kbbinder_metaqa} MetaQA KB-BINDER prompt(s) (≈ {KBB_SECONDS} s each one at a time)"
           if opts.kbbinder_metaqa else "")
    cap = f", answers capped at {opts.max_tokens} tokens" if opts.max_tokens else ""
    total = rec + KBB_SECONDS * opts.kbbinder_metaqa
    return (f"{n} recorded prompt group(s) of {recorded_id}{kbb}, through {routes} routes with {spec.name}{cap}: "
            f"one at a time they took {total / 60:.0f} min when recorded, so ≈ {routes * total / 60:.0f} min at most "
            "(the routes decoded together take less); run it on an idle machine")


#: What one MetaQA question's 6 KB-BINDER drafts took the 1.5B model one at a time (the committed records'
#: mean is ~34 s a question; the drafts are its only LLM calls)
KBB_SECONDS = 35


TABLE = register(Measurement(
    name="throughput", title="samples of one prompt decoded together vs one request at a time (SC, KB-BINDER)",
    data="throughput.json", output="throughput.md", report=report, measure=measure, estimate=estimate,
    options=(Option("--model", "qwen2.5-coder-1.5b", "the embedded model measured"),
             Option("--recorded", "", "the model id whose transcript gives the prompts (default: the measured model's)"),
             Option("--groups", 0, "recorded prompts per method (0: all)", low=0),
             Option("--kbbinder-metaqa", 9, "MetaQA dev questions whose KB-BINDER prompts are built and measured too "
                                            "(needs KGQA_DATA_DIR; 0: none)", low=0),
             Option("--rows", "3,6", "rows a decode call, one route each (3: identical answers)", low=1, kind="ints"),
             Option("--max-tokens", 0, "cap every answer at this many tokens (0: as recorded)", low=0),
             Option("--threads", 0, "threads of the model (0: the cores available)", low=0)),
    target=f"≥ {TARGET_RATIO:g}× questions per hour for SC and KB-BINDER, answers identical to one request at a time",
    verdict=verdict, requires="the embedded model; MetaQA under KGQA_DATA_DIR for --kbbinder-metaqa",
    status=suite_status))
