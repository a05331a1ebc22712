"""`kgqa cache merge` takes from another SQLite cache only what it can trust, in one transaction, and
never moves aside a file the user named with --into.

- a foreign cache's entry with NULL fields, or whose key is not the hash of its request, is left out and
  counted (no traceback; nothing of it in the target);
- a source without the cache's columns, or damaged (SQLite's quick_check), is refused in one line (exit 2),
  the target unchanged;
- a merge that fails while transcribing leaves the target as it was (rows and pending list);
- --into a file that is not SQLite (or a folder) is refused (exit 2), the file left as it is."""

from __future__ import annotations

import json
import sqlite3

import pytest

from kgqa_lib.cli import main as kgqa
from kgqa_lib.llm.chat import ChatRequest, LLMCache

COLUMNS = ("key TEXT PRIMARY KEY, model_id TEXT, request TEXT, text TEXT, prompt_tokens INTEGER, "
           "completion_tokens INTEGER, finish_reason TEXT, seconds REAL")


def _req(i: int) -> ChatRequest:
    return ChatRequest("m", (("user", f"question {i}"),))


def _resp(i: int) -> dict:
    return {"text": f"answer {i}", "prompt_tokens": 3, "completion_tokens": 2, "finish_reason": "stop", "seconds": 0.1}


def _foreign(path, rows, pending=()):
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE responses ({COLUMNS})")
    con.execute("CREATE TABLE pending (key TEXT PRIMARY KEY)")
    con.executemany("INSERT INTO responses VALUES (?,?,?,?,?,?,?,?)", rows)
    con.executemany("INSERT INTO pending VALUES (?)", [(k,) for k in pending])
    con.commit()
    con.close()
    return path


def _keys(path) -> set[str]:
    con = sqlite3.connect(path)
    try:
        return {r[0] for r in con.execute("SELECT key FROM responses")}
    finally:
        con.close()


@pytest.fixture
def target(tmp_path):
    (tmp_path / "tr").mkdir()
    return tmp_path / "cache.sqlite", ["--into", str(tmp_path / "cache.sqlite"), "--transcripts", str(tmp_path / "tr")]


def test_untrusted_entries_of_a_foreign_cache_are_left_out(tmp_path, target, capsys):
    path, args = target
    good = _req(1)
    wrong_key = _req(2)
    rows = [("k2", None, "{}", None, None, None, None, None),  # NULL fields (and a key that is no hash)
            (wrong_key.key[::-1], "m", wrong_key.canonical(), "answer", 1, 1, "stop", 0.1),  # key of another request
            (good.key, "m", good.canonical(), "answer 1", 3, 2, "stop", 0.1),
            (_req(3).key, "m", _req(3).canonical(), "answer 3", "three", 2, "stop", 0.1)]  # tokens not a number
    src = _foreign(tmp_path / "bad.sqlite", rows, pending=["k2", good.key])
    assert kgqa(["cache", "merge", str(src), *args]) == 0
    out = capsys.readouterr().out
    assert "1 response(s) new to this cache" in out and "3 entries left out" in out
    assert _keys(path) == {good.key}
    lines = (tmp_path / "tr" / "m.jsonl").read_text().splitlines()
    assert [json.loads(x)["key"] for x in lines] == [good.key]


def test_a_source_without_the_cache_columns_is_refused(tmp_path, target, capsys):
    path, args = target
    con = sqlite3.connect(tmp_path / "other.sqlite")
    con.execute("CREATE TABLE responses (key TEXT, answer TEXT)")
    con.commit()
    con.close()
    assert kgqa(["cache", "merge", str(tmp_path / "other.sqlite"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not an LLM cache of this project" in err and "model_id" in err


def test_a_damaged_source_is_refused_and_the_target_unchanged(tmp_path, target, capsys):
    path, args = target
    LLMCache(path, transcripts=tmp_path / "tr").put(_req(0), _resp(0))
    src = LLMCache(tmp_path / "shard.sqlite", transcripts=None)
    for i in range(1, 400):
        src.put(_req(i), {**_resp(i), "text": f"answer {i} " + "x" * 200})
    src._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    src._conn().close()
    raw = bytearray((tmp_path / "shard.sqlite").read_bytes())
    page = 4096
    for p in range(2, len(raw) // page - 1, 3):  # scribble over every third page after the first ones
        raw[p * page + 8: p * page + 200] = b"\xff" * 192
    (tmp_path / "shard.sqlite").write_bytes(bytes(raw))
    assert kgqa(["cache", "merge", str(tmp_path / "shard.sqlite"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "shard.sqlite" in err and "nothing was merged" in err
    assert _keys(path) == {_req(0).key}


def test_a_merge_that_fails_midway_leaves_the_target_as_it_was(tmp_path, monkeypatch):
    home = LLMCache(tmp_path / "home.sqlite", transcripts=tmp_path / "tr")
    shard = LLMCache(tmp_path / "shard.sqlite", transcripts=tmp_path / "tr", defer=True)
    for i in range(3):
        shard.put(_req(i), _resp(i))
    calls = []

    def failing_append(self, *a, **k):
        calls.append(a)
        if len(calls) == 2:
            raise OSError(5, "Input/output error")
        return real(self, *a, **k)

    real = LLMCache._append
    monkeypatch.setattr(LLMCache, "_append", failing_append)
    with pytest.raises(Exception):
        home.merge([shard.path])
    monkeypatch.undo()
    assert _keys(home.path) == set()  # no row of the failed merge stayed
    home.merge([shard.path])  # the same merge then does it all (the line appended before the failure is
    assert _keys(home.path) == {_req(i).key for i in range(3)}  # a valid entry: read, not appended again)
    lines = (tmp_path / "tr" / "m.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["key"] for x in lines) == sorted(_req(i).key for i in range(3))


def test_into_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path, capsys):
    notes = tmp_path / "mynotes.txt"
    notes.write_text("my notes\n")
    (tmp_path / "tr").mkdir()
    assert kgqa(["cache", "merge", "--into", str(notes), "--transcripts", str(tmp_path / "tr")]) == 2
    assert "is not an SQLite file" in capsys.readouterr().err
    assert notes.read_text() == "my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mynotes.txt", "tr"]
    assert kgqa(["cache", "merge", "--into", str(tmp_path / "tr"), "--transcripts", str(tmp_path / "tr")]) == 2
    assert "is a folder" in capsys.readouterr().err
