"""``distributed``: a sharded ``kgqa run`` on a Dask LocalCluster with 1, 2 and 4 workers against the
fake OpenAI-compatible server (1 s a call, no model), and the engine's overhead per shard.

    kgqa bench run distributed [--questions 96] [--latency 1.0] [--workers 1,2,4]

Writes ``results/bench/distributed.json`` and ``.md``. One shard per worker (shards = workers),
each a ``kgqa run --shard i/n`` subprocess with its own fresh cache (every call reaches the server),
one question at a time inside a shard (``--workers 1``): the speed-up is the cluster's alone. The table's
target: N workers ≥ 0.8·N× the questions/s of one worker. What it measures, :mod:`kgqa_lib.distributed`
and :mod:`kgqa_lib.servers`, is the app layer: the caller passes them in."""

from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from ..measure import Measurement, Option, register
from .timing import md_table


def _noop() -> float:
    return time.time()


def engine_overhead(distributed: ModuleType, workers: int = 2, tasks: int = 30) -> dict[str, float]:
    """Cluster start-up seconds and the round trip of a no-op task (submit → result), sequentially."""
    with distributed.client(None, workers) as (c, start):
        c.submit(_noop, pure=False).result()  # warm
        t = time.perf_counter()
        for _ in range(tasks):
            c.submit(_noop, pure=False).result()
        rtt = (time.perf_counter() - t) / tasks
    return {"cluster_start_s": round(start, 3), "noop_task_roundtrip_ms": round(rtt * 1000, 2)}


def measure(opts: SimpleNamespace, previous: dict[str, Any], servers: ModuleType,
            distributed: ModuleType) -> dict[str, Any]:
    """Each worker count: the sharded run, then the same shards again (nothing left to ask: a shard's
    fixed cost). ``servers``/``distributed`` are :mod:`kgqa_lib.servers` / :mod:`kgqa_lib.distributed`."""
    from ...evaluate.runner import read_records

    tmp = Path(tempfile.mkdtemp(prefix="bench-distributed-"))
    old_cache = os.environ.get("KGQA_CACHE_DIR")
    os.environ["KGQA_CACHE_DIR"] = str(tmp / "home-cache")  # the merged caches land here, not in ~/.cache
    try:
        data = tmp / "questions.jsonl"  # synthetic questions of our own (no benchmark data)
        data.write_text("".join(json.dumps({"qid": f"b{i}", "question": f"Which city is number {i}?",
                                            "answers": [f"answer-{i % 7}"]}) + "\n" for i in range(opts.questions)))
        overhead = engine_overhead(distributed)
        rows = []
        with servers.FakeChatServer(latency=opts.latency) as server:
            env = {"KGQA_LLM_BASE_URL": server.base_url, "KGQA_LLM_MODE": "auto", "OPENAI_API_KEY": "",
                   "KGQA_RESULTS_DIR": str(tmp / "results")}
            for w in opts.workers:
                before = server.requests

                def sharded():
                    return distributed.run_sharded(["--method", "io", "--dataset", str(data), "--llm", "openai:fake"],
                                                   w, tmp / f"w{w}" / "run.jsonl", workers=w, cache="per-shard",
                                                   cache_root=tmp / f"w{w}" / "caches", env=env)

                res = sharded()
                assert not res.failed, [t.stderr_tail for t in res.failed]
                n = sum(len(read_records(f)) for f in res.files)
                assert n == opts.questions and server.requests - before == opts.questions
                run_s = res.wall_seconds  # submit → all shards done → caches merged (cluster start excluded)
                again = sharded()  # the same shards again: all done, nothing to ask: what a shard costs besides its questions
                assert server.requests - before == opts.questions  # resumed: no question asked twice
                fixed = sum(t.seconds for t in again.tasks) / len(again.tasks)
                per_q = [(t.seconds - fixed) / max(1, len(read_records(f))) - opts.latency
                         for t, f in zip(res.tasks, res.files)]
                rows.append({"workers": w, "shards": w, "questions": n, "cluster_start_s": res.cluster_start_seconds,
                             "wall_s": run_s, "questions_per_s": round(n / run_s, 3),
                             "shard_fixed_s": round(fixed, 2),
                             "per_question_overhead_s": round(sum(per_q) / len(per_q), 3),
                             "queued_s": round(sum(t.queued_seconds for t in res.tasks) / len(res.tasks), 3)})
                print(rows[-1], flush=True)
    finally:
        if old_cache is None:
            os.environ.pop("KGQA_CACHE_DIR", None)
        else:
            os.environ["KGQA_CACHE_DIR"] = old_cache
        shutil.rmtree(tmp, ignore_errors=True)
    base = rows[0]["questions_per_s"] if rows and rows[0]["workers"] == 1 else None
    for r in rows:
        r["speedup"] = round(r["questions_per_s"] / base, 2) if base else None
        r["ratio_to_Nx"] = round(r["speedup"] / r["workers"], 2) if base else None
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {"engine": "dask distributed " + __import__("distributed").__version__, "latency_s": opts.latency,
            "cores": len(os.sched_getaffinity(0)), "loadavg_at_end": load, "python": platform.python_version(),
            **overhead, "rows": rows}


