"""Opening the project's SQLite caches (LLM answers, embeddings, SPARQL answers) the same way, and
recognising a damaged one (:func:`is_corrupt`, :func:`move_aside`, :class:`CacheCorrupt`) and recovering
from it once (:func:`run_recovering`).

The journal mode is ``$KGQA_SQLITE_JOURNAL`` (``wal``, the default, or ``delete`` / ``truncate`` /
``persist``). WAL is the fast choice on a local disk, but it needs shared memory between all
processes that open a file, which SQLite documents as broken on network file systems (NFS, SMB,
Lustre: a cluster's usual home folder). There, set ``KGQA_SQLITE_JOURNAL=delete`` *and* give
every shard its own cache folder (``KGQA_CACHE_DIR``): rollback journals rely on POSIX locks,
which some network file systems do not honour either; ``kgqa cache merge`` brings the shards'
answers back together."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable


JOURNAL_MODES = ("wal", "delete", "truncate", "persist")


def journal_mode() -> str:
    """``$KGQA_SQLITE_JOURNAL`` (lower-cased), default ``wal``; anything else is a one-line error."""
    mode = (os.environ.get("KGQA_SQLITE_JOURNAL") or "wal").strip().lower()
    if mode not in JOURNAL_MODES:
        from .errors import SetupError

        raise SetupError(f"KGQA_SQLITE_JOURNAL={mode!r} is not a journal mode we support: use one of "
                         f"{', '.join(JOURNAL_MODES)} (wal on a local disk, delete on a network file system)")
    return mode


def connect(path: str | Path, timeout: float = 30.0, **kwargs) -> sqlite3.Connection:
    """A connection with a busy timeout, the journal mode of :func:`journal_mode` (WAL unless
    ``$KGQA_SQLITE_JOURNAL`` says otherwise) and ``synchronous=NORMAL`` (``FULL`` without WAL,
    where NORMAL could lose the last transactions on a power cut).

    Switching a new database to WAL needs a moment of exclusive access, and SQLite reports
    "database is locked" at once (without waiting on the busy timeout) when another process is
    opening the same file at that instant; that step is retried for up to ``timeout`` seconds."""
    mode = journal_mode()
    con = sqlite3.connect(path, timeout=timeout, **kwargs)
    try:
        con.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            try:
                con.execute(f"PRAGMA journal_mode={mode.upper()}")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
        con.execute(f"PRAGMA synchronous={'NORMAL' if mode == 'wal' else 'FULL'}")
    except BaseException:
        con.close()
        raise
    return con


# --------------------------------------------------------------------------------------------
# A damaged cache file: recognised, moved aside (the LLM, embedding and SPARQL caches rebuild it)
# --------------------------------------------------------------------------------------------
class CacheCorrupt(RuntimeError):
    """A SQLite cache file is damaged (not a database, or a malformed/truncated page) and was not
    rebuilt. The message names the file and what to do."""


class CacheRecoveredWarning(RuntimeWarning):
    """A damaged SQLite cache was moved aside and rebuilt."""


def is_corrupt(exc: BaseException) -> bool:
    """SQLITE_CORRUPT (11: "database disk image is malformed") or SQLITE_NOTADB (26: "file is not a
    database"); a locked or read-only database is not corruption."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (11, 26)
    return "malformed" in str(exc) or "not a database" in str(exc)


def run_recovering(fn: Callable[..., Any], args: tuple, recover: Callable[[BaseException], None], what: str) -> Any:
    """``fn(*args)``; when it finds the cache file damaged (:func:`is_corrupt`), ``recover(exc)`` (which
    moves the file aside and opens a new one, or raises :class:`CacheCorrupt` when recovery is off) and
    run ``fn`` once more. Still damaged after that: :class:`CacheCorrupt` naming ``what`` (the file)."""
    try:
        return fn(*args)
    except sqlite3.DatabaseError as exc:
        if not is_corrupt(exc):
            raise
        recover(exc)
    try:
        return fn(*args)
    except sqlite3.DatabaseError as exc:
        if is_corrupt(exc):
            raise CacheCorrupt(f"{what} is still damaged after a rebuild ({exc}). Delete it and run again.") from exc
        raise


def move_aside(path: Path) -> Path:
    """``x.sqlite`` (and its ``-wal``/``-shm``) → ``x.sqlite.corrupt-<timestamp>``; returns the new name."""
    aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    for suffix in ("-wal", "-shm", ""):
        src = Path(str(path) + suffix)
        if src.exists():
            os.replace(src, Path(str(aside) + suffix))
    return aside
