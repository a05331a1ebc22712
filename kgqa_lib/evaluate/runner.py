"""The runner: a method over a dataset, one JSON line per finished question, resumable.

A record carries the question, gold and prediction, the response text, the metrics, the
per-stage trace, LLM and KG accounting, the error (if any) and the run's config hash; for a method
with gold-based diagnostics (:mod:`kgqa_lib.evaluate.diagnostics`: Keqing's decomposition check),
``"diagnostics"``, computed here from the trace and the question after the method returned. Killing a
run loses at most the question in flight: re-running the same command skips finished questions.

What a run file can be trusted for:

* **Only answers are recorded.** A question stopped by the infrastructure (an
  :class:`~kgqa_lib.errors.InfrastructureError`: LLM endpoint unreachable/5xx/timeout after the
  client's retries, SPARQL endpoint down, replay miss, the embedded KG's on-disk store corrupted or
  unreadable, one of the machine's own caches or the run file full, locked, read-only or damaged)
  gets *no line*: it is not scored, not counted by the report, and the next resume
  runs it. After ``MAX_CONSECUTIVE_OUTAGES`` such failures in a
  row the run stops (an endpoint that is down fails every question), and at the first
  :class:`~kgqa_lib.errors.StorageError` (the machine's own files: the next question would fail the
  same way); ``run`` then raises
  :class:`RunIncomplete` with a one-line summary (the CLI prints it and exits 3). A method's own
  failure (unparseable output, empty result, any other exception) stays a scored answer.
* **One writer.** ``<run>.lock`` beside the run file is held (``flock``) for the whole run; a
  second run on the same file fails with :class:`RunLocked` naming the holder's pid.
* **``overwrite`` never loses the old file**: the new run is written to ``<run>.tmp`` and replaces the
  old file atomically (``os.replace``) when its first question is finished.
* **Changed questions are re-scored.** On resume, a record whose question or gold answers changed
  (``question_hash``) is re-scored from its stored prediction (no LLM call); the file is rewritten
  atomically and the result's ``rescored`` says how many.
* Readers de-duplicate by qid (the last record wins), with a warning.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import os
import re
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable, Iterable

from .._sqlite import storage_failure
from ..data.datasets import Dataset
from ..errors import InfrastructureError, UserError
from ..kg.graph import store_failure
from ..llm.chat import ReplayMiss, track_usage
from ..llm.prompting import load_prompt
from ..methods import Context, MethodResult, get_method
from ..paths import results_dir
from .diagnostics import diagnose
from .metrics import FACTOID_KEYS, OPEN_KEYS, score


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


def run_config(method: str, dataset: str, model_id: str, seed: int, settings: dict[str, Any]) -> dict[str, Any]:
    """The configuration a run's records carry (and hash, :func:`config_hash`): method, dataset name,
    model id, seed, the settings given and the hashes of the method's prompt files."""
    return {"method": method, "dataset": dataset, "model_id": model_id, "seed": seed, "settings": settings,
            "prompts": {p: load_prompt(p).sha for p in getattr(get_method(method), "prompts", ())}}


def default_run_path(method: str, dataset: str, model_id: str, tag: str = "") -> Path:
    safe = lambda s: "".join(c if c.isalnum() or c in "-_." else "-" for c in s)  # noqa: E731
    model = safe(model_id)  # an endpoint's id holds its URL (openai:m@http://host:8000/v1 → openai-m-http---host-8000-v1)
    if len(model) > 100:  # a long URL: keep the name short enough for any file system, and unique
        model = f"{model[:80]}-{hashlib.sha256(model_id.encode('utf-8')).hexdigest()[:12]}"
    name = f"{safe(dataset)}__{safe(method)}__{model}{'__' + safe(tag) if tag else ''}.jsonl"
    return results_dir() / "runs" / name


class DuplicateRecordsWarning(UserWarning):
    """A run file held several records of the same question (two writers, or an old runner)."""


