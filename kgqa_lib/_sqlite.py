"""Opening the project's SQLite caches (LLM answers, embeddings, SPARQL answers) the same way, and
recognising a damaged one (:func:`is_corrupt`, :func:`move_aside`, :class:`CacheCorrupt`) and recovering
from it once (:func:`run_recovering`). Every other failure of the machine's own files (a full disk, a
lock held too long, a read-only file, an I/O error) is recognised here too (:func:`storage_failure`)
and raised as a :class:`~kgqa_lib.errors.StorageError` (:func:`guarded`): the run stops, never
scoring it as a question's answer.

The journal mode is ``$KGQA_SQLITE_JOURNAL`` (``wal``, the default, or ``delete`` / ``truncate`` /
``persist``). WAL is the fast choice on a local disk, but it needs shared memory between all
processes that open a file, which SQLite documents as broken on network file systems (NFS, SMB,
Lustre: a cluster's usual home folder). There, set ``KGQA_SQLITE_JOURNAL=delete`` *and* give
every shard its own cache folder (``KGQA_CACHE_DIR``): rollback journals rely on POSIX locks,
which some network file systems do not honour either; ``kgqa cache merge`` brings the shards'
answers back together."""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable

from .errors import StorageError


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
class CacheCorrupt(StorageError):
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


# --------------------------------------------------------------------------------------------
# Any other failure of the machine's own files: one line saying what to do, and the run stops
# --------------------------------------------------------------------------------------------
# SQLite's primary result codes (https://sqlite.org/rescode.html) and the errnos of the same faults
_SQLITE_KINDS = {13: "full", 5: "locked", 6: "locked", 15: "locked", 8: "read-only", 3: "read-only",
                 14: "read-only", 10: "I/O"}
_ERRNO_KINDS = {errno.ENOSPC: "full", errno.EDQUOT: "full", errno.EROFS: "read-only", errno.EACCES: "read-only",
                errno.EPERM: "read-only", errno.EIO: "I/O"}
_SQLITE_TEXTS = (("disk is full", "full"), ("locked", "locked"), ("readonly", "read-only"),
                 ("unable to open", "read-only"), ("disk I/O error", "I/O"))


def _kind(exc: BaseException) -> str | None:
    if isinstance(exc, sqlite3.DatabaseError):
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None:
            return _SQLITE_KINDS.get(code & 0xFF)
        return next((kind for text, kind in _SQLITE_TEXTS if text in str(exc)), None)
    if isinstance(exc, OSError):
        return _ERRNO_KINDS.get(exc.errno)
    return None


def storage_failure(exc: BaseException, what: str, elsewhere: str = "set KGQA_CACHE_DIR to a folder on another disk",
                    ) -> StorageError | None:
    """``exc`` as a :class:`~kgqa_lib.errors.StorageError` when it says that ``what`` (a file of this
    machine: "the LLM cache /…/llm_cache.sqlite") cannot be used — SQLite's "database or disk is
    full", "database is locked" (after the busy timeout), "attempt to write a readonly database",
    "unable to open database file", "disk I/O error", a damaged file (:func:`is_corrupt`), or an
    ``OSError`` ENOSPC / EDQUOT / EROFS / EACCES / EPERM / EIO; None for anything else (an SQL error
    is a bug, not the machine). The message is one line naming the file, the fault and the fix;
    ``elsewhere`` is the other place to put the file."""
    what = what[:1].lower() + what[1:]
    if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in what:
        what = f"{what} ({exc.filename})"
    reason = (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)).strip() or type(exc).__name__
    if is_corrupt(exc):
        return CacheCorrupt(f"{what} is damaged ({reason}): delete it (and its -wal/-shm files) and run again; it only "
                            "speeds things up and is rebuilt")
    kind = _kind(exc)
    if kind is None:
        return None
    fix = {"full": f"free space on its disk (or raise the quota), or {elsewhere}",
           "locked": "another process held it locked beyond the busy timeout: wait for it to finish, or give each run "
                     "its own KGQA_CACHE_DIR (`kgqa cache merge` joins them); on a network file system set "
                     "KGQA_SQLITE_JOURNAL=delete",
           "read-only": f"make it and its folder writable, or {elsewhere}",
           "I/O": f"check the disk, or {elsewhere}"}[kind]
    out = StorageError(f"{what} cannot be used ({reason}): {fix}")
    out.__cause__ = exc
    return out


def guarded(fn: Callable[..., Any], args: tuple, what: str, recover: Callable[[BaseException], None] | None = None,
            elsewhere: str = "set KGQA_CACHE_DIR to a folder on another disk") -> Any:
    """``fn(*args)`` on a cache: a damaged file is recovered once (:func:`run_recovering`, when
    ``recover`` is given); what :func:`storage_failure` recognises is raised as a
    :class:`~kgqa_lib.errors.StorageError` (:class:`CacheCorrupt` for a file still damaged)."""
    try:
        return run_recovering(fn, args, recover, what) if recover is not None else fn(*args)
    except StorageError:
        raise
    except (sqlite3.DatabaseError, OSError) as exc:
        failed = storage_failure(exc, what, elsewhere)
        if failed is None:
            raise
        raise failed from exc
