"""``scaleout``: concurrent questions, SPARQL servers, the whole MetaQA KB on disk.

    KGQA_DATA_DIR=../shared/datasets nice -n 10 kgqa bench run scaleout [--only concurrency,servers,metaqa] [--keep]

Sections (each merged into ``results/bench/scaleout.json``; ``scaleout.md`` is rewritten from the
whole JSON after each, so sections can be run one at a time):

``concurrency``
    The deterministic OpenAI-compatible ``FakeChatServer`` (1 s per call) answers method ``io`` on
    32 seeded ``miniworld:simple`` questions through the runner with 1, 4 and 16 workers (3 interleaved
    repeats, medians), each run with a fresh LLM cache in ``live`` mode (every call reaches the
    server): wall seconds, questions/s, speedup, the server's peak concurrent requests, and whether
    predictions equal the 1-worker run's. One more row runs ``kgqa run --llm openai:fake --workers 16`` as a subprocess; its fixed
    start-up cost is measured by re-running the finished command (the runner resumes: no calls).

``servers``
    The mini-world Freebase-style KG and the whole MetaQA KB served by Oxigraph in memory, Oxigraph
    on disk (bulk load, then read-only) and Virtuoso (skipped when ``virtuoso-t`` is absent),
    against the embedded backend (in memory and on disk): start/load seconds, triples, and
    median/p90 ms of 1-, 2- and 3-hop ``follow_path`` walks, a raw 1-hop ``sparql()`` SELECT and
    ``triples_around`` on 50 seeded entities. The walks are random relation paths drawn (seeded)
    on the embedded KG with every hop's frontier capped at 500 nodes; each backend's answers are
    checked against the embedded in-memory answers (as sets: an on-disk store returns index order).

``metaqa``
    With a fresh temporary KGQA_CACHE_DIR: the on-disk Oxigraph store of the whole
    MetaQA KB built cold (in a child process), reopened in the same process and in a new process;
    then every KB triple verbalised as PG&AKV does (``verbalise(t, "sentence").rstrip(".")``) and
    embedded with a fresh SQLite cache: cold rate, then warm (memo, new Embedder, new process).
    When the cold encode is projected past ``--embed-budget`` seconds (12 min), a seeded sample of
    20,000 texts is encoded and the full time extrapolated (the tables say so). Disk sizes of the
    store and the embedding cache.

Timings are wall-clock on a shared 2-core machine; the load average at each section's start is
recorded beside the numbers. The servers (:mod:`kgqa_lib.servers`, the app layer) are given by the
caller; the metaqa section's child processes are :mod:`.scaleout_child`.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, Sequence

from ...paths import repo_root
from ..measure import Measurement, Option, register
from .scaleout_child import verbalise_all
from .timing import disk_bytes, load_average, md_table, progress, sqlite_bytes, summary_ms, timed, timed_cpu

SECTIONS = ("concurrency", "servers", "metaqa")
METAQA_ENTITY_NS = "http://kgqa.local/metaqa/entity/"
METAQA_RELATION_NS = "http://kgqa.local/metaqa/relation/"
_BOOT = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"


def mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def run_child(args: list[str], env: dict[str, str] | None = None, timeout: float = 1800) -> tuple[dict, float]:
    """Run :mod:`.scaleout_child` alone in a new process (``--child ...``); returns its JSON (last
    stdout line) and wall seconds."""
    child = Path(__file__).with_name("scaleout_child.py")
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _BOOT, str(child), *args], capture_output=True, text=True,
                         env=env or dict(os.environ), timeout=timeout, cwd=repo_root())
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise RuntimeError(f"child {args} failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1]), wall


# --------------------------------------------------------------------------------------------
# 1. concurrency
# --------------------------------------------------------------------------------------------
def bench_concurrency(servers: ModuleType, tmp: Path, n: int, latency: float, workers: Sequence[int], repeats: int,
                      fast_repeats: int) -> dict[str, Any]:
    """The runner with each worker count (repeats interleaved), then the ``kgqa run`` command."""
    from ...data.datasets import load_dataset
    from ...evaluate.runner import read_records, run
    from ...llm.chat import LLMCache, make_llm
    from ...methods import Context

    ds = load_dataset("miniworld:simple", sample=n, seed=0)
    key = "sk-local-bench"
    rows: list[dict[str, Any]] = []
    baseline = None

    def preds_of(recs: list[dict]) -> list[tuple[str, str]]:
        return sorted((r["qid"], json.dumps(r["prediction"], ensure_ascii=False)) for r in recs)

    def one_run(srv, w: int, tag: str) -> dict[str, Any]:
        nonlocal baseline
        srv.max_in_flight = 0
        before = srv.requests
        llm = make_llm("openai:fake", "live", base_url=srv.base_url, api_key=key,
                       cache=LLMCache(tmp / f"llm-{tag}.sqlite", transcripts=None))
        ctx = Context(llm=llm, kg=None, embedder=None, settings={}, seed=0)
        recs, wall, cpu = timed_cpu(lambda: run("io", ds, ctx, tmp / f"run-{tag}.jsonl", progress=False, workers=w))
        preds = preds_of(recs)
        baseline = baseline if baseline is not None else preds
        q_s = [r["seconds"] for r in recs]
        print(f"  runner workers={w} {tag}: {wall:.2f} s, in flight {srv.max_in_flight}", flush=True)
        return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "questions": len(recs),
                "llm_requests": srv.requests - before, "max_in_flight": srv.max_in_flight,
                "errors": sum(bool(r["error"]) for r in recs), "answered": sum(bool(r["prediction"]) for r in recs),
                "identical_to_1_worker": preds == baseline,
                "question_s_median": round(statistics.median(q_s), 3), "question_s_max": round(max(q_s), 3)}

    def row(path: str, w: int, rs: list[dict[str, Any]], base_wall: float) -> dict[str, Any]:
        wall = statistics.median(r["wall_s"] for r in rs)
        return {"path": path, "workers": w, "repeats": len(rs), "questions": rs[0]["questions"],
                "llm_requests": rs[0]["llm_requests"], "errors": sum(r["errors"] for r in rs),
                "wall_s": wall, "wall_s_min": min(r["wall_s"] for r in rs), "wall_s_max": max(r["wall_s"] for r in rs),
                "cpu_s": statistics.median(r["cpu_s"] for r in rs), "q_per_s": round(rs[0]["questions"] / wall, 3),
                "speedup": round(base_wall / wall, 2), "max_in_flight": max(r["max_in_flight"] for r in rs),
                "identical_to_1_worker": all(r["identical_to_1_worker"] for r in rs),
                "answered": min(r["answered"] for r in rs),
                "question_s_max": max(r["question_s_max"] for r in rs),
                "runs_with_a_question_over_latency_plus_0_8s": sum(r["question_s_max"] > latency + 0.8 for r in rs),
                "runs": rs}

    with servers.FakeChatServer(latency=latency) as srv:
        backlog = getattr(srv._httpd, "request_queue_size", None)  # socketserver's default is 5
        # repeats interleaved (1, 4, 16, 1, 4, 16, ...) so a change in the machine's load hits every setting
        runs: dict[int, list[dict[str, Any]]] = {w: [] for w in workers}
        for rep in range(repeats):
            for w in workers:
                runs[w].append(one_run(srv, w, f"w{w}-r{rep}"))
        for rep in range(repeats, max(repeats, fast_repeats)):  # the fast setting: more repeats (a few s each)
            runs[max(workers)].append(one_run(srv, max(workers), f"w{max(workers)}-r{rep}"))
        base_wall = statistics.median(r["wall_s"] for r in runs[workers[0]])
        for w in workers:
            rows.append(row("runner", w, runs[w], base_wall))

        # the CLI path: `kgqa run --llm openai:fake --workers 16`, its own (fresh) cache dir
        w = max(workers)
        env = servers.env_for_openai(srv.base_url, model="fake", key=key)
        env["KGQA_CACHE_DIR"] = str(tmp / "cli-cache")
        kgqa = str(Path(sys.executable).parent / "kgqa")
        out = tmp / "cli.jsonl"
        cmd = [kgqa, "run", "--method", "io", "--dataset", "miniworld:simple", "--sample", str(n), "--seed", "0",
               "--llm", "openai:fake", "--llm-mode", "live", "--workers", str(w), "--out", str(out),
               "--no-transcripts", "--quiet"]
        srv.max_in_flight = 0
        before = srv.requests
        t = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=repo_root())
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"kgqa run failed: {proc.stderr[-2000:]}")
        requests, in_flight = srv.requests - before, srv.max_in_flight
        t = time.perf_counter()  # the same command again: every question is finished, so no calls
        subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=repo_root(), check=True)
        overhead = time.perf_counter() - t
        recs = read_records(out)
        net = max(wall - overhead, 1e-9)
        rows.append({"path": "cli", "workers": w, "questions": len(recs), "llm_requests": requests,
                     "errors": sum(bool(r["error"]) for r in recs), "wall_s": round(wall, 3),
                     "cli_overhead_s": round(overhead, 3), "net_s": round(net, 3),
                     "q_per_s": round(len(recs) / net, 3), "speedup": round(base_wall / net, 2),
                     "max_in_flight": in_flight, "identical_to_1_worker": preds_of(recs) == baseline,
                     "answered": sum(bool(r["prediction"]) for r in recs),
                     "question_s_max": round(max(r["seconds"] for r in recs), 3),
                     "command": " ".join(["kgqa", *cmd[1:-4], "--out", "<tmp>", "--no-transcripts", "--quiet"])})
        print(f"  cli workers={w}: {wall:.2f} s (overhead {overhead:.2f} s)", flush=True)
    best = next(r for r in rows if r["path"] == "runner" and r["workers"] == max(workers))
    return {"dataset": "miniworld:simple", "sample": n, "seed": 0, "method": "io", "server_latency_s": latency,
            "server_listen_backlog": backlog,
            "rows": rows, "target": f"{max(workers)} workers >= 12x the throughput of 1, identical results",
            "target_met": best["speedup"] >= 12 and best["identical_to_1_worker"]}


# --------------------------------------------------------------------------------------------
# 2. servers
# --------------------------------------------------------------------------------------------
def random_paths(kg, n: int, seed: int, hops: int = 3, cap: int = 500) -> list[tuple[str, list[str]]]:
    """``n`` (seed entity, relation path) pairs: seeded random walks of ``hops`` relations (``^`` =
    inverse, full IRIs) on ``kg`` whose every prefix reaches 1..``cap`` nodes."""
    rng = random.Random(seed)
    entities = sorted(kg.entities())
    rng.shuffle(entities)
    out = []
    for e in entities:
        path: list[str] = []
        frontier = [e]
        for _ in range(hops):
            iris = [x for x in frontier if "://" in x]
            if not iris:
                break
            node = rng.choice(iris)
            options = sorted({t.r.iri for t in kg.triples_around(node, "out")}) + \
                sorted({"^" + t.r.iri for t in kg.triples_around(node, "in")})
            rng.shuffle(options)
            for rel in options:
                nxt = kg.follow_path(e, path + [rel])
                if 0 < len(nxt) <= cap:
                    path.append(rel)
                    frontier = nxt
                    break
            else:
                break
        if len(path) == hops:
            out.append((e, path))
            if len(out) == n:
                break
    return out


QUERY_KINDS = ("follow_path 1-hop", "follow_path 2-hop", "follow_path 3-hop", "sparql 1-hop SELECT", "triples_around")


def one_walk(kg, e: str, path: list[str]) -> dict[str, tuple[Any, float]]:
    """Each query kind once on ``kg``: (answers, seconds)."""
    got: dict[str, tuple[Any, float]] = {}
    for h in (1, 2, 3):
        res, s = timed(lambda: kg.follow_path(e, path[:h]))
        got[f"follow_path {h}-hop"] = (sorted(res), s)
    res, s = timed(lambda: kg.sparql(f"SELECT ?p ?o WHERE {{ <{e}> ?p ?o }}"))
    got["sparql 1-hop SELECT"] = (sorted((r["p"], r["o"]) for r in res.rows), s)
    kg._label_cache.clear()  # a cold neighbourhood every time (both backends memoise labels)
    res, s = timed(lambda: kg.triples_around(e))
    got["triples_around"] = (sorted(str(t) for t in res), s)
    return got


def time_interleaved(backends: dict[str, Any], work: list[tuple[str, list[str]]],
                     warmup: int = 5) -> tuple[dict[str, dict], dict[str, dict]]:
    """Per backend the timing summary per query kind and its answers. Backends take turns walk by
    walk (the first one rotating), so a change in the machine's load hits all of them alike."""
    names = list(backends)
    times = {b: {k: [] for k in QUERY_KINDS} for b in names}
    answers: dict[str, dict[str, Any]] = {b: {} for b in names}
    for b in names:
        for e, path in work[:warmup]:
            one_walk(backends[b], e, path)
    sent = {b: kg.stats["sent"] for b, kg in backends.items() if isinstance(getattr(kg, "stats", None), dict)}
    for i, (e, path) in enumerate(progress(work, "walks", unit="walk")):
        for b in names[i % len(names):] + names[:i % len(names)]:
            for k, (ans, s) in one_walk(backends[b], e, path).items():
                times[b][k].append(s)
                answers[b][f"{i}|{k}"] = ans
    summary: dict[str, dict[str, Any]] = {b: {k: summary_ms(v) for k, v in times[b].items()} for b in names}
    for b, before in sent.items():  # HTTP requests per walk (all five query kinds), measured loop only
        summary[b]["http_requests_per_walk"] = round((backends[b].stats["sent"] - before) / max(len(work), 1), 2)
    return summary, answers


