"""FuSIC-KBQA's candidate path depth on MetaQA, without the LLM: a measurement table
(``kgqa bench run fusic_path_depth``) of the setting ``max_path_hops`` 2 (the paper: TIARA enumerates
2-hop paths) against 3, on the reported MetaQA questions of the bench table ``fusic``, MetaQA dev
questions (``fusic:mw-wd>metaqa:reported-<N>hop --sample 100 --seed 0``, N = 1, 2, 3; the cells' name for
the same questions is ``test-<N>hop``: the transfer task's reported part, not MetaQA's test set).

Per hop and depth: the gold topic linked; the gold path among the candidates; in the top 3 / 5 / 10
of BM25, of the dense retriever of the few-shot cells (MiniLM fine-tuned on the source, then on the
5 target shots) and of the zero-shot cells' (source only) — each retriever's own ranking, no LLM
(:func:`kgqa_lib.evaluate.fusic_recall.retrieval_recall` with ``rerank_with_llm=False``); path
candidates per question; CPU seconds per question (process time: on a shared machine wall time
would measure the wait) to enumerate the candidates, and to link, enumerate and rank them with the
three retrievers (the gold bookkeeping included). The retrievers are trained on 2-hop candidates
either way (the paper's); a training run missing from the disk cache is trained here (its seconds
are reported). Saves counts only, no question text."""

from __future__ import annotations

import json
import time
from statistics import mean
from types import SimpleNamespace
from typing import Any

from .measure import Measurement, Option, register
from .result_table import ResultTable, table

TASK = "mw-wd>metaqa"
KS = (3, 5, 10)


class Labelled:
    """A retriever under another name (the two dense retrievers are both ``dense``)."""

    def __init__(self, inner, label: str) -> None:
        self.inner, self.label, self.name = inner, label, inner.name

    def rank(self, question, texts, k=None):
        return self.inner.rank(question, texts, k)


def measure(opts: SimpleNamespace, previous: dict[str, Any]) -> dict[str, Any]:
    from tqdm.auto import tqdm

    from ..data.datasets import load_dataset
    from ..embed.embedder import Embedder
    from ..evaluate.fusic_recall import retrieval_recall
    from ..methods import Context
    from ..methods import fusic as F

    task = F.get_task(TASK)
    emb = Embedder()
    started = time.perf_counter()
    bm25, fs = F.make_retrievers("bm25,dense", TASK, 5)
    zs = F.make_retrievers("dense", TASK, 0)[0]
    training = {name: [{"examples": t.examples, "steps": t.steps, "seconds": round(t.seconds, 1), "cached": t.cached}
                       for t in getattr(r, "training", [])] for name, r in (("dense few-shot", fs), ("dense zero-shot", zs))}
    retrievers = [bm25, Labelled(fs, "dense few-shot"), Labelled(zs, "dense zero-shot")]
    out = {"task": TASK, "dataset": "fusic:mw-wd>metaqa:reported-<N>hop --sample %d --seed 0" % opts.n,
           "setup_seconds": round(time.perf_counter() - started, 1), "training": training, "rows": []}
    for h in opts.hops:
        qs = list(load_dataset(f"fusic:{TASK}:reported-{h}hop", sample=opts.n, seed=0))
        for d in opts.depths:
            ctx = Context(llm=None, embedder=emb, settings={"task": TASK, "max_path_hops": d})
            cpu, npaths, linked, per_q, rows = [], [], 0, [], []
            for q in tqdm(qs, desc=f"{h}-hop, max_path_hops={d}", unit="q"):
                kg, gold = task.target.kg_for(q), task.target.gold(q)
                t0 = time.process_time()
                linking = F.link_entities(q, kg, emb)
                t1 = time.process_time()
                c = F.enumerate_candidates(kg, linking, task.target.profile, max_hops=d)
                t2 = time.process_time()
                got = retrieval_recall(q, task, retrievers, ctx, K=max(KS), rerank_with_llm=False, ks=KS, candidates=c)
                cpu.append(t2 - t1)
                per_q.append(time.process_time() - t0)
                linked += bool(gold) and set(gold.topics) <= {m.iri for m in linking.mentions}
                npaths.append(len(c.paths))
                rows += [r for r in got if r["aspect"] == "path"]
            row = {"hops": h, "max_path_hops": d, "n": len(qs), "topic linked": linked,
                   "paths/q mean": round(mean(npaths), 1), "paths/q max": max(npaths),
                   "enumerate CPU s/q": round(mean(cpu), 3), "enumerate CPU s max": round(max(cpu), 3),
                   "link+enumerate+rank CPU s/q (3 retrievers)": round(mean(per_q), 3)}
            path_rows: dict[str, list] = {}
            for r in rows:
                path_rows.setdefault(r["retriever"], []).append(r)
            row["gold path in candidates"] = sum(r["in candidates"] for r in path_rows.get("bm25", []))
            for name, rs in path_rows.items():
                for k in KS:
                    row[f"{name} top {k}"] = sum(r[f"in top {k}"] for r in rs)
            out["rows"].append(row)
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def depth_table(out: dict[str, Any]) -> ResultTable:
    """The measurement as a table: a row per hop and depth, counts of questions out of n."""
    rows = out["rows"]
    cols = [c for c in rows[0] if c != "n"] if rows else []
    return table("path_depth", "Gold path among the candidates and in each retriever's top k, per hop and "
                               "max_path_hops (counts of questions of n)",
                 ["n", *cols], [[r["n"], *(r.get(c, "") for c in cols)] for r in rows])


