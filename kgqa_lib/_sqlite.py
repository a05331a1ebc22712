"""Opening the project's SQLite caches (LLM answers, embeddings, SPARQL answers) the same way."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path


def connect(path: str | Path, timeout: float = 30.0, **kwargs) -> sqlite3.Connection:
    """A connection with a busy timeout, WAL journaling and ``synchronous=NORMAL``.

    Switching a new database to WAL needs a moment of exclusive access, and SQLite reports
    "database is locked" at once (without waiting on the busy timeout) when another process is
    opening the same file at that instant; that step is retried for up to ``timeout`` seconds."""
    con = sqlite3.connect(path, timeout=timeout, **kwargs)
    try:
        con.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            try:
                con.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
        con.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        con.close()
        raise
    return con