def dedupe_records(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """(records with one per qid — the last one, at its position —, how many were dropped).
    Records without a qid are all kept."""
    last = {r["qid"]: i for i, r in enumerate(records) if isinstance(r, dict) and "qid" in r}
    kept = [r for i, r in enumerate(records) if not (isinstance(r, dict) and "qid" in r) or last[r["qid"]] == i]
    return kept, len(records) - len(kept)


def read_records(path: str | Path, *, dedupe: bool = True) -> RunRecords:
    """All complete records of a run file (a truncated line from a killed run or a full disk is skipped);
    a ``.gz`` file (a saved benchmark run, see :func:`save_runs`) is read the same way. Several
    records of one question (qid) count once — the last one — with a :class:`DuplicateRecordsWarning`
    (``dedupe=False``: every line as written). A :class:`RunRecords` list (``.to_df()``)."""
    import gzip
    import warnings

    path = Path(path)
    out = RunRecords()
    out.path = path
    if not path.exists():
        return out
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        for line in fh:
            try:  # (a line a full disk or a kill cut inside a multi-byte character is not UTF-8: skipped too)
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                out.not_text += 1
                continue
            try:
                rec = json.loads(text)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    if dedupe:
        kept, dropped = dedupe_records(out)
        if dropped:
            out[:] = kept
            warnings.warn(f"{path}: {dropped} duplicate record(s) of the same question dropped (the last one "
                          "counts); two runs wrote this file", DuplicateRecordsWarning, stacklevel=2)
    return out


def save_runs(paths: Iterable[str | Path], folder: str | Path,
              transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, int]:
    """Keep run files as ``<folder>/<name>.jsonl.gz`` (deterministic bytes, so unchanged runs make
    no diff), each record passed through ``transform`` (e.g. to strip a benchmark's content).
    Long benchmarks use this to carry progress across machines; returns records saved per file. Each
    file is replaced whole (``.tmp`` + ``os.replace``), so a copy is never seen half written."""
    import gzip

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    for p in map(Path, paths):
        recs = [transform(r) if transform else r for r in read_records(p)]
        data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in recs)
        target = folder / (p.name + ".gz")
        tmp = target.with_name(target.name + ".tmp")  # a save killed midway (or read midway) leaves the old copy
        tmp.write_bytes(gzip.compress(data.encode("utf-8"), mtime=0))
        os.replace(tmp, target)
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


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_atomically(path: Path, records: list[dict[str, Any]]) -> None:
    """``records`` into ``path`` through ``<path>.tmp`` + ``os.replace``: a crash leaves the old file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class RunLocked(RuntimeError):
    """Another process is writing this run file (its pid is in the message)."""


class RunConfigMismatch(UserError, RuntimeError):
    """The run file holds records of another configuration (model, prompts, settings, seed): the
    command must name another file or start it afresh; ``kgqa`` shows it as one line (exit 2)."""


def lock_path(run_path: str | Path) -> Path:
    """The lock of a run file: ``<run>.lock`` beside the file the path names, symlinks resolved, so two
    paths to one file (a symlink, ``..``) share one lock."""
    real = Path(os.path.realpath(run_path))
    return real.with_name(real.name + ".lock")


class _RunLock:
    """An exclusive ``flock`` on the run's :func:`lock_path` (holding the owner's pid) for the whole run.
    The file is removed on release; an acquirer checks it locked the file that is still there."""

    def __init__(self, run_path: Path) -> None:
        self.run_path = run_path
        self.path = lock_path(run_path)
        self.fd: int | None = None

    def acquire(self) -> "_RunLock":
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no lock
            return self
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                raise RunLocked(f"{self.run_path} is being written by another run (process {holder}, lock "
                                f"{self.path.name}); wait for it to finish, or write to another file (--out).") from None
            try:
                current = os.stat(self.path).st_ino
            except FileNotFoundError:
                current = None
            if current == os.fstat(fd).st_ino:
                break
            os.close(fd)  # its holder removed it while we opened it: lock the new one
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.unlink(self.path)  # still locked: whoever opened it meanwhile sees it gone and retries
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = None


#: A run stops after this many questions in a row failed for the infrastructure: an endpoint that
#: is down would fail every remaining question (each after the client's retries).
MAX_CONSECUTIVE_OUTAGES = 3

# Errors an older runner recorded as scored answers although the infrastructure failed (endpoint
# outages; a corrupted embedded store, RocksDB's "Corruption:"/"IO error:"): a resume runs those
# questions again (and drops the old records).
_LEGACY_OUTAGE = re.compile(r"^exception:(?:(?:EndpointError|LLMEndpointError|ReplayMiss|APIConnectionError|"
                            r"APITimeoutError|InternalServerError|RateLimitError):|"
                            r"(?:RuntimeError|OSError): (?:[^:]*: ){0,2}(?:Corruption|IO error): )")


class RunIncomplete(RuntimeError):
    """Some questions were not answered because of the infrastructure; ``str()`` is the one-line
    summary ("12 questions not answered: LLM endpoint http://… unreachable; re-run the same command
    to retry them"). ``records``: what the run file holds for the dataset; ``not_answered``: the
    qids; ``errors``: the infrastructure errors (``__cause__`` is the first)."""

    def __init__(self, summary: str, records: list[dict[str, Any]], not_answered: list[str],
                 errors: list[InfrastructureError]) -> None:
        super().__init__(summary)
        self.records, self.not_answered, self.errors = records, not_answered, errors


class RunRecords(list):
    """Run records (a list): the run's in dataset order from :func:`run`, a file's from
    :func:`read_records`; ``path`` (the run file), ``rescored`` (records re-scored on resume because
    their question or gold changed), ``not_text`` (lines of the file that are not UTF-8, skipped) and
    :meth:`to_df`."""

    path: Path | None = None
    rescored: int = 0
    not_text: int = 0

    def to_df(self, join: str | None = " | "):
        """One row per record: see :func:`records_to_df`."""
        return records_to_df(self, join)


def records_to_df(records: Iterable[dict[str, Any]], join: str | None = " | "):
    """A pandas DataFrame with one row per run record: ``qid``, ``question``, ``gold`` and
    ``prediction`` (lists joined with ``join``; None keeps the lists), ``error``, one column per
    metric the records hold (in :data:`~kgqa_lib.evaluate.metrics.FACTOID_KEYS` order), ``seconds``, the LLM ``calls`` and ``tokens`` (prompt + completion)
    and the ``kg_queries``. A field a record lacks (a benchmark's stripped copy has no question
    text) is None."""
    import pandas as pd

    records = list(records)

    def text(v: Any) -> Any:
        return join.join(map(str, v)) if join is not None and isinstance(v, list) else v

    held = {k for r in records for k in (r.get("metrics") or {})}
    metrics = [k for k in FACTOID_KEYS + OPEN_KEYS if k in held] + sorted(held - set(FACTOID_KEYS + OPEN_KEYS))
    rows = []
    for r in records:
        llm = r.get("llm") or {}
        rows.append({"qid": r.get("qid"), "question": r.get("question"), "gold": text(r.get("gold")),
                     "prediction": text(r.get("prediction")), "error": r.get("error"),
                     **{m: (r.get("metrics") or {}).get(m) for m in metrics},
                     "seconds": r.get("seconds"), "calls": llm.get("calls"),
                     "tokens": llm.get("prompt_tokens", 0) + llm.get("completion_tokens", 0) if llm else None,
                     "kg_queries": (r.get("kg") or {}).get("queries")})
    return pd.DataFrame(rows, columns=["qid", "question", "gold", "prediction", "error", *metrics, "seconds", "calls",
                                       "tokens", "kg_queries"])


def _outage_summary(n: int, errors: list[InfrastructureError], stopped: bool) -> str:
    errors = sorted(errors, key=lambda e: not e.stops_run)  # the fault that stopped the run comes first
    reasons = list(dict.fromkeys(e.short() for e in errors))
    reason = reasons[0] + (f" (and {len(reasons) - 1} other reason(s))" if len(reasons) > 1 else "")
    if all(isinstance(e, ReplayMiss) for e in errors):
        fix = ("record them with --llm-mode auto (KGQA_LLM_MODE=auto, LLM_MODE='auto' in a notebook), "
               "then re-run the same command")
    else:
        fix = "re-run the same command to retry them"
    if stopped and errors[0].stops_run:
        stop = " (stopped at the first failure of this machine's own files)"
    else:
        stop = f" (stopped after {MAX_CONSECUTIVE_OUTAGES} failures in a row)" if stopped else ""
    return f"{n} question{'s' if n != 1 else ''} not answered{stop}: {reason}; {fix}"


def _rescore(record: dict[str, Any], q, kg=None) -> dict[str, Any]:
    """The record scored again against the current question and gold, from its stored prediction
    (and its gold-based diagnostics computed again, when it has them)."""
    out = dict(record)
    out.update(question=q.question, gold=q.answers, kind=q.kind, question_hash=_question_hash(q),
               rescored_from=record.get("question_hash"),
               metrics=score(record.get("prediction") or [], q.answers, kind=q.kind, response=record.get("response")))
    if "diagnostics" in record:
        out["diagnostics"] = diagnose(record.get("method", ""), q, record.get("trace") or [], kg)
    return out


def _unmetered(kg: Any) -> Any:
    """The KG behind a :class:`Metered` proxy (the runner's own reads are not the method's queries)."""
    return kg._inner if isinstance(kg, Metered) else kg


def _setup_error(exc: BaseException) -> UserError | None:
    """``exc``, or an exception it was raised from (a library may wrap it), when it is a
    :class:`~kgqa_lib.errors.UserError`: the command or the setup is wrong (a bad environment variable
    found at the first query, a missing part), which no question's answer can be."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, UserError):
            return cur
        cur = cur.__cause__ or cur.__context__
    return None


def _redact(text: str) -> str:
    """Second line of defence: an API key never reaches a run record, whatever an exception says."""
    key = os.environ.get("OPENAI_API_KEY")
    return text.replace(key, "***") if key and len(key) >= 8 else text


def run_question(method: str, q, ctx: Context) -> tuple[MethodResult, dict[str, Any]]:
    """Run one question and measure it; an exception inside the method becomes a recorded error,
    except an :class:`~kgqa_lib.errors.InfrastructureError` (endpoint down, replay miss, the KG's
    store failing: :func:`~kgqa_lib.kg.graph.store_failure`) or a
    :class:`~kgqa_lib.errors.UserError` (a setup found wrong only when a question used it), which is
    raised: the question was not answered."""
    fn = get_method(method)
    kg = ctx.kg
    kg_before = kg.snapshot() if isinstance(kg, Metered) else (0, 0.0)
    t = time.perf_counter()
    with track_usage() as usage:
        try:
            result = fn(q, ctx)
        except InfrastructureError:
            raise
        except Exception as exc:  # noqa: BLE001 - a method failure is data, the run goes on
            failed = store_failure(exc)  # ... unless the KG's own store failed under it
            if failed is not None:
                raise failed from exc
            setup = _setup_error(exc)  # ... or the setup is wrong: the command stops (exit 2), nothing recorded
            if setup is not None:
                raise setup from None
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
        workers: int = 1, shard: tuple[int, int] | None = None) -> RunRecords:
    """Run ``method`` over ``dataset``, appending one record per finished question to ``out``.

    Re-running with the same ``out`` resumes: finished questions are skipped (records whose
    question or gold changed are re-scored from their prediction). A run file written under another
    config (model, prompts, settings, seed) is refused unless ``overwrite``, which replaces the old
    file atomically once the first new question is finished. ``workers`` > 1 runs questions
    concurrently in threads (for remote LLMs/endpoints; the local model serialises its calls);
    records are appended as questions finish, and the result list is in dataset order either way.
    ``workers`` is not part of the config: results do not depend on it. Nor is ``shard`` = (i, n)
    (``dataset`` is then shard i of n, :meth:`~kgqa_lib.data.datasets.Dataset.shard`): each record gets
    ``"shard": [i, n]``, which :func:`~kgqa_lib.evaluate.report.report` uses to merge the n files.

    Raises :class:`RunLocked` when another process writes ``out``, and :class:`RunIncomplete`
    (after writing every answer it could) when the infrastructure left questions unanswered."""
    get_method(method)  # fail fast on a typo
    if ctx.kg is not None and not isinstance(ctx.kg, Metered):
        ctx.kg = Metered(ctx.kg)
    config = dict(config or {})
    for key, value in run_config(method, dataset.name, ctx.llm.model_id, ctx.seed, ctx.settings).items():
        config.setdefault(key, value)
    chash = config_hash(config)
    out = Path(out) if out else default_run_path(method, dataset.name, ctx.llm.model_id)
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = _RunLock(out).acquire()
    try:
        return _run_locked(method, dataset, ctx, out, config, chash, progress, overwrite, workers, shard)
    finally:
        lock.release()