def bench_servers(servers: ModuleType, tmp: Path, n_entities: int, seed: int) -> dict[str, Any]:
    """Both KGs on every backend at once, walks interleaved (see the module's doc)."""
    from ...data.datasets import metaqa_kb_path
    from ...data.miniworld import BASE, FB_ALIAS, FB_DESC, FB_NAME
    from ...kg.graph import load_metaqa_kb, load_rdf, read_metaqa_rows, triples_to_ntriples
    from ...kg.remote import open_sparql_kg
    from ...paths import data_dir

    mw_files = [data_dir() / "miniworld" / "kg_freebase.nt", data_dir() / "miniworld" / "ontology.nt"]
    mw_opts = dict(namespace=BASE + "fb/", name="miniworld-freebase", entity_ns=BASE + "fb/", relation_ns=BASE + "fb/",
                   label_predicate=FB_NAME, alias_predicate=FB_ALIAS, description_predicate=FB_DESC)
    kb = metaqa_kb_path()
    metaqa_nt = tmp / "metaqa.nt"
    _, nt_s = timed(lambda: metaqa_nt.write_bytes(triples_to_ntriples(read_metaqa_rows(kb), METAQA_ENTITY_NS,
                                                                          METAQA_RELATION_NS)))
    datasets = {
        "miniworld:freebase": {
            "files": mw_files, "profile": "miniworld:freebase",
            "embedded_memory": lambda: load_rdf(mw_files, **mw_opts),
            "embedded_disk": lambda: load_rdf(mw_files, store_dir=tmp / "emb-miniworld", **mw_opts)},
        "metaqa": {
            "files": [metaqa_nt], "profile": "metaqa", "kb": str(kb),
            "embedded_memory": lambda: load_metaqa_kb(kb),
            "embedded_disk": lambda: load_metaqa_kb(kb, store_dir=tmp / "emb-metaqa")},
    }
    virtuoso = servers.virtuoso_binary()
    result: dict[str, Any] = {"entities": n_entities, "seed": seed, "frontier_cap": 500,
                              "virtuoso": virtuoso or "absent (skipped)", "metaqa_nt_write_s": round(nt_s, 3),
                              "datasets": {}}
    for ds_name, spec in datasets.items():
        print(f"  {ds_name}", flush=True)
        info: dict[str, dict[str, Any]] = {}
        backends: dict[str, Any] = {}
        ref, load_s = timed(spec["embedded_memory"])
        backends["embedded in-memory"] = ref
        info["embedded in-memory"] = {"start_s": 0.0, "load_s": load_s, "triples": len(ref)}
        kg, load_s = timed(spec["embedded_disk"])
        backends["embedded on-disk"] = kg
        info["embedded on-disk"] = {"start_s": 0.0, "load_s": load_s, "triples": len(kg)}
        started = [("Oxigraph server in-memory", lambda: servers.OxigraphServer(spec["files"])),
                   ("Oxigraph server on-disk",
                    lambda: servers.OxigraphServer(spec["files"], location=tmp / f"oxi-{ds_name[:4]}"))]
        if virtuoso:
            started.append(("Virtuoso 7.2", lambda: servers.VirtuosoServer(spec["files"])))
        with contextlib.ExitStack() as stack:
            for label, make in started:  # started one after the other, then all serve at once
                print(f"    start {label}", flush=True)
                srv = stack.enter_context(make())
                remote = open_sparql_kg(srv.kg_url(spec["profile"]), cache=False)
                backends[label] = remote
                info[label] = {"start_s": srv.timings.get("start_s", 0.0), "load_s": srv.timings.get("load_s", 0.0),
                               "triples": len(remote)}
            work = random_paths(ref, n_entities, seed)
            print(f"    {len(work)} walks on {len(backends)} backends, interleaved", flush=True)
            load_before = load_average()
            summary, answers = time_interleaved(backends, work)
            load_after = load_average()
        ref_answers = answers["embedded in-memory"]
        rows = []
        for b in backends:
            q = summary[b]
            rows.append({"backend": b, "start_s": round(info[b]["start_s"], 3), "load_s": round(info[b]["load_s"], 3),
                         "triples": info[b]["triples"], **({"http_requests_per_walk": q.pop("http_requests_per_walk")}
                                                          if "http_requests_per_walk" in q else {}),
                         "queries": q, "disagreements": sum(answers[b][k] != ref_answers[k] for k in ref_answers)})
        sizes = {f"{h}-hop": statistics.median(len(ref_answers[f"{i}|follow_path {h}-hop"]) for i in range(len(work)))
                 for h in (1, 2, 3)}
        result["datasets"][ds_name] = {"profile": spec["profile"], "walks": len(work), "median_answers": sizes,
                                       "load_average_during": [load_before, load_after],
                                       "example_path": work[0][1] if work else None, "rows": rows}
    if not virtuoso:
        result["note"] = "virtuoso-t not found: Virtuoso rows skipped (`make virtuoso` installs it)"
    return result


