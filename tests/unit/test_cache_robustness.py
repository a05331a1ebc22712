"""The SQLite caches under load and damage: two processes writing one LLM cache at once, and
garbage / truncated cache files (moved aside and rebuilt from the transcripts, with a warning, or
a clear CacheCorrupt error) — never a wrong answer."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

from kgqa_lib.embed.embedder import Embedder
from kgqa_lib.llm.chat import LLM, ChatRequest, LLMCache
from kgqa_lib._sqlite import CacheCorrupt, CacheRecoveredWarning
from kgqa_lib.errors import StorageError

N_PER_PROCESS = 200

WRITER = r"""
import os, sys, time
from kgqa_lib.llm.chat import ChatRequest, LLMCache
path, transcripts, tag, n, go = sys.argv[1:6]
while not os.path.exists(go):
    time.sleep(0.002)
cache = LLMCache(path, transcripts=transcripts)  # both open (create tables, switch to WAL) at once too
for i in range(int(n)):
    text = f"answer {tag} {i} " + "x" * (i * 997 % 20000)  # some lines far longer than an I/O buffer
    cache.put(ChatRequest("m", (("user", f"{tag}-{i}"),)), {"text": text, "prompt_tokens": 1, "completion_tokens": i})
"""


def _expected(tag: str, i: int) -> str:
    return f"answer {tag} {i} " + "x" * (i * 997 % 20000)


def test_two_processes_write_one_cache_at_once(tmp_path):
    path, tr, go = tmp_path / "c.sqlite", tmp_path / "tr", tmp_path / "go"
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(tr), tag, str(N_PER_PROCESS), str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for tag in ("a", "b")]
    time.sleep(1.0)  # both interpreters up and waiting
    t0 = time.perf_counter()
    go.touch()
    outs = [p.communicate(timeout=300) for p in procs]
    seconds = time.perf_counter() - t0
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "locked" not in err
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cache = LLMCache(path, transcripts=None)
    for tag in ("a", "b"):
        for i in range(N_PER_PROCESS):
            got = cache.get(ChatRequest("m", (("user", f"{tag}-{i}"),)).key)
            assert got is not None and got["text"] == _expected(tag, i) and got["completion_tokens"] == i
    lines = (tr / "m.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 * N_PER_PROCESS and all(json.loads(line)["key"] for line in lines)  # no interleaving
    rebuilt = LLM(None, "m", LLMCache(tmp_path / "fresh.sqlite", transcripts=tr), "replay")
    assert all(rebuilt.chat(f"{tag}-{i}").text == _expected(tag, i) for tag in "ab" for i in range(N_PER_PROCESS))
    print(f"\n2 processes x {N_PER_PROCESS} puts: {seconds:.2f} s, {2 * N_PER_PROCESS} rows readable, "
          f"{len(lines)} transcript lines")


class Echo:
    model_id = "echo"

    def complete(self, req):
        return {"text": f"reply to {req.messages[-1][1]} " + "y" * 3000, "prompt_tokens": 5, "completion_tokens": 7,
                "finish_reason": "stop"}


def _record(tmp_path, n=120):
    """A cache + transcripts with n answers; returns (cache path, transcripts, {prompt: text})."""
    path, tr = tmp_path / "llm_cache.sqlite", tmp_path / "tr"
    llm = LLM(Echo(), "echo", LLMCache(path, transcripts=tr), "auto")
    answers = {f"q{i}": llm.chat(f"q{i}").text for i in range(n)}
    llm.cache._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    llm.cache._conn().close()
    return path, tr, answers


def _replay_all(path, tr, answers):
    llm = LLM(None, "echo", LLMCache(path, transcripts=tr), "replay")
    for prompt, text in answers.items():
        assert llm.chat(prompt).text == text  # never a wrong answer


def test_garbage_cache_is_moved_aside_and_rebuilt(tmp_path):
    path, tr, answers = _record(tmp_path)
    path.write_bytes(b"\x00garbage, not SQLite\xff" * 500)
    with pytest.warns(CacheRecoveredWarning, match="damaged.*moved it to llm_cache.sqlite.corrupt-.*rebuilt"):
        _replay_all(path, tr, answers)
    aside = list(tmp_path.glob("llm_cache.sqlite.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"\x00garbage")  # kept, not deleted


def test_truncated_cache_is_moved_aside_and_rebuilt(tmp_path):
    path, tr, answers = _record(tmp_path)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size // 3)
    with pytest.warns(CacheRecoveredWarning, match="malformed"):
        _replay_all(path, tr, answers)
    assert list(tmp_path.glob("llm_cache.sqlite.corrupt-*"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _replay_all(path, tr, answers)  # the rebuilt file is healthy: no second warning


def test_damage_found_later_by_a_write_is_recovered_too(tmp_path):
    path, tr, answers = _record(tmp_path)
    cache = LLMCache(path, transcripts=tr)
    with open(path, "r+b") as f:  # damaged while open: every page after the first is lost
        f.truncate(4096)
    llm = LLM(Echo(), "echo", cache, "auto")
    with pytest.warns(CacheRecoveredWarning):
        for prompt, text in answers.items():
            assert llm.chat(prompt).text == text
        assert llm.chat("new question").text.startswith("reply to new question")


def test_without_recovery_the_error_names_the_file_and_the_fix(tmp_path):
    path, tr, _ = _record(tmp_path, n=3)
    path.write_bytes(b"garbage" * 1000)
    with pytest.raises(CacheCorrupt) as ei:
        LLMCache(path, transcripts=tr, recover=False)
    msg = str(ei.value)
    assert str(path) in msg and "delete it" in msg and "transcripts" in msg
    assert path.read_bytes().startswith(b"garbage")  # left alone


def test_a_locked_cache_is_not_mistaken_for_a_damaged_one(tmp_path):
    path, tr, answers = _record(tmp_path, n=3)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    cache = LLMCache(path, transcripts=None)
    cache._conn().execute("PRAGMA busy_timeout=200")
    with pytest.raises(StorageError, match="locked"):  # the machine's fault, not the question's (not moved aside)
        cache.put(ChatRequest("echo", (("user", "x"),)), {"text": "t", "prompt_tokens": 0, "completion_tokens": 0})
    blocker.execute("ROLLBACK")
    assert not list(tmp_path.glob("*.corrupt-*"))


def test_damaged_embedding_cache_is_moved_aside(tmp_path):
    path = tmp_path / "embeddings.sqlite"
    emb = Embedder(cache_path=path)
    vecs = np.eye(3, 4, dtype=np.float32)
    emb._store(["h1", "h2", "h3"], vecs)
    assert emb.cached_count() == 3
    emb.close()
    path.write_bytes(b"not a database" * 300)
    with pytest.raises(CacheCorrupt, match="embeddings.sqlite.*delete it"):
        Embedder(cache_path=path, recover=False)
    with pytest.warns(CacheRecoveredWarning, match="embedding cache"):
        emb = Embedder(cache_path=path)
    assert emb.cached_count() == 0  # vectors are re-encoded on demand, never read from garbage
    got = emb._store(["h1"], vecs[:1])
    assert np.array_equal(got["h1"], vecs[0])
    assert list(tmp_path.glob("embeddings.sqlite.corrupt-*"))


def _open_new_cache(path, go):
    import time as _time

    from kgqa_lib import _sqlite

    while not os.path.exists(go):
        _time.sleep(0.001)
    try:
        con = _sqlite.connect(path, timeout=30, isolation_level=None)
        con.execute("CREATE TABLE IF NOT EXISTS t (x)")
        con.execute("INSERT INTO t VALUES (1)")
        return ""
    except Exception as exc:  # noqa: BLE001 - reported to the test
        return str(exc)


def test_many_processes_opening_a_new_cache_at_once(tmp_path):
    """Switching a new file to WAL reports "database is locked" at once when another process does the
    same (measured without the retry: 18 of 240 openings failed); every opening must succeed."""
    import multiprocessing as mp

    failures = []
    ctx = mp.get_context("spawn")
    with ctx.Pool(6) as pool:
        for r in range(8):
            path, go = tmp_path / f"c{r}.sqlite", tmp_path / f"go{r}"
            res = pool.starmap_async(_open_new_cache, [(str(path), str(go))] * 6)
            time.sleep(0.2)
            go.touch()
            failures += [e for e in res.get(120) if e]
            assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM t").fetchone()[0] == 6
    assert not failures, failures


def test_run_recovering_recovers_once_then_names_the_file():
    """The one recovery rule both caches use: a damaged file is recovered once and the call re-run; a
    file still damaged after that is CacheCorrupt naming it; any other database error is not
    corruption and passes through without a recovery."""
    from kgqa_lib._sqlite import run_recovering

    damaged = sqlite3.DatabaseError("database disk image is malformed")
    calls, recovered = [], []

    def flaky(x):  # damaged on the first call only
        calls.append(x)
        if len(calls) == 1:
            raise damaged
        return x * 2

    assert run_recovering(flaky, (21,), recovered.append, "The test cache t.sqlite") == 42
    assert recovered == [damaged] and calls == [21, 21]

    def always_damaged():
        raise sqlite3.DatabaseError("file is not a database")

    recovered.clear()
    with pytest.raises(CacheCorrupt, match="The test cache t.sqlite is still damaged after a rebuild"):
        run_recovering(always_damaged, (), recovered.append, "The test cache t.sqlite")
    assert len(recovered) == 1

    def locked():
        raise sqlite3.OperationalError("database is locked")

    recovered.clear()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        run_recovering(locked, (), recovered.append, "The test cache t.sqlite")
    assert recovered == []
