"""Aggregate run files into the papers' tables: metric means with bootstrap CIs and costs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

from .metrics import bootstrap_ci
from .runner import DuplicateRecordsWarning, dedupe_records, read_records

FACTOID_METRICS = ("hits@1", "f1", "exact_match", "lenient")
OPEN_METRICS = ("rouge_l",)


def summarize(records: list[dict[str, Any]], metrics: Iterable[str] | None = None, seed: int = 0) -> dict[str, Any]:
    """One row: n, each metric's mean and 95% CI, error count, and per-question costs."""
    if not records:
        return {"n": 0}
    first = records[0]
    kinds = {r.get("kind", "factoid") for r in records}
    if metrics is None:
        metrics = OPEN_METRICS if kinds == {"open"} else FACTOID_METRICS
    row: dict[str, Any] = {"method": first.get("method"), "dataset": first.get("dataset"),
                           "model": first.get("model_id"), "n": len(records)}
    for m in metrics:
        values = [r["metrics"][m] for r in records if m in r.get("metrics", {})]
        mean, lo, hi = bootstrap_ci(values, seed=seed) if values else (math.nan, math.nan, math.nan)
        row[m] = mean
        row[f"{m}_ci"] = (lo, hi)
    n = len(records)
    row["errors"] = sum(1 for r in records if r.get("error"))
    row["calls/q"] = sum(r["llm"]["calls"] for r in records) / n
    row["tokens/q"] = sum(r["llm"]["prompt_tokens"] + r["llm"]["completion_tokens"] for r in records) / n
    row["s/q"] = sum(r["seconds"] for r in records) / n
    row["llm_s/q (recorded)"] = sum(r["llm"]["recorded_seconds"] for r in records) / n
    # time outside the LLM (retrieval, embedding, parsing): wall time minus this run's LLM time;
    # its share is taken against the recorded LLM time, i.e. as a live run would spend it
    outside = sum(max(0.0, r["seconds"] - r["llm"].get("seconds", 0.0)) for r in records) / n
    row["outside_llm_s/q"] = outside
    row["outside_share"] = outside / (outside + row["llm_s/q (recorded)"]) if outside + row["llm_s/q (recorded)"] else 0.0
    row["cache_hits"] = sum(r["llm"]["cache_hits"] for r in records)
    return row


def ci_cell(records: list[dict[str, Any]], metric: str, empty: str = "—", with_n: bool = True) -> str:
    """A table cell in points: ``mean [lo, hi] (n=…)`` of ``metric`` over ``records`` (95% bootstrap
    CI), or ``empty`` when there are none."""
    if not records:
        return empty
    row = summarize(records, [metric])
    lo, hi = row[f"{metric}_ci"]
    return f"{100 * row[metric]:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]" + (f" (n={row['n']})" if with_n else "")


def paired_gain(records: list[dict[str, Any]], baseline: list[dict[str, Any]], metric: str,
                seed: int = 0) -> tuple[float, float, float, int]:
    """(mean, low, high, n): ``records`` minus ``baseline`` on ``metric`` over the questions both
    runs answered (matched by qid), with a paired percentile-bootstrap 95% CI of the mean difference.
    Tighter than comparing two separate intervals, since the same questions are hard for both."""
    base = {r["qid"]: r["metrics"].get(metric) for r in baseline}
    diffs = [r["metrics"][metric] - base[r["qid"]] for r in records
             if base.get(r["qid"]) is not None and r["metrics"].get(metric) is not None]
    mean, lo, hi = bootstrap_ci(diffs, seed=seed)
    return mean, lo, hi, len(diffs)


def best_baseline_gain(records: list[dict[str, Any]], baselines: dict[str, list[dict[str, Any]]], metric: str,
                       seed: int = 0) -> tuple[str, float, tuple[float, float, float, int]]:
    """(name, its mean, paired gain): the baseline with the highest mean ``metric`` on the questions
    ``records`` answered (ties: the first named), and :func:`paired_gain` of ``records`` over it."""
    qids = {r["qid"] for r in records}
    means = {}
    for name, recs in baselines.items():
        values = [r["metrics"][metric] for r in recs if r["qid"] in qids and r["metrics"].get(metric) is not None]
        if values:
            means[name] = sum(values) / len(values)
    if not means:
        raise ValueError(f"no baseline answered these questions with {metric!r}")
    best = max(means, key=means.get)
    return best, means[best], paired_gain(records, baselines[best], metric, seed)


