"""Micro-benchmark of kgqa_lib.embed: cosine top-10 over ~130k cached triple embeddings.

  python scripts/bench_embed.py [--n 130000] [--fresh] [--cache PATH]

Builds ``--n`` synthetic, deterministic "subject relation object" strings from small invented word
lists (no benchmark files are read), encodes them once into an embedding cache (a dedicated file,
``user_cache_dir()/bench/embed_bench.sqlite`` by default, so the shared cache is not polluted;
``--fresh`` deletes it first), then measures:

- encode throughput (sentences/s) of that first pass (only the cache misses are encoded);
- cold load of all n vectors from the SQLite cache by a new Embedder (empty in-process memo);
- cosine top-10 latency (numpy) for 1 query and for a batch of 100 queries (medians of repeats).

Writes results/bench/embed.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time

import numpy as np

from kgqa_lib.embed.embedder import Embedder, cosine_topk
from kgqa_lib.paths import results_dir, shown_path, user_cache_dir

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


def timed(fn, *a, **k):
    t = time.perf_counter()
    out = fn(*a, **k)
    return out, time.perf_counter() - t


def ms_stats(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"median_ms": round(1000 * statistics.median(xs), 3), "min_ms": round(1000 * xs[0], 3),
            "p90_ms": round(1000 * xs[int(0.9 * (len(xs) - 1))], 3), "runs": len(xs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=130_000, help="number of synthetic triples (default 130000)")
    ap.add_argument("--cache", default=None, help="embedding cache file (default: user_cache_dir()/bench/embed_bench.sqlite)")
    ap.add_argument("--fresh", action="store_true", help="delete the benchmark cache first (re-measure encoding)")
    ap.add_argument("--single-runs", type=int, default=50)
    ap.add_argument("--batch-runs", type=int, default=15)
    ap.add_argument("--out", default=str(results_dir() / "bench" / "embed.json"))
    args = ap.parse_args()

    cache = args.cache or str(user_cache_dir() / "bench" / "embed_bench.sqlite")
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    if args.fresh:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(cache + suffix):
                os.remove(cache + suffix)

    import torch

    out: dict = {"n": args.n, "cache_file": shown_path(cache),  # never a home-folder path in a committed file
                 "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                 "python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__}
    texts, t = timed(synthetic_triples, args.n)
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
    singles = [timed(cosine_topk, queries[i % len(queries)], matrix, 10)[1] for i in range(args.single_runs)]
    batches = [timed(cosine_topk, queries, matrix, 10)[1] for _ in range(args.batch_runs)]
    out["top10_1_query"] = ms_stats(singles)
    out["top10_batch_100"] = ms_stats(batches)
    out["top10_batch_100"]["per_query_ms"] = round(out["top10_batch_100"]["median_ms"] / len(queries), 3)
    idx, sc = cosine_topk(queries[0], matrix, 10)
    out["example"] = {"query": synthetic_queries(1)[0], "top3": [[int(i), texts[int(i)], round(float(s), 4)]
                                                                  for i, s in zip(idx[:3], sc[:3])]}

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")

    rows = [("triples", f"{args.n:,} (mean {out['mean_chars']} chars)"),
            ("encode (first pass)", f"{enc:,} encoded in {out['encode']['model_seconds']} s → "
                                    f"{out['encode']['sentences_per_s']} sentences/s" if enc else "already cached"),
            ("cold load from cache", f"{out['cold_load']['first_s']} s first, {out['cold_load']['median_s']} s median "
                                     f"({out['cold_load']['vectors_per_s']:,} vectors/s, {out['cold_load']['matrix_mb']} MB)"),
            ("top-10, 1 query", f"{out['top10_1_query']['median_ms']} ms median"),
            ("top-10, batch of 100", f"{out['top10_batch_100']['median_ms']} ms median "
                                     f"({out['top10_batch_100']['per_query_ms']} ms/query)")]
    width = max(len(a) for a, _ in rows)
    print(f"\n{'measure':{width}s}  value\n{'-' * width}  {'-' * 50}")
    for a, b in rows:
        print(f"{a:{width}s}  {b}")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
