"""Issue 24: sharded runs merged by the report, grid sweeps by index, caches for many writers,
local-model threads and a shared client-side rate limit."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from kgqa_lib import _sqlite
from kgqa_lib.cli import main as kgqa
from kgqa_lib.data.datasets import Dataset, DatasetError, Question
from kgqa_lib.errors import SetupError, UsageError
from kgqa_lib.evaluate.report import report
from kgqa_lib.evaluate.runner import read_records, run
from kgqa_lib.llm.chat import LLM, ChatRequest, LLMCache, RateLimiter, make_llm, split_llm_name
from kgqa_lib.methods import Context, MethodResult, register_method


class FixedBackend:
    model_id = "fixed"

    def complete(self, req):
        word = req.messages[-1][1].split()[-1]
        return {"text": "{" + word + "}", "prompt_tokens": 7, "completion_tokens": 2, "finish_reason": "stop"}


@register_method("_shard_echo")
def _echo(q, ctx):
    r = ctx.llm.chat(q.question)
    return MethodResult([r.text.strip("{}")], r.text)


def _ds(n=23, name="toy"):
    return Dataset(name, [Question(f"q{i}", f"say w{i}", [f"w{i}" if i % 3 else "x"]) for i in range(n)])


# ---------------------------------------------------------------------------------------- shards
def test_shards_partition_the_selection_evenly_whatever_the_order():
    ds = _ds(23)
    parts = [ds.shard(i, 4) for i in range(4)]
    ids = [q.qid for p in parts for q in p]
    assert sorted(ids) == sorted(q.qid for q in ds)  # each question exactly once
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    for p in parts:  # dataset order kept, name unchanged
        assert [q.qid for q in p] == [q.qid for q in ds if q.qid in {x.qid for x in p}] and p.name == "toy"
    shuffled = Dataset("toy", list(reversed(ds.questions)))
    assert [{q.qid for q in shuffled.shard(i, 4)} for i in range(4)] == [{q.qid for q in p} for p in parts]
    assert [q.qid for q in ds.shard(0, 1)] == [q.qid for q in ds]
    with pytest.raises(DatasetError, match="shard 4/4"):
        ds.shard(4, 4)


def test_shard_argument_is_checked(capsys):
    for bad in ("4/4", "1", "a/b", "-1/3", "0/0"):
        assert kgqa(["run", "--method", "io", "--dataset", "tiny:films", "--shard", bad]) == 2
        assert "--shard" in capsys.readouterr().err


def _run_shards(tmp_path, n, ds, skip=()):
    files = []
    for i in range(n):
        if i in skip:
            continue
        cache = LLMCache(tmp_path / f"c{i}.sqlite", transcripts=None)
        ctx = Context(llm=LLM(FixedBackend(), "fixed", cache), settings={})
        out = tmp_path / f"toy__shard{i}of{n}.jsonl"
        run("_shard_echo", ds.shard(i, n), ctx, out, progress=False, shard=(i, n))
        files.append(out)
    return files


def test_report_merges_the_shard_files_of_one_run(tmp_path, capsys):
    ds = _ds(20)
    single = tmp_path / "single.jsonl"
    run("_shard_echo", ds, Context(llm=LLM(FixedBackend(), "fixed", LLMCache(tmp_path / "s.sqlite", transcripts=None)),
                                   settings={}), single, progress=False)
    files = _run_shards(tmp_path, 3, ds)
    recs = [r for f in files for r in read_records(f)]
    assert all(r["shard"][1] == 3 for r in recs)
    one = {r["qid"]: r for r in read_records(single)}
    assert {r["qid"]: (r["prediction"], r["metrics"], r["config_hash"]) for r in recs} == \
           {q: (r["prediction"], r["metrics"], r["config_hash"]) for q, r in one.items()}
    df = report(files)
    assert len(df) == 1 and df.iloc[0]["run"] == "toy" and df.iloc[0]["n"] == 20 and df.iloc[0]["shards"] == "3/3"
    assert df.iloc[0]["hits@1"] == report([single]).iloc[0]["hits@1"]
    assert df.attrs["shards"]["toy"] == {"n": 3, "files": 3, "missing": [], "short": {}, "questions": {0: 7, 1: 7, 2: 6},
                                         "duplicates": 0}
    # a missing shard and a duplicated file are stated
    assert kgqa(["report", str(files[0]), str(files[2]), str(files[2])]) == 0
    err = capsys.readouterr().err
    assert "missing shard(s): 1" in err and "n=3" in err and f"{len(read_records(files[2]))} duplicate qid(s)" in err


def test_unsharded_reports_are_unchanged(tmp_path):
    single = tmp_path / "single.jsonl"
    run("_shard_echo", _ds(5), Context(llm=LLM(FixedBackend(), "fixed", LLMCache(tmp_path / "s.sqlite", transcripts=None)),
                                       settings={}), single, progress=False)
    df = report([single, single])
    assert list(df["run"]) == ["single", "single #2"] and "shards" not in df.columns  # (rows never share a name)
    assert "shard" not in read_records(single)[0]


def test_cli_shard_writes_its_own_file_and_defers_transcripts(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "qs.jsonl"
    data.write_text("".join(json.dumps({"qid": f"q{i}", "question": f"who is w{i}", "answers": [f"w{i}"]}) + "\n"
                            for i in range(6)))
    # replay mode with an empty cache: every question is a replay miss (exit 3), but the path is named
    assert kgqa(["run", "--method", "io", "--dataset", str(data), "--llm", "openai:m", "--llm-mode", "replay",
                 "--shard", "1/2", "--quiet"]) == 3
    assert "shard1of2.jsonl" in capsys.readouterr().err


# ---------------------------------------------------------------------------------- grid index
def test_reproduce_list_and_index(tmp_path, monkeypatch, capsys):
    from kgqa_lib import reproduce as rp
    from kgqa_lib.notebooks import Executed

    nb = tmp_path / "01_x.ipynb"
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"]},
                                         "source": ["A = 1\n", "B = 2\n"], "outputs": [], "execution_count": None}],
                              "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    monkeypatch.setattr(rp, "notebook_paths", lambda: [nb])
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    ran = []
    monkeypatch.setattr(rp, "execute", lambda path, output, parameters, failed_copy: (
        ran.append((output, parameters)), Executed(output, 0.1, None))[1])
    assert kgqa(["reproduce", "--grid", "A=1,2,3", "--grid", "B=x,y", "--list"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 6 and lines[0].startswith("0\t") and "A=1 B='x'" in lines[0] and "A=3 B='y'" in lines[5]
    assert ran == []
    assert kgqa(["reproduce", "--grid", "A=1,2,3", "--grid", "B=x,y", "--index", "3"]) == 0
    assert len(ran) == 1 and ran[0][1] == {"A": 2, "B": "y"}
    assert lines[3].split("\t")[1] in str(ran[0][0])  # the folder --list named
    assert kgqa(["reproduce", "--grid", "A=1,2", "--index", "2"]) == 2
    assert "out of range" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ caches
def test_journal_mode_is_configurable(tmp_path, monkeypatch):
    monkeypatch.delenv("KGQA_SQLITE_JOURNAL", raising=False)
    assert _sqlite.connect(tmp_path / "a.sqlite").execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    monkeypatch.setenv("KGQA_SQLITE_JOURNAL", "delete")
    con = _sqlite.connect(tmp_path / "b.sqlite")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert con.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    cache = LLMCache(tmp_path / "c.sqlite", transcripts=None)
    assert cache._conn().execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    monkeypatch.setenv("KGQA_SQLITE_JOURNAL", "memory")
    with pytest.raises(SetupError, match="KGQA_SQLITE_JOURNAL"):
        _sqlite.connect(tmp_path / "d.sqlite")


def _req(i, model="m"):
    return ChatRequest(model, (("user", f"question {i}"),))


def _resp(i):
    return {"text": f"answer {i}", "prompt_tokens": 3, "completion_tokens": 2, "finish_reason": "stop", "seconds": 0.1}


def test_deferred_shard_caches_merge_into_the_transcripts_once(tmp_path, capsys):
    committed = tmp_path / "llm_cache"
    committed.mkdir()
    home = LLMCache(tmp_path / "home.sqlite", transcripts=committed)
    home.put(_req(0), _resp(0))  # already transcribed
    s1 = LLMCache(tmp_path / "s1" / "llm_cache.sqlite", transcripts=committed, defer=True)
    s2 = LLMCache(tmp_path / "s2" / "llm_cache.sqlite", transcripts=committed, defer=True)
    for i in (0, 1, 2):
        s1.put(_req(i), _resp(i))
    for i in (2, 3):
        s2.put(_req(i), _resp(i))
    private = LLMCache(tmp_path / "s2" / "llm_cache.sqlite", transcripts=None)  # a --no-transcripts run
    private.put(_req(9), _resp(9))
    assert [len(p.read_text().splitlines()) for p in committed.glob("*.jsonl")] == [1]  # shards wrote none
    counts = home.merge([s1.path, s2.path])
    assert counts == {"sources": 2, "added": 4, "transcribed": 3, "already": 1, "rejected": 0}
    keys = [json.loads(line)["key"] for line in (committed / "m.jsonl").read_text().splitlines()]
    assert sorted(keys) == sorted(_req(i).key for i in range(4))  # once each; 9 stays private
    assert home.get(_req(9).key)["text"] == "answer 9"
    assert home.merge([s1.path, s2.path])["transcribed"] == 0  # idempotent
    # the CLI, with transcripts (.jsonl) as sources too
    extra = tmp_path / "other.jsonl"
    extra.write_text((committed / "m.jsonl").read_text().splitlines()[0] + "\n")
    s3 = LLMCache(tmp_path / "s3.sqlite", transcripts=committed, defer=True)
    s3.put(_req(5), _resp(5))
    args = ["--into", str(home.path), "--transcripts", str(committed)]  # never the repository's data/llm_cache
    assert kgqa(["cache", "merge", str(s3.path), str(extra), *args]) == 0
    assert "1 appended" in capsys.readouterr().out
    assert len((committed / "m.jsonl").read_text().splitlines()) == 5
    assert kgqa(["cache", "merge", str(tmp_path / "nope.sqlite"), *args]) == 2


def test_xdg_cache_home_is_respected(tmp_path, monkeypatch):
    from kgqa_lib.paths import user_cache_dir

    monkeypatch.delenv("KGQA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache_dir() == tmp_path / "xdg" / "kgqa"
    assert LLMCache(transcripts=None).path == tmp_path / "xdg" / "kgqa" / "llm_cache.sqlite"


# ------------------------------------------------------------------------- local model options
def test_local_threads_and_gpu_layers(monkeypatch):
    import os

    monkeypatch.delenv("KGQA_LLM_THREADS", raising=False)
    monkeypatch.delenv("KGQA_LLM_GPU_LAYERS", raising=False)
    llm = make_llm("local", "replay", cache=LLMCache(":memory:", transcripts=None))
    assert llm.backend.n_threads == len(os.sched_getaffinity(0)) and llm.backend.n_gpu_layers == 0
    monkeypatch.setenv("KGQA_LLM_THREADS", "5")
    assert make_llm("local", "replay", cache=LLMCache(":memory:", transcripts=None)).backend.n_threads == 5
    llm = make_llm("local:qwen2.5-0.5b?threads=3&gpu_layers=-1", "replay", cache=LLMCache(":memory:", transcripts=None))
    assert (llm.backend.n_threads, llm.backend.n_gpu_layers) == (3, -1)
    assert llm.model_id == "qwen2.5-0.5b-instruct-q4"  # options never reach ids, keys or configs
    assert split_llm_name("openai:gpt-4o-mini?rpm=500&tpm=2e5") == ("openai:gpt-4o-mini", {"rpm": 500.0, "tpm": 2e5})
    for bad in ("local?thread=2", "local?threads=0", "openai:m?rpm=-1", "local?rpm=5"):
        with pytest.raises(UsageError):
            split_llm_name(bad)
    monkeypatch.setenv("KGQA_LLM_THREADS", "many")
    with pytest.raises(UsageError, match="KGQA_LLM_THREADS"):
        make_llm("local", "replay", cache=LLMCache(":memory:", transcripts=None))


# ------------------------------------------------------------------------------- rate limiter
class FakeClock:
    def __init__(self):
        self.now = 100.0
        self.lock = threading.Lock()

    def __call__(self):
        return self.now

    def sleep(self, s):
        with self.lock:
            self.now += s


def test_rate_limiter_requests_per_minute():
    clock = FakeClock()
    rl = RateLimiter(rpm=120, clock=clock, sleep=clock.sleep)  # 2 a second, one second's burst
    starts = []
    for _ in range(6):
        rl.acquire()
        starts.append(clock.now - 100.0)
    assert starts == pytest.approx([0, 0, 0.5, 1.0, 1.5, 2.0])


def test_rate_limiter_tokens_per_minute_and_retry_after():
    clock = FakeClock()
    rl = RateLimiter(tpm=6000, clock=clock, sleep=clock.sleep)  # 100 tokens a second
    rl.acquire(100)
    assert clock.now == 100.0
    rl.acquire(250)  # more than a bucket: waits for a full one, then owes the rest
    assert clock.now == pytest.approx(101.0)
    rl.acquire(50)  # pays the debt of 150 first
    assert clock.now == pytest.approx(101.0 + 2.0)
    rl.pause(5)
    rl.acquire(0)
    assert clock.now == pytest.approx(108.0)
    unlimited = RateLimiter(clock=clock, sleep=clock.sleep)
    for _ in range(100):
        unlimited.acquire(10_000)
    assert clock.now == pytest.approx(108.0)