# --------------------------------------------------------------------------------------------
# 3. metaqa: the on-disk store and the embeddings of its verbalised triples, cold and warm
# --------------------------------------------------------------------------------------------
def bench_metaqa(tmp: Path, budget_s: float, sample_n: int, pilot_n: int, seed: int) -> dict[str, Any]:
    cache_dir = tmp / "kgqa-cache"
    cache_dir.mkdir(parents=True, exist_ok=True)
    os.environ["KGQA_CACHE_DIR"] = str(cache_dir)  # before any object is made; the children inherit it
    from ...data.datasets import metaqa_kb_path
    from ...embed.embedder import Embedder
    from ...kg.graph import _OPEN, load_metaqa_kb

    kb = str(metaqa_kb_path())
    store = cache_dir / "kg" / "metaqa"
    out: dict[str, Any] = {"kb": "$KGQA_DATA_DIR/" + Path(kb).resolve().relative_to(Path(os.environ["KGQA_DATA_DIR"]).resolve()).as_posix(),
                           "kb_bytes": disk_bytes(Path(kb)), "cache_dir": "fresh temporary KGQA_CACHE_DIR",
                           "embed_budget_s": budget_s}

    print("  store: cold build (child process)", flush=True)
    build, build_wall = run_child(["--child", "build", "--store", str(store), "--kb", kb])
    build["process_wall_s"] = build_wall
    print("  store: reopen in a new process (x2)", flush=True)
    opens = []
    for _ in range(2):
        o, wall = run_child(["--child", "open", "--store", str(store), "--kb", kb])
        o["process_wall_s"] = wall
        opens.append(o)
    out["store"] = {"build": build, "reopen_new_process": opens, "store_bytes": disk_bytes(store)}

    # verbalise every KB triple as PG&AKV does (kgqa_lib/methods/pgakv.py: verbalise(t, "sentence").rstrip("."))
    print("  verbalising", flush=True)
    kg = load_metaqa_kb(kb, store_dir=store)
    texts, verb_s = timed(lambda: verbalise_all(kg))
    distinct = list(dict.fromkeys(texts))
    rng = random.Random(seed)
    order = rng.sample(distinct, len(distinct))
    out["verbalise"] = {"style": "sentence (rstrip '.') as in PG&AKV", "triples": len(texts),
                        "distinct_texts": len(distinct), "seconds": verb_s,
                        "mean_chars": statistics.fmean(len(x) for x in distinct)}

    cache = cache_dir / "embeddings.sqlite"
    emb = Embedder(cache_path=cache)
    _, model_s = timed(lambda: emb.dim)  # an empty cache: this loads the model
    # pilot: torch's default thread count and a single thread, each on its own fresh slice; the
    # faster one encodes the rest (on a busy machine 2 threads were measured 3x slower than 1)
    import torch

    default_threads = torch.get_num_threads()
    pilots: dict[int, dict[str, float]] = {}
    pos = 0
    for th in sorted({default_threads, 1}, reverse=True):
        torch.set_num_threads(th)
        part = order[pos:pos + pilot_n]
        pos += len(part)
        print(f"  embedding: pilot {len(part)} texts, {th} torch thread(s)", flush=True)
        _, w, c = timed_cpu(lambda: emb.encode(part))
        pilots[th] = {"texts": len(part), "wall_s": w, "cpu_s": c, "texts_per_s": len(part) / w}
    best = max(pilots, key=lambda k: pilots[k]["texts_per_s"])
    torch.set_num_threads(best)
    projected = len(distinct) / pilots[best]["texts_per_s"]
    full = projected <= budget_s
    target = order if full else order[:max(sample_n, pos)]
    print(f"  embedding: {len(target)} texts cold with {best} thread(s) (projected all: {projected:.0f} s)", flush=True)
    _, rest_w, rest_c = timed_cpu(lambda: emb.encode(target[pos:]))
    cold_s = rest_w + sum(p["wall_s"] for p in pilots.values())
    cold_cpu = rest_c + sum(p["cpu_s"] for p in pilots.values())
    rest_rate = (len(target) - pos) / rest_w if len(target) > pos else pilots[best]["texts_per_s"]
    rate = len(target) / cold_s
    cold = {"texts": len(target), "sampled": not full, "model_load_s": model_s, "encode_s": cold_s,
            "cpu_s": cold_cpu, "model_s": emb.stats.model_seconds, "texts_per_s": rate,
            "texts_per_cpu_s": len(target) / cold_cpu, "encoded": emb.stats.encoded,
            "pilots": {str(k): v for k, v in pilots.items()}, "torch_threads_default": default_threads,
            "torch_threads_used": best, "rest_texts_per_s": rest_rate,
            "projected_all_from_pilot_s": projected,
            "all_texts_s": cold_s if full else len(distinct) / rest_rate,
            "all_texts_extrapolated": not full, "batch_size": emb.batch_size}
    print("  embedding: warm", flush=True)
    mat, memo_s = timed(lambda: emb.encode(target))
    emb.close()
    emb2 = Embedder(cache_path=cache)
    mat2, sqlite_s = timed(lambda: emb2.encode(target))
    same = bool((mat == mat2).all())
    warm_new_embedder = {"encode_s": sqlite_s, "encoded": emb2.stats.encoded, "model_loaded": emb2.loaded,
                         "identical_vectors": same}
    emb2.close()
    texts_file = tmp / "texts.json"
    texts_file.write_text(json.dumps(target, ensure_ascii=False), encoding="utf-8")
    del kg
    _OPEN.clear()  # let the child open the store read-write, as a fresh process would
    gc.collect()
    child, wall = run_child(["--child", "ready", "--store", str(store), "--kb", kb, "--texts", str(texts_file),
                             "--cache", str(cache)])
    child["process_wall_s"] = wall
    cache_b = sqlite_bytes(cache)
    out["embed"] = {
        "model": emb.model_id, "cold": cold,
        "warm_same_embedder_memo": {"encode_s": memo_s},
        "warm_new_embedder_sqlite": warm_new_embedder,
        "warm_new_process": child,
        "cache_bytes": cache_b, "cache_bytes_all_texts": cache_b if full else cache_b * len(distinct) / len(target),
        "cache_bytes_extrapolated": not full,
    }
    return out


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------
def f2(x: float) -> str:
    return f"{x:.2f}"


