"""The runner: a method over a dataset, one JSON line per finished question, resumable.

A record carries the question, gold and prediction, the response text, the metrics, the
per-stage trace, LLM and KG accounting, the error (if any) and the run's config hash. Killing a
run loses at most the question in flight: re-running the same command skips finished questions.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable, Iterable

from ..datasets import Dataset
from ..llm import ReplayMiss, track_usage
from ..methods import Context, MethodResult, get_method
from ..paths import results_dir
from ..prompting import load_prompt
from .metrics import score


class Metered:
    """A transparent proxy that counts and times calls to an object's public methods
    (used to account KG queries per question without touching the KG backends). Counts are kept
    per thread, so questions running concurrently are each accounted their own queries."""

    def __init__(self, inner: Any) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_local", threading.local())

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                local = self._local
                local.calls = getattr(local, "calls", 0) + 1
                local.seconds = getattr(local, "seconds", 0.0) + time.perf_counter() - t

        return timed

    def __len__(self) -> int:
        return len(self._inner)

    def snapshot(self) -> tuple[int, float]:
        """This thread's (calls, seconds) so far."""
        return getattr(self._local, "calls", 0), getattr(self._local, "seconds", 0.0)


def _jsonable(x: Any) -> Any:
    if hasattr(x, "as_dict"):
        return _jsonable(x.as_dict())
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    if hasattr(x, "__dataclass_fields__"):
        from dataclasses import asdict

        return _jsonable(asdict(x))
    return str(x)


def _question_hash(q) -> str:
    return hashlib.sha256(json.dumps(q.as_dict(), sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:12]


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]


def default_run_path(method: str, dataset: str, model_id: str, tag: str = "") -> Path:
    safe = lambda s: "".join(c if c.isalnum() or c in "-_." else "-" for c in s)  # noqa: E731
    name = f"{safe(dataset)}__{safe(method)}__{safe(model_id)}{'__' + safe(tag) if tag else ''}.jsonl"
    return results_dir() / "runs" / name


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """All complete records of a run file (a truncated last line from a killed run is skipped);
    a ``.gz`` file (a saved benchmark run, see :func:`save_runs`) is read the same way."""
    import gzip

    path = Path(path)
    if not path.exists():
        return []
    out = []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def save_runs(paths: Iterable[str | Path], folder: str | Path,
              transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, int]:
    """Keep run files as ``<folder>/<name>.jsonl.gz`` (deterministic bytes, so unchanged runs make
    no diff), each record passed through ``transform`` (e.g. to strip a benchmark's content).
    Long benchmarks use this to carry progress across machines; returns records saved per file."""
    import gzip

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    for p in map(Path, paths):
        recs = [transform(r) if transform else r for r in read_records(p)]
        data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in recs)
        (folder / (p.name + ".gz")).write_bytes(gzip.compress(data.encode("utf-8"), mtime=0))
        counts[p.name] = len(recs)
    return counts


def restore_runs(folder: str | Path, runs: str | Path) -> dict[str, str]:
    """Unpack ``<folder>/*.jsonl.gz`` into ``runs`` so a re-run resumes them; an existing run file
    is kept (it is newer). Returns what happened to each file."""
    import gzip

    runs = Path(runs)
    runs.mkdir(parents=True, exist_ok=True)
    out = {}
    for g in sorted(Path(folder).glob("*.jsonl.gz")):
        target = runs / g.name[:-3]
        if target.exists():
            out[target.name] = "kept (exists)"
            continue
        target.write_bytes(gzip.decompress(g.read_bytes()))
        out[target.name] = "restored"
    return out


def _append(path: Path, record: dict[str, Any]) -> None:
    line = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        # a killed run may leave a partial line: start on a fresh line if so
        if fh.tell() > 0:
            with open(path, "rb") as rb:
                rb.seek(-1, os.SEEK_END)
                if rb.read(1) != b"\n":
                    line = "\n" + line
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def _redact(text: str) -> str:
    """Second line of defence: an API key never reaches a run record, whatever an exception says."""
    key = os.environ.get("OPENAI_API_KEY")
    return text.replace(key, "***") if key and len(key) >= 8 else text


