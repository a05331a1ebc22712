"""Keqing's Fig. 5 and Fig. 6 sweeps on a few mini-world questions (notebook 32's replay): what a setting
does to the candidate chains, the selection calls and the answers, read from the run records' traces."""

from __future__ import annotations

from typing import Any

import numpy as np

from .diagnostics import keqing_steps


def chains_per_sub(records: list[dict[str, Any]]) -> float:
    """Candidate chains per sub-question (the matched templates' chains), over every sub-question."""
    n = [len(st["match"]["chains"]) for r in records for st in keqing_steps(r["trace"]) if st.get("match")]
    return float(np.mean(n)) if n else float("nan")


def gold_chain_recall(records: list[dict[str, Any]], questions: dict[str, Any]) -> float:
    """Share of questions whose gold relation path can be read off the candidate chains: one candidate chain
    per sub-question, in order, concatenated (for the logical chain directly, its one written chain);
    ``questions``: qid → question. Records without sub-question steps are left out."""
    from itertools import product

    from ..methods.keqing import gold_chain

    hit = []
    for r in records:
        steps = keqing_steps(r["trace"])
        if not steps:
            continue
        gold = tuple(gold_chain(questions[r["qid"]]))
        chains = [[tuple(c) for c in (st.get("match") or {}).get("chains", [])] for st in steps]
        hit.append(any(sum(pick, ()) == gold for pick in product(*chains)))
    return float(np.mean(hit)) if hit else float("nan")


def selection_calls(records: list[dict[str, Any]]) -> float:
    """Candidate-selection calls per question."""
    if not any(keqing_steps(r["trace"]) for r in records):  # none, or the chain ablation (no sub-questions)
        return float("nan")
    return float(np.mean([sum((st.get("reasoning") or {}).get("calls", 0) for st in keqing_steps(r["trace"]))
                          for r in records]))


def sweep_table(runs: dict[str, list[dict[str, Any]]], questions: dict[str, Any]):
    """One row per configuration (label → its run records): questions, Hits@1, the gold chain among the
    candidates, candidate chains per sub-question, selection calls and LLM calls per question."""
    import pandas as pd

    rows = [(label, len(recs), float(np.mean([r["metrics"]["hits@1"] for r in recs])) if recs else float("nan"),
             gold_chain_recall(recs, questions), chains_per_sub(recs), selection_calls(recs),
             float(np.mean([r["llm"]["calls"] for r in recs])) if recs else float("nan")) for label, recs in runs.items()]
    return pd.DataFrame(rows, columns=["configuration", "n", "Hits@1", "gold chain among candidates",
                                       "candidate chains / sub-question", "selection calls/q", "calls/q"]
                        ).set_index("configuration")