def render_md(data: dict[str, Any]) -> str:
    meta = data.get("meta", {})
    parts = ["# Scale-out benchmark", "",
             f"`kgqa bench run scaleout`; {meta.get('cpu_count')} CPUs, Python {meta.get('python')}, "
             f"{meta.get('platform')}. Wall-clock times of a niced process on a shared machine (other jobs, e.g. "
             "an LLM benchmark and test runs, came and went); the 1-minute load average at each section's start "
             "is given with it. Raw numbers: `scaleout.json`.", ""]
    c = data.get("concurrency")
    if c:
        parts += [f"## 1. Concurrent questions (runner `workers`)", "",
                  f"Method `{c['method']}` on {c['sample']} questions of `{c['dataset']}` (sample seed {c['seed']}), "
                  f"LLM `openai:fake` = `FakeChatServer` answering every call after {c['server_latency_s']:g} s; "
                  f"each row a fresh LLM cache in `live` mode (every question reaches the server). "
                  f"Load average {c['load_average']}. Run {c['run_at']}.", ""]
        rows = []
        for r in c["rows"]:
            wall = (f"{f2(r['wall_s'])} ({f2(r['wall_s_min'])}–{f2(r['wall_s_max'])})" if r["path"].startswith("runner") else
                    f"{f2(r['net_s'])} (wall {f2(r['wall_s'])} − start-up {f2(r['cli_overhead_s'])})")
            rows.append([r["path"] + (f" ×{r['repeats']}" if r.get("repeats") else " ×1"), r["workers"],
                         r["questions"], r["llm_requests"], wall,
                         f2(r["cpu_s"]) if "cpu_s" in r else "–", f2(r["q_per_s"]),
                         f"{r['speedup']:.1f}x", r["max_in_flight"], "yes" if r["identical_to_1_worker"] else "**no**",
                         (f2(r["question_s_max"]) + (f" ({r['runs_with_a_question_over_latency_plus_0_8s']} of "
                                                     f"{r['repeats']} runs > {c['server_latency_s'] + 0.8:g} s)"
                                                     if "repeats" in r else "")) if "question_s_max" in r else "–",
                         r["errors"]])
        parts += [md_table(["path", "workers", "questions", "LLM requests", "seconds", "CPU s", "questions/s",
                            "speedup vs 1", "server peak in-flight", "predictions = 1 worker", "slowest question s",
                            "errors"], rows), ""]
        parts += [f"Target ({c['target']}): **{'met' if c['target_met'] else 'not met'}**. "
                  "The CLI row is `" + next(r["command"] for r in c["rows"] if r["path"] == "cli") + "` with "
                  "`KGQA_LLM_BASE_URL`/`KGQA_LLM_MODEL`/`OPENAI_API_KEY` from `env_for_openai`; its start-up "
                  "(interpreter, imports, dataset) is measured by re-running the finished command, which resumes "
                  "with no calls, and subtracted. CPU s: this process's CPU time (client threads and the in-process "
                  "server) during the run. Runner rows: the median of the repeats (min–max), repeats interleaved; "
                  "the ideal for 16 workers is 2 rounds of 1 s (16x). The fake server's listen backlog is "
                  f"{c.get('server_listen_backlog')} (socketserver's default of 5 dropped bursts of 16 connections: "
                  "a question of ~2 s, its SYN retransmitted after 1 s; measured with an earlier version of the server: 16 workers "
                  "11.6x with 4 of 8 runs stalled, 14.4x with the backlog raised).", ""]
    s = data.get("servers")
    if s:
        parts += ["## 2. SPARQL servers vs the embedded backend", "",
                  f"{s['entities']} seeded (seed {s['seed']}) random walks per KG: 3 relations (inverse hops allowed) "
                  f"with every prefix reaching 1..{s['frontier_cap']} nodes, drawn on the embedded KG; 1-, 2- and "
                  "3-hop are that walk's prefixes (`follow_path`; the endpoint sends one VALUES query per hop and "
                  "100 frontier nodes). `sparql 1-hop SELECT` is `SELECT ?p ?o WHERE { <e> ?p ?o }` through "
                  "`sparql()`; `triples_around` is the neighbourhood with labels (label memo cleared each call). "
                  "Endpoints through `open_sparql_kg(srv.kg_url(profile), cache=False)` (no query cache); all "
                  "five backends of a KG are up at once and take turns walk by walk (interleaved, so load changes "
                  "on the shared machine hit them alike), after 5 warm-up walks each. Disagreements: answers (as sets) differing from the embedded "
                  f"in-memory backend's, out of {len(QUERY_KINDS)} × walks. Virtuoso: {s['virtuoso']}. "
                  f"Load average {s['load_average']}. Run {s['run_at']}.", ""]
        for ds_name, d in s["datasets"].items():
            what = {"metaqa": "the whole MetaQA KB"}.get(ds_name, "the mini-world KG, Freebase-style")
            parts += [f"### {ds_name}: {what} (profile `{d['profile']}`, {d['walks']} walks)", ""]
            head = ["backend", "start s", "load s", "triples"] + [f"{k} median / p90 ms" for k in QUERY_KINDS] + \
                ["HTTP requests / walk", "disagreements"]
            rows = []
            for r in d["rows"]:
                rows.append([r["backend"], f2(r["start_s"]), f2(r["load_s"]), f"{r['triples']:,}"] +
                            [f"{r['queries'][k]['median_ms']:.2f} / {r['queries'][k]['p90_ms']:.2f}" for k in QUERY_KINDS] +
                            [r.get("http_requests_per_walk", "–"), r["disagreements"]])
            sizes = ", ".join(f"{k} {v:g}" for k, v in d.get("median_answers", {}).items())
            during = d.get("load_average_during")
            parts += [md_table(head, rows), ""] + ([f"Median answers per walk: {sizes}." +
                                                   (f" Load average during the walks: {during[0]}–{during[1]}." if during else ""),
                                                   ""] if sizes else [])
        parts += ["Embedded load = building the store in this process (on disk: bulk load + optimize into a "
                  "fresh folder); server load = Oxigraph in memory: HTTP POST to the Graph Store; Oxigraph on "
                  "disk: `oxigraph load` before `serve-read-only`; Virtuoso: `ld_dir` + `rdf_loader_run` + "
                  "`checkpoint`. MetaQA's N-Triples file (with one rdfs:label per name) was written once in "
                  f"{s['metaqa_nt_write_s']:.1f} s.", ""]
    m = data.get("metaqa")
    if m:
        st, e, v = m["store"], m["embed"], m["verbalise"]
        b = st["build"]
        parts += ["## 3. The whole MetaQA KB: on-disk store and triple embeddings, cold and warm", "",
                  f"`{Path(m['kb']).name}` ({mb(m['kb_bytes'])}), a fresh temporary `KGQA_CACHE_DIR`. "
                  f"Load average {m['load_average']}. Run {m['run_at']}.", ""]
        rows = [["cold build (`load_metaqa_kb(path, store_dir=…)`, fresh folder, new process)", f2(b["cold_build_s"]),
                 f"{b['triples']:,} triples; store {mb(st['store_bytes'])} on disk; CPU {f2(b['cold_build_cpu_s'])} s"],
                ["reuse, same process (second call)", f"{b['in_process_reuse_s'] * 1000:.3f} ms",
                 "the process-wide `_OPEN` handle: same object" if b["same_object"] else "new object"]]
        for i, o in enumerate(st["reopen_new_process"], 1):
            rows.append([f"reuse, new process #{i} (open the built store)", f2(o["open_s"]),
                         f"imports {f2(o['import_s'])} s; first 3-hop walk {o['first_query_s'] * 1000:.1f} ms; "
                         f"process wall {f2(o['process_wall_s'])} s"])
        rows.append(["for comparison: in-memory build, no store", f2(b["in_memory_build_s"]),
                     f"{b['in_memory_triples']:,} triples, paid by every process; CPU {f2(b['in_memory_build_cpu_s'])} s"])
        parts += ["### Store", "", md_table(["step", "seconds", "notes"], rows), ""]
        c = e["cold"]
        best = str(c["torch_threads_used"])
        pil = "; ".join(f"{k} thread{'s' if k != '1' else ''}: {p['texts_per_s']:.0f} texts/s "
                        f"({p['texts'] / p['cpu_s']:.0f} per CPU-second)" for k, p in c["pilots"].items())
        sample_note = (f"a seeded sample of {c['texts']:,} of the {v['distinct_texts']:,} texts: the full cold encode "
                       f"was projected at {c['projected_all_from_pilot_s'] / 60:.1f} min (> the "
                       f"{m['embed_budget_s'] / 60:.0f}-min budget) from the pilot, so the all-texts rows are "
                       "extrapolated from the sample's rate" if c["sampled"] else f"all {c['texts']:,} distinct texts")
        w2, w3 = e["warm_new_embedder_sqlite"], e["warm_new_process"]
        rows = [["verbalise all triples (`verbalise(t, 'sentence')`, as PG&AKV)", f2(v["seconds"]),
                 f"{v['triples']:,} triples → {v['distinct_texts']:,} distinct texts, mean {v['mean_chars']:.0f} chars"],
                ["load the encoder (first miss)", f2(c["model_load_s"]), e["model"]],
                ["pilot (cold, fresh slices)", f2(sum(p["wall_s"] for p in c["pilots"].values())),
                 f"{pil} → {best} used for the rest (torch default {c['torch_threads_default']})"],
                [f"cold encode ({'sample' if c['sampled'] else 'all'}, pilot included)", f2(c["encode_s"]),
                 f"{c['texts']:,} texts, {c['texts_per_s']:.0f} texts/s wall; CPU {f2(c['cpu_s'])} s = "
                 f"{c['texts_per_cpu_s']:.0f} texts per CPU-second; after the pilot {c['rest_texts_per_s']:.0f} texts/s; batch {c['batch_size']}"],
                *([[f"cold encode, all texts (extrapolated)", f2(c["all_texts_s"]),
                    f"{v['distinct_texts']:,} texts = {c['all_texts_s'] / 60:.1f} min"]] if c["all_texts_extrapolated"] else []),
                ["cold encode, all texts, at the pilot's rate", f2(c["projected_all_from_pilot_s"]),
                 f"{v['distinct_texts']:,} texts / {c['pilots'][best]['texts_per_s']:.0f} texts/s = "
                 f"{c['projected_all_from_pilot_s'] / 60:.1f} min; the full encode ran at "
                 f"{c['rest_texts_per_s'] / c['pilots'][best]['texts_per_s']:.0%} of the pilot's rate "
                 "(other jobs on the shared machine; this process is niced)"],
                ["warm, same Embedder (in-process memo)", f2(e["warm_same_embedder_memo"]["encode_s"]),
                 f"{c['texts'] / max(e['warm_same_embedder_memo']['encode_s'], 1e-9):,.0f} texts/s"],
                ["warm, new Embedder (SQLite cache)", f2(w2["encode_s"]),
                 f"{c['texts'] / max(w2['encode_s'], 1e-9):,.0f} texts/s; encoded {w2['encoded']}; model loaded: "
                 f"{w2['model_loaded']}; vectors identical: {w2['identical_vectors']}"],
                ["warm, new process (SQLite cache)", f2(w3["encode_s"]),
                 f"encoded {w3['encoded']}; model loaded: {w3['model_loaded']}"],
                ["warm start of a new process, end to end", f2(w3["total_s"]),
                 f"imports {f2(w3['import_s'])} + open store {f2(w3['open_s'])} + verbalise "
                 f"{w3['verbalised']:,} triples {f2(w3['verbalise_s'])} + embed {w3['texts']:,} texts from the cache "
                 f"{f2(w3['encode_s'])} s; process wall {f2(w3['process_wall_s'])} s"],
                ["embedding cache on disk", mb(e["cache_bytes"]),
                 f"{c['texts']:,} vectors (384 × float32 + key)" +
                 (f"; all texts ≈ {mb(e['cache_bytes_all_texts'])} (extrapolated)" if e["cache_bytes_extrapolated"] else "")]]
        parts += ["### Embeddings of the verbalised triples", "", f"Measured on {sample_note}.", "",
                  md_table(["step", "seconds / size", "notes"], rows), ""]
    return "\n".join(parts).rstrip() + "\n"


