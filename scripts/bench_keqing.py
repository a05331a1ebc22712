"""Keqing benchmark on MetaQA dev: Hits@1 per hop with bootstrap CIs, decomposition accuracy,
LLM calls, tokens and seconds per question.

Run the methods first (resumable; MetaQA run files stay in results/runs/, never committed):

    export KGQA_DATA_DIR=../shared/datasets
    for h in 1 2 3; do
      kgqa run --method keqing --dataset keqing:metaqa:${h}hop --sample 200 --llm local --no-transcripts \\
          --out results/runs/keqing_metaqa_${h}hop.jsonl
    done
    python scripts/bench_keqing.py        # → results/bench/keqing_metaqa.md

The evaluated questions are MetaQA dev lines outside the pool (every tenth line is the pool the
templates and exemplars come from); ``--sample 200`` draws them with seed 0.

MetaQA's questions and answers must not enter the repository, so progress is kept across machines
as *stripped* records (question id, config hash, metrics, LLM/KG accounting, the predicted and gold
relation paths, error categories — no question text, no entity names):

    python scripts/bench_keqing.py --save      # → results/bench/runs/keqing_metaqa/*.jsonl.gz (commit)
    python scripts/bench_keqing.py --restore   # → results/runs/ (the runner skips those questions)"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np

from kgqa_lib.evaluate.metrics import bootstrap_ci
from kgqa_lib.evaluate.report import summarize
from kgqa_lib.evaluate.runner import read_records, restore_runs, save_runs
from kgqa_lib.paths import results_dir

PAPER = {1: 98.4, 2: 99.9, 3: 99.6}  # Keqing, LoRA-fine-tuned LLaMA, MetaQA test (paper, Table 2)


SAVED = results_dir() / "bench" / "runs" / "keqing_metaqa"
SAVED_FULL = results_dir() / "bench" / "runs" / "keqing_full"  # the paper's four stages
KEEP = ("dataset", "qid", "kind", "metrics", "error", "llm", "kg", "seconds", "method", "model_id", "config_hash", "config")


def strip(r: dict) -> dict:
    """A run record without MetaQA content: ids, metrics, costs, relation paths, error categories."""
    out = {k: r[k] for k in KEEP if k in r}
    check, dec = stage(r, "decomposition_check"), stage(r, "decompose")
    out["trace"] = ([{"name": "decomposition_check", "output": check}] if check else []) + \
                   ([{"name": "decompose", "output": {"error": dec.get("error")}}] if dec else [])
    out["prediction"] = ["(answered)"] if r.get("prediction") else []
    out["stripped"] = True
    return out


def _norm(x: str) -> str:
    return " ".join(x.casefold().split())


def strip_full(r: dict) -> dict:
    """A full-pipeline record (candidate reasoning, response) without MetaQA content: on top of
    :func:`strip`, per sub-question the reasoning's counts (candidates, selected, made-up names,
    over the bound, calls, error), the final step's selection against the gold answers (counts), the
    lenient response check, and seconds and LLM calls per stage."""
    out = strip(r)
    plan = stage(r, "execute_plan")
    steps = plan[0] if isinstance(plan, list) and plan else []
    rs = [st.get("reasoning", {}) for st in steps]
    out["reasoning"] = [{k: x.get(k) for k in ("mode", "n_candidates", "n_answers", "unmatched", "over_bound",
                                                  "calls", "called", "error")} for x in rs]
    gold = {_norm(g) for g in r.get("gold") or []}
    pred = [_norm(p) for p in r.get("prediction") or []]
    last = rs[-1] if rs else {}
    cands = {_norm(c) for c in last.get("candidates") or []}
    out["selection"] = {"n_candidates": last.get("n_candidates", 0), "n_selected": len(pred),
                        "candidates_listed": len(cands), "gold_in_candidates": len(gold & cands),
                        "gold_selected": len(gold & set(pred)), "n_gold": len(gold)}
    resp = _norm(r.get("response") or "")
    out["response_check"] = {"names_top1": bool(pred) and pred[0] in resp,
                             "names_any": any(p in resp for p in pred), "responded": stage(r, "respond") is not None}
    secs = {s["name"]: s.get("seconds", 0.0) for s in r.get("trace") or []}
    out["stages"] = {"seconds": {k: secs[k] for k in ("select_exemplars", "decompose", "execute_plan", "respond") if k in secs},
                     "calls": {"decompose": int("decompose" in secs),
                               "reasoning": sum(int(x.get("calls") or x.get("called") or 0) for x in rs),
                               "respond": int("respond" in secs)}}
    return out


def save(runs: Path, prefix: str) -> None:
    folder, fn = (SAVED_FULL, strip_full) if prefix == "keqing_full" else (SAVED, strip)
    for name, n in save_runs(sorted(runs.glob(f"{prefix}_*hop.jsonl")), folder, fn).items():
        print("saved", name, n, "stripped records")


def restore(runs: Path) -> None:
    for folder in (SAVED, SAVED_FULL):
        if folder.is_dir():
            for name, what in restore_runs(folder, runs).items():
                print(name, what)


def ceiling(hops: int, qids: set[str]) -> tuple[float, int]:
    """Hits@1 of executing the *gold* relation path from the topic entity (topic excluded at every
    hop), answers ordered as Keqing orders them: what a perfect decomposition and matching would
    score on this KB. Needs KGQA_DATA_DIR; returns (nan, 0) without it."""
    from kgqa_lib.datasets import DatasetNotFound, load_dataset
    from kgqa_lib.evaluate.metrics import score
    from kgqa_lib.kg import load_named
    from kgqa_lib.methods import keqing as K

    try:
        ds = [q for q in load_dataset(f"keqing:metaqa:{hops}hop") if q.qid in qids]
        kg = load_named("metaqa")
    except DatasetNotFound:
        return float("nan"), 0
    hits = []
    for q in ds:
        topic = {v for t in q.topic_entities for v in K.link_seed(t, kg)}
        frontier = sorted(topic)
        for hop in K.gold_chain(q):
            frontier = K.retrieve_candidates(kg, "metaqa", frontier, [(hop,)], topic)[0].tails
        hits.append(score([K._label(kg, v) for v in frontier], q.answers)["hits@1"])
    return float(np.mean(hits)), len(hits)


def stage(r, name):
    return next((s["output"] for s in r.get("trace") or [] if s["name"] == name), None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default=str(results_dir() / "runs"))
    ap.add_argument("--prefix", default="keqing_metaqa")
    ap.add_argument("--out", default=str(results_dir() / "bench" / "keqing_metaqa.md"))
    ap.add_argument("--no-ceiling", dest="ceiling", action="store_false", help="skip the gold-path ceiling (needs the KB)")
    ap.add_argument("--save", action="store_true", help="keep stripped records in results/bench/runs/keqing_metaqa/")
    ap.add_argument("--restore", action="store_true", help="copy the stripped records back to results/runs/")
    args = ap.parse_args()
    if args.save or args.restore:
        save(Path(args.runs), args.prefix) if args.save else restore(Path(args.runs))
        return 0
    lines = ["# Keqing on MetaQA dev (local model)", "",
             "| hops | n | Hits@1 [95% CI] | paper | gold-path ceiling | decomposition acc. [95% CI] | unparseable | no answer | calls/q | tokens/q | s/q (mean / median) | outside-LLM share |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    failures = []
    for h in (1, 2, 3):
        path = Path(args.runs) / f"{args.prefix}_{h}hop.jsonl"
        recs = read_records(path) if path.exists() else []
        if not recs:
            lines.append(f"| {h} | 0 | (not run: {path.name}) | {PAPER[h] / 100:.3f} | | | | | | | | |")
            continue
        row = summarize(recs)
        checks = [c["correct"] for r in recs if (c := stage(r, "decomposition_check"))]
        dm, dlo, dhi = bootstrap_ci([float(c) for c in checks])
        unparse = sum(1 for r in recs if (d := stage(r, "decompose")) and d["error"] == "fallback")
        ceil, n_ceil = ceiling(h, {r["qid"] for r in recs}) if args.ceiling else (float("nan"), 0)
        lines.append(f"| {h} | {row['n']} | {row['hits@1']:.3f} [{row['hits@1_ci'][0]:.3f}, {row['hits@1_ci'][1]:.3f}] | "
                     f"{PAPER[h] / 100:.3f} | {ceil:.3f} | {dm:.3f} [{dlo:.3f}, {dhi:.3f}] | {unparse} | "
                     f"{sum(1 for r in recs if not r['prediction'])} | {row['calls/q']:.2f} | {row['tokens/q']:.0f} | "
                     f"{row['s/q']:.2f} / {float(np.median([r['seconds'] for r in recs])):.2f} | {row['outside_share']:.2f} |")
        for r in recs:
            c = stage(r, "decomposition_check")
            if c and not c["correct"]:
                failures.append((h, " / ".join(c["predicted_chain"]) or "(none)", " / ".join(c["gold_chain"])))
    lines += ["", "s/q is wall time per question on 2 cores; the mean includes stretches where another job shared",
              "the cores (the median is closer to an undisturbed run).", "",
              "Most frequent wrong template sequences (predicted ← gold):", ""]
    for (h, p, g), n in Counter(failures).most_common(12):
        lines.append(f"- {h}-hop ×{n}: `{p}` ← `{g}`")
    text = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