def run_question(method: str, q, ctx: Context) -> tuple[MethodResult, dict[str, Any]]:
    """Run one question and measure it; an exception inside the method becomes a recorded error
    (a missing recording in replay mode is not swallowed: it is a setup problem)."""
    fn = get_method(method)
    kg = ctx.kg
    kg_before = kg.snapshot() if isinstance(kg, Metered) else (0, 0.0)
    t = time.perf_counter()
    with track_usage() as usage:
        try:
            result = fn(q, ctx)
        except ReplayMiss:
            raise
        except Exception as exc:  # noqa: BLE001 - a method failure is data, the run goes on
            result = MethodResult([], "", [], f"exception:{type(exc).__name__}: {_redact(str(exc))[:300]}")
    seconds = time.perf_counter() - t
    kg_after = kg.snapshot() if isinstance(kg, Metered) else (0, 0.0)
    acct = {
        "seconds": round(seconds, 4),
        "llm": usage.as_dict(),
        "kg": {"queries": kg_after[0] - kg_before[0], "seconds": round(kg_after[1] - kg_before[1], 4)},
    }
    return result, acct


def run(method: str, dataset: Dataset, ctx: Context, out: str | Path | None = None, *,
        config: dict[str, Any] | None = None, progress: bool = True, overwrite: bool = False,
        workers: int = 1) -> list[dict[str, Any]]:
    """Run ``method`` over ``dataset``, appending one record per finished question to ``out``.

    Re-running with the same ``out`` resumes: finished questions are skipped. A run file written
    under another config (model, prompts, settings, seed) is refused unless ``overwrite``.
    ``workers`` > 1 runs questions concurrently in threads (for remote LLMs/endpoints; the local
    model serialises its calls); records are appended as questions finish, and the result list is
    in dataset order either way. ``workers`` is not part of the config: results do not depend on it."""
    get_method(method)  # fail fast on a typo
    if ctx.kg is not None and not isinstance(ctx.kg, Metered):
        ctx.kg = Metered(ctx.kg)
    config = dict(config or {})
    config.setdefault("method", method)
    config.setdefault("dataset", dataset.name)
    config.setdefault("model_id", ctx.llm.model_id)
    config.setdefault("seed", ctx.seed)
    config.setdefault("settings", ctx.settings)
    config.setdefault("prompts", {p: load_prompt(p).sha for p in getattr(get_method(method), "prompts", ())})
    chash = config_hash(config)
    out = Path(out) if out else default_run_path(method, dataset.name, ctx.llm.model_id)
    out.parent.mkdir(parents=True, exist_ok=True)
    if overwrite and out.exists():
        out.unlink()
    existing = read_records(out)
    other = {r.get("config_hash") for r in existing} - {chash}
    if other:
        raise RuntimeError(
            f"{out} holds records of another configuration ({', '.join(sorted(map(str, other)))} ≠ {chash}). "
            "Use another output path (--out), or --overwrite to start it afresh."
        )
    done = {r["qid"]: r for r in existing}
    todo = [q for q in dataset if q.qid not in done]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(dataset), initial=len(dataset) - len(todo), desc=f"{method} · {dataset.name}", unit="q")

    def finish(q, result: MethodResult, acct: dict[str, Any]) -> None:
        metrics = score(result.answers, q.answers, kind=q.kind, response=result.response)
        record = {
            "dataset": dataset.name, "qid": q.qid, "question": q.question, "gold": q.answers,
            "kind": q.kind, "question_hash": _question_hash(q), "prediction": result.answers, "response": result.response,
            "metrics": metrics, "error": result.error, "trace": _jsonable(result.trace),
            **acct, "method": method, "model_id": ctx.llm.model_id,
            "config_hash": chash, "config": config,
        }
        _append(out, record)
        done[q.qid] = record
        if bar:
            bar.update(1)

    try:
        if workers <= 1:
            for q in todo:
                finish(q, *run_question(method, q, ctx))
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kgqa-q") as pool:
                pending = {pool.submit(contextvars.copy_context().run, run_question, method, q, ctx): q for q in todo}
                try:
                    while pending:
                        finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                        for fut in finished:
                            q = pending.pop(fut)
                            finish(q, *fut.result())  # a ReplayMiss (setup problem) stops the run
                except BaseException:
                    for fut in pending:
                        fut.cancel()
                    raise
    finally:
        if bar:
            bar.close()
    return [done[q.qid] for q in dataset if q.qid in done]
