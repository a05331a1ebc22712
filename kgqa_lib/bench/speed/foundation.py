"""``foundation``: the KG and embedding foundation on the MetaQA KB (needs KGQA_DATA_DIR).

``kgqa bench run foundation [--queries 50] [--skip-embeddings]`` measures: KB load (in memory;
on-disk build; warm reopen), SPARQL 1/2/3-hop latency and path walks from random seed entities,
entity lookup, and cosine top-10 over the embeddings of all verbalised KB triples (encoded once
into the on-disk cache, then loaded warm). Writes ``results/bench/foundation.json`` and ``.md``."""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..measure import Measurement, Option, register
from .timing import md_table, ms_stats, timed


def measure(opts: SimpleNamespace, previous: dict[str, Any]) -> dict[str, Any]:
    """Load, query and (unless ``--skip-embeddings``) embed the MetaQA KB (see the module's doc)."""
    import gc

    from ...data.datasets import metaqa_kb_path
    from ...kg import graph as kg_mod
    from ...kg.graph import RDFS_LABEL, load_metaqa_kb

    kb = metaqa_kb_path()
    out: dict = {"kb": f"metaqa/{kb.name}"}
    kg, t = timed(load_metaqa_kb, kb)
    out["load_in_memory_s"] = round(t, 2)
    out["triples_incl_labels"] = len(kg)
    tmp = Path(tempfile.mkdtemp())
    _, t = timed(load_metaqa_kb, kb, tmp / "store")
    out["load_on_disk_build_s"] = round(t, 2)
    kg_mod._OPEN.clear()  # measure a real reopen (a new process), not the per-process handle
    del _
    gc.collect()
    _, t = timed(load_metaqa_kb, kb, tmp / "store")
    out["load_on_disk_warm_s"] = round(t, 3)

    rng = random.Random(0)
    rel = kg.relation_iri
    movies = sorted({r["m"] for r in kg.sparql(f"SELECT DISTINCT ?m WHERE {{ ?m <{rel('directed_by')}> ?d }}", max_rows=10**6)})
    seeds = rng.sample(movies, opts.queries)
    q1 = lambda m: f"SELECT ?a WHERE {{ <{m}> <{rel('starred_actors')}> ?a }}"  # noqa: E731
    q2 = lambda m: f"SELECT DISTINCT ?o WHERE {{ <{m}> <{rel('directed_by')}> ?d . ?o <{rel('directed_by')}> ?d . FILTER(?o != <{m}>) }}"  # noqa: E731
    q3 = lambda m: (f"SELECT DISTINCT ?g WHERE {{ <{m}> <{rel('directed_by')}> ?d . ?o <{rel('directed_by')}> ?d . "  # noqa: E731
                    f"FILTER(?o != <{m}>) ?o <{rel('has_genre')}> ?g }}")
    for name, q in [("sparql_1hop", q1), ("sparql_2hop", q2), ("sparql_3hop", q3)]:
        out[name] = ms_stats([timed(kg.sparql, q(m))[1] for m in seeds])
    out["follow_path_3hop"] = ms_stats([timed(kg.follow_path, m, ["directed_by", "^directed_by", "has_genre"])[1] for m in seeds])
    out["triples_around"] = ms_stats([timed(kg.triples_around, m)[1] for m in seeds])
    labels = [kg.label(m) for m in seeds]
    kg.lookup("warm up the label index")
    out["lookup_exact"] = ms_stats([timed(kg.lookup, lab)[1] for lab in labels])
    out["lookup_fuzzy"] = ms_stats([timed(kg.lookup, lab[:-1] + "x")[1] for lab in labels])
    shutil.rmtree(tmp)

    if not opts.skip_embeddings:
        import numpy as np

        from ...embed.embedder import Embedder, cosine_topk

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
        out["cosine_top10_1_query"] = ms_stats([timed(cosine_topk, queries[i], matrix, 10)[1] for i in range(len(labels))])
        batch = np.repeat(queries, 2, axis=0)[:100]
        out["cosine_top10_100_queries"] = ms_stats([timed(cosine_topk, batch, matrix, 10)[1] for _ in range(5)])
    return out


