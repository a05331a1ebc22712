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
templates and exemplars come from); ``--sample 200`` draws them with seed 0."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np

from kgqa_lib.evaluate.metrics import bootstrap_ci
from kgqa_lib.evaluate.report import summarize
from kgqa_lib.evaluate.runner import read_records
from kgqa_lib.paths import results_dir

PAPER = {1: 98.4, 2: 99.9, 3: 99.6}  # Keqing, LoRA-fine-tuned LLaMA, MetaQA test (paper, Table 2)


def stage(r, name):
    return next((s["output"] for s in r.get("trace") or [] if s["name"] == name), None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default=str(results_dir() / "runs"))
    ap.add_argument("--prefix", default="keqing_metaqa")
    ap.add_argument("--out", default=str(results_dir() / "bench" / "keqing_metaqa.md"))
    args = ap.parse_args()
    lines = ["# Keqing on MetaQA dev (local model)", "",
             "| hops | n | Hits@1 [95% CI] | paper | decomposition acc. [95% CI] | unparseable | no answer | calls/q | tokens/q | s/q | outside-LLM share |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    failures = []
    for h in (1, 2, 3):
        path = Path(args.runs) / f"{args.prefix}_{h}hop.jsonl"
        recs = read_records(path) if path.exists() else []
        if not recs:
            lines.append(f"| {h} | 0 | (not run: {path.name}) | {PAPER[h]} | | | | | | | |")
            continue
        row = summarize(recs)
        checks = [c["correct"] for r in recs if (c := stage(r, "decomposition_check"))]
        dm, dlo, dhi = bootstrap_ci([float(c) for c in checks])
        unparse = sum(1 for r in recs if (d := stage(r, "decompose")) and d["error"] == "fallback")
        lines.append(f"| {h} | {row['n']} | {row['hits@1']:.3f} [{row['hits@1_ci'][0]:.3f}, {row['hits@1_ci'][1]:.3f}] | "
                     f"{PAPER[h] / 100:.3f} | {dm:.3f} [{dlo:.3f}, {dhi:.3f}] | {unparse} | "
                     f"{sum(1 for r in recs if not r['prediction'])} | {row['calls/q']:.2f} | {row['tokens/q']:.0f} | "
                     f"{row['s/q']:.2f} | {row['outside_share']:.2f} |")
        for r in recs:
            c = stage(r, "decomposition_check")
            if c and not c["correct"]:
                failures.append((h, " / ".join(c["predicted_chain"]) or "(none)", " / ".join(c["gold_chain"])))
    lines += ["", "Most frequent wrong template sequences (predicted ← gold):", ""]
    for (h, p, g), n in Counter(failures).most_common(12):
        lines.append(f"- {h}-hop ×{n}: `{p}` ← `{g}`")
    text = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
