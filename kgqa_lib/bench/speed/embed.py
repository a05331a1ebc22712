"""``embed``: cosine top-10 over ~130k cached triple embeddings (``kgqa bench run embed [--n 130000] [--fresh]``).

Builds ``--n`` synthetic, deterministic "subject relation object" strings from small invented word
lists (no benchmark files are read), encodes them once into an embedding cache (a dedicated file,
``user_cache_dir()/bench/embed_bench.sqlite`` by default, so the shared cache is not polluted;
``--fresh`` deletes it first), then measures:

- encode throughput (sentences/s) of that first pass (only the cache misses are encoded);
- cold load of all n vectors from the SQLite cache by a new Embedder (empty in-process memo);
- cosine top-10 latency (numpy) for 1 query and for a batch of 100 queries (medians of repeats).

Writes ``results/bench/embed.json`` and ``embed.md``."""

from __future__ import annotations

import os
import platform
import random
import statistics
from types import SimpleNamespace
from typing import Any

from ...paths import shown_path, user_cache_dir
from ..measure import Measurement, Option, register
from .timing import md_table, ms_stats, timed

FIRST = ["Ada", "Bruno", "Clara", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kofi", "Lena",
         "Marek", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tamsin", "Umar", "Vera", "Wiktor",
         "Xenia", "Yusuf", "Zora", "Anton", "Beatrix", "Cyril", "Dalia"]
LAST = ["Abernathy", "Baranek", "Castellano", "Dunmore", "Eklund", "Fairweather", "Gallo", "Halvorsen", "Ivanek",
        "Jankowski", "Kettering", "Lindqvist", "Moreau", "Nakamura", "Okonkwo", "Pellegrini", "Quist", "Rasmussen",
        "Szabo", "Thornbury", "Ulrich", "Varga", "Whitlock", "Yilmaz", "Zeller", "Ambrose", "Blackwood",
        "Corvino", "Delacroix", "Esterhazy"]
ADJ = ["Silent", "Crimson", "Hollow", "Golden", "Broken", "Distant", "Frozen", "Hidden", "Last", "Midnight",
       "Northern", "Paper", "Quiet", "Restless", "Scarlet", "Secret", "Sunken", "Velvet", "Wandering", "Wild"]
NOUN = ["Harbor", "Orchard", "Lantern", "River", "Garden", "Mirror", "Station", "Island", "Letter", "Empire",
        "Compass", "Violin", "Winter", "Carnival", "Lighthouse", "Meadow", "Signal", "Tide", "Valley", "Voyage"]
CITY = ["Lisbon", "Tallinn", "Kraków", "Porto", "Ghent", "Bergen", "Trieste", "Bilbao", "Lyon", "Turku", "Graz",
        "Brno", "Cork", "Malmö", "Split", "Plovdiv", "Kaunas", "Basel", "Utrecht", "Nantes"]
GENRE = ["drama", "comedy", "thriller", "documentary", "western", "musical", "horror", "romance", "animation",
         "science fiction", "mystery", "fantasy"]
LANG = ["Portuguese", "Estonian", "Polish", "Flemish", "Norwegian", "Italian", "Basque", "French", "Finnish",
        "Czech", "Irish", "Swedish", "Croatian", "Bulgarian", "Lithuanian"]
FIELD = ["chemistry", "architecture", "linguistics", "astronomy", "botany", "economics", "geology", "music theory"]

# relation → a function drawing an object
PERSON_REL = {
    "born in": lambda r: r.choice(CITY),
    "died in": lambda r: r.choice(CITY),
    "studied": lambda r: r.choice(FIELD),
    "speaks": lambda r: r.choice(LANG),
    "married to": lambda r: f"{r.choice(FIRST)} {r.choice(LAST)}",
    "child of": lambda r: f"{r.choice(FIRST)} {r.choice(LAST)}",
    "award received": lambda r: f"{r.choice(ADJ)} {r.choice(NOUN)} Prize {r.randint(1950, 2023)}",
    "date of birth": lambda r: str(r.randint(1900, 2005)),
}
WORK_REL = {
    "directed by": lambda r: f"{r.choice(FIRST)} {r.choice(LAST)}",
    "written by": lambda r: f"{r.choice(FIRST)} {r.choice(LAST)}",
    "starred actors": lambda r: f"{r.choice(FIRST)} {r.choice(LAST)}",
    "has genre": lambda r: r.choice(GENRE),
    "in language": lambda r: r.choice(LANG),
    "release year": lambda r: str(r.randint(1930, 2023)),
    "filmed in": lambda r: r.choice(CITY),
    "has tags": lambda r: f"{r.choice(ADJ).lower()} {r.choice(GENRE)}",
}


