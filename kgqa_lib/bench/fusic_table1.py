"""FuSIC-KBQA's Table 1 for our transfer pairs, from the data (no LLM): a measurement table
(``kgqa bench run fusic_table1``) whose JSON holds numbers only — per pair of the bench table
``fusic`` (:data:`kgqa_lib.bench.fusic.PAIRS`, the same reported questions: MetaQA dev, 100 per hop,
seeded; GrailQA-Tech's 124; the mini-world's reported parts) the statistics of
:func:`kgqa_lib.evaluate.transfer_stats.table1_statistics` (their definitions, and where our data
cannot give the paper's exactly, are in that module's doc). The FuSIC report shows them beside the
paper's Table 1 rows (:func:`section`)."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace
from typing import Any

from .measure import Measurement, register
from .result_table import ResultTable, table

#: Table 1 of the paper, row by row: (Dom. JS, Rel. % New, Func. JS, # Relations src / tgt, Src-Tgt Sim,
#: # Tokens src / tgt, Target Gen. Scenario), as printed
PAPER_T1 = {
    "GrailQA→GraphQA": ("0.25", "50.4", "0.01", "1.36 / 1.53", "0.44", "10.4 / 9.3", "C,Z"),
    "GrailQA→WebQSP": ("0.37", "55.4", "0.04", "1.35 / 1.54", "0.31", "10.4 / 6.6", "I,C,Z"),
    "WebQSP→GrailQA-Tech": ("0.68", "99.3", "0.11", "1.52 / 1.46", "0.23", "6.6 / 10.9", "I,C,Z"),
    "WebQSP→GraphQA-Pop": ("0.66", "97.5", "0.07", "1.52 / 1.73", "0.23", "6.6 / 9.2", "C,Z"),
}
SHOTS = 5  # the few-shot cells' target shots: the generalization scenario is against these
DIGITS = 4  # the JSON's rounding


def _target(dataset: str, extra: tuple[str, ...]):
    """A pair's reported questions, as its cells' ``kgqa run`` loads them (``--sample N``, seed 0)."""
    from ..data.datasets import load_dataset

    sample = int(extra[extra.index("--sample") + 1]) if "--sample" in extra else None
    return list(load_dataset(dataset, sample=sample, seed=0))


def measure(opts: SimpleNamespace, previous: dict[str, Any]) -> dict[str, Any]:
    from ..embed.embedder import Embedder
    from ..evaluate.transfer_stats import task_statistics
    from .fusic import PAIRS

    started, emb, rows = time.perf_counter(), Embedder(), []
    for pair, (task, dataset, _, extra, label) in PAIRS.items():
        stats = task_statistics(task, _target(dataset, extra), shots=SHOTS, encode=emb.encode)
        rows.append({"pair": pair, "label": label, "task": task,
                     **{k: round(v, DIGITS) if isinstance(v, float) else v for k, v in stats.items()}})
    return {"encoder": emb.model_id, "shots": SHOTS, "rows": rows, "seconds": round(time.perf_counter() - started, 1)}


def _two(a: float, b: float, fmt: str) -> str:
    return f"{a:{fmt}} / {b:{fmt}}"


def _js(bits: float, base: float) -> str:
    """A JS divergence in bits, and in nats beside it (the paper does not say which log it uses)."""
    nats = bits * math.log(base)
    return f"{bits:.2f} ({nats:.2f})"


def section(data: dict[str, Any]) -> list[str]:
    """The Table 1 section of the FuSIC report (Markdown lines, a leading blank line)."""
    lines = ["", "## Table 1 analogue: how far each pair's target is from its source (no LLM)", ""]
    if not data:
        return lines + ["Not computed yet: `kgqa bench run fusic_table1 --yes` (no LLM; needs KGQA_DATA_DIR)."]
    return lines + [columns_note(data), "", *table1(data).markdown().splitlines()]


def columns_note(data: dict[str, Any]) -> str:
    """How the Table 1 analogue's columns are computed (the measurement ``data``: its encoder and shots)."""
    return ("Computed from the data by `kgqa bench run fusic_table1` (kgqa_lib.evaluate.transfer_stats: the "
            "definitions and where our data cannot give the paper's exactly), on the reported questions of each "
            "pair (the target; the paper's: its test set) against every source question with a gold logical form "
            "(the paper's: the source training set). Dom. JS and Func. JS: Jensen–Shannon divergence in bits (log "
            "base 2: 0 identical, 1 disjoint), in nats in brackets — the paper does not say which log it uses. "
            "Rel. % new: target questions with a relation no source logical form uses, by KB relation id (the "
            "paper's; our MetaQA and mini-world pairs change KB or schema, so every id is new there) and by the "
            "relation's schema-neutral name (the mini-world's property names are MetaQA's relation names). "
            "Domains: GrailQA's own annotation; the mini-world's, the Freebase domain of each relation; MetaQA's, "
            "film for every question (our stand-in: MetaQA names none). Functions: GrailQA's (none, count, "
            "argmax, argmin, comparatives). Src-Tgt sim: the caption's \"average minimum cosine distance\" read "
            "as each target question's cosine similarity to its nearest source question, averaged (the mean "
            f"over all pairs in brackets), with our encoder ({data['encoder']}; the paper names none). # Tokens: "
            "whitespace tokens per question. Target gen.: the target questions i.i.d. / compositional / zero-shot "
            f"with respect to the {data['shots']} target shots our few-shot cells use (GrailQA's definitions; the "
            "paper's 100 shots; it marks which occur).")