def report(d: dict[str, Any]) -> str:
    load = d["loadavg_at_end"]
    lines = [
        "# Sharded `kgqa run` on Dask distributed (LocalCluster on 127.0.0.1)",
        "",
        f"`kgqa bench run distributed`: method `io`, {d['rows'][0]['questions']} synthetic questions, the fake "
        f"OpenAI-compatible server (`kgqa_lib.servers.FakeChatServer`, {d['latency_s']:g} s a call, no model); one "
        "shard per worker, each a `kgqa run --shard i/n` subprocess with its own fresh cache, questions one at a "
        f"time inside a shard. {d['engine']}, Python {d['python']}, {d['cores']} cores"
        + (f" (load average {load[0]:.1f} at the end: the machine is shared)" if load else "") + ".",
        "",
        md_table(["workers", "shards", "questions", "wall s", "questions/s", "speed-up",
                  "speed-up / N (the table's target: ≥ 0.8)", "fixed cost per shard s", "overhead per question s",
                  "queued s", "cluster start s"],
                 [[r["workers"], r["shards"], r["questions"], f"{r['wall_s']:.1f}", f"{r['questions_per_s']:.3f}",
                   r["speedup"], r["ratio_to_Nx"], f"{r['shard_fixed_s']:.2f}", f"{r['per_question_overhead_s']:.3f}",
                   f"{r['queued_s']:.2f}", f"{r['cluster_start_s']:.1f}"] for r in d["rows"]]),
    ]
    lines += [
        "",
        f"Engine: a LocalCluster (scheduler + 2 worker processes) starts in {d['cluster_start_s']:.2f} s; a no-op "
        f"task's round trip (submit → result) is {d['noop_task_roundtrip_ms']:.1f} ms: the engine's own cost "
        "per shard. The fixed cost per shard is a shard's subprocess with nothing left to ask (the same shards run "
        "again: Python start, imports — `openai` dominates —, opening the cache and importing the transcripts, "
        "reading the run file); the overhead per question is the rest of a shard's time per question beyond the "
        "server's latency (client, cache write, run-file append with fsync). Wall time counts from the first "
        "submit to the merged caches (cluster start excluded, listed separately). On 2 cores the workers' "
        "CPU work (imports, overhead per question) competes with the rest of the machine: the load average "
        "above says how busy it was (a negative overhead per question: the re-run's start-up was slower than the "
        "real run's, the two being measured at different moments of a shared machine).",
        "",
    ]
    return "\n".join(lines)


def estimate(opts: SimpleNamespace, previous: dict[str, Any]) -> str:
    calls = sum(opts.questions * opts.latency / w for w in opts.workers)
    shards = sum(opts.workers) * 2
    return (f"{opts.questions} questions sharded over {'/'.join(map(str, opts.workers))} worker(s): ≈ {calls:.0f} s "
            f"of server latency, plus a cluster start per worker count and {shards} shard subprocesses (a few s each)")


TABLE = register(Measurement(
    name="distributed", title="a sharded `kgqa run` on a Dask LocalCluster: speed-up with 1, 2, 4 workers",
    data="distributed.json", output="distributed.md", report=report, measure=measure, estimate=estimate,
    options=(Option("--questions", 96, "synthetic questions", low=1),
             Option("--latency", 1.0, "seconds the fake server takes per call", low=0),
             Option("--workers", "1,2,4", "worker counts (one shard each; the first 1 is the speed-ups' baseline)",
                    low=1, kind="ints")),
    target="N workers ≥ 0.8·N× the questions/s of one worker",
    verdict=lambda d: all(r["ratio_to_Nx"] >= 0.8 for r in d["rows"] if r["ratio_to_Nx"] is not None),
    needs=("servers", "distributed"), requires="dask distributed (requirements.txt)"))
