"""Faults of this machine's own files and of the command's KG URL.

* The SQLite caches (LLM answers, embeddings, SPARQL answers), the transcripts and the run file
  failing — full, locked by another process, read-only, damaged — are infrastructure failures: no
  record, the run stops at once with one line saying what to do (the CLI exits 3), and the same
  command answers every question once the fault is gone. Each fault is the real one where this
  machine can make it: SQLite's own "database or disk is full" (``PRAGMA max_page_count``), a second
  connection holding the write lock, ENOSPC from ``/dev/full``, a truncated file; a read-only file is
  SQLite's own "attempt to write a readonly database" (``PRAGMA query_only``: tests run as root,
  which file modes do not stop).
* A reply longer than the LLM's ``max_reply_chars`` is cut before it is cached, transcribed or
  recorded, and the record counts it.
* A bad KG URL (scheme, host, option values, ``workers=0``) is one line and exit 2 before any
  question is asked.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from kgqa_lib import cli
from kgqa_lib.data.datasets import Dataset, Question
from kgqa_lib import errors
from kgqa_lib.evaluate.runner import RunIncomplete, read_records, run
from kgqa_lib.llm.chat import LLM, LLMCache, _slug, make_llm, track_usage
from kgqa_lib.methods import Context, MethodResult, register_method


class Counting:
    """A stand-in backend: answers '{<last word>}' and a few KB of reasoning (each answer needs new
    pages of the cache file), or ``reply``; counts its calls."""

    def __init__(self, reply: str | None = None) -> None:
        self.calls, self.reply = 0, reply

    model_id = "faults-stand-in"

    def complete(self, req):
        self.calls += 1
        text = self.reply if self.reply is not None else "{" + req.messages[-1][1].split()[-1] + "}" + " because" * 1000
        return {"text": text, "prompt_tokens": 3, "completion_tokens": 2, "finish_reason": "stop"}


@register_method("_faults_echo")
def _echo(q, ctx):
    r = ctx.llm.chat(q.question)
    return MethodResult([r.text[r.text.index("{") + 1:r.text.index("}")]], r.text)


def _ds(n=5):
    return Dataset("faults", [Question(f"q{i}", f"say w{i}", [f"w{i}"]) for i in range(n)])


def _llm(tmp_path, backend=None, **cache_kwargs):
    cache = LLMCache(tmp_path / "llm_cache.sqlite", **{"transcripts": None, **cache_kwargs})
    return LLM(backend or Counting(), "faults-stand-in", cache, "auto")


def _assert_stopped(exc: RunIncomplete, out, *says: str) -> str:
    msg = str(exc)
    assert read_records(out) == [], "a failure of the machine's own files was recorded as an answer"
    assert "\n" not in msg and msg.startswith("5 questions not answered (stopped at the first failure"), msg
    assert msg.endswith("re-run the same command to retry them"), msg
    for text in says:
        assert text in msg, (text, msg)
    assert isinstance(exc.__cause__, errors.StorageError) and isinstance(exc.__cause__, errors.InfrastructureError)
    return msg


def _resume_answers_all(tmp_path, out, **cache_kwargs):
    backend = Counting()
    recs = run("_faults_echo", _ds(), Context(_llm(tmp_path, backend, **cache_kwargs)), out, progress=False)
    assert [r["qid"] for r in recs] == [f"q{i}" for i in range(5)] and all(r["error"] is None for r in recs)
    assert all(r["metrics"]["hits@1"] == 1.0 for r in recs)
    return backend


# ------------------------------------------------------------------------------------------ the LLM cache
def test_a_full_llm_cache_stops_the_run_and_resume_answers(tmp_path):
    llm = _llm(tmp_path)
    con = llm.cache._conn()  # this thread's connection: the one the run uses (workers=1)
    con.execute(f"PRAGMA max_page_count={con.execute('PRAGMA page_count').fetchone()[0]}")  # no page can be added
    out = tmp_path / "run.jsonl"
    with pytest.raises(RunIncomplete) as ei:
        run("_faults_echo", _ds(), Context(llm), out, progress=False)
    msg = _assert_stopped(ei.value, out, "the LLM cache", "llm_cache.sqlite", "database or disk is full",
                          "free space on its disk", "KGQA_CACHE_DIR")
    assert llm.backend.calls == 1, "the run went on after the cache was found full"
    assert not list(tmp_path.glob("*.corrupt-*")), msg  # a full file is not a damaged one
    _resume_answers_all(tmp_path, out)


def test_a_locked_llm_cache_stops_the_run_and_resume_answers(tmp_path):
    llm = _llm(tmp_path)
    llm.cache._conn().execute("PRAGMA busy_timeout=200")  # the real one waits 30 s
    blocker = sqlite3.connect(tmp_path / "llm_cache.sqlite", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # another process writing, for longer than the busy timeout
    out = tmp_path / "run.jsonl"
    try:
        with pytest.raises(RunIncomplete) as ei:
            run("_faults_echo", _ds(), Context(llm), out, progress=False)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    _assert_stopped(ei.value, out, "database is locked", "another process held it locked", "KGQA_CACHE_DIR")
    assert not list(tmp_path.glob("*.corrupt-*"))
    _resume_answers_all(tmp_path, out)


def test_a_read_only_llm_cache_stops_the_run_and_resume_answers(tmp_path):
    llm = _llm(tmp_path)
    llm.cache._conn().execute("PRAGMA query_only=ON")  # SQLite's own SQLITE_READONLY on every write
    out = tmp_path / "run.jsonl"
    with pytest.raises(RunIncomplete) as ei:
        run("_faults_echo", _ds(), Context(llm), out, progress=False)
    _assert_stopped(ei.value, out, "readonly database", "make it and its folder writable")
    _resume_answers_all(tmp_path, out)


def test_a_full_disk_under_the_transcripts_stops_the_run(tmp_path):
    tr = tmp_path / "tr"
    llm = _llm(tmp_path, transcripts=tr)
    tr.mkdir(exist_ok=True)
    transcript = tr / f"{_slug('faults-stand-in')}.jsonl"
    transcript.symlink_to("/dev/full")  # after the cache imported the folder: every write is ENOSPC
    out = tmp_path / "run.jsonl"
    try:
        with pytest.raises(RunIncomplete) as ei:
            run("_faults_echo", _ds(), Context(llm), out, progress=False)
    finally:
        transcript.unlink()
    _assert_stopped(ei.value, out, f"the transcript {transcript} cannot be used (No space left on device)",
                    "free space", "--no-transcripts")
    _resume_answers_all(tmp_path, out, transcripts=tr)
    assert len(transcript.read_text().splitlines()) == 5  # every answer transcribed on the resume


def test_a_llm_cache_damaged_for_good_stops_the_run(tmp_path):
    first = _llm(tmp_path)
    first.chat("say hello")
    first.cache._conn().close()  # the last connection: its pages are checkpointed into the file
    llm = _llm(tmp_path, recover=False)
    with open(tmp_path / "llm_cache.sqlite", "r+b") as f:  # damaged while open: every page after the first lost
        f.truncate(4096)
    out = tmp_path / "run.jsonl"
    with pytest.raises(RunIncomplete) as ei:
        run("_faults_echo", _ds(), Context(llm), out, progress=False)
    _assert_stopped(ei.value, out, "damaged", "delete it")


# ------------------------------------------------------------------------- the other caches, the run file
def test_a_full_embedding_cache_is_a_storage_error(tmp_path):
    from kgqa_lib.embed.embedder import Embedder

    emb = Embedder(cache_path=tmp_path / "embeddings.sqlite")
    emb._con.execute(f"PRAGMA max_page_count={emb._con.execute('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(errors.StorageError, match=r"the embedding cache .*embeddings.sqlite cannot be used \(database or disk "
                                           r"is full\): free space"):
        emb._store([f"h{i}" for i in range(50)], np.ones((50, 384), dtype=np.float32))
    emb.close()


def test_a_damaged_or_locked_sparql_cache_is_a_storage_error(tmp_path):
    from kgqa_lib.kg.remote import QueryCache

    bad = tmp_path / "sparql_cache.sqlite"
    bad.write_bytes(b"not a database" * 400)
    with pytest.raises(errors.StorageError, match=r"the SPARQL cache .*sparql_cache.sqlite is damaged.*delete it"):
        QueryCache(bad)
    good = QueryCache(tmp_path / "ok.sqlite")
    good._conn().execute("PRAGMA busy_timeout=100")
    blocker = sqlite3.connect(tmp_path / "ok.sqlite", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(errors.StorageError, match="database is locked"):
            good.put("k", "http://127.0.0.1:9/q", "ASK {}", "{}", 0.1)
    finally:
        blocker.execute("ROLLBACK")


def test_a_run_file_on_a_full_disk_stops_the_run_and_resume_answers(tmp_path):
    out = tmp_path / "run.jsonl"

    @register_method("_faults_disk_fills")
    def _m(q, ctx):
        if q.qid == "q0" and not out.exists():
            out.symlink_to("/dev/full")  # the disk fills while the first question runs
        return _echo(q, ctx)

    with pytest.raises(RunIncomplete) as ei:
        try:
            run("_faults_disk_fills", _ds(), Context(_llm(tmp_path)), out, progress=False)
        finally:
            out.unlink()
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith("5 questions not answered (stopped at the first failure"), msg
    assert f"the run file {out}" in msg and "No space left on device" in msg and "(--out)" in msg, msg
    _resume_answers_all(tmp_path, out)


def test_kgqa_run_with_a_full_cache_exits_3_with_one_line(tmp_path, monkeypatch, capsys):
    from kgqa_lib.llm import chat
    from kgqa_lib.servers import FakeChatServer

    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    real = chat.make_llm

    def full(*args, **kwargs):  # the cache's disk is full from the start
        llm = real(*args, **kwargs)
        con = llm.cache._conn()
        con.execute(f"PRAGMA max_page_count={con.execute('PRAGMA page_count').fetchone()[0]}")
        return llm

    out = tmp_path / "io.jsonl"
    with FakeChatServer(reply=lambda m: "Answer: {x} " + "because " * 1000) as srv:
        argv = ["run", "--method", "io", "--dataset", "tiny:films", "--limit", "3", "--llm",
                f"openai:fake@{srv.base_url}", "--llm-mode", "auto", "--no-transcripts", "--quiet", "--out", str(out)]
        monkeypatch.setattr(chat, "make_llm", full)
        assert cli.main(argv) == 3
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: 3 questions not answered (stopped at the first"), err
        assert "database or disk is full" in err[0] and "re-run the same command" in err[0], err
        assert read_records(out) == [] and srv.requests == 1
        monkeypatch.setattr(chat, "make_llm", real)
        assert cli.main(argv) == 0
    assert len(read_records(out)) == 3 and all(r["error"] is None for r in read_records(out))


def test_kgqa_run_whose_cache_cannot_be_opened_exits_3_with_one_line(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    (cache / "llm_cache.sqlite").mkdir(parents=True)  # SQLite cannot open a folder as its file
    monkeypatch.setenv("KGQA_CACHE_DIR", str(cache))
    code = cli.main(["run", "--method", "io", "--dataset", "tiny:films", "--llm-mode", "replay", "--quiet",
                     "--out", str(tmp_path / "r.jsonl")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1, err
    assert err[0].startswith("error: the LLM cache ") and "unable to open database file" in err[0], err
    assert not (tmp_path / "r.jsonl").exists()


# ------------------------------------------------------------------------------------ long replies
def test_a_reply_over_the_cap_is_cut_before_cache_transcript_and_record(tmp_path):
    big = "Answer: {w0} " + "x" * 1_000_000
    backend = Counting(reply=big)
    tr = tmp_path / "tr"
    llm = LLM(backend, "faults-stand-in", LLMCache(tmp_path / "c.sqlite", transcripts=tr), "auto", max_reply_chars=2000)
    with track_usage() as usage:
        r = llm.chat("say w0")
    assert r.text == big[:2000] and r.finish_reason == "truncated" and usage.truncated == 1
    assert usage.as_dict()["truncated"] == 1
    (line,) = (tr / f"{_slug('faults-stand-in')}.jsonl").read_text().splitlines()
    assert len(line) < 3000, "a huge line was written into the transcript"
    again = llm.chat("say w0")  # from the cache: as cut, and still counted as cut
    assert again.cache_hit and again.text == big[:2000] and again.finish_reason == "truncated"
    assert backend.calls == 1
    out = tmp_path / "run.jsonl"
    llm2 = LLM(Counting(reply=big), "faults-stand-in", LLMCache(tmp_path / "c2.sqlite", transcripts=None), "auto",
               max_reply_chars=2000)
    (rec,) = run("_faults_echo", _ds(1), Context(llm2), out, progress=False)
    assert rec["llm"]["truncated"] == 1 and len(rec["response"]) == 2000 and rec["prediction"] == ["w0"]
    assert out.stat().st_size < 20_000
    small = run("_faults_echo", _ds(2), Context(_llm(tmp_path)), tmp_path / "small.jsonl", progress=False)
    assert "truncated" not in small[0]["llm"]  # records without a cut reply keep their old shape


def test_the_reply_cap_defaults_to_64k_and_reads_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("KGQA_LLM_MAX_REPLY_CHARS", raising=False)
    assert _llm(tmp_path).max_reply_chars == 65536
    monkeypatch.setenv("KGQA_LLM_MAX_REPLY_CHARS", "100")
    llm = make_llm("local", "replay", cache=LLMCache(tmp_path / "c3.sqlite", transcripts=None))
    assert llm.max_reply_chars == 100
    monkeypatch.setenv("KGQA_LLM_MAX_REPLY_CHARS", "lots")
    with pytest.raises(errors.UsageError, match="KGQA_LLM_MAX_REPLY_CHARS"):
        _llm(tmp_path)


# ------------------------------------------------------------------------------------- bad KG URLs
KG_CASES = [
    ("bad-scheme", "sparql+htp:/x#profile=tiny", "needs an http(s) endpoint with a host"),
    ("negative-timeout", "sparql+http://127.0.0.1:9/q#profile=tiny&fanout=-1&timeout=-5", "expects"),
    ("timeout-not-a-number", "sparql+http://127.0.0.1:9/q#profile=tiny&timeout=abc",
     "timeout='abc'"),
    ("negative-workers", "sparql+http://127.0.0.1:9/q#profile=tiny&workers=-1", "workers='-1'"),
    ("bad-ipv6", "sparql+http://[::1/x#profile=tiny", "is not a URL (Invalid IPv6 URL)"),
    ("bad-port", "sparql+http://127.0.0.1:port/q#profile=tiny", "is not a URL"),
    ("unknown-engine", "sparql+http://127.0.0.1:9/q#profile=tiny&engine=blazing", "unknown engine 'blazing'"),
    ("unknown-profile", "sparql+http://127.0.0.1:9/q#profile=wikipedia", "unknown KG profile 'wikipedia'"),
]


@pytest.mark.parametrize("name,kg,says", KG_CASES, ids=[c[0] for c in KG_CASES])
def test_a_bad_kg_url_is_one_line_exit_2_before_any_question(name, kg, says, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "qsm.jsonl"
    code = cli.main(["run", "--method", "qsm", "--dataset", "tiny:films", "--limit", "2", "--kg", kg,
                     "--llm-mode", "replay", "--quiet", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and says in err[0], err
    assert not out.exists() and not (tmp_path / "cache").exists(), "something was written before the check"


def test_workers_0_in_a_kg_url_is_refused_at_once(tmp_path):
    """``BoundedSemaphore(0)``: the first query used to wait forever."""
    env = {**os.environ, "KGQA_CACHE_DIR": str(tmp_path / "cache")}
    t = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-m", "kgqa_lib.cli", "run", "--method", "qsm", "--dataset", "tiny:films",
                            "--limit", "1", "--kg", "sparql+http://127.0.0.1:9/q#profile=tiny&workers=0", "--llm-mode",
                            "replay", "--quiet", "--out", str(tmp_path / "w.jsonl")],
                           capture_output=True, text=True, env=env, timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("kgqa run with workers=0 in the KG URL did not return within 90 s")
    assert p.returncode == 2, p.stderr[-1000:]
    assert p.stderr.strip() == ("error: the option workers='0' in 'sparql+http://127.0.0.1:9/q#profile=tiny&workers=0' "
                                "expects a whole number ≥ 1"), p.stderr
    assert time.monotonic() - t < 60
    from kgqa_lib.kg.remote import SparqlKG

    with pytest.raises(errors.UsageError, match="at least 1 worker"):  # the library refuses it too
        SparqlKG("http://127.0.0.1:9/q", "tiny", max_concurrency=0, cache=False)
