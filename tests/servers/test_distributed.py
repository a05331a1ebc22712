"""A sharded ``kgqa run`` on a real Dask cluster on 127.0.0.1 (a scheduler and 2 worker processes),
against the fake OpenAI-compatible server (1 s a call): the merged shards equal a single-process run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kgqa_lib.evaluate.report import report
from kgqa_lib.evaluate.runner import read_records
from kgqa_lib.servers import FakeChatServer

pytestmark = pytest.mark.server

N_QUESTIONS = 8
SHARDS = 4


@pytest.fixture(scope="module")
def scheduler():
    """The address of a LocalCluster (scheduler + 2 worker processes on 127.0.0.1)."""
    pytest.importorskip("distributed", reason="Dask distributed is not installed (make setup installs it)")
    from kgqa_lib.distributed import client

    ctx = client(None, workers=2)
    try:
        c, _ = ctx.__enter__()
    except Exception as exc:  # noqa: BLE001 - only an engine that cannot start skips
        pytest.skip(f"a Dask LocalCluster could not start on 127.0.0.1 here: {type(exc).__name__}: {exc}")
    yield c.scheduler.address
    ctx.__exit__(None, None, None)


def test_sharded_run_on_a_local_cluster_equals_one_process(scheduler, tmp_path, monkeypatch):
    from kgqa_lib import distributed

    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "home-cache"))
    data = tmp_path / "questions.jsonl"  # our own throw-away questions (outside data/: no transcripts)
    data.write_text("".join(json.dumps({"qid": f"d{i}", "question": f"Which city is number {i}?",
                                        "answers": [f"answer-{i % 7}"]}) + "\n" for i in range(N_QUESTIONS)))
    with FakeChatServer(latency=1.0) as server:
        env = {"KGQA_LLM_BASE_URL": server.base_url, "KGQA_LLM_MODE": "auto", "OPENAI_API_KEY": "",
               "KGQA_RESULTS_DIR": str(tmp_path / "results")}
        args = ["--method", "io", "--dataset", str(data), "--llm", "openai:fake"]
        single = tmp_path / "single.jsonl"
        proc = subprocess.run([sys.executable, "-m", "kgqa_lib.cli", "run", *args, "--out", str(single), "--quiet",
                               "--workers", "4"], env={**os.environ, **env, "KGQA_CACHE_DIR": str(tmp_path / "c0")},
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        calls_single = server.requests
        res = distributed.run_sharded(args, SHARDS, tmp_path / "sharded.jsonl", address=scheduler,
                                      cache="per-shard", cache_root=tmp_path / "caches", env=env)
    assert not res.failed, [t.stderr_tail for t in res.failed]
    assert len({t.worker for t in res.tasks}) == 2  # both worker processes ran shards
    assert server.requests - calls_single == N_QUESTIONS  # each question asked once over all shards
    one = {r["qid"]: r for r in read_records(single)}
    merged = [r for f in res.files for r in read_records(f)]
    assert sorted(r["qid"] for r in merged) == sorted(one) and len(merged) == N_QUESTIONS
    for r in merged:
        o = one[r["qid"]]
        assert (r["prediction"], r["metrics"], r["response"], r["config_hash"]) == \
               (o["prediction"], o["metrics"], o["response"], o["config_hash"])
    df, df1 = report(res.files), report([single])
    assert len(df) == 1 and df.iloc[0]["shards"] == f"{SHARDS}/{SHARDS}" and df.iloc[0]["n"] == N_QUESTIONS
    for m in ("hits@1", "f1", "exact_match"):
        assert df.iloc[0][m] == df1.iloc[0][m]
    assert df.attrs["shards"]["sharded"]["missing"] == [] and df.attrs["shards"]["sharded"]["duplicates"] == 0
    # the shards' caches were merged into this machine's cache: the same run now replays offline
    assert res.merged["added"] == N_QUESTIONS and res.merged["transcribed"] == 0


def test_grid_combinations_run_one_per_task(scheduler, tmp_path, monkeypatch):
    """``run_grid`` maps a --grid onto ``kgqa reproduce … --index k`` tasks (here with a notebook
    filter that matches nothing, so every task exits 2 at once: the plumbing, not the notebooks)."""
    from kgqa_lib import distributed

    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "home-cache"))
    res = distributed.run_grid(["--only", "no-such-notebook", "--grid", "A=1,2,3"], address=scheduler,
                               env={"KGQA_RESULTS_DIR": str(tmp_path / "results")})
    assert [t.name for t in res.tasks] == [f"combination {k}/3" for k in range(3)]
    assert [t.argv[-2:] for t in res.tasks] == [["--index", str(k)] for k in range(3)]
    assert all(t.returncode == 2 and "matches no notebook" in t.stderr_tail for t in res.tasks)
