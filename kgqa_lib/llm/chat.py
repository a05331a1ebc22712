"""One chat interface over two backends, with a persistent record/replay cache.

* ``LocalBackend`` — the embedded GGUF model run in-process by llama-cpp-python (2 threads).
* ``OpenAIBackend`` — any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server).

Every call goes through :class:`LLM`, which keys it by the canonical JSON of
*(model id, messages, temperature, top_p, max_tokens, stop, seed, sample index)* (an endpoint's model
id includes its URL: :func:`openai_model_id`) and serves it from
a SQLite cache. Modes: ``auto`` (cache, else live, then store), ``replay`` (a miss is an error
that names the key and says how to record it) and ``live`` (always call, then store).

New responses are also appended to JSON-lines *transcripts* (``data/llm_cache/<model>.jsonl``),
which are committed: a fresh clone imports them into its SQLite cache and replays every default
run offline, byte for byte. (llama.cpp's greedy decoding was measured not to be bit-identical
across runs, so exact replays must come from recordings, never from re-generation.)
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Protocol, Sequence

from .. import _sqlite
from .._sqlite import CacheCorrupt, CacheRecoveredWarning, guarded, move_aside
from ..errors import InfrastructureError, SetupError, UsageError
from ..paths import data_dir, user_cache_dir

MODES = ("auto", "replay", "live")


# --------------------------------------------------------------------------------------------
# Requests, results and accounting
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChatRequest:
    """Everything that determines a response; its canonical JSON is the cache key."""

    model_id: str
    messages: tuple[tuple[str, str], ...]
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    seed: int = 0
    sample_index: int = 0

    def canonical(self) -> str:
        payload = {
            "model": self.model_id,
            "messages": [{"role": r, "content": c} for r, c in self.messages],
            "temperature": round(float(self.temperature), 6),
            "top_p": round(float(self.top_p), 6),
            "max_tokens": int(self.max_tokens),
            "stop": list(self.stop),
            "seed": int(self.seed),
            "sample_index": int(self.sample_index),
        }
        return json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    @property
    def key(self) -> str:
        return hashlib.sha256(self.canonical().encode("utf-8")).hexdigest()

    def preview(self, n: int = 80) -> str:
        user = [c for r, c in self.messages if r == "user"]
        text = (user[-1] if user else self.messages[-1][1]).strip().replace("\n", " ")
        return text[-n:] if len(text) > n else text


#: The ``finish_reason`` of a reply cut at the LLM's ``max_reply_chars`` (kept so in the cache and transcripts)
TRUNCATED = "truncated"


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    seconds: float  # wall time of this call (a cache hit is ~0)
    recorded_seconds: float  # generation time when the response was recorded
    cache_hit: bool
    key: str

    def __str__(self) -> str:
        return self.text


@dataclass
class Usage:
    """Summed accounting of LLM calls (per question, per run, or per process). ``truncated``: calls
    whose reply was cut at the LLM's ``max_reply_chars`` (``finish_reason`` "truncated"); in
    :meth:`as_dict` only when there were some."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    recorded_seconds: float = 0.0
    truncated: int = 0

    def add(self, r: ChatResult) -> None:
        self.calls += 1
        self.cache_hits += int(r.cache_hit)
        self.prompt_tokens += r.prompt_tokens
        self.completion_tokens += r.completion_tokens
        self.seconds += r.seconds
        self.recorded_seconds += r.recorded_seconds
        self.truncated += int(r.finish_reason == TRUNCATED)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["seconds"] = round(d["seconds"], 4)
        d["recorded_seconds"] = round(d["recorded_seconds"], 4)
        if not d["truncated"]:
            del d["truncated"]
        return d


_SCOPES: contextvars.ContextVar[tuple[Usage, ...]] = contextvars.ContextVar("kgqa_llm_scopes", default=())


@contextlib.contextmanager
def track_usage() -> Iterator[Usage]:
    """Collect the usage of every LLM call made inside the block (threads of ``LLM.map`` too)."""
    usage = Usage()
    token = _SCOPES.set(_SCOPES.get() + (usage,))
    try:
        yield usage
    finally:
        _SCOPES.reset(token)


class ReplayMiss(InfrastructureError, LookupError):
    """Replay mode found no recorded response for a request (not an answer: the runner leaves the
    question unanswered and the run exits non-zero; see :mod:`kgqa_lib.errors`)."""