def questions_line(out: dict[str, Any]) -> str:
    """Which questions the measurement ``out`` ran on, by the reported part's own name (``reported-<N>hop``; a
    measurement saved before that name existed says ``test-<N>hop``, the same questions)."""
    from ..methods.fusic.tasks import REPORTED

    spec = out["dataset"].replace(":test-", f":{REPORTED}-")
    return (f"The questions: `{spec}` — FuSIC's reported MetaQA questions, MetaQA dev questions (MetaQA's test set is "
            "not used; the benchmark cells name the same part `test-<N>hop`, the transfer task's reported part).")


def linker_caveat(out: dict[str, Any], records) -> str:
    """The measurement's gold topic links against the benchmark's records on the same questions (the ``fusic``
    table's FuSIC(T) few-shot cell per hop, ``records``: cell name → its saved records): the counts per hop, and
    where they differ a caveat — the linker is deterministic, so on the same questions a different count means the
    measurement ran with another version of it than the cells, and its counts on those hops are that linker's."""
    from .fusic import cell_records, funnel

    ours = {r["hops"]: r["topic linked"] for r in out.get("rows", []) if r["max_path_hops"] == 2}
    cells = {h: cell_records(records, f"metaqa{h}.fs_dense") for h in ours}
    theirs = {h: funnel(c)["topic linked"] for h, c in cells.items() if c and not c.partial}
    if not theirs:
        return "Gold topic linked: the benchmark's FuSIC(T) few-shot cells are not complete yet, so not compared."
    counts = ", ".join(f"{h}-hop {ours[h]} vs {theirs[h]}" for h in sorted(theirs))
    differ = [h for h in sorted(theirs) if ours[h] != theirs[h]]
    text = (f"Gold topic linked, this measurement vs the benchmark's records on the same questions (FuSIC(T) few-shot, "
            f"the dense retriever): {counts}.")
    if not differ:
        return text + " The same on every hop."
    hops = ", ".join(f"{h}-hop" for h in differ)
    return (text + f" They differ on {hops}: the linker is deterministic, so on the same questions this measurement ran "
            "with another version of the entity linker than the benchmark's cells, and its counts there are that "
            "linker's (`kgqa bench run fusic_path_depth` measures again with the cells' linker).")


#: the measurement's columns a notebook shows: the counts, then the CPU seconds
COUNTS = ["n", "topic linked", "gold path in candidates", "dense few-shot top 3", "dense few-shot top 5",
          "dense few-shot top 10", "dense zero-shot top 5", "bm25 top 5", "paths/q mean", "paths/q max"]


def depth_frames(out: dict[str, Any]):
    """The measurement as two DataFrames indexed by (hops, max_path_hops): the counts (:data:`COUNTS`) and the CPU
    seconds."""
    import pandas as pd

    d = pd.DataFrame(out["rows"]).set_index(["hops", "max_path_hops"])
    return d[[c for c in COUNTS if c in d.columns]], d[[c for c in d.columns if "CPU" in c]]


def tables(out: dict[str, Any]) -> dict[str, ResultTable]:
    """The report's tables as data, by name (``.frame()`` for a notebook, ``.markdown()`` for the report)."""
    return {t.name: t for t in (depth_table(out),)}


def frames() -> dict[str, Any]:
    """The report's tables as DataFrames, from the committed measurement (``fusic_path_depth.json``)."""
    from .measure import read
    from .result_table import frames as to_frames

    return to_frames(list(tables(read(TABLE)).values()))


def report(out: dict[str, Any]) -> str:
    """The measurement as a table (counts of questions out of n)."""
    if not out["rows"]:
        return "no rows\n"
    lines = ["# FuSIC-KBQA candidate path depth on MetaQA dev questions, the reported part (no LLM)", "",
             f"`kgqa bench run fusic_path_depth`. {questions_line(out)} Counts of questions (of n) whose gold path is "
             "among the candidates / "
             "in each retriever's own top k; `max_path_hops` 2 = the paper (TIARA's 2-hop enumeration). Retrievers "
             f"trained on 2-hop candidates either way. Training: {json.dumps(out['training'])}. CPU seconds are "
             "process time (time spent waiting for a shared core is not counted). Raw numbers: `fusic_path_depth.json`.",
             "", depth_table(out).markdown()]
    return "\n".join(lines) + "\n"


def estimate(opts: SimpleNamespace, previous: dict[str, Any]) -> str:
    per_q = [r["link+enumerate+rank CPU s/q (3 retrievers)"] for r in previous.get("rows", [])]
    each = f"≈ {mean(per_q):.1f} CPU s per question as last measured" if per_q else "time unknown"
    return (f"{opts.n} questions × {len(opts.hops)} hop(s) × {len(opts.depths)} depth(s): link, enumerate and rank "
            f"without the LLM ({each}; a dense retriever missing from the disk cache is trained first, minutes)")


TABLE = register(Measurement(
    name="fusic_path_depth", title="FuSIC-KBQA on MetaQA without the LLM: gold path among the candidates and in "
                                   "each retriever's top k at max_path_hops 2 vs 3",
    data="fusic_path_depth.json", output="fusic_path_depth.md", report=report, measure=measure, estimate=estimate,
    options=(Option("--n", 100, "questions per hop (the fusic table's --sample 100)", low=1),
             Option("--hops", "1,2,3", "MetaQA hops", low=1, kind="ints"),
             Option("--depths", "2,3", "max_path_hops values", low=1, kind="ints")),
    requires="KGQA_DATA_DIR (MetaQA) and the embedding model"))