COLUMNS = ("pair", "source / target questions", "Dom. JS", "Rel. % new: KB ids (names)", "Func. JS",
           "# Relations src / tgt", "Src-Tgt sim: nearest (mean)", "# Tokens src / tgt", "target gen.: I / C / Z")


def table1(data: dict[str, Any]) -> ResultTable:
    """Our pairs' statistics (the measurement's rows), then the paper's Table 1 rows as printed."""
    rows = data.get("rows") or []
    base = rows[0]["js_base"] if rows else 2.0
    body = []
    for r in rows:
        gen = r.get("generalization")
        body.append([r["label"], f"{r['n_source']} / {r['n_target']}", _js(r["domain_js"], base),
                     f"{r['new_relation_pct']:.1f} ({r['new_relation_name_pct']:.1f})", _js(r["function_js"], base),
                     _two(r["relations_source"], r["relations_target"], ".2f"),
                     f"{r['similarity_nearest']:.2f} ({r['similarity_mean']:.2f})",
                     _two(r["tokens_source"], r["tokens_target"], ".1f"),
                     f"{gen['I']} / {gen['C']} / {gen['Z']}" if gen else "—"])
    body += [[f"paper, Table 1, row {name}", "—", *values] for name, values in PAPER_T1.items()]
    return table("table1", "Table 1 analogue: how far each pair's target is from its source (no LLM)", COLUMNS, body)


def paper_column_reading(data: dict[str, Any], column: str) -> str:
    """Why the paper's ``column`` stands beside ours, as far as Table 1 tells: of the paper's rows
    (:data:`PAPER_T1`), the one whose target has the largest share of questions with a relation new to the source,
    against our pairs' shares (the measurement ``data``; KB ids, and relation names in brackets)."""
    most = max(PAPER_T1, key=lambda k: float(PAPER_T1[k][1]))
    rows = data.get("rows") or []
    if not rows:
        return f"The paper's values beside ours are its column {column}; our pairs' Table 1 is not computed yet."
    ids = [r["new_relation_pct"] for r in rows]
    names = [r["new_relation_name_pct"] for r in rows]
    span = lambda xs: f"{min(xs):.1f}" if min(xs) == max(xs) else f"{min(xs):.1f}–{max(xs):.1f}"  # noqa: E731
    return (f"The paper's values beside ours are its column {column}"
            + (", its Table 1 row" if most == column else f"; its Table 1 row {most} is the one")
            + f" with the most target questions using a relation new to the source ({PAPER_T1[most][1]}%); ours: "
            f"{span(ids)}% by KB relation id ({span(names)}% by relation name).")


def tables(data: dict[str, Any]) -> dict[str, ResultTable]:
    """The report's tables as data, by name (``.frame()`` for a notebook, ``.markdown()`` for the report)."""
    return {t.name: t for t in (table1(data),)}


def frames() -> dict[str, Any]:
    """The report's tables as DataFrames, from the committed measurement (``fusic_table1.json``)."""
    from .measure import read
    from .result_table import frames as to_frames

    return to_frames(list(tables(read(TABLE)).values()))


def report(data: dict[str, Any]) -> str:
    return "\n".join(["# FuSIC-KBQA Table 1 analogue: our transfer pairs (no LLM)"] + section(data)) + "\n"


def estimate(opts: SimpleNamespace, previous: dict[str, Any]) -> str:
    last = f"≈ {previous['seconds']:.0f} s as last measured" if previous.get("seconds") else "a few minutes"
    return (f"no LLM: every pair of the fusic table, its source questions and reported questions read and embedded "
            f"({last}; loading the MetaQA KB included)")


TABLE = register(Measurement(
    name="fusic_table1", title="FuSIC-KBQA's Table 1 for our transfer pairs (divergences, new relations, relations "
                               "per logical form, question similarity), no LLM",
    data="fusic_table1.json", output="fusic_table1.md", report=report, measure=measure, estimate=estimate,
    requires="KGQA_DATA_DIR (MetaQA, GrailQA) and the embedding model"))
