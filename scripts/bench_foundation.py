"""Micro-benchmarks of the foundation on the MetaQA KB (needs KGQA_DATA_DIR).

  python scripts/bench_foundation.py [--queries 50] [--skip-embeddings]

Measures: KB load (in memory; on-disk build; warm reopen), SPARQL 1/2/3-hop latency and path
walks from random seed entities, entity lookup, and cosine top-10 over the embeddings of all
verbalised KB triples (encoded once into the on-disk cache, then loaded warm).
Writes results/bench/foundation.json and prints a table."""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from kgqa_lib.data.datasets import metaqa_kb_path
from kgqa_lib.kg import graph as kg_mod
from kgqa_lib.kg.graph import RDFS_LABEL, load_metaqa_kb
from kgqa_lib.paths import results_dir


def timed(fn, *a, **k):
    t = time.perf_counter()
    out = fn(*a, **k)
    return out, time.perf_counter() - t


def stats_ms(xs):
    xs = sorted(xs)
    return {"median_ms": round(1000 * statistics.median(xs), 3), "p90_ms": round(1000 * xs[int(0.9 * (len(xs) - 1))], 3),
            "n": len(xs)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--skip-embeddings", action="store_true")
    args = ap.parse_args()
    out: dict = {}
    kb = metaqa_kb_path()
    kg, t = timed(load_metaqa_kb, kb)
    out["load_in_memory_s"] = round(t, 2)
    out["triples_incl_labels"] = len(kg)
    tmp = Path(tempfile.mkdtemp())
    _, t = timed(load_metaqa_kb, kb, tmp / "store")
    out["load_on_disk_build_s"] = round(t, 2)
    kg_mod._OPEN.clear()  # measure a real reopen (a new process), not the per-process handle
    import gc

    del _
    gc.collect()
    _, t = timed(load_metaqa_kb, kb, tmp / "store")
    out["load_on_disk_warm_s"] = round(t, 3)

    rng = random.Random(0)
    rel = kg.relation_iri
    movies = sorted({r["m"] for r in kg.sparql(f"SELECT DISTINCT ?m WHERE {{ ?m <{rel('directed_by')}> ?d }}", max_rows=10**6)})
    seeds = rng.sample(movies, args.queries)
    q1 = lambda m: f"SELECT ?a WHERE {{ <{m}> <{rel('starred_actors')}> ?a }}"  # noqa: E731
    q2 = lambda m: f"SELECT DISTINCT ?o WHERE {{ <{m}> <{rel('directed_by')}> ?d . ?o <{rel('directed_by')}> ?d . FILTER(?o != <{m}>) }}"  # noqa: E731
    q3 = lambda m: (f"SELECT DISTINCT ?g WHERE {{ <{m}> <{rel('directed_by')}> ?d . ?o <{rel('directed_by')}> ?d . "  # noqa: E731
                    f"FILTER(?o != <{m}>) ?o <{rel('has_genre')}> ?g }}")
    for name, q in [("sparql_1hop", q1), ("sparql_2hop", q2), ("sparql_3hop", q3)]:
        out[name] = stats_ms([timed(kg.sparql, q(m))[1] for m in seeds])
    out["follow_path_3hop"] = stats_ms([timed(kg.follow_path, m, ["directed_by", "^directed_by", "has_genre"])[1] for m in seeds])
    out["triples_around"] = stats_ms([timed(kg.triples_around, m)[1] for m in seeds])
    labels = [kg.label(m) for m in seeds]
    kg.lookup("warm up the label index")
    out["lookup_exact"] = stats_ms([timed(kg.lookup, lab)[1] for lab in labels])
    out["lookup_fuzzy"] = stats_ms([timed(kg.lookup, lab[:-1] + "x")[1] for lab in labels])
    shutil.rmtree(tmp)

    if not args.skip_embeddings:
        from kgqa_lib.embed.embedder import Embedder, cosine_topk

        import pyoxigraph as ox

        texts = []
        for q in kg.store.quads_for_pattern(None, None, None, kg._g):
            if q.predicate.value != RDFS_LABEL:
                texts.append(f"{kg.label(q.subject.value)} {kg.label(q.predicate.value)} {kg.label(q.object.value)}")
        emb = Embedder()
        _, t = timed(emb.encode, texts, True)
        out["embed_triples"] = len(texts)
        out["embed_first_pass_s"] = round(t, 1)
        out["embed_first_pass_encoded"] = emb.stats.encoded
        warm = Embedder()
        matrix, t = timed(warm.encode, texts)
        out["embed_warm_load_s"] = round(t, 2)
        queries = warm.encode([f"who directed {lab}" for lab in labels])
        out["cosine_top10_1_query"] = stats_ms([timed(cosine_topk, queries[i], matrix, 10)[1] for i in range(len(labels))])
        batch = np.repeat(queries, 2, axis=0)[:100]
        out["cosine_top10_100_queries"] = stats_ms([timed(cosine_topk, batch, matrix, 10)[1] for _ in range(5)])
        del ox

    path = results_dir() / "bench" / "foundation.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    for k, v in out.items():
        print(f"{k:28s} {v}")


if __name__ == "__main__":
    main()
