"""Aggregate run files into the papers' tables: metric means with bootstrap CIs and costs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

from .metrics import bootstrap_ci
from .runner import DuplicateRecordsWarning, dedupe_records, lock_path, read_records

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


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def cost_line(records: list[dict[str, Any]] = (), label: str = "demo", usage=None) -> str:
    """What a notebook's demo cost, in one sentence: ``"demo: 27 answers, 45 LLM calls (45 replayed from the
    recordings); live they took 11 min"``. The answers' costs come from their run ``records`` (:func:`summarize`:
    recorded LLM time plus the time outside the LLM); ``usage`` adds calls made outside any record — a
    :class:`~kgqa_lib.llm.chat.Usage` (``track_usage()``) or the replies themselves (``ChatResult``), e.g. a
    walkthrough's — at the time they took when they were recorded."""
    from ..llm.chat import Usage

    if usage is not None and not isinstance(usage, Usage):
        replies, usage = usage, Usage()
        for r in replies:
            usage.add(r)
    usage = usage or Usage()
    s = summarize(list(records), [])
    n = s["n"]
    calls = round(s["calls/q"] * n) + usage.calls if n else usage.calls
    hits = (s["cache_hits"] if n else 0) + usage.cache_hits
    live = ((s["llm_s/q (recorded)"] + s["outside_llm_s/q"]) * n if n else 0.0) + usage.recorded_seconds
    answers = f"{n} answer{'s' * (n != 1)}, " if n else ""
    return f"{label}: {answers}{calls} LLM calls ({hits} replayed from the recordings); live they took {_duration(live)}"


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


#: What :func:`summarize` reads of every record: its costs (``llm.*``, ``seconds``), all numbers.
_RUN_NUMBERS = ("llm.calls", "llm.prompt_tokens", "llm.completion_tokens", "llm.recorded_seconds", "llm.cache_hits",
                "seconds")


def _read_run(path: Path) -> list[dict[str, Any]]:
    """Every record of a run file as written (:func:`read_records`), or a
    :class:`~kgqa_lib.errors.UsageError` naming the file when it is not one: not UTF-8, not gzip
    (``.gz``), or records without the costs a report sums (a dataset file, a damaged run)."""
    import gzip
    import zlib

    from ..errors import UsageError

    hint = "give run files written by `kgqa run` (results/runs/*.jsonl, or saved .jsonl.gz)"
    try:
        records = read_records(path, dedupe=False)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise UsageError(f"{path} is not a run file: not a readable gzip file ({exc or type(exc).__name__}); "
                         f"{hint}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({exc.strerror or exc}); {hint}") from None
    if records.not_text and not records:
        raise UsageError(f"{path} is not a run file: not UTF-8 text ({records.not_text} line(s) of other bytes and "
                         f"no record); {hint}")
    for r in records:
        qid = f"of qid {r['qid']!r} " if isinstance(r.get("qid"), (str, int)) else ""
        for key in _RUN_NUMBERS:
            value: Any = r
            for part in key.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise UsageError(f"{path} is not a run file: its record {qid}has no number {key!r}; {hint}")
        metrics = r.get("metrics", {})
        if not isinstance(metrics, dict) or not all(v is None or isinstance(v, (int, float)) for v in metrics.values()):
            raise UsageError(f"{path} is not a run file: the metrics of its record {qid}are not numbers by name; {hint}")
    return records


def _shard_groups(paths: list[Path]) -> list[tuple[str, list[Path], list[list[dict[str, Any]]]]]:
    """(run name, files, their records) in the order of ``paths``: the files of a sharded run
    (records with ``"shard": [i, n]``, the same config hash and n) form one group named after the
    first file without its ``__shardIofN`` tag; every other file is a group of its own."""
    import re

    groups: dict[Any, tuple[str, list[Path], list[list[dict[str, Any]]]]] = {}
    for k, p in enumerate(paths):
        records = _read_run(p)
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


def _unique_names(groups: list[tuple[str, list[Path], list[list[dict[str, Any]]]]]) -> list[str]:
    """A distinct row name per group: its own name, and where two runs share one, the sharded runs' shard
    count (``A (2 shards)``), else the file's folder (``x/A``), else a number (``A #2``)."""
    names = [g[0] for g in groups]

    def n_shards(parts: list[list[dict[str, Any]]]) -> int | None:
        return next((int(r["shard"][1]) for part in parts for r in part if isinstance(r.get("shard"), list)), None)

    for widen in (lambda n, g: f"{n} ({n_shards(g[2])} shards)" if n_shards(g[2]) else n,
                  lambda n, g: f"{g[1][0].parent.name}/{n}" if g[1][0].parent.name else n):
        for name in {n for n in names if names.count(n) > 1}:
            at = [i for i, n in enumerate(names) if n == name]
            wider = [widen(name, groups[i]) for i in at]
            if len(set(wider)) > 1:  # it tells some of them apart
                for i, w in zip(at, wider):
                    names[i] = w
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} #{seen[n]}")
    return out