QUERIES = [("sparql_1hop", "SPARQL 1-hop (a movie's actors)"),
           ("sparql_2hop", "SPARQL 2-hop (the director's other movies)"),
           ("sparql_3hop", "SPARQL 3-hop (their genres)"),
           ("follow_path_3hop", "`follow_path` 3-hop (directed_by, ^directed_by, has_genre)"),
           ("triples_around", "`triples_around` (a movie's neighbourhood)"),
           ("lookup_exact", "`lookup` of the exact label"),
           ("lookup_fuzzy", "`lookup` of the label with its last letter changed"),
           ("cosine_top10_1_query", "cosine top-10 over all triples, 1 query"),
           ("cosine_top10_100_queries", "cosine top-10 over all triples, 100 queries")]


def report(d: dict[str, Any]) -> str:
    rows = [["KB load, in memory", f"{d['load_in_memory_s']} s ({d['triples_incl_labels']:,} triples with labels)"],
            ["KB load, on-disk store built", f"{d['load_on_disk_build_s']} s"],
            ["KB load, on-disk store reopened", f"{d['load_on_disk_warm_s']} s"]]
    if "embed_triples" in d:
        rows += [["embed every verbalised triple, first pass", f"{d['embed_first_pass_s']} s ({d['embed_triples']:,} "
                  f"triples, {d['embed_first_pass_encoded']:,} of them encoded"
                  + (")" if d["embed_first_pass_encoded"] == d["embed_triples"] else ", the rest read from the cache)")],
                 ["the same embeddings, warm (a new Embedder, from the cache)", f"{d['embed_warm_load_s']} s"]]
    rows += [[what, f"{d[k]['median_ms']} ms median, p90 {d[k]['p90_ms']} ms ({d[k]['n']} runs)"]
             for k, what in QUERIES if k in d]
    return "\n".join([
        "# Foundation: the MetaQA KB in the embedded KG, and embeddings of its triples", "",
        "`kgqa bench run foundation`: the MetaQA KB (" + (f"`{d['kb']}`" if "kb" in d else "`metaqa/kb.txt` or "
                                                          "`kb_augmented.txt`") + " under `KGQA_DATA_DIR`) loaded into the embedded "
        "Oxigraph KG; queries from seeded random movies (seed 0); the embeddings of every verbalised KB triple "
        "(`subject relation object` labels) in the shared embedding cache. Raw numbers: `foundation.json`.", "",
        md_table(["measure", "value"], rows), ""])


def estimate(opts: SimpleNamespace, previous: dict[str, Any]) -> str:
    loads = sum(previous.get(k, 0) for k in ("load_in_memory_s", "load_on_disk_build_s", "load_on_disk_warm_s"))
    text = f"3 loads of the MetaQA KB ({f'≈ {loads:.0f} s recorded' if loads else 'seconds'}) and {8 * opts.queries} queries"
    if opts.skip_embeddings:
        return text + "; embeddings skipped"
    first = previous.get("embed_first_pass_s")
    return text + ("; embedding every triple: ≈ " + (f"{first / 60:.1f} min recorded" if first else "minutes")
                   + " on a cold embedding cache, seconds on a warm one")


TABLE = register(Measurement(
    name="foundation", title="the MetaQA KB in the embedded KG (load, SPARQL, paths, lookup) and its triple embeddings",
    data="foundation.json", output="foundation.md", report=report, measure=measure, estimate=estimate,
    options=(Option("--queries", 50, "seed movies (queries of each kind)", low=1),
             Option("--skip-embeddings", False, "skip embedding the KB's triples")),
    requires="MetaQA under KGQA_DATA_DIR; the embedding model"))