# --------------------------------------------------------------------------------------------
def measure(opts: SimpleNamespace, previous: dict[str, Any], servers: ModuleType, save) -> dict[str, Any]:
    """The sections of ``--only``, each merged into the JSON so far and saved (with the report) as
    soon as it is done; ``servers`` is :mod:`kgqa_lib.servers`."""
    data = dict(previous)
    data["meta"] = {"cpu_count": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(terse=True)}
    tmp = Path(tempfile.mkdtemp(prefix="kgqa-bench-scaleout-"))
    print(f"temporary folder: {tmp}", flush=True)
    cache_env = os.environ.get("KGQA_CACHE_DIR")  # the metaqa section sets a fresh one
    try:
        for section in SECTIONS:
            if section not in opts.only:
                continue
            print(f"[{section}]", flush=True)
            sub = tmp / section
            sub.mkdir()
            load, t0, at = load_average(), time.perf_counter(), time.strftime("%Y-%m-%d %H:%M")
            if section == "concurrency":
                res = bench_concurrency(servers, sub, opts.questions, opts.latency, opts.workers, opts.repeats,
                                        opts.repeats_fast)
            elif section == "servers":
                res = bench_servers(servers, sub, opts.entities, opts.seed)
            else:
                res = bench_metaqa(sub, opts.embed_budget, opts.embed_sample, opts.embed_pilot, opts.seed)
            res.update(load_average=load, run_at=at, section_s=round(time.perf_counter() - t0, 1))
            data[section] = res
            save(data)
            print(f"[{section}] done in {res['section_s']} s", flush=True)
    finally:
        if cache_env is None:
            os.environ.pop("KGQA_CACHE_DIR", None)
        else:
            os.environ["KGQA_CACHE_DIR"] = cache_env
        if opts.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return data