def _shard_state(n: int, files: list[Path], records: list[dict[str, Any]]) -> dict[str, Any]:
    """Which of the n shards of a merged run are missing and which are short: questions per shard, and a
    shard short of what a complete one would hold — shards are dealt round-robin
    (:meth:`~kgqa_lib.data.datasets.Dataset.shard`), so complete shards hold the same number of questions,
    or one fewer from some index on — or whose file's run lock is still there (its ``kgqa run`` is running,
    or was stopped before it ended). A shard stopped just before its last question cannot be told from
    a complete one by its count."""
    import re

    counts: dict[int, set] = {}
    for r in records:
        if isinstance(r.get("shard"), list):
            counts.setdefault(int(r["shard"][0]), set()).add(r.get("qid"))
    sizes = {i: len(q) for i, q in counts.items() if 0 <= i < n}
    short: dict[int, str] = {}
    if sizes:
        top = max(sizes.values())
        last_top = max(i for i, c in sizes.items() if c == top)
        for i, c in sorted(sizes.items()):
            expected = top if i <= last_top else top - 1
            if c < expected:
                short[i] = f"{c} question(s), at least {expected} expected"
    for f in files:
        m = re.search(r"shard(\d+)of(\d+)", f.name)
        if m and int(m.group(2)) == n and int(m.group(1)) in sizes and lock_path(f).exists():
            i = int(m.group(1))
            short[i] = "; ".join(filter(None, [short.get(i), "its run has not ended (running, or stopped before "
                                                               f"the end: {lock_path(f).name} is still there)"]))
    return {"missing": sorted(set(range(n)) - set(sizes)), "questions": dict(sorted(sizes.items())),
            "short": dict(sorted(short.items()))}


def shard_note(name: str, info: dict[str, Any]) -> str:
    """One line on a merged run (``report(…).attrs["shards"][name]``): its shard files, the missing and the
    short shards with how to run them, and the duplicates ignored."""
    n = info["n"]
    parts = [f"{name}: merged {info['files']} shard file(s) of n={n}"]
    if info["missing"]:
        parts.append(f"missing shard(s): {', '.join(map(str, info['missing']))} (run them with --shard i/{n})")
    if info.get("short"):
        parts.append("unfinished shard(s): " + ", ".join(f"{i} ({why})" for i, why in info["short"].items())
                     + f" (resume each with the same `kgqa run … --shard i/{n}`)")
    if not info["missing"] and not info.get("short"):
        parts.append(f"all {n} shards present, none short of the others")
    parts.append(f"{info['duplicates']} duplicate qid(s) ignored (the last record counts)")
    return "; ".join(parts)


def report(paths: Iterable[str | Path], metrics: Iterable[str] | None = None):
    """A pandas DataFrame with one row per run. A run is a file, or the n shard files of a sharded
    run (``kgqa run --shard i/n``; records with the same config hash and n), merged into one row
    with a ``shards`` column (``3/4``: shards present of n). Several records of one question count
    once (the last record), with a :class:`DuplicateRecordsWarning`; the frame's
    ``attrs["duplicates"]`` maps each such run to the number of records dropped, and
    ``attrs["shards"]`` each merged run to ``{"n", "files", "missing": [shard indices], "short":
    {shard index: why}, "questions": {shard index: questions}, "duplicates"}`` (:func:`_shard_state`;
    :func:`shard_note` says it in one line). Row names are distinct (:func:`_unique_names`)."""
    import warnings

    import pandas as pd

    rows, duplicates, shards = [], {}, {}
    groups = _shard_groups([Path(p) for p in paths])
    for name, (_, files, parts) in zip(_unique_names(groups), groups):
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
            state = _shard_state(n, files, records)
            shards[name] = {"n": n, "files": len(files), **state, "duplicates": dropped}
            done = n - len(state["missing"]) - len(state["short"])
            row["shards"] = f"{n - len(state['missing'])}/{n}" + (f" ({done} finished)" if state["short"] else "")
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


def print_report(paths: Iterable[str | Path], metrics: Iterable[str] | None = None, out: str | Path | None = None):
    """``kgqa report``: the table of ``paths`` (:func:`report`) on stdout, a note on stderr per run whose
    duplicates were ignored and per merged sharded run (:func:`shard_note`); with ``out``, the Markdown
    there and a CSV beside it. Returns the frame."""
    import sys
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DuplicateRecordsWarning)  # said once below, as a note
        df = report(paths, metrics)
    for run_name, n in df.attrs.get("duplicates", {}).items():
        if run_name in df.attrs.get("shards", {}):
            continue  # said with the shards below
        print(f"note: {run_name}: {n} duplicate record(s) of the same question ignored (the last one counts); "
              "two runs wrote this file", file=sys.stderr)
    for run_name, info in df.attrs.get("shards", {}).items():
        print(f"note: {shard_note(run_name, info)}", file=sys.stderr)
    table = format_table(df)
    print(table)
    if out:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(table + "\n", encoding="utf-8")
        df.drop(columns=[c for c in df.columns if c.endswith("_ci")]).to_csv(out.with_suffix(".csv"), index=False)
    return df
