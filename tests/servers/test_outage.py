"""Issue 18, item 1 end to end: ``kgqa run`` against a stopped LLM server and against a stopped
SPARQL server (the project's real loopback servers: ``FakeChatServer``, ``OxigraphServer``) exits
non-zero with a one-line summary and writes no scored record; after the server is started, the same
command answers every question. (Today: exit 0 and every question scored 0 as
``exception:…EndpointError``, and the resume skips them.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kgqa_lib.evaluate.runner import read_records
from kgqa_lib.llm.chat import LLMCache, LLMEndpointError, make_llm
from kgqa_lib.paths import data_dir
from kgqa_lib.servers import FakeChatServer, OxigraphServer, env_for_openai, free_port

pytestmark = pytest.mark.server


def _kgqa(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kgqa_lib.cli", "run", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def _env(tmp_path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "KGQA_CACHE_DIR": str(tmp_path / "cache"), "NO_PROXY": "127.0.0.1", **extra}
    env.pop("KGQA_LLM_MODE", None)
    return env


def _last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


def test_stopped_llm_server_then_resume(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}/v1"
    env = _env(tmp_path, **{k: v for k, v in env_for_openai(base).items() if k.startswith(("KGQA_LLM", "OPENAI"))})
    out = tmp_path / "io.jsonl"
    args = ["--method", "io", "--dataset", "miniworld:simple", "--limit", "2", "--llm", "openai:fake",
            "--llm-mode", "auto", "--no-transcripts", "--quiet", "--out", str(out)]
    down = _kgqa(args, env)  # nothing listens on the port: connection refused, after the client's retries
    assert read_records(out) == [], "an outage was recorded as answers"
    assert down.returncode == 3, down.stderr[-2000:]
    line = _last_line(down.stderr)
    assert line.startswith("error: 2 questions not answered") and f"LLM endpoint {base} unreachable" in line, line
    assert "re-run the same command to retry them" in line and "Traceback" not in down.stderr
    with FakeChatServer(port=port) as srv:
        up = _kgqa(args, env)
        assert up.returncode == 0, up.stderr[-2000:]
        assert srv.requests == 2
    recs = read_records(out)
    assert len(recs) == 2 and all(r["error"] is None and r["prediction"] for r in recs)


def test_llm_5xx_after_retries_is_an_endpoint_error(tmp_path):
    with FakeChatServer(fail=lambda n: 502) as srv:
        llm = make_llm("openai:fake", "live", cache=LLMCache(tmp_path / "c.sqlite", transcripts=None),
                       base_url=srv.base_url, api_key="sk-local-test", max_retries=1)
        with pytest.raises(LLMEndpointError, match="HTTP 502") as ei:
            llm.chat("Who directed Inception?", max_tokens=5)
    assert ei.value.status_code == 502 and srv.requests == 2


def test_stopped_sparql_server_then_resume(tmp_path):
    port = free_port()
    kg = f"sparql+http://127.0.0.1:{port}/query#profile=miniworld:wikidata"
    env = _env(tmp_path)
    out = tmp_path / "qsm.jsonl"
    args = ["--method", "qsm", "--dataset", "miniworld:multihop", "--sample", "4", "--kg", kg,
            "--llm-mode", "replay", "--quiet", "--out", str(out)]
    down = _kgqa(args, env)
    assert read_records(out) == [], "an outage was recorded as answers"
    assert down.returncode == 3, down.stderr[-2000:]
    line = _last_line(down.stderr)
    assert line.startswith("error: 4 questions not answered"), line
    assert f"SPARQL endpoint http://127.0.0.1:{port}/query unreachable" in line and "re-run the same command" in line
    files = [data_dir() / "miniworld" / "kg_wikidata.nt", data_dir() / "miniworld" / "ontology.nt"]
    with OxigraphServer(files, port=port):
        up = _kgqa(args, env)
    assert up.returncode == 0, up.stderr[-2000:]
    recs = read_records(out)
    assert len(recs) == 4 and not any((r["error"] or "").startswith("exception:") for r in recs)
    # the same answers as the embedded KG (replayed from the committed transcripts)
    emb = tmp_path / "emb.jsonl"
    r = _kgqa([*args[:args.index("--kg")], "--kg", "miniworld", "--llm-mode", "replay", "--quiet", "--out", str(emb)], env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted((x["qid"], json.dumps(x["prediction"])) for x in recs) == \
        sorted((x["qid"], json.dumps(x["prediction"])) for x in read_records(emb))
