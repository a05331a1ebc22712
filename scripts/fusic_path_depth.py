"""FuSIC-KBQA's candidate path depth on MetaQA, without the LLM: the setting ``max_path_hops`` 2 (the
paper: TIARA enumerates 2-hop paths) against 3, on the test questions of the bench table ``fusic``
(``fusic:mw-wd>metaqa:test-<N>hop --sample 100 --seed 0``, N = 1, 2, 3).

  KGQA_DATA_DIR=… nice -n 19 python scripts/fusic_path_depth.py [--n 100] [--hops 1,2,3] [--depths 2,3]

Per hop and depth: the gold topic linked; the gold path among the candidates; in the top 3 / 5 / 10
of BM25, of the dense retriever of the few-shot cells (MiniLM fine-tuned on the source, then on the
5 target shots) and of the zero-shot cells' (source only) — each retriever's own ranking, no LLM
(:func:`kgqa_lib.evaluate.fusic_recall.retrieval_recall` with ``rerank_with_llm=False``); path
candidates per question; CPU seconds per question (process time: on a shared machine wall time
would measure the wait) to enumerate the candidates, and to link, enumerate and rank them with the
three retrievers (the gold bookkeeping included). The retrievers are trained on 2-hop candidates either
way (the paper's); a training run missing from the disk cache is trained here (its seconds are
reported). Writes results/bench/fusic_path_depth.json and .md: counts only, no question text.
"""

from __future__ import annotations

import argparse
import json
import time
from statistics import mean

TASK = "mw-wd>metaqa"
KS = (3, 5, 10)


class Labelled:
    """A retriever under another name (the two dense retrievers are both ``dense``)."""

    def __init__(self, inner, label: str) -> None:
        self.inner, self.label, self.name = inner, label, inner.name

    def rank(self, question, texts, k=None):
        return self.inner.rank(question, texts, k)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100, help="questions per hop (the bench's --sample 100)")
    ap.add_argument("--hops", default="1,2,3")
    ap.add_argument("--depths", default="2,3")
    ap.add_argument("--out", default=None, help="default: results/bench/fusic_path_depth.json (and .md)")
    args = ap.parse_args(argv)

    from kgqa_lib.data.datasets import load_dataset
    from kgqa_lib.embed.embedder import Embedder
    from kgqa_lib.evaluate.fusic_recall import retrieval_recall
    from kgqa_lib.methods import Context
    from kgqa_lib.methods import fusic as F
    from kgqa_lib.paths import results_dir

    task = F.get_task(TASK)
    emb = Embedder()
    started = time.perf_counter()
    bm25, fs = F.make_retrievers("bm25,dense", TASK, 5)
    zs = F.make_retrievers("dense", TASK, 0)[0]
    training = {name: [{"examples": t.examples, "steps": t.steps, "seconds": round(t.seconds, 1), "cached": t.cached}
                       for t in getattr(r, "training", [])] for name, r in (("dense few-shot", fs), ("dense zero-shot", zs))}
    retrievers = [bm25, Labelled(fs, "dense few-shot"), Labelled(zs, "dense zero-shot")]
    setup_s = time.perf_counter() - started
    out = {"task": TASK, "dataset": "fusic:mw-wd>metaqa:test-<N>hop --sample %d --seed 0" % args.n,
           "setup_seconds": round(setup_s, 1), "training": training, "rows": []}
    for h in [int(x) for x in args.hops.split(",")]:
        qs = list(load_dataset(f"fusic:{TASK}:test-{h}hop", sample=args.n, seed=0))
        for d in [int(x) for x in args.depths.split(",")]:
            ctx = Context(llm=None, embedder=emb, settings={"task": TASK, "max_path_hops": d})
            cpu, npaths, linked, per_q, rows = [], [], 0, [], []
            for q in qs:
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
            path_rows = {}
            for r in rows:
                path_rows.setdefault(r["retriever"], []).append(r)
            row["gold path in candidates"] = sum(r["in candidates"] for r in path_rows.get("bm25", []))
            for name, rs in path_rows.items():
                for k in KS:
                    row[f"{name} top {k}"] = sum(r[f"in top {k}"] for r in rs)
            out["rows"].append(row)
            print(json.dumps(row), flush=True)
    out["seconds"] = round(time.perf_counter() - started, 1)
    path = results_dir() / "bench" / "fusic_path_depth.json" if args.out is None else __import__("pathlib").Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    path.with_suffix(".md").write_text(markdown(out))
    print(markdown(out))
    return 0


def markdown(out: dict) -> str:
    """The measurement as a table (counts of questions out of n)."""
    rows = out["rows"]
    if not rows:
        return "no rows\n"
    cols = [c for c in rows[0] if c not in ("n",)]
    lines = [f"# FuSIC-KBQA candidate path depth on MetaQA (no LLM): {out['dataset']}", "",
             "Counts of questions (of n) whose gold path is among the candidates / in each retriever's own top k; "
             "`max_path_hops` 2 = the paper (TIARA's 2-hop enumeration). Retrievers trained on 2-hop candidates "
             f"either way. Training: {json.dumps(out['training'])}. CPU seconds (process time; niced, on 2 cores "
             "shared with a llama.cpp benchmark).", "",
             "| n | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for r in rows:
        lines.append(f"| {r['n']} | " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
