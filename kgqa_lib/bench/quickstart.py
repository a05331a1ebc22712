"""What notebook 00 displays of its demo and of the benchmark's IO and CoT cells: metrics in points (as every
results table of the collection), the methods by their papers' names (``IO``, ``CoT``), and what the
seconds per question are."""

from __future__ import annotations

from typing import Any

from .result_table import ResultTable, table
from ..evaluate.pgakv_analysis import ROWS

#: what the seconds-per-question column of :func:`io_cot_readable` is
SECONDS_NOTE = ("s/q (recorded): seconds per question the model took when these answers were recorded on this "
                "machine (a live run's time; it varies with the machine's load); a replay reads them back at once.")


def method_name(method: str) -> str:
    """A method's name as the papers write it (``io`` → ``IO``, ``cot`` → ``CoT``); other names unchanged."""
    return ROWS.get(method, method)


def _points(mean: float, ci: tuple[float, float]) -> str:
    return f"{100 * mean:.1f} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def demo_table(report) -> Any:
    """Notebook 00's demo as a DataFrame, from :func:`~kgqa_lib.evaluate.report.report`'s frame (fractions): per
    method (by name, :func:`method_name`) the questions, Hits@1 and F1 in points with their 95% bootstrap CIs,
    ToG's lenient match in points, malformed answers, LLM calls and tokens per question."""
    import pandas as pd

    return pd.DataFrame({
        "method": [method_name(m) for m in report["method"]],
        "n": report["n"],
        "Hits@1 (points) [95% CI]": [_points(m, ci) for m, ci in zip(report["hits@1"], report["hits@1_ci"])],
        "F1 (points) [95% CI]": [_points(m, ci) for m, ci in zip(report["f1"], report["f1_ci"])],
        "lenient, ToG's (points)": (100 * report["lenient"]).round(1),
        "malformed": report["errors"],
        "LLM calls/q": report["calls/q"].round(1),
        "tokens/q": report["tokens/q"].round(1),
    }).set_index("method")


def points_bars(ax, report, metric: str = "hits@1", label: str = "Hits@1"):
    """Bars of ``metric`` per method of a report frame, in points (0–100) with the 95% CI as error bars, the
    methods by name (:func:`method_name`)."""
    means = [100 * float(m) for m in report[metric]]
    cis = [(100 * lo, 100 * hi) for lo, hi in report[f"{metric}_ci"]]
    ax.bar([method_name(m) for m in report["method"]], means, capsize=6, color=["#4C72B0", "#DD8452", "#55A868"][:len(means)],
           yerr=[[m - lo for m, (lo, _) in zip(means, cis)], [hi - m for m, (_, hi) in zip(means, cis)]])
    ax.set_ylim(0, 100)
    ax.set_ylabel(f"{label} (points)")
    return ax


def io_cot_readable(t: ResultTable) -> ResultTable:
    """:func:`~kgqa_lib.bench.pgakv.io_cot_table` with the methods by name and the seconds column named for
    what it is (:data:`SECONDS_NOTE`)."""
    columns = [("s/q (recorded)" if c == "s/q live" else c) for c in t.columns]
    return table(t.name, t.title, columns, [[method_name(r[0]), *r[1:]] for r in t.rows])


def _live_minutes(part: str, questions: int, load) -> float:
    """Minutes IO and CoT take live on ``questions`` questions of a mini-world set, from the benchmark's records
    of that set (their recorded seconds per question)."""
    from ..evaluate.pgakv_analysis import run_costs

    return questions * sum(c.get("s/q", 0.0) for c in run_costs([(part, "io"), (part, "cot")], load)) / 60


_TIME = " (as the benchmark recorded it per question; loading the model adds to it)"


def try_this(dataset: str, n_questions: int | None, seed: int, load=None, metaqa: float | None = None) -> str:
    """What each of notebook 00's "Try this" suggestions needs: calls that are not recorded run the local model
    live (``LLM_MODE = "auto"``; minutes from the ``pgakv_t2`` records' seconds per question of IO and CoT, and for
    MetaQA ``metaqa`` seconds per question, default ``pgakv_metaqa``'s CoT 1-hop records), and what MetaQA needs
    (``KGQA_DATA_DIR``, laid out as the README's *External benchmarks* says)."""
    from .pgakv import demo_qids
    from ..evaluate.pgakv_analysis import committed_records

    load = load or committed_records
    part = dataset.split(":")[1] if dataset.startswith("miniworld:") else None
    lines = ['KG = "miniworld:freebase": no LLM call changes; it replays as recorded.']
    if part:
        now, more = demo_qids([dataset], n_questions, seed)[part], demo_qids([dataset], 20, seed)[part]
        new = len(more - now)
        lines.append(f"N_QUESTIONS = 20: {new} questions more, {2 * new} LLM calls live (LLM_MODE = \"auto\"), "
                     f"≈ {_live_minutes(part, new, load):.1f} min of model time{_TIME}.")
    other = "miniworld:multihop" if part != "multihop" else "miniworld:simple"
    n = len(demo_qids([other], n_questions, seed)[other.split(":")[1]])
    lines.append(f'DATASET = "{other}": every call live, {1 + 2 * n} LLM calls, ≈ '
                 f"{_live_minutes(other.split(':')[1], n, load):.1f} min of model time{_TIME}.")
    metaqa = metaqa if metaqa is not None else _metaqa_cot()
    lines.append("kgqa run --method cot --dataset metaqa:1hop:dev --sample 50: 50 LLM calls live"
                 + (f", ≈ {50 * metaqa / 60:.1f} min of model time{_TIME}" if metaqa else "") + "; needs KGQA_DATA_DIR "
                 "set to a folder holding the MetaQA files (the README, section External benchmarks, gives the "
                 "layout and where to download them).")
    return "\n".join(lines)


def _metaqa_cot() -> float | None:
    """Seconds per question of CoT on MetaQA 1-hop as the ``pgakv_metaqa`` records hold them (None: not run)."""
    from .core import Records
    from .pgakv_metaqa import TABLE
    from ..evaluate.report import summarize

    recs = Records(TABLE)("cot_1hop")
    if not recs:
        return None
    s = summarize(recs, [])
    return s["llm_s/q (recorded)"] + s["outside_llm_s/q"]