# --------------------------------------------------------------------------------------------
# The cache: SQLite for lookups, JSON-lines transcripts for committing
# --------------------------------------------------------------------------------------------
class LLMCache:
    """Persistent response cache.

    ``path`` is the SQLite file (default ``<user cache>/llm_cache.sqlite``); ``transcripts`` is a
    folder of ``*.jsonl`` files that are imported on open (idempotent) and appended to on every
    store (default ``data/llm_cache``; ``None`` disables transcripts).

    Several processes may share the file (WAL journal, 30 s busy timeout). A damaged file (not a
    database, or a truncated/malformed page, found on open or on any later read or write) is moved
    aside to ``<name>.corrupt-<timestamp>`` and rebuilt from the transcripts, with a
    :class:`CacheRecoveredWarning`; ``recover=False`` raises :class:`CacheCorrupt` instead. Any other
    failure of the file or of a transcript (disk full, locked beyond the busy timeout, read-only, an
    I/O error) is a :class:`~kgqa_lib.errors.StorageError`: not an answer, the run stops.

    ``defer`` (default ``$KGQA_DEFER_TRANSCRIPTS``; ``kgqa run --shard`` sets it): new entries are
    not appended to the transcripts but listed in the cache's ``pending`` table, so many writers
    (shards, maybe on several machines, each with its own ``KGQA_CACHE_DIR``) never append to
    ``data/llm_cache/`` at once; :meth:`merge` (``kgqa cache merge``) transcribes them later."""

    def __init__(self, path: str | Path | None = None, transcripts: str | Path | None | bool = True,
                 recover: bool = True, defer: bool | None = None):
        self.path = Path(path) if path else user_cache_dir() / "llm_cache.sqlite"
        if transcripts is True:
            transcripts = data_dir() / "llm_cache"
        self.transcripts = Path(transcripts) if transcripts else None
        self.recover = recover
        if defer is None:
            defer = os.environ.get("KGQA_DEFER_TRANSCRIPTS", "").strip().lower() in ("1", "true", "yes", "on")
        self.defer = bool(defer)
        self._lock = threading.RLock()  # re-entered when a write under the lock finds the file damaged
        self._local = threading.local()
        self._generation = 0  # bumped when the file is rebuilt: every thread reconnects
        self._guarded(self._open)

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._conn() as con:
            fresh = con.execute("SELECT name FROM sqlite_master WHERE name='transcribed'").fetchone() is None
            con.executescript(
                """
                CREATE TABLE IF NOT EXISTS transcribed (key TEXT PRIMARY KEY);
                CREATE TABLE IF NOT EXISTS responses (
                    key TEXT PRIMARY KEY, model_id TEXT, request TEXT, text TEXT,
                    prompt_tokens INTEGER, completion_tokens INTEGER, finish_reason TEXT,
                    seconds REAL);
                CREATE TABLE IF NOT EXISTS imported (file TEXT PRIMARY KEY, size INTEGER, mtime REAL);
                CREATE TABLE IF NOT EXISTS pending (key TEXT PRIMARY KEY);
                """
            )
            if fresh:  # a cache made before `transcribed` existed: re-read every transcript once
                con.execute("DELETE FROM imported")
        if self.transcripts and self.transcripts.is_dir():
            self._import_transcripts()

    def _conn(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is not None and getattr(self._local, "generation", 0) != self._generation:
            con.close()  # the file was rebuilt by another thread
            con = None
        if con is None:
            con = _sqlite.connect(self.path, timeout=30, isolation_level=None)  # concurrent writers wait
            self._local.con, self._local.generation = con, self._generation
            self._local.inode = _inode(self.path)
        return con

    def _guarded(self, fn, *args):
        """Run ``fn``; when the file turns out damaged, move it aside, rebuild, and run ``fn`` again;
        a file that cannot be used is a :class:`~kgqa_lib.errors.StorageError`."""
        return guarded(fn, args, f"The LLM cache {self.path}", self._rebuild)

    def _rebuild(self, exc: BaseException) -> None:
        what = (f"The LLM cache {self.path} is damaged ({exc}). It only speeds things up: delete it (and "
                f"{self.path.name}-wal/-shm) and it is rebuilt from the transcripts in "
                f"{self.transcripts or 'data/llm_cache/'} on the next run.")
        if not self.recover:
            raise CacheCorrupt(what) from exc
        with self._lock:
            con = getattr(self._local, "con", None)
            seen_inode = getattr(self._local, "inode", None)
            if con is not None:
                con.close()
                self._local.con = None
            aside = None
            if self.path.exists() and (seen_inode is None or _inode(self.path) == seen_inode):
                aside = move_aside(self.path)  # (else another process has rebuilt it already)
            self._generation += 1
            self._open()
        n = self._conn().execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        moved = f"moved it to {aside.name} and " if aside else ""
        warnings.warn(f"The LLM cache {self.path} was damaged ({exc}); {moved}rebuilt it from the transcripts "
                      f"({n} responses). Answers that were only in the old file (runs with --no-transcripts) "
                      "are recorded again when needed.", CacheRecoveredWarning, stacklevel=5)  # _rebuild < run_recovering < guarded < _guarded < method

    def import_transcripts(self) -> int:
        """Import every ``*.jsonl`` transcript that changed since it was last imported.

        When any transcript changed, the record of which keys are transcribed is rebuilt from the
        files as they are now: a transcript reverted by ``git checkout`` no longer counts as holding
        answers it lost, so the next recording appends them again."""
        return self._guarded(self._import_transcripts)

    def _import_transcripts(self) -> int:
        con = self._conn()
        files = sorted(self.transcripts.glob("*.jsonl"))
        changed = []
        for f in files:
            st = f.stat()
            row = con.execute("SELECT size, mtime FROM imported WHERE file=?", (str(f),)).fetchone()
            if not (row and row[0] == st.st_size and row[1] == st.st_mtime):
                changed.append(f)
        if not changed:
            return 0
        rows, keys = [], []
        for f in files:
            with open(f, encoding="utf-8") as fh:
                for line in fh:
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        e = json.loads(line)
                        resp = e["response"]
                        canonical = json.dumps(e["request"], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
                        if hashlib.sha256(canonical.encode("utf-8")).hexdigest() != e["key"]:
                            continue  # an edited entry no longer answers the request it names
                        keys.append(e["key"])
                        if f in changed:
                            rows.append((e["key"], e["request"]["model"], canonical, resp["text"],
                                         resp["prompt_tokens"], resp["completion_tokens"],
                                         resp.get("finish_reason", ""), resp.get("seconds", 0.0)))
                    except (ValueError, KeyError, TypeError, AttributeError):
                        # a truncated last line (interrupted run) is skipped, never fatal
                        continue
        with self._lock:
            con.execute("BEGIN")
            con.executemany("INSERT OR REPLACE INTO responses VALUES (?,?,?,?,?,?,?,?)", rows)  # last entry wins, as in put()
            con.execute("DELETE FROM transcribed")
            con.executemany("INSERT OR IGNORE INTO transcribed VALUES (?)", [(k,) for k in keys])
            for f in changed:
                st = f.stat()
                con.execute("INSERT OR REPLACE INTO imported VALUES (?,?,?)", (str(f), st.st_size, st.st_mtime))
            con.execute("COMMIT")
        return len(rows)

    def get(self, key: str) -> dict[str, Any] | None:
        return self._guarded(self._get, key)

    def _get(self, key: str) -> dict[str, Any] | None:
        row = self._conn().execute(
            "SELECT text, prompt_tokens, completion_tokens, finish_reason, seconds FROM responses WHERE key=?",
            (key,),
        ).fetchone()
        if row is None:
            return None
        return dict(zip(("text", "prompt_tokens", "completion_tokens", "finish_reason", "seconds"), row))

    def put(self, request: ChatRequest, response: dict[str, Any]) -> None:
        self._guarded(self._put, request, response)

    def _put(self, request: ChatRequest, response: dict[str, Any]) -> None:
        canonical = request.canonical()
        key = request.key
        with self._lock:
            self._conn().execute(
                "INSERT OR REPLACE INTO responses VALUES (?,?,?,?,?,?,?,?)",
                (key, request.model_id, canonical, response["text"], response["prompt_tokens"],
                 response["completion_tokens"], response.get("finish_reason", ""), response.get("seconds", 0.0)),
            )
            if self.transcripts is not None:
                self._append(key, request.model_id, canonical, response)

    def _append(self, key: str, model_id: str, canonical: str, response: dict[str, Any]) -> None:
        """Append one entry to the model's transcript (caller holds the lock); deferred: list it as
        pending (for :meth:`merge`)."""
        if self.defer:
            self._conn().execute("INSERT OR IGNORE INTO pending VALUES (?)", (key,))
            return
        self.transcripts.mkdir(parents=True, exist_ok=True)
        f = self.transcripts / f"{_slug(model_id)}.jsonl"
        line = json.dumps({"key": key, "request": json.loads(canonical), "response": response},
                          ensure_ascii=False, sort_keys=True)
        # one write of one whole line, flushed: an interrupted run leaves at most a truncated last
        # line, which the importer skips
        try:
            with open(f, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:  # a full disk, a read-only checkout: named as the transcript's failure
            failed = _sqlite.storage_failure(exc, f"the transcript {f}", "run with --no-transcripts (new answers "
                                             "then stay in this machine's cache)")
            if failed is None:
                raise
            raise failed from exc
        st = f.stat()
        con = self._conn()
        con.execute("INSERT OR REPLACE INTO imported VALUES (?,?,?)", (str(f), st.st_size, st.st_mtime))
        con.execute("INSERT OR IGNORE INTO transcribed VALUES (?)", (key,))

    def ensure_transcribed(self, key: str) -> bool:
        """A cache hit that no committed transcript holds yet (it was made by a run that kept its
        answers on this machine only) is appended now, so a notebook recorded on this machine
        replays on any other. Returns True when it appended."""
        if self.transcripts is None:
            return False
        return self._guarded(self._ensure_transcribed, key)

    def _ensure_transcribed(self, key: str) -> bool:
        con = self._conn()
        if con.execute("SELECT 1 FROM transcribed WHERE key=?", (key,)).fetchone():
            return False
        row = con.execute("SELECT model_id, request, text, prompt_tokens, completion_tokens, finish_reason, seconds "
                          "FROM responses WHERE key=?", (key,)).fetchone()
        if row is None:
            return False
        response = dict(zip(("text", "prompt_tokens", "completion_tokens", "finish_reason", "seconds"), row[2:]))
        with self._lock:
            self._append(key, row[0], row[1], response)
        return True

    def merge(self, sources: "Iterable[str | Path] | MergeSources") -> dict[str, int]:
        """Merge other caches into this one: ``sources`` are SQLite cache files (a shard's
        ``llm_cache.sqlite``, read only, never changed) or transcript files (``*.jsonl``).
        Every response missing here is added to this SQLite cache; the entries a source was to
        transcribe (its ``pending`` list; every entry of a ``.jsonl``) and that no transcript holds
        yet are appended to the transcripts, once per key. This cache's own pending entries are
        transcribed too (then cleared). Returns counts: ``sources``, ``added`` (responses new to
        this cache), ``transcribed`` (entries appended), ``already`` (to transcribe, but held already),
        ``rejected`` (entries left out: not answering the request they name, or with missing fields).

        A source is checked before anything is written: an SQLite source must have the cache's columns
        and pass SQLite's ``quick_check`` (else a :class:`~kgqa_lib.errors.SetupError` names it), and every
        entry, as in a transcript, must be keyed by the hash of its request and carry its fields (else it
        is left out and counted). The rows, the transcripts' bookkeeping and the cleared pending list are
        written in one transaction, so a merge that fails midway leaves this cache as it was (lines it
        appended to a transcript are valid entries, read again on the next open)."""
        if self.transcripts is None:
            raise UsageError("kgqa cache merge needs a transcripts folder (data/llm_cache/) to merge into")
        checked = sources if isinstance(sources, MergeSources) else read_merge_sources(sources, own=self.path)
        return self._guarded(self._merge, checked)

    def _merge(self, checked: "MergeSources") -> dict[str, int]:
        rows, wanted, rejected = checked.rows, checked.wanted, checked.rejected
        sources = checked.sources
        con = self._conn()
        with self._lock:
            if self.transcripts.is_dir():
                self._import_transcripts()  # the transcripts as they are now: which keys they hold
            own_pending = [r[0] for r in con.execute("SELECT key FROM pending ORDER BY rowid")]
            before = con.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
            transcribed = already = 0
            defer, self.defer = self.defer, False
            con.execute("BEGIN IMMEDIATE")  # all or nothing: rows, transcript bookkeeping, pending list
            try:
                con.executemany("INSERT OR IGNORE INTO responses VALUES (?,?,?,?,?,?,?,?)", list(rows.values()))
                added = con.execute("SELECT COUNT(*) FROM responses").fetchone()[0] - before
                for key in dict.fromkeys(own_pending + wanted):
                    if con.execute("SELECT 1 FROM transcribed WHERE key=?", (key,)).fetchone():
                        already += 1
                        continue
                    row = con.execute("SELECT model_id, request, text, prompt_tokens, completion_tokens, "
                                      "finish_reason, seconds FROM responses WHERE key=?", (key,)).fetchone()
                    if row is None or _merge_row((key, *row)) is None:  # (this cache's own bad rows are not copied on)
                        continue
                    response = dict(zip(("text", "prompt_tokens", "completion_tokens", "finish_reason", "seconds"), row[2:]))
                    self._append(key, row[0], row[1], response)
                    transcribed += 1
                con.execute("DELETE FROM pending")
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            finally:
                self.defer = defer
        return {"sources": len(sources), "added": added, "transcribed": transcribed, "already": already,
                "rejected": rejected}

    def stats(self) -> dict[str, Any]:
        return self._guarded(self._stats)

    def _stats(self) -> dict[str, Any]:
        con = self._conn()
        rows = con.execute(
            "SELECT model_id, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(seconds) "
            "FROM responses GROUP BY model_id ORDER BY model_id"
        ).fetchall()
        return {
            "path": str(self.path),
            "transcripts": str(self.transcripts) if self.transcripts else None,
            "models": [
                {"model_id": m, "responses": n, "prompt_tokens": p or 0, "completion_tokens": c or 0,
                 "recorded_seconds": round(s or 0.0, 1)}
                for m, n, p, c, s in rows
            ],
        }


@dataclass
class MergeSources:
    """What :meth:`LLMCache.merge` takes from its sources (:func:`read_merge_sources`): the responses rows
    (by key), the keys to transcribe, how many entries were left out."""

    sources: list[Path]
    rows: dict[str, tuple]
    wanted: list[str]
    rejected: int


def read_merge_sources(sources: Iterable[str | Path], own: Path | None = None) -> MergeSources:
    """Read and check every source of a merge before anything is written (``kgqa cache merge`` calls it
    before it opens the cache it merges into): an SQLite source must have the cache's columns and pass
    SQLite's ``quick_check``; a source with entries none of which can be trusted (not keyed by their
    request, fields missing, not JSON or not UTF-8) is not a cache either. Each is a
    :class:`~kgqa_lib.errors.SetupError` naming the file. ``own``: the cache merged into (skipped as a
    source: its pending entries are read by the merge itself)."""
    sources = [Path(p) for p in sources]
    rows: dict[str, tuple] = {}  # key → responses row (first source wins: the same key is the same request)
    wanted: list[str] = []
    rejected = 0
    for src in sources:
        good_here = bad_here = 0
        if src.suffix == ".jsonl":
            for e in _transcript_entries(src):
                good = None if e is None else _merge_row(e)
                if good is None:
                    bad_here += 1
                    continue
                good_here += 1
                rows.setdefault(good[0], good)
                wanted.append(good[0])
        elif own is not None and src.resolve() == Path(own).resolve():
            continue  # its pending entries are read by the merge
        else:
            try:
                con = sqlite3.connect(f"file:{src}?mode=ro", uri=True, timeout=30)
            except sqlite3.Error as exc:
                raise SetupError(f"cannot open the cache {src} ({exc}): give an llm_cache.sqlite or a .jsonl "
                                 "transcript") from None
            try:
                names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                if "responses" not in names:
                    raise SetupError(f"{src} is not an LLM cache (no responses table): give an llm_cache.sqlite "
                                     "or a .jsonl transcript")
                columns = {r[1] for r in con.execute("PRAGMA table_info(responses)")}
                lacking = [c for c in _MERGE_COLUMNS if c not in columns]
                if lacking:
                    raise SetupError(f"{src} is not an LLM cache of this project (its responses table has no "
                                     f"{', '.join(lacking)}): nothing was merged")
                check = con.execute("PRAGMA quick_check").fetchone()
                if not check or check[0] != "ok":
                    raise SetupError(f"{src} is damaged (SQLite quick_check: {check[0] if check else 'no answer'}): "
                                     "nothing was merged; merge the shard's transcripts or re-run the shard instead")
                for row in con.execute(f"SELECT {', '.join(_MERGE_COLUMNS)} FROM responses"):
                    good = _merge_row(row)
                    if good is None:
                        bad_here += 1
                        continue
                    good_here += 1
                    rows.setdefault(good[0], good)
                if "pending" in names:
                    wanted += [r[0] for r in con.execute("SELECT key FROM pending ORDER BY rowid")]
            except sqlite3.DatabaseError as exc:
                raise SetupError(f"cannot read the cache {src} ({exc}); is it a kgqa llm_cache.sqlite?") from None
            finally:
                con.close()
        if bad_here and not good_here:
            raise SetupError(f"{src} holds no entry that can be trusted ({bad_here} not keyed by their request, with "
                             "fields missing, or not JSON): nothing was merged; give an llm_cache.sqlite or a .jsonl "
                             "transcript")
        rejected += bad_here
    return MergeSources(sources, rows, wanted, rejected)


#: The columns of a cache's ``responses`` table, in order: what :meth:`LLMCache.merge` reads of a source.
_MERGE_COLUMNS = ("key", "model_id", "request", "text", "prompt_tokens", "completion_tokens", "finish_reason", "seconds")


def _merge_row(row: Sequence[Any]) -> tuple | None:
    """A ``responses`` row as :meth:`LLMCache.merge` takes it from another cache, or None when it cannot
    be trusted: its key is not the hash of its (canonical JSON) request, or a field is missing or of the
    wrong type (a finish reason and seconds may be absent: "" and 0.0)."""
    try:
        key, model_id, request, text, prompt_tokens, completion_tokens, finish_reason, seconds = row
        canonical = json.dumps(json.loads(request), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        if not isinstance(key, str) or hashlib.sha256(canonical.encode("utf-8")).hexdigest() != key:
            return None
    except (ValueError, TypeError, UnicodeEncodeError):
        return None
    counts_ok = all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (prompt_tokens, completion_tokens))
    if not (isinstance(model_id, str) and model_id and isinstance(text, str) and counts_ok):
        return None
    if finish_reason is not None and not isinstance(finish_reason, str):
        return None
    import math

    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not math.isfinite(seconds) or seconds < 0):
        return None
    return (key, model_id, canonical, text, prompt_tokens, completion_tokens, finish_reason or "",
            float(seconds or 0.0))


def _transcript_entries(path: Path) -> Iterator[tuple | None]:
    """The entries of a transcript file as ``responses`` rows, None for a line that is not a valid entry
    (edited, truncated; bytes that are not UTF-8 make their line not parse); blank lines skipped."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                e = json.loads(line)
                resp = e["response"]
                canonical = json.dumps(e["request"], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
                if hashlib.sha256(canonical.encode("utf-8")).hexdigest() != e["key"]:
                    yield None
                    continue
                yield (e["key"], e["request"]["model"], canonical, resp["text"], resp["prompt_tokens"],
                       resp["completion_tokens"], resp.get("finish_reason", ""), resp.get("seconds", 0.0))
            except (ValueError, KeyError, TypeError, AttributeError):
                yield None


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "(not installed)"


def _slug(s: str) -> str:
    """A file name for a model id (``openai:m@http://host:8000/v1`` → ``openai_m_http___host_8000_v1``);
    a very long id (a long endpoint URL) is shortened, with a hash of the whole id to keep it unique."""
    slug = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in s)
    if len(slug) > 120:
        slug = f"{slug[:100]}_{hashlib.sha256(s.encode('utf-8')).hexdigest()[:12]}"
    return slug


# --------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------
class Backend(Protocol):
    model_id: str

    def complete(self, request: ChatRequest) -> dict[str, Any]:
        """Return {text, prompt_tokens, completion_tokens, finish_reason}."""


def _strip_special(text: str) -> str:
    """A reply's text as the library keeps it (every backend's reply passes here): without the end
    markers chat templates occasionally leak, and with each lone UTF-16 surrogate (an endpoint's JSON
    may carry ``"\\ud800"``; no UTF-8 file or SQLite text can hold it) replaced by U+FFFD, so the
    answer, the cache and the run record keep the rest of the reply."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # (a surrogate pair written as two code points becomes its character)
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    for marker in ("<|im_end|>", "<|endoftext|>", "<|im_start|>"):
        text = text.replace(marker, "")
    return text.strip()


def default_threads() -> int:
    """Threads for the embedded model: ``$KGQA_LLM_THREADS``, else the cores this process may use
    (``os.sched_getaffinity``: a Slurm/cgroup allocation, not the whole machine)."""
    env = os.environ.get("KGQA_LLM_THREADS", "").strip()
    if env:
        return _option_int("KGQA_LLM_THREADS", env, low=1, high=_OPTION_HIGH["threads"])
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def default_gpu_layers() -> int:
    """Layers offloaded to a GPU: ``$KGQA_LLM_GPU_LAYERS`` (-1: all), else 0 (the CPU build has no GPU)."""
    env = os.environ.get("KGQA_LLM_GPU_LAYERS", "").strip()
    return _option_int("KGQA_LLM_GPU_LAYERS", env, low=-1) if env else 0


def _option_int(name: str, text: str, low: int, high: tuple[int, str] | None = None) -> int:
    """``text`` as a whole number ≥ ``low`` (and ≤ ``high[0]``, for the reason ``high[1]``)."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < low or (high is not None and value > high[0]):
        raise UsageError(f"{name} expects a whole number ≥ {low}" + (f" and ≤ {high[0]} ({high[1]})" if high else "")
                         + f", got {text!r}")
    return value


def _option_rate(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        raise UsageError(f"{name} expects a positive number (per minute), got {text!r}")
    return value


def _option_seconds(name: str, text: Any) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{name} expects a number of seconds > 0, got {text!r}")
    return value


#: The whole of one call to an OpenAI-compatible endpoint, retries included (``$KGQA_LLM_TIMEOUT``,
#: ``kgqa run --llm-timeout``, ``openai:MODEL?timeout=…``): long enough for a slow server to write 512
#: tokens, short enough that a stalled or trickling one cannot hold a question (or every worker) for long.
DEFAULT_LLM_TIMEOUT = 300.0
#: Characters of one reply kept (``$KGQA_LLM_MAX_REPLY_CHARS``); the rest is cut before it is cached,
#: recorded or parsed. 64k characters is ~16k tokens: far beyond any max_tokens the methods ask for.
DEFAULT_MAX_REPLY_CHARS = 65536
#: Bytes of one HTTP reply read from an endpoint before it is refused (a server that ignores max_tokens)
MAX_REPLY_BYTES = 64 * 2**20


def default_llm_timeout() -> float:
    """Seconds an endpoint call may take in all: ``$KGQA_LLM_TIMEOUT``, else :data:`DEFAULT_LLM_TIMEOUT`."""
    env = os.environ.get("KGQA_LLM_TIMEOUT", "").strip()
    return _option_seconds("KGQA_LLM_TIMEOUT", env) if env else DEFAULT_LLM_TIMEOUT


def default_max_reply_chars() -> int:
    """Characters of a reply kept: ``$KGQA_LLM_MAX_REPLY_CHARS``, else :data:`DEFAULT_MAX_REPLY_CHARS`."""
    env = os.environ.get("KGQA_LLM_MAX_REPLY_CHARS", "").strip()
    return _option_int("KGQA_LLM_MAX_REPLY_CHARS", env, low=1) if env else DEFAULT_MAX_REPLY_CHARS


def default_prefix_cache() -> int:
    """Saved prefix states of the embedded model (:class:`PrefixStateCache`): ``$KGQA_LLM_PREFIX_CACHE``,
    else 0 (off: no state is ever saved or loaded, as before the option existed)."""
    env = os.environ.get("KGQA_LLM_PREFIX_CACHE", "").strip()
    return _option_int("KGQA_LLM_PREFIX_CACHE", env, low=0, high=_OPTION_HIGH["prefix_cache"]) if env else 0


def default_prefix_cache_min() -> int:
    """Tokens a saved state must reuse beyond the live context's prefix to be loaded:
    ``$KGQA_LLM_PREFIX_CACHE_MIN``, else :data:`PREFIX_CACHE_MIN`."""
    env = os.environ.get("KGQA_LLM_PREFIX_CACHE_MIN", "").strip()
    return _option_int("KGQA_LLM_PREFIX_CACHE_MIN", env, low=1) if env else PREFIX_CACHE_MIN


#: Options an LLM name may carry after ``?`` (``local?threads=8&gpu_layers=-1&prefix_cache=4``,
#: ``openai:gpt-4o-mini?rpm=500&tpm=200000&timeout=60``). They change how answers are computed, never which
#: answer a request has: they are not part of the model id, the cache keys or the run config. The one
#: exception: ``local?batch=N&batch_rows=R`` with R above :data:`EXACT_BATCH_ROWS` gives other answers than
#: one request at a time, so its model id carries :data:`BATCHED_SUFFIX` (:func:`local_model_id`).
LLM_OPTIONS = {"local": ("threads", "gpu_layers", "prefix_cache", "prefix_cache_min", "batch", "batch_rows"),
               "openai": ("rpm", "tpm", "timeout")}
_OPTION_LOW = {"threads": 1, "gpu_layers": -1, "prefix_cache": 0, "prefix_cache_min": 1, "batch": 0, "batch_rows": 1}
#: Upper bounds of the embedded model's options, with the reason (shown in the error)
_OPTION_HIGH = {
    "threads": (256, "the model gains nothing from more threads than cores, and each thread holds its own stack "
                     "and work buffers in memory"),
    "prefix_cache": (64, "each saved state holds up to ~225 MiB of memory (the 1.5B model at n_ctx 8192), so 64 "
                         "states may already need ~14 GiB"),
    "batch": (16, "each sequence holds a whole context of KV cache (~225 MiB for the 1.5B model at n_ctx 8192), "
                  "allocated when the model loads"),
    "batch_rows": (16, "a decode call never holds more rows than the sequences decoded together (batch)"),
}
#: ``local?...`` options → :class:`LocalBackend` arguments
_LOCAL_ARGS = {"threads": "n_threads", "gpu_layers": "n_gpu_layers", "prefix_cache": "prefix_cache",
               "prefix_cache_min": "prefix_cache_min", "batch": "batch", "batch_rows": "batch_rows"}

#: Rows (tokens of different sequences) one ``llama_decode`` call may hold while every row's logits stay
#: bit-identical to a lone token's. Measured with llama-cpp-python 0.3.36 on this project's CPU build (both
#: embedded models, Q4 weights repacked for the CPU): 1–3 rows are computed row by row (a matrix-vector kernel
#: per row) and match a lone token bit for bit; rows in a group of 4 go through the 4-row matrix kernel, whose
#: logits differ (by up to ~0.5), which changes some sampled tokens.
EXACT_BATCH_ROWS = 3
#: What the model id of the embedded model carries when samples decoded together may differ from one request
#: at a time (``batch_rows`` above :data:`EXACT_BATCH_ROWS`): its answers are cached and recorded apart.
BATCHED_SUFFIX = "@batched"


def default_batch() -> int:
    """Samples of one prompt the embedded model decodes together (:meth:`LocalBackend.complete_many`):
    ``$KGQA_LLM_BATCH``, else 0 (off: one request at a time)."""
    env = os.environ.get("KGQA_LLM_BATCH", "").strip()
    return _option_int("KGQA_LLM_BATCH", env, low=0, high=_OPTION_HIGH["batch"]) if env else 0


def default_batch_rows() -> int:
    """Rows one decode call holds when samples are decoded together: ``$KGQA_LLM_BATCH_ROWS``, else
    :data:`EXACT_BATCH_ROWS` (answers identical to one request at a time)."""
    env = os.environ.get("KGQA_LLM_BATCH_ROWS", "").strip()
    return _option_int("KGQA_LLM_BATCH_ROWS", env, low=1, high=_OPTION_HIGH["batch_rows"]) if env else EXACT_BATCH_ROWS


def local_model_id(model_id: str, batch: int | None = None, batch_rows: int | None = None) -> str:
    """The id of an embedded model with these options (``None``: from the environment): the model's own id,
    or with :data:`BATCHED_SUFFIX` when samples are decoded together with more than
    :data:`EXACT_BATCH_ROWS` rows a call (answers that differ from one request at a time)."""
    batch = default_batch() if batch is None else int(batch)
    rows = default_batch_rows() if batch_rows is None else int(batch_rows)
    return model_id + BATCHED_SUFFIX if batch >= 2 and min(rows, batch) > EXACT_BATCH_ROWS else model_id


def split_llm_name(name: str) -> tuple[str, dict[str, Any]]:
    """``"local:qwen2.5-0.5b?threads=8&gpu_layers=-1"`` → ``("local:qwen2.5-0.5b", {"threads": 8,
    "gpu_layers": -1})``; an unknown or malformed option is a :class:`~kgqa_lib.errors.UsageError`."""
    from urllib.parse import parse_qsl

    base, sep, query = name.partition("?")
    kind = base.partition(":")[0]
    if not sep:
        return base, {}
    if kind == "server":  # a managed llama-server's options (kgqa_lib.llm.server)
        from .server import parse_options

        return base, parse_options(name, query)
    allowed = LLM_OPTIONS.get(kind, ())
    opts: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in allowed:
            raise UsageError(f"unknown option {key!r} in the LLM name {name!r}: {kind} takes "
                             + (", ".join(f"{a}=…" for a in allowed) or "no options"))
        if key in ("rpm", "tpm"):
            opts[key] = _option_rate(key, value)
        elif key == "timeout":
            opts[key] = _option_seconds(key, value)
        else:
            opts[key] = _option_int(key, value, low=_OPTION_LOW[key], high=_OPTION_HIGH.get(key))
    return base, opts


#: Tokens a saved prefix state must reuse beyond the live context to be worth loading. A load copies
#: the state's KV cache (0.5B model, measured: 8 saves and 3 loads of ~650-token states took 0.44 s in
#: all), far less than evaluating 100 prompt tokens (~1 s at the ~115 tokens/s of the 1.5B model on 2 cores).
PREFIX_CACHE_MIN = 100


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the longest common prefix of two token sequences (lists or numpy arrays)."""
    import numpy as np

    x, y = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    n = min(len(x), len(y))
    differ = np.flatnonzero(x[:n] != y[:n])
    return int(differ[0]) if differ.size else int(n)


def reused_tokens(context: Sequence[int], prompt: Sequence[int], fresh_logits: bool = False) -> int:
    """Prompt tokens llama-cpp-python's ``Llama.generate`` takes from the context it starts from
    instead of evaluating them (0.3.36): the common prefix, less one when that is the whole prompt
    (its last token is evaluated again for fresh logits) unless the context is exactly the prompt
    with its logits from a live decode (``fresh_logits``)."""
    n = common_prefix(context, prompt)
    if n and n == len(prompt):
        return n if (len(context) == n and fresh_logits) else n - 1
    return n


class PrefixStateCache:
    """A count-bounded LRU of saved model states, each keyed by the tokens its context holds.

    :meth:`lookup` finds the entry sharing the longest prefix with a new prompt (ties: the most
    recently used) and returns it only when that prefix is at least ``min_gain`` tokens longer than
    the one the live context already shares (``live``); a returned entry becomes the most recently
    used. :meth:`add` stores a state, drops the entries whose tokens are a prefix of its tokens
    (it reuses at least as much for any prompt) and evicts the least recently used beyond
    ``capacity``; a state shorter than ``min_gain`` tokens (it could never be loaded) is not kept.
    Pure bookkeeping: the values are opaque (``llama_cpp.LlamaState`` in :class:`LocalBackend`)."""

    def __init__(self, capacity: int, min_gain: int = PREFIX_CACHE_MIN):
        if capacity < 1 or min_gain < 1:
            raise ValueError(f"PrefixStateCache needs capacity ≥ 1 and min_gain ≥ 1, got {capacity}, {min_gain}")
        from collections import OrderedDict

        self.capacity, self.min_gain = int(capacity), int(min_gain)
        self._entries: OrderedDict[int, tuple[Any, Any]] = OrderedDict()  # id → (tokens, value), LRU first
        self._next = 0

    def __len__(self) -> int:
        return len(self._entries)

    def values(self) -> list[Any]:
        """The stored values, least recently used first."""
        return [v for _, v in self._entries.values()]

    def best(self, tokens: Sequence[int]) -> tuple[Any, int]:
        """``(value, prefix)`` of the entry sharing the longest prefix with ``tokens`` (ties: the most
        recently used), ``(None, 0)`` when empty; nothing is marked as used."""
        key, n = self._best_key(tokens)
        return (None, 0) if key is None else (self._entries[key][1], n)

    def _best_key(self, tokens: Sequence[int]) -> tuple[int | None, int]:
        best_key, best_n = None, -1
        for key in reversed(self._entries):  # most recent first: it wins ties
            n = common_prefix(self._entries[key][0], tokens)
            if n > best_n:
                best_key, best_n = key, n
        return best_key, max(best_n, 0)

    def lookup(self, tokens: Sequence[int], live: int = 0) -> tuple[Any, int] | None:
        """``(value, prefix)`` of the best entry when its prefix is ≥ ``live + min_gain``, else None."""
        key, n = self._best_key(tokens)
        if key is None or n < live + self.min_gain:
            return None
        self._entries.move_to_end(key)
        return self._entries[key][1], n

    def add(self, tokens: Sequence[int], value: Any) -> bool:
        """Store ``value`` for the context ``tokens``; False when it is too short to keep."""
        import numpy as np

        toks = np.array(tokens, dtype=np.int32)  # a copy: the caller's array is the live context
        if len(toks) < self.min_gain:
            return False
        for key in [k for k, (t, _) in self._entries.items() if len(t) <= len(toks) and common_prefix(t, toks) == len(t)]:
            del self._entries[key]
        self._entries[self._next] = (toks, value)
        self._next += 1
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return True


def _trimmed_state(llama: Any) -> Any:
    """``Llama.save_state()`` (llama-cpp-python 0.3.36) without its copy of the (n_batch, n_vocab)
    float32 ``scores`` array (~148 MiB for Qwen2.5's vocabulary; with ``logits_all=False`` never
    written nor read, sampling reads the context's own logits): one row instead, which
    ``Llama.load_state`` broadcasts over the rows it restores. The state then costs its llama.cpp
    data (the KV cache of its tokens; measured for the 0.5B model: 12,301 bytes a token, 653 tokens →
    8.0 MB) plus the token ids (n_ctx int32) and that row (n_vocab float32): 8.7 MB where
    ``save_state()`` makes 164 MB."""
    import ctypes

    import llama_cpp
    import numpy as np

    if getattr(llama, "_logits_all", False):  # every row is real then (logprobs): keep them all
        return llama.save_state()
    ctx = llama.ctx
    size = int(llama_cpp.llama_state_get_size(ctx))
    buf = (ctypes.c_uint8 * size)()
    n = int(llama_cpp.llama_state_get_data(ctx, buf, size))
    if n > size:
        raise RuntimeError("Failed to copy llama state data")
    data = ctypes.string_at(buf, n)
    del buf
    scores = (llama._scores[-1:].copy() if llama.n_tokens else np.zeros((1, llama.n_vocab()), dtype=np.single))
    return llama_cpp.LlamaState(input_ids=llama.input_ids.copy(), scores=scores, n_tokens=llama.n_tokens,
                                llama_state=data, llama_state_size=n, seed=llama._seed)


def _state_bytes(state: Any) -> int:
    return len(state.llama_state) + state.input_ids.nbytes + state.scores.nbytes


# --------------------------------------------------------------------------------------------
# Samples of one prompt decoded together (LocalBackend.complete_many, llama-cpp-python 0.3.36)
# --------------------------------------------------------------------------------------------
def _seed_of(request: ChatRequest) -> int:
    """The sampler seed of a request (every backend derives it so: samples differ by their index)."""
    return request.seed * 1_000_003 + request.sample_index


def _chat_arguments(request: ChatRequest) -> dict[str, Any]:
    """``Llama.create_chat_completion``'s arguments for a request (the rest keep llama-cpp-python's defaults)."""
    return {"messages": [{"role": r, "content": c} for r, c in request.messages], "temperature": request.temperature,
            "top_p": request.top_p, "max_tokens": request.max_tokens, "stop": list(request.stop) or None,
            "seed": _seed_of(request)}


def _sampling_key(request: ChatRequest) -> tuple:
    """What requests decoded together share: everything but the seed and sample index."""
    return (request.model_id, request.messages, request.temperature, request.top_p, request.max_tokens, request.stop)


class _Handed(Exception):
    """Carries what the chat handler handed ``create_completion`` (see :func:`_completion_arguments`)."""

    def __init__(self, kwargs: dict[str, Any]):
        super().__init__("create_completion arguments")
        self.kwargs = kwargs


def _completion_arguments(llama: Any, request: ChatRequest) -> dict[str, Any]:
    """What ``create_chat_completion`` hands ``Llama.create_completion`` for ``request``: the prompt tokens
    of the model's chat template, the stop strings with the template's own, its stopping criteria, and every
    sampling setting with llama-cpp-python's defaults. The chat handler runs as usual, up to that call."""
    def hand(*args: Any, **kwargs: Any) -> Any:
        raise _Handed({"prompt": args[0], **kwargs} if args else kwargs)

    own = vars(llama)
    had, before = "create_completion" in own, own.get("create_completion")
    llama.create_completion = hand
    try:
        llama.create_chat_completion(**_chat_arguments(request))
    except _Handed as handed:
        return handed.kwargs
    finally:
        if had:
            llama.create_completion = before
        else:
            del llama.create_completion
    raise RuntimeError("the chat handler of the embedded model did not call create_completion")


def _plain_sampling(kwargs: dict[str, Any]) -> bool:
    """Whether decoding together reproduces what ``create_completion`` would do with these arguments: a
    token prompt, no streaming, no logprobs, grammar, logits processors, logit bias or mirostat."""
    return (isinstance(kwargs.get("prompt"), list) and bool(kwargs["prompt"]) and not kwargs.get("stream")
            and kwargs.get("logprobs") is None and kwargs.get("grammar") is None
            and kwargs.get("logits_processor") is None and not kwargs.get("logit_bias")
            and not kwargs.get("mirostat_mode") and kwargs.get("suffix") is None and not kwargs.get("echo"))


def _hold_sequences(llama: Any, n_ctx: int, sequences: int) -> None:
    """Give a loaded ``Llama`` a context of ``sequences`` sequences with ``n_ctx`` tokens each (one KV stream
    each, not a shared cache: a sequence's cells then lie as they would alone, and its attention is computed
    as alone). Sequence 0 is the context ``create_chat_completion`` uses; its numbers are those of a
    one-sequence context (measured: bit-identical logits for a prompt and for decoded tokens)."""
    from llama_cpp import _internals

    params = llama.context_params
    params.n_ctx = n_ctx * sequences
    params.n_seq_max = sequences
    params.kv_unified = False
    context = _internals.LlamaContext(model=llama._model, params=params, verbose=False)
    old, llama._ctx = llama._ctx, context
    old.close()
    llama.reset()


def _copy_sequence(llama: Any, src: int, dst: int) -> None:
    """Copy sequence ``src``'s KV cache into sequence ``dst`` (emptied first), byte for byte and cell for cell:
    through llama.cpp's per-sequence state, so only the cells ``src`` holds are copied (``llama_memory_seq_cp``
    between streams copies whole streams: measured ~0.15 s a copy for the 0.5B model at n_ctx 8192, against
    ~3 ms for a 180-token prompt this way)."""
    import ctypes

    import llama_cpp

    ctx = llama._ctx
    llama_cpp.llama_memory_seq_rm(ctx.memory, dst, -1, -1)
    size = llama_cpp.llama_state_seq_get_size(ctx.ctx, src)
    buf = (ctypes.c_uint8 * size)()
    n = llama_cpp.llama_state_seq_get_data(ctx.ctx, buf, size, src)
    if not n or llama_cpp.llama_state_seq_set_data(ctx.ctx, buf, n, dst) != n:
        raise RuntimeError(f"could not copy sequence {src} of the embedded model's context to sequence {dst}")


def _drop_sequences(llama: Any, sequences: int) -> None:
    """Forget every sequence (after a failure midway: the next call evaluates its prompt from scratch)."""
    import llama_cpp

    for seq in range(sequences):
        llama_cpp.llama_memory_seq_rm(llama._ctx.memory, seq, -1, -1)
    llama.reset()


def _prompt_into_sequence_zero(llama: Any, prompt: list[int]) -> int:
    """Evaluate ``prompt`` into sequence 0 exactly as ``Llama.generate`` (0.3.36) does before its first
    sample: reuse the live context's common prefix (re-evaluating the last prompt token when the whole
    prompt matches), or sample from the live logits when the context is exactly the prompt. Returns the
    tokens evaluated."""
    tokens = list(prompt)
    reset = True
    if llama.n_tokens > 0:
        longest = common_prefix(llama._input_ids, tokens)
        consumed = longest == len(tokens)
        if llama.n_tokens == len(tokens) and consumed and not llama._requires_eval:
            reset, tokens, reuse = False, [], 0
        else:
            reuse = longest - 1 if consumed else longest
        if reuse > 0 and llama._ctx.kv_cache_seq_rm(-1, reuse, -1):
            reset, tokens = False, tokens[reuse:]
            llama.n_tokens = reuse
            llama._requires_eval = True
    if reset:
        llama.reset()
    llama.eval(tokens)
    return len(tokens)


class _Sample:
    """One request's generation: the loop of ``Llama._create_completion`` (0.3.36, not streamed) around the
    tokens sampled for it — end of generation, incomplete UTF-8, stop strings, ``max_tokens``, and the chat
    template's stopping criteria where ``Llama.generate`` checks them."""

    def __init__(self, llama: Any, prompt: list[int], max_tokens: int, stops: list[bytes], criteria: Any,
                 sampler: Any):
        self.llama, self.prompt, self.max_tokens, self.stops, self.criteria = llama, prompt, max_tokens, stops, criteria
        self.sampler = sampler
        self.completion: list[int] = []
        self.n_evaluated = len(prompt)  # prompt and completion tokens in its KV cache
        self.text, self.finish_reason = b"", "length"
        self.done, self.pending, self.multibyte_fix = False, None, 0
        self.seq = 0  # the sequence whose KV cache holds its context

    def evaluated(self) -> Any:
        import numpy as np

        return np.asarray((self.prompt + self.completion)[:self.n_evaluated], dtype=np.intc)

    def _end(self) -> None:
        self.done, self.pending = True, None
        if self.criteria is not None and self.criteria(self.evaluated(), self.llama.scores[-1, :]):
            self.text, self.finish_reason = self._detokenized(), "stop"

    def _detokenized(self) -> bytes:
        return self.llama.detokenize(self.completion, prev_tokens=self.prompt)

    def feed(self, token: int) -> None:
        """Take the token sampled next: end, or keep it to be evaluated (``pending``)."""
        import llama_cpp

        if self.criteria is not None and self.criteria(self.evaluated(), self.llama.scores[0, :]):
            return self._end()  # (Llama.generate returns before it yields the token)
        if llama_cpp.llama_vocab_is_eog(self.llama._model.vocab, token):
            self.text, self.finish_reason = self._detokenized(), "stop"
            return self._end()
        self.completion.append(token)
        all_text = self._detokenized()
        for k, char in enumerate(all_text[-3:]):  # an incomplete UTF-8 character: no stop checks yet
            k = 3 - k
            for num, pattern in ((2, 192), (3, 224), (4, 240)):
                if num > k and pattern & char == pattern:
                    self.multibyte_fix = num - k
        if self.multibyte_fix > 0:
            self.multibyte_fix -= 1
            self.pending = token
            return None
        found = [s for s in self.stops if s in all_text]
        if found:
            self.text, self.finish_reason = all_text[:all_text.index(found[0])], "stop"
            return self._end()
        if len(self.completion) >= self.max_tokens:
            self.text, self.finish_reason = all_text, "length"
            return self._end()
        self.pending = token
        return None


def _decode_rows(llama: Any, rows: list[tuple[int, int, int]], batches: dict[int, Any]) -> None:
    """One ``llama_decode`` of ``rows`` (token, position, sequence), each with its logits."""
    import llama_cpp

    n = len(rows)
    batch = batches.get(n)
    if batch is None:
        batch = batches[n] = llama_cpp.llama_batch_init(n, 0, 1)
    batch.n_tokens = n
    for i, (token, pos, seq) in enumerate(rows):
        batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = token, pos, 1, 1
        batch.seq_id[i][0] = seq
    code = llama_cpp.llama_decode(llama._ctx.ctx, batch)
    if code != 0:
        raise RuntimeError(f"llama_decode returned {code}")


def _decode_together(llama: Any, kwargs: dict[str, Any], seeds: Sequence[int], sequences: int,
                     rows: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Answer one prompt (``kwargs``: :func:`_completion_arguments`) once per seed, the seeds' samples decoded
    together in the context's sequences, at most ``rows`` of them a decode call.

    Each sample starts from what a one-at-a-time run would hand it. The first is sampled from the prompt as
    evaluated into sequence 0 (:func:`_prompt_into_sequence_zero`). A later one starts where the previous
    sample left the context: from the same logits when that sample ended at its first token (nothing of it
    was evaluated), else from the prompt's last token evaluated again alone over the rest of the prompt —
    done once, in a copy of sequence 0, and copied to each later sample's sequence (:func:`_copy_sequence`:
    the same bytes in the same cells, so each sequence computes as it would alone). Afterwards sequence 0 holds
    what the last sample's run leaves (its prompt and evaluated tokens); the other sequences are emptied.
    Returns the answers (``text`` bytes decoded, ``completion_tokens``, ``finish_reason``) and counts."""
    import llama_cpp

    prompt = list(kwargs["prompt"])
    n_prompt, n_ctx = len(prompt), llama._n_ctx
    if n_prompt >= n_ctx:
        raise ValueError(f"Requested tokens ({n_prompt}) exceed context window of {n_ctx}")
    max_tokens = kwargs.get("max_tokens")
    if max_tokens is None or max_tokens <= 0:
        max_tokens = n_ctx - n_prompt
    max_tokens = max_tokens if max_tokens + n_prompt < n_ctx else n_ctx - n_prompt
    stop = kwargs.get("stop") or []
    stops = [s.encode("utf-8") for s in ([stop] if isinstance(stop, str) else stop)]
    samples = []
    for seed in seeds:  # each its own sampler chain, built as Llama.generate builds it
        llama.set_seed(seed)
        sampler = llama._init_sampler(
            top_k=kwargs.get("top_k", 40), top_p=kwargs.get("top_p", 0.95), min_p=kwargs.get("min_p", 0.05),
            typical_p=kwargs.get("typical_p", 1.0), temp=kwargs.get("temperature", 0.8),
            repeat_penalty=kwargs.get("repeat_penalty", 1.0), frequency_penalty=kwargs.get("frequency_penalty", 0.0),
            presence_penalty=kwargs.get("presence_penalty", 0.0), tfs_z=kwargs.get("tfs_z", 1.0),
            mirostat_mode=0, mirostat_tau=kwargs.get("mirostat_tau", 5.0), mirostat_eta=kwargs.get("mirostat_eta", 0.1),
            logits_processor=None, grammar=None)
        samples.append(_Sample(llama, prompt, max_tokens, stops, kwargs.get("stopping_criteria"), sampler))
    if len(samples) > sequences:
        raise ValueError(f"{len(samples)} samples do not fit {sequences} sequences")
    batches: dict[int, Any] = {}
    try:
        return _decode_samples(llama, samples, prompt, seeds, sequences, rows, batches)
    finally:
        for batch in batches.values():
            llama_cpp.llama_batch_free(batch)


def _decode_samples(llama: Any, samples: list[_Sample], prompt: list[int], seeds: Sequence[int], sequences: int,
                    rows: int, batches: dict[int, Any]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The body of :func:`_decode_together`."""
    import llama_cpp

    ctx, n_prompt = llama._ctx, len(prompt)
    counts = {"prompt_tokens": n_prompt, "evaluated": _prompt_into_sequence_zero(llama, prompt), "decode_calls": 0,
              "decode_rows": 0}
    # the first samples take the evaluated prompt's logits, as long as each ends at its first token
    k = 0
    samples[0].feed(samples[0].sampler.sample(ctx, -1))
    while samples[k].done and k + 1 < len(samples):
        k += 1
        samples[k].feed(samples[k].sampler.sample(ctx, -1))
    free = list(range(1, sequences))
    if k + 1 < len(samples):  # the later ones: the prompt's last token evaluated again, alone
        again = free.pop(0)
        _copy_sequence(llama, 0, again)
        ctx.kv_cache_seq_rm(again, n_prompt - 1, -1)
        _decode_rows(llama, [(prompt[-1], n_prompt - 1, again)], batches)
        counts["evaluated"] += 1
        taken = False
        for sample in samples[k + 1:]:
            sample.feed(sample.sampler.sample(ctx, -1))
            sample.seq = again
            if not sample.done:
                if taken:
                    sample.seq = free.pop(0)
                    _copy_sequence(llama, again, sample.seq)
                taken = True
    active = [s for s in samples if not s.done]
    while active:
        for start in range(0, len(active), rows):
            part = active[start:start + rows]
            _decode_rows(llama, [(s.pending, s.n_evaluated, s.seq) for s in part], batches)
            counts["decode_calls"] += 1
            counts["decode_rows"] += len(part)
            for s in part:
                s.n_evaluated += 1
            for i, s in enumerate(part):
                s.feed(s.sampler.sample(ctx, i))
        active = [s for s in active if not s.done]
    last = samples[-1]  # sequence 0 as the last sample's one-at-a-time run leaves the context
    if last.seq != 0:
        _copy_sequence(llama, last.seq, 0)
    ctx.kv_cache_seq_rm(0, last.n_evaluated, -1)
    for seq in range(1, sequences):
        llama_cpp.llama_memory_seq_rm(ctx.memory, seq, -1, -1)
    tokens = last.evaluated()
    llama.input_ids[:len(tokens)] = tokens
    llama.n_tokens = len(tokens)
    llama._requires_eval = True  # the live logits are another sequence's: a repeated prompt re-evaluates its end
    llama.set_seed(seeds[-1])
    answers = [{"text": s.text.decode("utf-8", errors="ignore"), "completion_tokens": len(s.completion),
                "finish_reason": s.finish_reason} for s in samples]
    return answers, counts


class LocalBackend:
    """The embedded GGUF model, in-process through llama-cpp-python.

    ``n_threads``: default :func:`default_threads` (``$KGQA_LLM_THREADS``, else the cores available);
    ``n_gpu_layers``: default :func:`default_gpu_layers` (``$KGQA_LLM_GPU_LAYERS``, else 0; -1 = all,
    for a llama-cpp-python built with CUDA/Metal). Both can be given in the name:
    ``local?threads=8&gpu_layers=-1``.

    Memory is bounded: no llama.cpp RAM prompt cache is attached (measured: the stock
    ``LlamaRAMCache`` counts only the llama.cpp state of an entry, not the (n_batch, n_vocab) float32
    ``scores`` copy ``Llama.save_state`` adds, ~148 MiB each: it undercounts entries ~13x and a server
    grew to 22.8 GB). Prefix reuse between consecutive prompts happens inside the one ``Llama`` object
    anyway: a call evaluates only what follows its common prefix with the previous call's context.

    Prefix states (opt-in, ``prefix_cache``: ``local?prefix_cache=8`` or ``$KGQA_LLM_PREFIX_CACHE``;
    default 0 = off, nothing saved or loaded): the context after each call is saved (at most
    ``prefix_cache`` states, least recently used dropped: :class:`PrefixStateCache`), and before a
    call the state sharing the longest token prefix with the new prompt is loaded when that prefix
    beats the live context's by at least ``prefix_cache_min`` tokens (``local?prefix_cache_min=…``,
    ``$KGQA_LLM_PREFIX_CACHE_MIN``, default :data:`PREFIX_CACHE_MIN`). FuSIC's generation prompts,
    whose system and exemplar turns repeat across questions with re-rank calls in between, then
    skip that part of their evaluation. The prompt tokens are the chat handler's own (the lookup
    runs inside ``create_completion``, which ``create_chat_completion`` calls with them).

    Memory bound with the cache on: ``prefix_cache`` × the largest state. A state is saved without
    the ``scores`` copy (:func:`_trimmed_state`): the KV cache of its tokens (Qwen2.5-Coder-1.5B:
    28 KiB a token; Qwen2.5-0.5B: 12 KiB) + one scores row (n_vocab × 4 bytes, 0.6 MiB) + the token
    ids (n_ctx × 4 bytes) — at most ~225 MiB for the 1.5B model at n_ctx 8192 (a context holds at
    most n_ctx tokens), ~85 MiB for a 3,000-token FuSIC prompt; ``prefix_cache=8`` ≤ ~1.8 GiB (~0.7 GiB at FuSIC sizes).
    Saving or loading also holds one more copy transiently.

    Outputs: with the cache off, nothing differs from before. With it on, a call that loads a state
    evaluates the rest of its prompt in ``n_batch`` chunks from another position than it would have,
    so greedy answers are not guaranteed bit-identical to a cache-off run (llama.cpp's are not
    across runs either: exact replays come from recordings). Measured with the 0.5B model, 8
    interleaved re-rank/generation prompts sharing a ~560-token prefix, temperature 0: 7 of 8 texts
    identical, 1,228 of 2,934 prompt tokens evaluated instead of 2,906; the one that differs is
    reproduced without the cache when the live context offers the same prefix (the same tokens
    evaluated from the same position), so it comes from where evaluation starts, not from the
    saved state.

    Samples decoded together (opt-in, ``batch``: ``local?batch=6`` or ``$KGQA_LLM_BATCH``; default 0 = off):
    :meth:`complete_many` answers requests that differ only in their seed or sample index (self-consistency's
    and KB-BINDER's samples) at once: the prompt is evaluated once, as for the first of them, and up to
    ``batch`` sequences are decoded together, each with its own sampler built as ``create_chat_completion``
    builds it (the request's seed; stop strings and end of generation per sequence). The context then holds
    ``batch`` sequences of ``n_ctx`` tokens each (one KV cache each, allocated at load). Each decode call
    holds at most ``batch_rows`` of them (``local?batch_rows=…``, ``$KGQA_LLM_BATCH_ROWS``; default
    :data:`EXACT_BATCH_ROWS`): with that default every sample is bit-identical to the one ``complete`` gives
    when the samples are asked one after another (each sequence starts from the KV cache and logits a
    one-at-a-time run would hand it: the first from the evaluated prompt, the later ones from the prompt's last
    token evaluated again), so the answers share the model id, cache and records. More rows a call decode faster
    but change some sampled tokens: the model id then ends in :data:`BATCHED_SUFFIX`. Not combined with
    ``prefix_cache``.

    :meth:`prefix_stats` (both modes): live calls, prompt tokens, those ``evaluated`` and ``reused``
    (taken from the context a call started from), ``reused_from_states`` (of those, the tokens a
    loaded state added beyond the live context's prefix: what the cache saved), state loads/saves,
    the states and bytes held, and the seconds spent saving and loading; with ``batch``: ``together``
    (requests answered by decoding together), ``decode_calls`` and ``decode_rows`` (their decode calls
    after the prompt, and the rows those held)."""

    def __init__(self, model: str = "default", n_ctx: int = 8192, n_threads: int | None = None, n_batch: int = 256,
                 n_gpu_layers: int | None = None, prefix_cache: int | None = None, prefix_cache_min: int | None = None,
                 batch: int | None = None, batch_rows: int | None = None):
        from . import models

        self.spec = models.get_spec(model)
        self.n_ctx, self.n_batch = n_ctx, n_batch
        self.n_threads = default_threads() if n_threads is None else int(n_threads)
        self.n_gpu_layers = default_gpu_layers() if n_gpu_layers is None else int(n_gpu_layers)
        self.prefix_cache = default_prefix_cache() if prefix_cache is None else int(prefix_cache)
        self.prefix_cache_min = default_prefix_cache_min() if prefix_cache_min is None else int(prefix_cache_min)
        if self.prefix_cache < 0 or self.prefix_cache_min < 1:
            raise UsageError(f"prefix_cache expects a whole number ≥ 0 and prefix_cache_min one ≥ 1, got "
                             f"{self.prefix_cache} and {self.prefix_cache_min}")
        self.batch = default_batch() if batch is None else int(batch)
        self.batch_rows = default_batch_rows() if batch_rows is None else int(batch_rows)
        if self.batch < 0 or self.batch_rows < 1:
            raise UsageError(f"batch expects a whole number ≥ 0 and batch_rows one ≥ 1, got {self.batch} and "
                             f"{self.batch_rows}")
        if self.batch >= 2 and self.prefix_cache:
            raise UsageError("the embedded model's batch (samples decoded together) and prefix_cache (saved prefix "
                             "states) cannot be combined: use one of them (local?batch=6 or local?prefix_cache=8)")
        self.model_id = local_model_id(self.spec.model_id, self.batch, self.batch_rows)
        self._states = PrefixStateCache(self.prefix_cache, self.prefix_cache_min) if self.prefix_cache else None
        how = ("one request at a time" if not self.batches else
               f"samples of one prompt decoded together (up to {self.batch}, at most "
               f"{min(self.batch, self.batch_rows)} rows a decode call)")
        self.engine = (f"llama-cpp-python {_dist_version('llama_cpp_python')} in-process, {how} "
                       f"({self.n_threads} thread(s), batch {self.n_batch}"
                       + (f", prefix cache {self.prefix_cache}" if self.prefix_cache else "") + ")")
        self.stats: dict[str, Any] = {
            "calls": 0, "prompt_tokens": 0, "evaluated": 0, "reused": 0, "reused_from_states": 0,
            "state_loads": 0, "state_saves": 0, "states": 0, "state_bytes": 0, "state_seconds": 0.0}
        if self.batches:
            self.stats.update(together=0, decode_calls=0, decode_rows=0)
        self._start: tuple[Any, bool] | None = None  # (context, fresh logits) the running call starts from
        self._live_start: tuple[Any, bool] | None = None  # the live context, when a state replaced it
        self._llama = None
        self._lock = threading.Lock()

    def _load(self):
        if self._llama is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise RuntimeError(
                    "llama-cpp-python is not installed; run `make setup` (it builds the wheel once, "
                    "~5 min) or use an OpenAI-compatible endpoint (KGQA_LLM_BASE_URL)."
                ) from exc
            from . import models

            path = models.model_path(self.spec.name)
            llama = Llama(
                model_path=str(path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                n_threads_batch=self.n_threads, n_batch=self.n_batch, n_gpu_layers=self.n_gpu_layers,
                verbose=False, seed=0,
            )
            if self._states is not None:
                self._hook(llama)
            if self.batches:
                _hold_sequences(llama, self.n_ctx, self.batch)
            self._llama = llama
        return self._llama

    def load(self) -> None:
        """Load the model now (else the first call does)."""
        with self._lock:
            self._load()

    @property
    def batches(self) -> bool:
        """Whether :meth:`complete_many` decodes samples together (``batch`` ≥ 2)."""
        return self.batch >= 2

    def _hook(self, llama: Any) -> None:
        """Look up a saved state where the chat handler hands ``create_completion`` its prompt tokens."""
        original = llama.create_completion

        def create_completion(*args: Any, **kwargs: Any) -> Any:
            prompt = kwargs["prompt"] if "prompt" in kwargs else (args[0] if args else None)
            if isinstance(prompt, list) and prompt:
                self._before_generate(llama, prompt)
            return original(*args, **kwargs)

        llama.create_completion = create_completion

    def _before_generate(self, llama: Any, prompt: list[int]) -> None:
        hit = self._states.lookup(prompt, live=common_prefix(llama._input_ids, prompt))
        if hit is None:
            return
        state = hit[0]
        started = time.perf_counter()
        try:
            llama.load_state(state)
        except RuntimeError as exc:  # llama.cpp refused the data: start from an empty context instead
            llama.reset()
            self._start = (llama._input_ids.copy(), False)
            warnings.warn(f"could not load a saved prefix state ({exc}); the prompt is evaluated in full",
                          RuntimeWarning, stacklevel=2)
            return
        self.stats["state_seconds"] += time.perf_counter() - started
        self.stats["state_loads"] += 1
        self._live_start, self._start = self._start, (state.input_ids[:state.n_tokens].copy(), False)

    def _account(self, llama: Any, prompt_tokens: int) -> None:
        prompt = llama.input_ids[:prompt_tokens]
        reused = reused_tokens(self._start[0], prompt, fresh_logits=self._start[1])
        s = self.stats
        s["calls"] += 1
        s["prompt_tokens"] += prompt_tokens
        s["reused"] += reused
        s["evaluated"] += prompt_tokens - reused
        if self._live_start is not None:
            s["reused_from_states"] += reused - reused_tokens(self._live_start[0], prompt, fresh_logits=self._live_start[1])

    def _save(self, llama: Any) -> None:
        if llama.n_tokens < self._states.min_gain:
            return
        started = time.perf_counter()
        self._states.add(llama.input_ids[:llama.n_tokens], _trimmed_state(llama))
        s = self.stats
        s["state_seconds"] += time.perf_counter() - started
        s["state_saves"] += 1
        s["states"] = len(self._states)
        s["state_bytes"] = sum(_state_bytes(v) for v in self._states.values())

    def prefix_stats(self) -> dict[str, Any]:
        """A copy of :attr:`stats` (seconds rounded), plus ``prefix_cache`` and ``prefix_cache_min``."""
        with self._lock:
            out = dict(self.stats)
        out["state_seconds"] = round(out["state_seconds"], 3)
        return {"prefix_cache": self.prefix_cache, "prefix_cache_min": self.prefix_cache_min, **out}

    def complete(self, request: ChatRequest) -> dict[str, Any]:
        with self._lock:  # one llama context: calls are serialised
            return self._complete(request)

    def _complete(self, request: ChatRequest) -> dict[str, Any]:
        llama = self._load()
        self._start = (llama._input_ids.copy(), not getattr(llama, "_requires_eval", True))
        self._live_start = None
        out = llama.create_chat_completion(**_chat_arguments(request))
        usage = out.get("usage") or {}
        self._account(llama, int(usage.get("prompt_tokens", 0)))
        if self._states is not None:
            self._save(llama)
        choice = out["choices"][0]
        return {
            "text": _strip_special(choice["message"].get("content") or ""),
            "prompt_tokens": int(usage.get("prompt_tokens", 0)),
            "completion_tokens": int(usage.get("completion_tokens", 0)),
            "finish_reason": choice.get("finish_reason") or "",
        }

    def complete_many(self, requests: Sequence[ChatRequest]) -> list[dict[str, Any]]:
        """The responses of ``requests``, in order, as :meth:`complete` gives them one after another. With
        ``batch`` ≥ 2, consecutive requests that differ only in their seed or sample index are decoded
        together (up to ``batch`` at once; see the class doc); any other request is answered alone."""
        with self._lock:
            if not self.batches:
                return [self._complete(r) for r in requests]
            out: list[dict[str, Any]] = []
            run: list[ChatRequest] = []
            for r in [*requests, None]:
                if run and (r is None or len(run) == self.batch or _sampling_key(r) != _sampling_key(run[0])):
                    out += self._together(run) if len(run) > 1 else [self._complete(run[0])]
                    run = []
                if r is not None:
                    run.append(r)
            return out

    def _together(self, requests: Sequence[ChatRequest]) -> list[dict[str, Any]]:
        """Requests sharing everything but their seed decoded together (``_complete`` one by one when the
        chat handler asks for something decoding together does not reproduce: a grammar, logprobs...)."""
        llama = self._load()
        kwargs = _completion_arguments(llama, requests[0])
        if not _plain_sampling(kwargs):
            return [self._complete(r) for r in requests]
        try:
            answers, counts = _decode_together(llama, kwargs, [_seed_of(r) for r in requests], self.batch,
                                               min(self.batch, self.batch_rows))
        except BaseException:
            _drop_sequences(llama, self.batch)  # nothing of a half-done run is reused
            raise
        s, n, p = self.stats, len(requests), counts["prompt_tokens"]
        s["calls"] += n
        s["together"] += n
        s["prompt_tokens"] += n * p
        s["evaluated"] += counts["evaluated"]
        s["reused"] += n * p - counts["evaluated"]
        s["decode_calls"] += counts["decode_calls"]
        s["decode_rows"] += counts["decode_rows"]
        return [{"text": _strip_special(a["text"]), "prompt_tokens": p, "completion_tokens": a["completion_tokens"],
                 "finish_reason": a["finish_reason"]} for a in answers]


class RateLimiter:
    """A client-side limit of requests and tokens per minute, and the endpoint's ``Retry-After``.

    Two token buckets (requests, tokens) that refill continuously at ``rpm``/``tpm`` per minute and
    hold at most one second's worth (at least one request; a request costing more tokens than a
    bucket holds waits for a full bucket and leaves it in debt): the rate holds over any minute
    without bursts that a per-second quota would refuse. :meth:`pause` (a 429's ``Retry-After``)
    holds *every* caller until then. Thread-safe; one instance per endpoint and model is shared by
    all workers of a process (:func:`rate_limiter`). ``clock``/``sleep`` are injectable for tests."""

    def __init__(self, rpm: float | None = None, tpm: float | None = None, *, clock=time.monotonic,
                 sleep=time.sleep) -> None:
        self.rpm, self.tpm = rpm, tpm
        self.clock, self.sleep = clock, sleep
        self._lock = threading.Lock()
        now = clock()
        self._req = self._req_cap = max(1.0, rpm / 60.0) if rpm else 0.0
        self._tok = self._tok_cap = max(1.0, tpm / 60.0) if tpm else 0.0
        self._last = now
        self._paused_until = now
        self.waited = 0.0  # seconds callers spent waiting here (accounting)

    def configure(self, rpm: float | None, tpm: float | None) -> None:
        """New limits (the latest backend's) for every user of this limiter."""
        with self._lock:
            self._refill(self.clock())
            self.rpm, self.tpm = rpm, tpm
            self._req_cap = max(1.0, rpm / 60.0) if rpm else 0.0
            self._tok_cap = max(1.0, tpm / 60.0) if tpm else 0.0
            self._req, self._tok = min(self._req, self._req_cap), min(self._tok, self._tok_cap)

    def _refill(self, now: float) -> None:
        dt = max(0.0, now - self._last)
        self._last = now
        if self.rpm:
            self._req = min(self._req_cap, self._req + dt * self.rpm / 60.0)
        if self.tpm:
            self._tok = min(self._tok_cap, self._tok + dt * self.tpm / 60.0)

    def acquire(self, tokens: float = 0.0) -> float:
        """Wait until one request (costing ``tokens``) may go; returns the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                now = self.clock()
                self._refill(now)
                wait = self._paused_until - now
                if wait <= 0:
                    need_req = 1.0 - self._req if self.rpm else 0.0
                    need_tok = min(tokens, self._tok_cap) - self._tok if self.tpm else 0.0
                    wait = max(need_req * 60.0 / self.rpm if self.rpm and need_req > 0 else 0.0,
                               need_tok * 60.0 / self.tpm if self.tpm and need_tok > 0 else 0.0)
                    if wait <= 0:
                        if self.rpm:
                            self._req -= 1.0
                        if self.tpm:
                            self._tok -= tokens
                        self.waited += waited
                        return waited
            self.sleep(wait)
            waited += wait

    def pause(self, seconds: float) -> None:
        """Hold every caller for ``seconds`` from now (the endpoint said ``Retry-After``)."""
        if not seconds or seconds <= 0 or seconds != seconds:
            return
        with self._lock:
            self._paused_until = max(self._paused_until, self.clock() + min(float(seconds), 600.0))


_LIMITERS: dict[str, RateLimiter] = {}
_LIMITERS_LOCK = threading.Lock()


def rate_limiter(model_id: str, rpm: float | None = None, tpm: float | None = None) -> RateLimiter:
    """The process-wide :class:`RateLimiter` of an endpoint's model (``model_id`` names both), with
    the given limits (``None``: ``$KGQA_LLM_RPM`` / ``$KGQA_LLM_TPM``, else no limit)."""
    if rpm is None and os.environ.get("KGQA_LLM_RPM", "").strip():
        rpm = _option_rate("KGQA_LLM_RPM", os.environ["KGQA_LLM_RPM"])
    if tpm is None and os.environ.get("KGQA_LLM_TPM", "").strip():
        tpm = _option_rate("KGQA_LLM_TPM", os.environ["KGQA_LLM_TPM"])
    with _LIMITERS_LOCK:
        limiter = _LIMITERS.get(model_id)
        if limiter is None:
            limiter = _LIMITERS[model_id] = RateLimiter(rpm, tpm)
        elif (limiter.rpm, limiter.tpm) != (rpm, tpm):
            limiter.configure(rpm, tpm)
        return limiter


def _retry_after(headers: Any) -> float | None:
    """Seconds from a response's ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date)."""
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            import email.utils

            try:
                when = email.utils.parsedate_to_datetime(value)
                return when.timestamp() - time.time()
            except (TypeError, ValueError, IndexError, OverflowError):
                return None
    return None


def _estimated_tokens(body: bytes) -> float:
    """What a chat request costs against a tokens-per-minute limit, as OpenAI counts it: the
    prompt (about 4 characters a token) plus ``max_tokens``."""
    try:
        payload = json.loads(body or b"{}")
    except ValueError:
        return 0.0
    if not isinstance(payload, dict):
        return 0.0
    chars = sum(len(str(m.get("content", ""))) for m in payload.get("messages", []) if isinstance(m, dict))
    return chars / 4.0 + float(payload.get("max_tokens") or payload.get("max_completion_tokens") or 0)


class OpenAIBackend:
    """Any OpenAI-compatible chat endpoint, through the ``openai`` client.

    Retries with exponential backoff on 408/409/429/5xx and connection errors are the client's
    (``max_retries``). ``timeout`` bounds the whole call, retries included (default
    :func:`default_llm_timeout`: ``$KGQA_LLM_TIMEOUT``, else 300 s; ``openai:MODEL?timeout=60``,
    ``kgqa run --llm-timeout 60``): each attempt's connect and read waits are cut to what is left, and
    the body is checked against the deadline as it arrives, so a server trickling its answer cannot
    stretch the call (it ends within about the deadline, plus at most one retry's backoff). A reply
    body over :data:`MAX_REPLY_BYTES` is refused. Both raise :class:`LLMEndpointError`, as does an HTTP
    200 that is not a chat completion (an HTML login page, a body that is not JSON, no ``choices``).
    Every HTTP attempt (retries too) first passes the process-wide
    :class:`RateLimiter` of this endpoint and model (``rpm``/``tpm``: ``openai:MODEL?rpm=500&tpm=2e5``,
    or ``$KGQA_LLM_RPM``/``$KGQA_LLM_TPM``; time spent waiting there does not count against the
    deadline); a 429's ``Retry-After`` pauses every worker of the process, not only the one that got it."""

    def __init__(self, model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                 timeout: float | None = None, max_retries: int = 4, rpm: float | None = None, tpm: float | None = None,
                 read_timeout: float = 120.0):
        import openai

        self.model = model or os.environ.get("KGQA_LLM_MODEL") or "gpt-4o-mini"
        base_url = base_url or os.environ.get("KGQA_LLM_BASE_URL") or None
        self.model_id = openai_model_id(self.model, base_url)  # the endpoint is part of the cache key
        api_key = openai_api_key(base_url, api_key)
        self.timeout = default_llm_timeout() if timeout is None else _option_seconds("timeout", timeout)
        self.limiter = limiter = rate_limiter(self.model_id, rpm, tpm)
        self.engine = f"OpenAI-compatible endpoint {endpoint_id(base_url or OPENAI_DEFAULT_BASE_URL)}"
        call = self._call = threading.local()  # this thread's call: its deadline

        def before(request: Any) -> None:
            waited = 0.0
            if request.method == "POST":
                waited = limiter.acquire(_estimated_tokens(request.content) if limiter.tpm else 0.0)
            deadline = getattr(call, "deadline", None)
            if deadline is None:
                return
            call.deadline = deadline = deadline + waited  # queueing behind the rate limit is not the server's time
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._too_slow()
            request.extensions["timeout"] = {k: left if v is None else min(v, left)
                                             for k, v in (request.extensions.get("timeout") or {
                                                 "connect": None, "read": None, "write": None, "pool": None}).items()}

        def after(response: Any) -> None:
            if response.status_code in (429, 503):
                limiter.pause(_retry_after(response.headers) or 0.0)
            response.stream = _bounded_body(response.stream, getattr(call, "deadline", None), self._too_slow,
                                            self._too_big)

        http_client = openai.DefaultHttpxClient(event_hooks={"request": [before], "response": [after]},
                                                timeout=min(read_timeout, self.timeout))
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=min(read_timeout, self.timeout),
                                     max_retries=max_retries, http_client=http_client)
        self._shown = _shown_url(self._client.base_url).rstrip("/")

    def _too_slow(self) -> "LLMEndpointError":
        return LLMEndpointError(
            f"The LLM endpoint {self._shown} did not finish answering within {self.timeout:g} s (the whole call, "
            "retries included). Is the server overloaded, or sending its answer slowly? Allow more time with "
            "`kgqa run --llm-timeout SECONDS`, openai:MODEL?timeout=SECONDS or KGQA_LLM_TIMEOUT.",
            summary=f"LLM endpoint {self._shown} gave no complete answer within {self.timeout:g} s")

    def _too_big(self) -> "LLMEndpointError":
        return LLMEndpointError(
            f"The LLM endpoint {self._shown} sent a reply of more than {MAX_REPLY_BYTES // 2**20} MiB, which was "
            "refused. Does the server ignore max_tokens? Check its settings and the model name.",
            summary=f"LLM endpoint {self._shown} sent a reply of more than {MAX_REPLY_BYTES // 2**20} MiB")

    def _not_a_completion(self, what: str) -> "LLMEndpointError":
        return LLMEndpointError(
            f"The LLM endpoint {self._shown} answered HTTP 200 with something that is not a chat completion "
            f"({what}). Is the URL the /v1 of an OpenAI-compatible server (not a web page, a proxy or a login "
            "page)? Check KGQA_LLM_BASE_URL or the URL in the LLM name.",
            summary=f"LLM endpoint {self._shown} answered something that is not a chat completion")

    def complete(self, request: ChatRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = dict(
            model=self.model,
            messages=[{"role": r, "content": c} for r, c in request.messages],
            temperature=request.temperature,
            top_p=request.top_p,
            max_tokens=request.max_tokens,
            seed=request.seed * 1_000_003 + request.sample_index,
        )
        if request.stop:
            kwargs["stop"] = list(request.stop)
        import openai

        leak = None
        self._call.deadline = time.monotonic() + self.timeout
        try:
            out = self._client.chat.completions.create(**kwargs)
        except LLMEndpointError:  # past the deadline, or a reply too big (raised by the client's hooks)
            raise
        except json.JSONDecodeError as exc:  # a 200 whose body is not JSON
            raise self._not_a_completion(f"not JSON: {exc}") from None
        except openai.APIConnectionError as exc:  # (timeouts too) the client's own message names no server
            leak = _without_secret(exc, self._client.api_key)
            if leak is None:
                if time.monotonic() >= self._call.deadline:  # the last read was cut at the deadline
                    raise self._too_slow() from exc
                shown = self._shown
                raise LLMEndpointError(
                    f"Cannot reach the LLM endpoint {shown} "
                    f"({type(exc).__name__}: {exc}; retried {self._client.max_retries} times). Is the server "
                    "running? Check KGQA_LLM_BASE_URL (e.g. http://127.0.0.1:8000/v1 for vLLM, "
                    "http://127.0.0.1:11434/v1 for Ollama) or use the embedded model (LLM='local').",
                    summary=f"LLM endpoint {shown} unreachable ({type(exc).__name__})",
                ) from exc
        except Exception as exc:
            leak = _without_secret(exc, self._client.api_key)
            status = getattr(exc, "status_code", None)
            if leak is None and isinstance(exc, openai.APIStatusError) and status in _ENDPOINT_STATUSES:
                # the endpoint, not the question, failed (after the client's retries for 408/409/429/5xx)
                shown = self._shown
                raise LLMEndpointError(
                    f"The LLM endpoint {shown} answered HTTP {status} ({str(exc)[:200]}; retried "
                    f"{self._client.max_retries} times). Check the server, the model name and OPENAI_API_KEY.",
                    status, summary=f"LLM endpoint {shown} failed with HTTP {status}",
                ) from exc
            if leak is None:
                raise
        finally:
            self._call.deadline = None
        if leak is not None:  # raised outside the except block: the original is not even its __context__
            raise leak
        choices = getattr(out, "choices", None)
        if not isinstance(choices, list) or not choices:
            shown = out[:80] if isinstance(out, str) else ("no choices" if choices is None else f"choices={choices!r:.80}")
            raise self._not_a_completion(repr(shown) if isinstance(out, str) else shown)
        choice = choices[0]
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None)
        if message is None or not (content is None or isinstance(content, str)):
            raise self._not_a_completion(f"its first choice has no text message: {choice!r:.120}")
        usage = out.usage
        return {
            "text": _strip_special(content or ""),
            "prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
            "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
            "finish_reason": getattr(choice, "finish_reason", None) or "",
        }


_BODY_CLASSES: dict[type, type] = {}


def _bounded_body(stream: Any, deadline: float | None, too_slow: Any, too_big: Any) -> Any:
    """The HTTP client's response byte stream, checked as it arrives: past ``deadline`` (monotonic
    seconds) it raises ``too_slow()``, beyond :data:`MAX_REPLY_BYTES` ``too_big()`` — errors the
    ``openai`` client neither retries nor wraps."""
    base = next((c for c in type(stream).__mro__ if c.__name__ == "SyncByteStream"), None)
    if base is None:  # not a stream we know how to wrap (an async client): left as it is
        return stream
    cls = _BODY_CLASSES.get(base)
    if cls is None:
        class Bounded(base):
            def __init__(self, inner: Any, deadline: float | None, too_slow: Any, too_big: Any) -> None:
                self.inner, self.deadline, self.too_slow, self.too_big = inner, deadline, too_slow, too_big

            def __iter__(self) -> Iterator[bytes]:
                size = 0
                for chunk in self.inner:
                    size += len(chunk)
                    if size > MAX_REPLY_BYTES:
                        raise self.too_big()
                    if self.deadline is not None and time.monotonic() > self.deadline:
                        raise self.too_slow()
                    yield chunk

            def close(self) -> None:
                self.inner.close()

        cls = _BODY_CLASSES[base] = Bounded
    return cls(stream, deadline, too_slow, too_big)


# HTTP statuses that are the endpoint's failure, not the question's: auth, unknown model, and what
# the client retries (408/409/429/5xx). A 400 (e.g. a prompt over the context length) stays the question's.
_ENDPOINT_STATUSES = frozenset({401, 403, 404, 408, 409, 429} | set(range(500, 600)))


class LLMEndpointError(InfrastructureError, RuntimeError):
    """An OpenAI-compatible endpoint could not be reached or failed (5xx/429/auth after the client's
    retries; the message names the URL, without credentials, and the fix), or failed with a message
    that quoted the API key (some servers and proxies echo the ``Authorization`` header: the same
    message, key redacted, original dropped). Not an answer: see :mod:`kgqa_lib.errors`."""

    def __init__(self, message: str, status_code: int | None = None, *, summary: str | None = None):
        super().__init__(message, summary=summary)
        self.status_code = status_code


def _shown_url(url: Any) -> str:
    """The endpoint as shown in messages: scheme, host, port and path (no user:password, no query)."""
    from urllib.parse import urlsplit

    parts = urlsplit(str(url))
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}" if parts.scheme else "(no URL)"


OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"


def endpoint_id(url: Any) -> str:
    """An endpoint as it enters model ids (and so cache keys and run configs): lower-case scheme and
    host, the port unless it is the scheme's default, the path without a trailing slash; never
    user:password, the query string or the fragment (credentials and keys stay out of the caches)."""
    from urllib.parse import urlsplit

    parts = urlsplit(str(url).strip())
    scheme = (parts.scheme or "http").lower()
    host = (parts.hostname or "").lower()
    host = f"[{host}]" if ":" in host else host  # IPv6
    try:
        port = parts.port
    except ValueError:  # a malformed port: the client will say so; the id just leaves it out
        port = None
    if port and port != {"http": 80, "https": 443}.get(scheme):
        host += f":{port}"
    path = "/".join(seg for seg in parts.path.split("/") if seg)
    return f"{scheme}://{host}" + (f"/{path}" if path else "")


def openai_api_key(base_url: str | None = None, api_key: str | None = None) -> str:
    """The API key for an OpenAI-compatible endpoint: ``api_key``, else ``$OPENAI_API_KEY``. OpenAI's
    own URL (the default) needs one (a :class:`~kgqa_lib.errors.SetupError` saying what to set);
    any other server (vLLM, Ollama, llama.cpp) gets a placeholder."""
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if key:
        return key
    url = base_url or os.environ.get("KGQA_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL
    if endpoint_id(url) != endpoint_id(OPENAI_DEFAULT_BASE_URL):
        return "not-needed"
    raise SetupError("No OpenAI API key: set OPENAI_API_KEY, or set KGQA_LLM_BASE_URL to a local "
                     "OpenAI-compatible server (vLLM, Ollama, llama.cpp), or use the embedded model (LLM='local').")


def openai_model_id(model: str, base_url: str | None = None) -> str:
    """The model id of an OpenAI-compatible backend: ``openai:MODEL`` for OpenAI itself (no base URL,
    or ``https://api.openai.com/v1``: the id recordings made before endpoints were part of the id
    carry), else ``openai:MODEL@<endpoint_id>``, so the same model name served by two servers never
    shares cached answers. ``base_url`` falls back to ``$OPENAI_BASE_URL`` as the ``openai`` client does."""
    url = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL
    ep = endpoint_id(url)
    return f"openai:{model}" if ep == endpoint_id(OPENAI_DEFAULT_BASE_URL) else f"openai:{model}@{ep}"


def _without_secret(exc: BaseException, secret: str | None) -> LLMEndpointError | None:
    """``None`` when nothing about ``exc`` (message, repr, body, causes) mentions ``secret``; else
    an :class:`LLMEndpointError` carrying the message with the secret replaced."""
    if not secret or secret == "not-needed":
        return None
    chain, e = [], exc
    while e is not None and len(chain) < 10:
        chain.append(e)
        e = e.__cause__ or e.__context__
    if not any(secret in text for e in chain for text in (str(e), repr(e), str(getattr(e, "body", "")))):
        return None
    message = f"{type(exc).__name__}: {exc}".replace(secret, "<redacted API key>")
    return LLMEndpointError(message, getattr(exc, "status_code", None))


# --------------------------------------------------------------------------------------------
# The chat interface
# --------------------------------------------------------------------------------------------
Messages = Sequence[dict[str, str]] | Sequence[tuple[str, str]] | str


def _as_messages(messages: Messages, system: str | None) -> tuple[tuple[str, str], ...]:
    if isinstance(messages, str):
        out = [("user", messages)]
    else:
        out = [(m["role"], m["content"]) if isinstance(m, dict) else (m[0], m[1]) for m in messages]
    if system is not None:
        out.insert(0, ("system", system))
    return tuple(out)


def _log_usage(path: str, model_id: str, r: ChatResult) -> None:
    """One JSON line per call (``kgqa reproduce`` sets ``KGQA_USAGE_LOG`` to count cache hits and
    live calls inside notebook kernels). Counts only: no prompt, no answer, no key."""
    line = json.dumps({"model": model_id, "cache_hit": r.cache_hit, "prompt_tokens": r.prompt_tokens,
                       "completion_tokens": r.completion_tokens, "seconds": round(r.seconds, 4)}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@dataclass
class LLM:
    """``llm.chat(messages)`` → :class:`ChatResult`, cached according to ``mode``.

    ``max_reply_chars`` (default :func:`default_max_reply_chars`: ``$KGQA_LLM_MAX_REPLY_CHARS``, else
    65,536): a longer reply (a server that ignores ``max_tokens``, a model repeating itself) is cut
    there before it is cached, transcribed, recorded or parsed, with ``finish_reason`` "truncated",
    counted in :class:`Usage` (``truncated``, in each run record's ``llm``)."""

    backend: Any  # Backend, or None for a replay-only LLM
    model_id: str
    cache: LLMCache
    mode: str = "auto"
    default_max_tokens: int = 512
    usage: Usage = field(default_factory=Usage)
    max_reply_chars: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"LLM mode must be one of {MODES}, got {self.mode!r}")
        if self.max_reply_chars is None:
            self.max_reply_chars = default_max_reply_chars()
        elif int(self.max_reply_chars) < 1:
            raise UsageError(f"max_reply_chars expects a whole number ≥ 1, got {self.max_reply_chars!r}")
        self._usage_lock = threading.Lock()

    @property
    def engine(self) -> str:
        """How the model is served (run records keep it beside the model id; not part of cache keys)."""
        return getattr(self.backend, "engine", None) or ("recorded answers only (replay)" if self.backend is None
                                                         else type(self.backend).__name__)

    def request(self, messages: Messages, *, system: str | None = None, temperature: float = 0.0,
                top_p: float = 1.0, max_tokens: int | None = None, stop: Iterable[str] = (),
                seed: int = 0, sample_index: int = 0) -> ChatRequest:
        return ChatRequest(
            model_id=self.model_id, messages=_as_messages(messages, system), temperature=float(temperature),
            top_p=float(top_p), max_tokens=int(max_tokens or self.default_max_tokens), stop=tuple(stop),
            seed=int(seed), sample_index=int(sample_index),
        )

    def chat(self, messages: Messages, **kwargs: Any) -> ChatResult:
        return self.run(self.request(messages, **kwargs))

    def run(self, request: ChatRequest) -> ChatResult:
        started = time.perf_counter()
        result = self._recorded(request, started)
        if result is None:
            response = self.backend.complete(request)
            result = self._store(request, response, round(time.perf_counter() - started, 3))
        return self._count(result)

    def _recorded(self, request: ChatRequest, started: float) -> ChatResult | None:
        """The cached answer (not counted yet), or None when the backend must answer; a
        :class:`ReplayMiss` when it cannot."""
        key = request.key
        cached = self.cache.get(key) if self.mode != "live" else None
        if cached is not None:
            if self.mode != "replay":  # recording: make sure the committed transcript holds this answer
                self.cache.ensure_transcribed(key)
            text, finish = self._capped(cached["text"], cached["finish_reason"])  # (one stored before the cap)
            return ChatResult(text, cached["prompt_tokens"], cached["completion_tokens"],
                              finish, time.perf_counter() - started, cached["seconds"], True, key)
        if self.mode == "replay" or self.backend is None:
            raise ReplayMiss(_replay_miss_message(request, self.mode),
                             summary=f"no recorded response of {request.model_id} (key {key[:16]}…, "
                                     f"prompt ends {request.preview(40)!r})")
        return None

    def _store(self, request: ChatRequest, response: dict[str, Any], seconds: float) -> ChatResult:
        """A live answer: capped, cached (and transcribed), as a result (not counted yet)."""
        response["seconds"] = seconds
        response["text"], response["finish_reason"] = self._capped(response["text"], response.get("finish_reason", ""))
        self.cache.put(request, response)
        return ChatResult(response["text"], response["prompt_tokens"], response["completion_tokens"],
                          response["finish_reason"], response["seconds"], response["seconds"], False, request.key)

    def _count(self, result: ChatResult) -> ChatResult:
        with self._usage_lock:
            self.usage.add(result)
            for scope in _SCOPES.get():
                scope.add(result)
        if os.environ.get("KGQA_USAGE_LOG"):
            _log_usage(os.environ["KGQA_USAGE_LOG"], self.model_id, result)
        return result

    @property
    def batches(self) -> bool:
        """Whether :meth:`run_many` hands its live requests to the backend together (the embedded model
        with ``batch`` ≥ 2: :meth:`LocalBackend.complete_many`)."""
        return bool(getattr(self.backend, "batches", False)) and hasattr(self.backend, "complete_many")

    def run_many(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        """Several requests, in order, with the results :meth:`run` gives them one after another.

        When the backend decodes together (:attr:`batches`), every recorded request is served from the
        cache and only the rest reach the backend, in one :meth:`~LocalBackend.complete_many` call; each of
        those is cached as soon as the call returns, with an equal share of its wall time as its seconds.
        Otherwise (every other backend, and replay) this is ``[self.run(r) for r in requests]``."""
        if not self.batches or self.mode == "replay":
            return [self.run(r) for r in requests]
        started = time.perf_counter()
        results: list[ChatResult | None] = [self._recorded(r, started) for r in requests]
        live = [i for i, r in enumerate(results) if r is None]
        if live:
            begun = time.perf_counter()
            responses = self.backend.complete_many([requests[i] for i in live])
            share = round((time.perf_counter() - begun) / len(live), 3)
            for i, response in zip(live, responses):
                results[i] = self._store(requests[i], response, share)
        return [self._count(r) for r in results]  # type: ignore[arg-type]

    def chat_many(self, messages: Messages, n: int, **kwargs: Any) -> list[ChatResult]:
        """``n`` samples of one prompt (sample indices 0..n-1; the other arguments as :meth:`chat`), through
        :meth:`run_many`."""
        if "sample_index" in kwargs:
            raise TypeError("chat_many numbers its samples itself (sample_index 0..n-1)")
        return self.run_many([self.request(messages, sample_index=i, **kwargs) for i in range(int(n))])

    def _capped(self, text: str, finish_reason: str) -> tuple[str, str]:
        """``(text, finish_reason)``, cut at ``max_reply_chars`` (finish_reason "truncated") when longer."""
        if len(text) <= self.max_reply_chars:
            return text, finish_reason
        return text[:self.max_reply_chars], TRUNCATED

    def map(self, requests: Sequence[ChatRequest], workers: int = 4) -> list[ChatResult]:
        """Run requests concurrently (bounded pool; the local backend serialises internally)."""
        if workers <= 1 or len(requests) <= 1:
            return [self.run(r) for r in requests]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(contextvars.copy_context().run, self.run, r) for r in requests]
            return [f.result() for f in futures]


def _replay_miss_message(request: ChatRequest, mode: str) -> str:
    where = ""
    try:  # name the notebook cell when we run inside a kernel
        from IPython import get_ipython

        ip = get_ipython()
        if ip is not None:
            where = f" (in notebook cell [{ip.execution_count}])"
    except Exception:
        pass
    reason = "replay mode" if mode == "replay" else "no backend configured"
    return (
        f"No recorded LLM response for key {request.key[:16]}…{where}: {reason}.\n"
        f"  model={request.model_id} temperature={request.temperature} sample_index={request.sample_index}\n"
        f"  prompt ends: {request.preview()!r}\n"
        "To record it, run again with LLM_MODE='auto' (notebook parameter), `--llm-mode auto` (kgqa CLI) "
        "or KGQA_LLM_MODE=auto: the call then goes to the live model and is appended to "
        "data/llm_cache/<model>.jsonl; commit that file to make the run replayable."
    )


def chat_samples(llm: Any, messages: Messages, n: int, **kwargs: Any) -> list[ChatResult]:
    """``n`` samples of one prompt (sample indices 0..n-1) from ``llm``: :meth:`LLM.chat_many` when its class
    has one (the embedded model with ``batch`` decodes them together), else one ``llm.chat`` per sample (a
    wrapper that records calls, a test double). What self-consistency and KB-BINDER sample through."""
    if callable(getattr(type(llm), "chat_many", None)):
        return llm.chat_many(messages, n, **kwargs)
    return [llm.chat(messages, sample_index=i, **kwargs) for i in range(int(n))]


def resolve_mode(mode: str | None = None) -> str:
    """An explicit mode wins; ``None`` means ``$KGQA_LLM_MODE``, else ``auto``."""
    mode = mode or os.environ.get("KGQA_LLM_MODE") or "auto"
    if mode not in MODES:
        raise UsageError(f"LLM mode must be one of {MODES}, got {mode!r} (from --llm-mode, LLM_MODE or $KGQA_LLM_MODE)")
    return mode


def check_llm(name: str | None = None, mode: str | None = None, *, base_url: str | None = None,
              api_key: str | None = None) -> None:
    """Raise what :func:`make_llm` would for an unknown name or mode, or a missing API key, before any
    cache is opened (``kgqa run`` calls it first, so a bad command writes nothing)."""
    name = name or os.environ.get("KGQA_LLM") or "local"
    mode = resolve_mode(mode)
    name, _ = split_llm_name(name)  # unknown options are errors
    kind, _, model = name.partition(":")
    if kind == "local":
        from . import models

        try:
            models.get_spec(model or "default")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    elif kind == "openai":
        model, url = split_endpoint(model)
        if url is not None and not url.startswith(("http://", "https://")):
            raise UsageError(f"the endpoint in the LLM name {name!r} is not an http(s) URL: write "
                             "openai:MODEL@http://host:port/v1")
        if mode != "replay":  # replay needs no key
            openai_api_key(url or base_url, api_key)
    elif kind == "server":  # the embedded model behind a managed llama-server (kgqa_lib.llm.server)
        from .server import check_name

        check_name(model, mode)
    else:
        raise UsageError(f"Unknown LLM {name!r}: use 'local', 'local:<model>', 'openai:<model>' or "
                         "'openai:<model>@http://host:port/v1', or 'server[:<model>]' (a managed llama-server)")


def split_endpoint(model: str) -> tuple[str, str | None]:
    """``"NAME@http://host:8000/v1"`` → ``("NAME", "http://host:8000/v1")``; no ``@``: ``(model, None)``."""
    head, sep, url = model.partition("@")
    return (head, url) if sep else (model, None)


def llm_model_id(name: str | None = None, *, base_url: str | None = None) -> str:
    """The model id an LLM name resolves to, without loading or calling anything: ``local`` →
    ``qwen2.5-coder-1.5b-instruct-q4_k_m``, ``openai:m@http://h:8000/v1`` → ``openai:m@http://h:8000/v1``.
    (Options after ``?`` never change it, except a ``batch_rows`` whose answers differ: :func:`local_model_id`.)"""
    name = name or os.environ.get("KGQA_LLM") or "local"
    check_llm(name, "replay", base_url=base_url)
    base, options = split_llm_name(name)
    kind, _, model = base.partition(":")
    if kind in ("local", "server"):
        from . import models

        model_id = models.get_spec(model or "default").model_id
        if kind == "server":  # the same weights under another engine: their own answers and records
            from .server import served_id

            return served_id(model_id)
        return local_model_id(model_id, options.get("batch"), options.get("batch_rows"))
    model, url = split_endpoint(model or os.environ.get("KGQA_LLM_MODEL") or "gpt-4o-mini")
    return openai_model_id(model, url or base_url or os.environ.get("KGQA_LLM_BASE_URL"))


def model_slug(model_id: str) -> str:
    """A folder name for a model id (:func:`_slug`)."""
    return _slug(model_id)


def make_llm(name: str | None = None, mode: str | None = None, *, cache: LLMCache | None = None,
             base_url: str | None = None, api_key: str | None = None, timeout: float | None = None,
             max_reply_chars: int | None = None, **backend_kwargs: Any) -> LLM:
    """Build an :class:`LLM` from a short name.

    * ``"local"`` (default) / ``"local:qwen2.5-coder-1.5b"`` / ``"local:qwen2.5-0.5b"`` — embedded model;
    * ``"server"`` / ``"server:qwen2.5-0.5b?slots=2"`` — the embedded model served by a llama-server this
      process starts and stops (:mod:`kgqa_lib.llm.server`); its id is the model's with ``@llama-server``;
    * ``"openai:MODEL"`` (or ``"openai"`` with ``$KGQA_LLM_MODEL``) — an OpenAI-compatible endpoint at
      ``base_url`` / ``$KGQA_LLM_BASE_URL`` (OpenAI itself when unset). Its model id names the
      endpoint (:func:`openai_model_id`: ``openai:MODEL@http://127.0.0.1:8000/v1``; plain
      ``openai:MODEL`` for OpenAI's own URL), so two servers never share cached answers. Answers
      recorded before the endpoint was part of the id are stored as ``openai:MODEL``: replay them
      with ``KGQA_LLM_BASE_URL`` unset (replay needs no server), or re-record them.

    ``timeout``: seconds one endpoint call may take in all, retries included (:class:`OpenAIBackend`;
    it wins over ``openai:MODEL?timeout=…``); the embedded model needs none (in-process, bounded by
    ``max_tokens``) and ignores it. ``max_reply_chars``: see :class:`LLM`.

    ``name=None`` reads ``$KGQA_LLM`` (default ``local``). The backend is created lazily: in replay
    mode nothing is loaded and no key is needed."""
    name = name or os.environ.get("KGQA_LLM") or "local"
    mode = resolve_mode(mode)
    check_llm(name, mode, base_url=base_url, api_key=api_key)  # before the cache is opened
    if timeout is not None:
        timeout = _option_seconds("the LLM timeout", timeout)
    cache = cache or LLMCache()
    name, options = split_llm_name(name)
    kind, _, model = name.partition(":")
    if kind == "local":
        options = {_LOCAL_ARGS[k]: v for k, v in options.items()}
        backend = LocalBackend(model or "default", **{**options, **backend_kwargs})
        return LLM(backend, backend.model_id, cache, mode, max_reply_chars=max_reply_chars)
    if kind == "server":  # the embedded model behind a managed llama-server (kgqa_lib.llm.server)
        from .server import ServerBackend

        if timeout is not None:
            options["timeout"] = timeout
        backend = ServerBackend(model or "default", **{**options, **backend_kwargs})
        return LLM(None if mode == "replay" else backend, backend.model_id, cache, mode, max_reply_chars=max_reply_chars)
    # "openai" (check_llm refused any other kind)
    model, url = split_endpoint(model or os.environ.get("KGQA_LLM_MODEL") or "gpt-4o-mini")
    base_url = url or base_url
    if mode == "replay":
        return LLM(None, openai_model_id(model, base_url or os.environ.get("KGQA_LLM_BASE_URL")), cache, mode,
                   max_reply_chars=max_reply_chars)
    if timeout is not None:
        options["timeout"] = timeout
    backend = OpenAIBackend(model, base_url=base_url, api_key=api_key, **{**options, **backend_kwargs})
    return LLM(backend, backend.model_id, cache, mode, max_reply_chars=max_reply_chars)
