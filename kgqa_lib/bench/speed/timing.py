"""Timers, summaries and Markdown helpers shared by the speed tables.

Standard library only, with nothing of ``kgqa_lib`` imported: :mod:`.scaleout_child` runs in a
child process as a plain file and loads this one beside it, so the child pays only for what it
measures (not for importing the benchmark tables)."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Sequence


def timed(fn: Callable[..., Any], *a: Any, **k: Any) -> tuple[Any, float]:
    """(``fn(*a, **k)``, wall seconds)."""
    t = time.perf_counter()
    out = fn(*a, **k)
    return out, time.perf_counter() - t


def timed_cpu(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, wall seconds, this process's CPU seconds over all its threads)."""
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t, time.process_time() - c


def ms_stats(seconds: Sequence[float], count: str = "n", minimum: bool = False) -> dict[str, float]:
    """Median, (min,) p90 (the sorted value at 90 % of the way) in ms, and how many (key ``count``)."""
    xs = sorted(seconds)
    out = {"median_ms": round(1000 * statistics.median(xs), 3)}
    if minimum:
        out["min_ms"] = round(1000 * xs[0], 3)
    out["p90_ms"] = round(1000 * xs[int(0.9 * (len(xs) - 1))], 3)
    out[count] = len(xs)
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (``q`` in 0..100) of a non-empty sequence."""
    xs = sorted(values)
    if not xs:
        raise ValueError("percentile of nothing")
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """n, median, interpolated p90, mean and max, in ms."""
    ms = [s * 1000.0 for s in seconds]
    return {"n": len(ms), "median_ms": round(statistics.median(ms), 3), "p90_ms": round(percentile(ms, 90), 3),
            "mean_ms": round(statistics.fmean(ms), 3), "max_ms": round(max(ms), 3)}


def load_average() -> float:
    """The 1-minute load average (NaN where the system has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return float("nan")


def disk_bytes(path: Path) -> int:
    """Bytes of a file, or of every file under a folder."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def sqlite_bytes(path: Path) -> int:
    """A SQLite file with its ``-wal``/``-shm`` companions."""
    return sum(Path(str(path) + s).stat().st_size for s in ("", "-wal", "-shm") if Path(str(path) + s).exists())


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A report's pipe table: :meth:`kgqa_lib.bench.result_table.ResultTable.markdown` of these rows."""
    from ..result_table import table

    return table("table", "", headers, rows).markdown()


def progress(iterable: Any, desc: str, total: int | None = None, unit: str = "it") -> Any:
    """A tqdm bar over a long loop (on stderr)."""
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, total=total, unit=unit)
