"""The child processes of ``scaleout``'s metaqa section: a fresh process builds or opens the MetaQA
store, or starts warm (store, verbalised triples, embeddings from the cache).

:func:`kgqa_lib.bench.speed.scaleout.run_child` runs this file alone (``runpy.run_path``), without
importing ``kgqa_lib.bench``: a child pays for what it measures (``import_s``, ``process_wall_s``),
not for the benchmark tables. So this file imports only the standard library at module level, and
``kgqa_lib`` inside the functions (absolute names)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__:
    from .timing import timed, timed_cpu
else:  # run alone (see the module's doc): the timers from the file beside this one
    import runpy

    _timing = runpy.run_path(str(Path(__file__).with_name("timing.py")))
    timed, timed_cpu = _timing["timed"], _timing["timed_cpu"]


def child_build(store: str, kb: str) -> dict[str, Any]:
    """In a fresh process: build the store cold, reopen it in-process, and build it in memory."""
    t = time.perf_counter()
    from kgqa_lib.kg.graph import load_metaqa_kb

    import_s = time.perf_counter() - t
    kg, cold, cold_cpu = timed_cpu(lambda: load_metaqa_kb(kb, store_dir=store))
    again, reuse = timed(lambda: load_metaqa_kb(kb, store_dir=store))
    n, count_s = timed(lambda: len(kg))
    mem, mem_s, mem_cpu = timed_cpu(lambda: load_metaqa_kb(kb))
    return {"import_s": import_s, "cold_build_s": cold, "cold_build_cpu_s": cold_cpu, "in_process_reuse_s": reuse,
            "same_object": again is kg, "triples": n, "count_s": count_s, "in_memory_build_s": mem_s,
            "in_memory_build_cpu_s": mem_cpu, "in_memory_triples": len(mem)}


def child_open(store: str, kb: str) -> dict[str, Any]:
    """In a new process: open the built store and answer a first 3-hop walk."""
    t = time.perf_counter()
    from kgqa_lib.kg.graph import load_metaqa_kb

    import_s = time.perf_counter() - t
    kg, open_s = timed(lambda: load_metaqa_kb(kb, store_dir=store))
    seed = kg.entity_iri("Inception")
    ans, q_s = timed(lambda: kg.follow_path(seed, ["directed_by", "^directed_by", "in_language"]))
    n, count_s = timed(lambda: len(kg))
    return {"import_s": import_s, "open_s": open_s, "first_query_s": q_s, "first_query_answers": len(ans),
            "triples": n, "count_s": count_s}


def verbalise_all(kg) -> list[str]:
    """Every KB triple as PG&AKV verbalises its candidates (kgqa_lib/methods/pgakv.py)."""
    return [kg.verbalise(t, "sentence").rstrip(".") for e in kg.entities() for t in kg.triples_around(e, "out")]


def child_ready(store: str, kb: str, texts_file: str, cache: str) -> dict[str, Any]:
    """In a new process, warm: open the built store, verbalise every triple, embed the texts from
    the cache (no model load expected) — what a fresh process pays before answering."""
    t0 = time.perf_counter()
    from kgqa_lib.embed.embedder import Embedder
    from kgqa_lib.kg.graph import load_metaqa_kb

    import_s = time.perf_counter() - t0
    kg, open_s = timed(lambda: load_metaqa_kb(kb, store_dir=store))
    verbalised, verb_s = timed(lambda: verbalise_all(kg))
    texts = json.loads(Path(texts_file).read_text(encoding="utf-8"))
    emb = Embedder(cache_path=cache)
    mat, s = timed(lambda: emb.encode(texts))
    return {"import_s": import_s, "open_s": open_s, "verbalise_s": verb_s, "verbalised": len(verbalised),
            "encode_s": s, "texts": len(texts), "encoded": emb.stats.encoded, "cached": emb.stats.cached,
            "model_loaded": emb.loaded, "shape": list(mat.shape), "total_s": time.perf_counter() - t0}



def main(argv: list[str]) -> int:
    """``--child build|open|ready --store DIR --kb FILE [--texts FILE --cache FILE]``: prints the JSON."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", choices=["build", "open", "ready"], required=True)
    ap.add_argument("--store")
    ap.add_argument("--kb")
    ap.add_argument("--texts")
    ap.add_argument("--cache")
    args = ap.parse_args(argv)
    fn = {"build": lambda: child_build(args.store, args.kb), "open": lambda: child_open(args.store, args.kb),
          "ready": lambda: child_ready(args.store, args.kb, args.texts, args.cache)}[args.child]
    print(json.dumps(fn()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
