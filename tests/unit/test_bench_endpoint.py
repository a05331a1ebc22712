"""`kgqa bench run TABLE --llm openai:NAME@URL`: a table's cells run end to end against an
OpenAI-compatible endpoint (the project's fake chat server on 127.0.0.1), into a temporary results
folder, with the model's records in their own folder and a report that shows the model; answering
questions concurrently (``--workers``) gives the same records as one at a time."""

from __future__ import annotations

import gzip
import json

import pytest

from kgqa_lib.bench import core
from kgqa_lib.servers import FakeChatServer


def _table():
    cells = (core.Cell("ep_io", "io", "tiny:films", 4, ("--limit", "4", "--llm", "local", "--no-transcripts")),
             core.Cell("ep_cot", "cot", "tiny:films", 4, ("--limit", "4", "--llm", "local", "--no-transcripts")))
    return core.Table(name="endpoint_t", title="endpoint", cells=cells, output="endpoint_t.md",
                      report=lambda rs: f"io n={len(rs('ep_io'))}\n")


def _run(tmp_path, monkeypatch, server, workers, name):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / name / "results"))
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / name / "cache"))  # every answer live from the server
    monkeypatch.setenv("KGQA_LLM_MODE", "auto")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    table = _table()
    llm = f"openai:fake@{server.base_url}"
    assert core.run(table, llm=llm, workers=workers, poll=0.5, echo=lambda _: None) == 0
    model = core.model_key(llm)
    recs = {c.name: [json.loads(x) for x in gzip.decompress(table.saved(c, model).read_bytes()).decode().splitlines()]
            for c in table.cells}
    return table, model, recs


def test_a_table_runs_against_an_endpoint_and_workers_change_nothing(tmp_path, monkeypatch):
    with FakeChatServer(latency=0.05) as server:
        table, model, concurrent = _run(tmp_path, monkeypatch, server, 3, "concurrent")
        assert server.max_in_flight > 1  # the questions of a cell did run at once
        n = server.requests
        _, _, sequential = _run(tmp_path, monkeypatch, server, None, "sequential")
        assert server.requests == 2 * n  # the second run asked the server again, nothing from a cache
    assert model.startswith("openai_fake_http___127.0.0.1_")
    for cell in ("ep_io", "ep_cot"):
        assert len(concurrent[cell]) == 4
        assert all(r["model_id"] == f"openai:fake@{server.base_url}" and r["engine"].startswith("OpenAI-compatible")
                   for r in concurrent[cell])
        key = lambda recs: sorted((r["qid"], r["prediction"], r["metrics"]) for r in recs)  # noqa: E731
        assert key(concurrent[cell]) == key(sequential[cell])
    assert not table.model_dir().exists()  # the default model's records are untouched
    report = (tmp_path / "sequential" / "results" / "bench" / "endpoint_t.md").read_text()
    assert report.startswith("io n=0\n") and "## Models" in report and model in report
    assert "| ep_io |" in report and "not run" in report  # the default model has not run this table


def test_an_unknown_model_is_refused_before_anything_runs(tmp_path, monkeypatch):
    from kgqa_lib.errors import UsageError

    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    with pytest.raises(UsageError):
        core.run(_table(), llm="nonsense")
    assert not (tmp_path / "results").exists()