def estimate(opts: SimpleNamespace, previous: dict[str, Any]) -> str:
    parts = []
    for section in (s for s in SECTIONS if s in opts.only):
        last = (previous.get(section) or {}).get("section_s")
        if section == "concurrency":
            w = opts.workers
            calls = (opts.repeats * sum(opts.questions * opts.latency / k for k in w)
                     + (max(opts.repeats, opts.repeats_fast) - opts.repeats + 1) * opts.questions * opts.latency / max(w))
            parts.append(f"concurrency ≈ {calls:.0f} s of server latency + the `kgqa run` start-ups")
        elif section == "servers":
            parts.append(f"servers: {opts.entities} walks × 5 backends × 2 KGs" + (f", {last / 60:.0f} min last time" if last else ""))
        else:
            parts.append(f"metaqa: cold encode ≤ {opts.embed_budget / 60:.0f} min (sampled beyond)"
                         + (f", {last / 60:.0f} min in all last time" if last else ""))
    return "; ".join(parts)


TABLE = register(Measurement(
    name="scaleout", title="concurrent questions, SPARQL servers vs the embedded KG, the whole MetaQA KB on disk",
    data="scaleout.json", output="scaleout.md", report=render_md, measure=measure, estimate=estimate,
    options=(Option("--only", ",".join(SECTIONS), "sections to run (the others stay as measured)", kind="names",
                    choices=SECTIONS),
             Option("--questions", 32, "concurrency: questions", low=1),
             Option("--latency", 1.0, "concurrency: seconds the fake server takes per call", low=0),
             Option("--workers", "1,4,16", "concurrency: worker counts, the first is the speed-ups' baseline",
                    low=1, kind="ints"),
             Option("--repeats", 3, "concurrency: runs per worker count (medians reported)", low=1),
             Option("--repeats-fast", 8, "concurrency: runs of the largest worker count", low=1),
             Option("--entities", 50, "servers: seeded walks per KG", low=1),
             Option("--seed", 0, "servers/metaqa: seed of the walks and the sample"),
             Option("--embed-budget", 720.0, "metaqa: seconds; beyond this the cold encode is sampled", low=0),
             Option("--embed-sample", 20000, "metaqa: texts encoded when sampled", low=1),
             Option("--embed-pilot", 1000, "metaqa: texts of each thread-count pilot", low=1),
             Option("--keep", False, "keep the temporary folder")),
    target="16 workers >= 12x the throughput of 1, identical results (concurrency)",
    verdict=lambda d: "concurrency" not in d or d["concurrency"]["target_met"],
    needs=("servers", "save"),
    requires="MetaQA under KGQA_DATA_DIR (servers, metaqa); the `oxigraph` binary; Virtuoso optional"))