def synthetic_triples(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct "subject relation object" strings, deterministic for a seed."""
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < n:
        if rng.random() < 0.5:
            subj = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
            rel = rng.choice(sorted(PERSON_REL))
            obj = PERSON_REL[rel](rng)
        else:
            subj = f"The {rng.choice(ADJ)} {rng.choice(NOUN)}"
            if rng.random() < 0.4:
                subj += f" {rng.choice(['II', 'III', 'of ' + rng.choice(CITY)])}"
            rel = rng.choice(sorted(WORK_REL))
            obj = WORK_REL[rel](rng)
        out.setdefault(f"{subj} {rel} {obj}", None)
    return list(out)


def synthetic_queries(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    forms = [lambda: f"who directed The {rng.choice(ADJ)} {rng.choice(NOUN)}",
             lambda: f"where was {rng.choice(FIRST)} {rng.choice(LAST)} born",
             lambda: f"which films are in {rng.choice(LANG)}",
             lambda: f"what did {rng.choice(FIRST)} {rng.choice(LAST)} study",
             lambda: f"{rng.choice(GENRE)} films released in {rng.randint(1930, 2023)}"]
    return [rng.choice(forms)() for _ in range(n)]


def cache_file(opts: SimpleNamespace) -> str:
    return opts.cache or str(user_cache_dir() / "bench" / "embed_bench.sqlite")


def measure(opts: SimpleNamespace, previous: dict[str, Any]) -> dict[str, Any]:
    """Encode once into the benchmark's cache, then cold loads and top-10 searches (see the module's doc)."""
    import numpy as np
    import torch

    from ...embed.embedder import Embedder, cosine_topk

    cache = cache_file(opts)
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    if opts.fresh:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(cache + suffix):
                os.remove(cache + suffix)

    out: dict = {"n": opts.n, "cache_file": shown_path(cache),  # never a home-folder path in a committed file
                 "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                 "python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__}
    texts, t = timed(synthetic_triples, opts.n)
    out["build_texts_s"] = round(t, 2)
    out["mean_chars"] = round(sum(map(len, texts)) / len(texts), 1)

    # 1. encode once into the cache (only misses are encoded)
    emb = Embedder(cache_path=cache)
    _, t = timed(emb.encode, texts, True)
    enc = emb.stats.encoded
    out["encode"] = {"encoded": enc, "served_from_cache": emb.stats.cached, "seconds": round(t, 2),
                     "model_seconds": round(emb.stats.model_seconds, 2), "batch_size": emb.batch_size,
                     "sentences_per_s": round(enc / emb.stats.model_seconds, 1) if enc else None}
    if enc == 0:
        out["encode"]["note"] = "everything was already cached; run with --fresh to re-measure encoding"
    emb.close()
    del emb

    # 2. cold load: a new Embedder (empty memo) reads all n vectors back from SQLite
    loads, matrix = [], None
    for _ in range(3):
        e = Embedder(cache_path=cache)
        matrix, t = timed(e.encode, texts)
        assert e.stats.encoded == 0, "cold load should be served entirely from the cache"
        loads.append(t)
        e.close()
    out["cold_load"] = {"first_s": round(loads[0], 3), "median_s": round(statistics.median(loads), 3), "runs": len(loads),
                        "vectors_per_s": round(len(texts) / statistics.median(loads)),
                        "matrix_shape": list(matrix.shape), "matrix_mb": round(matrix.nbytes / 2**20, 1)}

    # 3. top-10 search latency
    q_emb = Embedder(cache_path=cache)
    queries = q_emb.encode(synthetic_queries(100))
    cosine_topk(queries, matrix, 10)  # warm-up
    singles = [timed(cosine_topk, queries[i % len(queries)], matrix, 10)[1] for i in range(opts.single_runs)]
    batches = [timed(cosine_topk, queries, matrix, 10)[1] for _ in range(opts.batch_runs)]
    out["top10_1_query"] = ms_stats(singles, "runs", minimum=True)
    out["top10_batch_100"] = ms_stats(batches, "runs", minimum=True)
    out["top10_batch_100"]["per_query_ms"] = round(out["top10_batch_100"]["median_ms"] / len(queries), 3)
    idx, sc = cosine_topk(queries[0], matrix, 10)
    out["example"] = {"query": synthetic_queries(1)[0], "top3": [[int(i), texts[int(i)], round(float(s), 4)]
                                                                  for i, s in zip(idx[:3], sc[:3])]}
    return out


def report(d: dict[str, Any]) -> str:
    enc = d["encode"]
    load, one, batch = d["cold_load"], d["top10_1_query"], d["top10_batch_100"]
    rows = [("triples", f"{d['n']:,} (mean {d['mean_chars']} chars)"),
            ("encode (first pass)", f"{enc['encoded']:,} encoded in {enc['model_seconds']} s → "
                                    f"{enc['sentences_per_s']} sentences/s (batch {enc['batch_size']})"
             if enc["encoded"] else "already cached"),
            ("cold load from cache", f"{load['first_s']} s first, {load['median_s']} s median of {load['runs']} "
                                     f"({load['vectors_per_s']:,} vectors/s, {load['matrix_mb']} MB)"),
            ("top-10, 1 query", f"{one['median_ms']} ms median (min {one['min_ms']}, p90 {one['p90_ms']}; "
                                f"{one['runs']} runs)"),
            ("top-10, batch of 100", f"{batch['median_ms']} ms median ({batch['per_query_ms']} ms/query; "
                                     f"{batch['runs']} runs)")]
    top = "; ".join(f"{text!r} {score}" for _, text, score in d["example"]["top3"])
    return "\n".join([
        "# Embedding cache and cosine top-10 search", "",
        "`kgqa bench run embed`: synthetic, deterministic \"subject relation object\" triples (invented word lists, "
        f"no benchmark files) encoded once into `{d['cache_file']}`, then read back by a new `Embedder` "
        "(cold load: an empty in-process memo) and searched with `cosine_topk` (numpy). "
        f"{d['cpu_count']} CPUs, torch {d['torch']} ({d['torch_threads']} threads), numpy {d['numpy']}, "
        f"Python {d['python']}. Raw numbers: `embed.json`.", "",
        md_table(["measure", "value"], rows), "",
        f"Example: {d['example']['query']!r} → {top}.", ""])


def estimate(opts: SimpleNamespace, previous: dict[str, Any]) -> str:
    rate = (previous.get("encode") or {}).get("sentences_per_s")
    cached = os.path.exists(cache_file(opts)) and not opts.fresh
    encode = (f"≈ {opts.n / rate / 60:.1f} min at the recorded {rate} sentences/s" if rate else "time unknown")
    return (f"encode up to {opts.n:,} synthetic triples ({encode}"
            + ("; the cache exists, so only the texts it lacks" if cached else "") + "), then 3 cold loads and "
            f"{opts.single_runs + opts.batch_runs} top-10 searches (seconds)")


TABLE = register(Measurement(
    name="embed", title="embedding cache and cosine top-10 over ~130k synthetic triples (encode, cold load, search)",
    data="embed.json", output="embed.md", report=report, measure=measure, estimate=estimate,
    options=(Option("--n", 130_000, "number of synthetic triples", low=1),
             Option("--cache", None, "embedding cache file (default: user_cache_dir()/bench/embed_bench.sqlite)"),
             Option("--fresh", False, "delete the benchmark cache first (re-measure encoding)"),
             Option("--single-runs", 50, "top-10 searches of 1 query", low=1),
             Option("--batch-runs", 15, "top-10 searches of a batch of 100 queries", low=1)),
    requires="the embedding model (`kgqa doctor`)"))