def format_gain(gain: tuple[float, float, float, int]) -> str:
    """A :func:`paired_gain` in points: ``+9.9 [+4.3, +15.5]``."""
    mean, lo, hi = (100 * x for x in gain[:3])
    return f"{mean:+.1f} [{lo:+.1f}, {hi:+.1f}]"


def _shard_groups(paths: list[Path]) -> list[tuple[str, list[Path], list[list[dict[str, Any]]]]]:
    """(run name, files, their records) in the order of ``paths``: the files of a sharded run
    (records with ``"shard": [i, n]``, the same config hash and n) form one group named after the
    first file without its ``__shardIofN`` tag; every other file is a group of its own."""
    import re

    groups: dict[Any, tuple[str, list[Path], list[list[dict[str, Any]]]]] = {}
    for k, p in enumerate(paths):
        records = read_records(p, dedupe=False)
        shard = next((r.get("shard") for r in records if isinstance(r.get("shard"), list)), None)
        if shard and len(shard) == 2:
            key: Any = ("shards", next((r.get("config_hash") for r in records), None), shard[1])
            name = re.sub(r"[-_]*shard\d+of\d+", "", Path(p).stem.removesuffix(".jsonl")) or Path(p).stem
        else:
            key, name = ("file", k), Path(p).stem
        groups.setdefault(key, (name, [], []))
        groups[key][1].append(Path(p))
        groups[key][2].append(records)
    return list(groups.values())


def report(paths: Iterable[str | Path], metrics: Iterable[str] | None = None):
    """A pandas DataFrame with one row per run. A run is a file, or the n shard files of a sharded
    run (``kgqa run --shard i/n``; records with the same config hash and n), merged into one row
    with a ``shards`` column (``3/4``: shards present of n). Several records of one question count
    once (the last record), with a :class:`DuplicateRecordsWarning`; the frame's
    ``attrs["duplicates"]`` maps each such run to the number of records dropped, and
    ``attrs["shards"]`` each merged run to ``{"n", "files", "missing": [shard indices], "duplicates"}``."""
    import warnings

    import pandas as pd

    rows, duplicates, shards = [], {}, {}
    for name, files, parts in _shard_groups([Path(p) for p in paths]):
        records, dropped = dedupe_records([r for part in parts for r in part])
        if dropped:
            duplicates[name] = dropped
            where = files[0] if len(files) == 1 else f"{name} ({len(files)} shard files)"
            warnings.warn(f"{where}: {dropped} duplicate record(s) of the same question dropped (the last one counts)",
                          DuplicateRecordsWarning, stacklevel=2)
        row = summarize(records, metrics)
        sharded = any(isinstance(r.get("shard"), list) for r in records)
        if sharded:
            n = int(next(r["shard"][1] for r in records if isinstance(r.get("shard"), list)))
            present = {int(r["shard"][0]) for r in records if isinstance(r.get("shard"), list)}
            shards[name] = {"n": n, "files": len(files), "missing": sorted(set(range(n)) - present),
                            "duplicates": dropped}
            row["shards"] = f"{len(present & set(range(n)))}/{n}"
        if row.get("n"):
            rows.append({"run": name, **row})
    df = pd.DataFrame(rows)
    df.attrs["duplicates"] = duplicates
    df.attrs["shards"] = shards
    return df


def format_table(df, digits: int = 3) -> str:
    """Markdown table; a metric with a CI prints as ``0.420 [0.300, 0.540]``."""
    cols = [c for c in df.columns if not c.endswith("_ci")]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, row in df.iterrows():
        cells = []
        for c in cols:
            v = row[c]
            if isinstance(v, float):
                cell = f"{v:.{digits}f}" if not math.isnan(v) else "–"
                ci = row.get(f"{c}_ci")
                if isinstance(ci, tuple) and not any(math.isnan(x) for x in ci):
                    cell += f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
            else:
                cell = str(v)
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