def _run_locked(method: str, dataset: Dataset, ctx: Context, out: Path, config: dict[str, Any], chash: str,
                progress: bool, overwrite: bool, workers: int, shard: tuple[int, int] | None = None) -> RunRecords:
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        tmp.unlink()  # a crashed writer's leftover (we hold the lock)
    replace_pending = overwrite and out.exists()  # the old file stays until a new answer replaces it
    existing = [] if overwrite else read_records(out, dedupe=False)
    other = {r.get("config_hash") for r in existing} - {chash}
    if other:
        raise RunConfigMismatch(
            f"{out} holds records of another configuration ({', '.join(sorted(map(str, other)))} ≠ {chash}). "
            "Use another output path (--out), or --overwrite to start it afresh."
        )
    kept, duplicates = dedupe_records(existing)
    legacy = [r for r in kept if _LEGACY_OUTAGE.match(str(r.get("error") or ""))]
    kept = [r for r in kept if not _LEGACY_OUTAGE.match(str(r.get("error") or ""))]
    questions = {q.qid: q for q in dataset}
    rescored = 0
    for i, r in enumerate(kept):
        q = questions.get(r.get("qid"))
        # (a record without the hash, or a benchmark's stripped copy without the prediction, is kept as is)
        if q is not None and r.get("question_hash") and not r.get("stripped") and r["question_hash"] != _question_hash(q):
            kept[i] = _rescore(r, q, _unmetered(ctx.kg))
            rescored += 1
    if duplicates or legacy or rescored:
        _write_atomically(out, kept)
    done = {r["qid"]: r for r in kept if "qid" in r}
    todo = [q for q in dataset if q.qid not in done]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(dataset), initial=len(dataset) - len(todo), desc=f"{method} · {dataset.name}", unit="q")
        for what, n in (("re-scored (their question or gold answers changed)", rescored),
                        ("duplicate records dropped", duplicates),
                        ("records of an endpoint outage dropped, to run again", len(legacy))):
            if n:
                bar.write(f"{out.name}: {n} {what}")

    def write(record: dict[str, Any]) -> None:
        nonlocal replace_pending
        if replace_pending:  # --overwrite: the new file replaces the old one with its first answer
            _append(tmp, record)
            os.replace(tmp, out)
            _fsync_dir(out.parent)
            replace_pending = False
        else:
            _append(out, record)

    def finish(q, result: MethodResult, acct: dict[str, Any]) -> None:
        metrics = score(result.answers, q.answers, kind=q.kind, response=result.response)
        trace = _jsonable(result.trace)
        record = {
            "dataset": dataset.name, "qid": q.qid, "question": q.question, "gold": q.answers,
            "kind": q.kind, "question_hash": _question_hash(q), "prediction": result.answers, "response": result.response,
            "metrics": metrics, "error": result.error, "trace": trace,
            **acct, "method": method, "model_id": ctx.llm.model_id, "engine": getattr(ctx.llm, "engine", None),
            "config_hash": chash, "config": config,
        }
        diagnostics = diagnose(method, q, trace, _unmetered(ctx.kg))  # the gold read here, after the method
        if diagnostics:
            record["diagnostics"] = diagnostics
        if shard:
            record["shard"] = [int(shard[0]), int(shard[1])]
        write(record)
        done[q.qid] = record
        if bar:
            bar.update(1)

    outages: list[InfrastructureError] = []
    in_a_row = 0

    def outcome(q, get: Callable[[], tuple[MethodResult, dict[str, Any]]]) -> bool:
        """Record one question's outcome; False when the run should stop (the infrastructure is down)."""
        nonlocal in_a_row
        try:
            result = get()
        except InfrastructureError as exc:  # not an answer: no record, the next resume retries it
            outages.append(exc)
            in_a_row += 1
            return in_a_row < MAX_CONSECUTIVE_OUTAGES and not exc.stops_run
        in_a_row = 0
        try:
            finish(q, *result)
        except OSError as exc:  # the run file cannot be written (disk full, read-only): the answer is lost
            failed = storage_failure(exc, f"the run file {out}", "write the run to another disk (--out)")
            if failed is None:
                raise
            outages.append(failed)
            return False
        return True

    stopped = False
    try:
        if workers <= 1:
            for q in todo:
                if not outcome(q, lambda q=q: run_question(method, q, ctx)):
                    stopped = True
                    break
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kgqa-q") as pool:
                pending = {pool.submit(contextvars.copy_context().run, run_question, method, q, ctx): q for q in todo}
                try:
                    while pending:
                        finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                        for fut in finished:
                            if not outcome(pending.pop(fut), fut.result) and not stopped:
                                stopped = True  # questions not started are dropped; running ones are recorded
                                for f in pending:
                                    f.cancel()
                                pending = {f: q for f, q in pending.items() if not f.cancelled()}
                except BaseException:
                    for fut in pending:
                        fut.cancel()
                    raise
        if replace_pending and not outages:  # --overwrite of a run with nothing to run: an empty file
            _write_atomically(out, [])
    finally:
        if bar:
            bar.close()
    records = RunRecords(done[q.qid] for q in dataset if q.qid in done)
    records.path, records.rescored = out, rescored
    if outages:
        missing = [q.qid for q in todo if q.qid not in done]
        raise RunIncomplete(_outage_summary(len(missing), outages, stopped), records, missing, outages) from outages[0]
    return records
