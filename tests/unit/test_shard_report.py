"""Merged shard reports say which shards are missing or unfinished, row names never collide, and the
Dask driver reports only its own shards.

- a shard stopped half-way is named (its questions against what a complete shard holds), as is a shard
  whose run lock is still there (stopped just before its end: its count alone cannot tell);
- two runs of one name (2 shards and 3 shards of one config) are two rows with distinct names, each with
  its own shard note;
- `python -m kgqa_lib.distributed run` whose shards all failed before writing anything reports nothing,
  rather than every run under results/runs/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgqa_lib import cli, distributed
from kgqa_lib.data.datasets import qid_rank_key
from kgqa_lib.evaluate import report as reports
from kgqa_lib.evaluate.report import report


def _record(qid: str, shard: tuple[int, int] | None, config: str = "cfg") -> dict:
    rec = {"qid": qid, "dataset": "d", "method": "io", "model_id": "m", "config_hash": config, "kind": "factoid",
           "seconds": 1.0, "error": None, "metrics": {"hits@1": 1.0, "f1": 1.0, "exact_match": 1.0, "lenient": 1.0},
           "llm": {"calls": 1, "prompt_tokens": 1, "completion_tokens": 1, "recorded_seconds": 1.0, "cache_hits": 0,
                   "seconds": 1.0}}
    if shard:
        rec["shard"] = list(shard)
    return rec


def _shards(qids: list[str], n: int) -> list[list[str]]:
    """The questions of each of n shards, dealt as Dataset.shard deals them."""
    ranked = sorted(qids, key=qid_rank_key)
    return [ranked[i::n] for i in range(n)]


def _write(path: Path, qids: list[str], shard: tuple[int, int] | None, config: str = "cfg") -> Path:
    path.write_text("".join(json.dumps(_record(q, shard, config)) + "\n" for q in qids))
    return path


def test_a_shard_stopped_half_way_is_named(tmp_path, capsys):
    qids = [f"q{i}" for i in range(161)]
    s0, s1 = _shards(qids, 2)
    files = [_write(tmp_path / "r__shard0of2.jsonl", s0, (0, 2)), _write(tmp_path / "r__shard1of2.jsonl", s1[:5], (1, 2))]
    df = report(files)
    info = df.attrs["shards"]["r"]
    assert info["missing"] == [] and list(info["short"]) == [1]
    assert "5 question(s), at least 80 expected" in info["short"][1]
    assert df.loc[0, "shards"] == "2/2 (1 finished)"
    assert cli.main(["report", *map(str, files)]) == 0
    err = capsys.readouterr().err
    assert "unfinished shard(s): 1 (5 question(s)" in err and "none short" not in err


def test_a_shard_stopped_before_its_last_question_is_named_by_its_lock(tmp_path):
    qids = [f"q{i}" for i in range(10)]
    s0, s1 = _shards(qids, 2)
    files = [_write(tmp_path / "r__shard0of2.jsonl", s0, (0, 2)), _write(tmp_path / "r__shard1of2.jsonl", s1[:-1], (1, 2))]
    assert report(files).attrs["shards"]["r"]["short"] == {}  # 5 and 4: as complete shards of 9 would be
    (tmp_path / "r__shard1of2.jsonl.lock").write_text("12345\n")  # what a killed `kgqa run` leaves
    info = report(files).attrs["shards"]["r"]
    assert list(info["short"]) == [1] and "has not ended" in info["short"][1]
    assert "unfinished shard(s): 1" in reports.shard_note("r", info)


def test_complete_shards_are_said_complete(tmp_path):
    qids = [f"q{i}" for i in range(11)]
    files = [_write(tmp_path / f"r__shard{i}of3.jsonl", part, (i, 3)) for i, part in enumerate(_shards(qids, 3))]
    info = report(files).attrs["shards"]["r"]
    assert info["missing"] == [] and info["short"] == {} and sum(info["questions"].values()) == 11
    assert "all 3 shards present, none short of the others" in reports.shard_note("r", info)


def test_runs_of_one_name_get_distinct_rows_and_notes(tmp_path, capsys):
    qids = [f"q{i}" for i in range(10)]
    two, three = _shards(qids, 2), _shards(qids, 3)
    files = [_write(tmp_path / "A__shard0of2.jsonl", two[0], (0, 2)), _write(tmp_path / "A__shard1of2.jsonl", two[1], (1, 2)),
             _write(tmp_path / "A__shard0of3.jsonl", three[0], (0, 3))]
    df = report(files)
    assert sorted(df["run"]) == ["A (2 shards)", "A (3 shards)"]
    assert set(df.attrs["shards"]) == {"A (2 shards)", "A (3 shards)"}
    assert df.attrs["shards"]["A (3 shards)"]["missing"] == [1, 2]
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    plain = [_write(tmp_path / "x" / "run.jsonl", qids, None), _write(tmp_path / "y" / "run.jsonl", qids[:3], None)]
    assert list(report(plain)["run"]) == ["x/run", "y/run"]
    assert cli.main(["report", *map(str, files)]) == 0
    err = capsys.readouterr().err
    assert "A (2 shards): merged 2 shard file(s)" in err and "A (3 shards): merged 1 shard file(s)" in err


def test_the_driver_reports_nothing_when_no_shard_wrote_a_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    (tmp_path / "results" / "runs").mkdir(parents=True)
    _write(tmp_path / "results" / "runs" / "unrelated_run.jsonl", ["u1"], None)
    out = tmp_path / "d.jsonl"

    def failed_shards(run_args, shards, out_path, **kw):
        files = distributed.shard_paths(out_path, shards)
        tasks = [distributed.TaskResult(f"shard {i}/{shards}", [], 2, 0.1, 0.0, "w", "error: kgqa run needs --method")
                 for i in range(shards)]
        return distributed.DistributedResult(tasks, files)

    monkeypatch.setattr(distributed, "run_sharded", failed_shards)
    assert distributed.main(["run", "--shards", "2", "--out", str(out)]) == 1
    printed = capsys.readouterr()
    assert "unrelated_run" not in printed.out + printed.err
    assert "no shard wrote a run file: nothing to report" in printed.out
    assert "shard 0/2 did not finish (exit 2): it wrote no record" in printed.out


def test_the_driver_names_the_shards_that_did_not_finish(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    qids = [f"q{i}" for i in range(20)]
    s0, s1 = _shards(qids, 2)
    out = tmp_path / "d.jsonl"
    files = distributed.shard_paths(out, 2)
    _write(files[0], s0, (0, 2))
    _write(files[1], s1[:3], (1, 2))

    def one_killed(run_args, shards, out_path, **kw):
        tasks = [distributed.TaskResult("shard 0/2", [], 0, 1.0, 0.0, "w"),
                 distributed.TaskResult("shard 1/2", [], -9, 1.0, 0.0, "w")]
        return distributed.DistributedResult(tasks, files)

    monkeypatch.setattr(distributed, "run_sharded", one_killed)
    assert distributed.main(["run", "--shards", "2", "--out", str(out)]) == 1
    printed = capsys.readouterr()
    assert "shard 1/2 did not finish (exit -9): d__shard1of2.jsonl holds 3 record(s)" in printed.out
    assert "unfinished shard(s): 1 (3 question(s), at least 9 expected)" in printed.err
