"""The speed benchmarks as measurement tables (``kgqa_lib.bench.speed``): listed beside the paper
tables, their reports regenerated from their JSON (a changed number is caught), and the cheap ones
measured end to end at tiny sizes into a temporary results folder through ``kgqa bench run``.
(Bad table names and options: ``test_cli_errors.py``.)"""

from __future__ import annotations

import json
import shutil

import pytest

from kgqa_lib.bench import measure
from kgqa_lib.cli import main
from kgqa_lib.paths import repo_root

SPEED = ("embed", "foundation", "scaleout", "distributed", "hostile_queries", "hostile_parsers")


@pytest.fixture
def results(tmp_path, monkeypatch):
    """A temporary results folder (``KGQA_RESULTS_DIR``) and cache; returns its ``bench/`` folder."""
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "results" / "bench"


def _run(argv: list[str], capsys) -> tuple[int, str]:
    code = main(["bench", "run", *argv])
    return code, capsys.readouterr().out


def _measured(results, name: str) -> dict:
    """The JSON a run wrote; its report is what the JSON gives."""
    m = measure.MEASUREMENTS[name]
    assert (results / m.output).exists() and measure.check(m) is None
    data = json.loads((results / m.data).read_text())
    assert data["measured_at"] and data["machine"]["cpus"]
    return data


def test_list_shows_the_measurement_tables_with_when_target_and_options(monkeypatch, capsys):
    monkeypatch.delenv("KGQA_RESULTS_DIR", raising=False)  # the committed results/
    assert main(["bench", "list"]) == 0
    out = capsys.readouterr().out
    for name in SPEED:
        assert f"\n{name}: " in out
    assert "pgakv_t2: " in out  # beside the paper tables
    assert main(["bench", "list", "scaleout"]) == 0
    out = capsys.readouterr().out
    assert "measured 2026-11-23 18:58, 2026-11-23 19:09, 2026-11-23 19:12; 2 CPUs" in out
    assert "target: 16 workers >= 12x the throughput of 1, identical results (concurrency) — met" in out
    assert "--repeats-fast 8" in out and "--only concurrency,servers,metaqa" in out


def test_report_check_catches_a_changed_number(results, capsys):
    results.mkdir(parents=True)
    for f in ("distributed.json", "distributed.md"):
        shutil.copy(repo_root() / "results" / "bench" / f, results / f)
    assert main(["bench", "report", "--check", "distributed"]) == 0
    data = json.loads((results / "distributed.json").read_text())
    data["rows"][1]["wall_s"] = 61.7  # the committed report says 51.7
    (results / "distributed.json").write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["bench", "report", "--check", "distributed"]) == 1
    assert "distributed.md differs from what distributed.json gives, from line 8" in capsys.readouterr().out
    assert main(["bench", "report", "distributed"]) == 0  # rewrites it
    assert "| 2 | 2 | 96 | 61.7 |" in (results / "distributed.md").read_text()
    (results / "distributed.json").unlink()
    assert "has no distributed.json" in measure.check(measure.MEASUREMENTS["distributed"])


def test_without_yes_only_the_estimate(results, capsys):
    code, out = _run(["embed", "--n", "10"], capsys)
    assert code == 0 and out.startswith("embed: encode up to 10 synthetic triples") and "nothing was run" in out
    assert not results.exists()


def test_hostile_parsers_end_to_end(results, capsys):
    code, out = _run(["hostile_parsers", "--n", "3", "--only", "fusic", "--max-memory-gb", "0", "--yes"], capsys)
    assert code == 0, out
    data = _measured(results, "hostile_parsers")
    assert data["n"] == 3 and {r["parser"] for r in data["rows"]} == {
        "fusic.parse_choice", "fusic.extract_query (sparql)", "fusic.extract_query (sexpr)", "fusic.execute_query (empty KG)"}
    assert all(r["inputs"] == 3 and r["crashes"] == 0 for r in data["rows"])
    assert "Crashes: **0**." in (results / "hostile_parsers.md").read_text()


def test_hostile_queries_end_to_end_on_the_embedded_backend(results, capsys, monkeypatch):
    from kgqa_lib.bench.speed import hostile_queries as hq

    every = hq.hostile
    monkeypatch.setattr(hq, "hostile", lambda port: [q for q in every(port) if q[0] in ("LOAD", "LIMIT 50000000")])
    code, out = _run(["hostile_queries", "--no-remote", "--timeout", "2", "--yes"], capsys)
    assert code == 0, out
    data = _measured(results, "hostile_queries")
    [(backend, rows)] = data["backends"].items()
    assert backend == "embedded" and [r["verdict"] for r in rows] == ["rejected", "accepted"]
    assert all(r["ok"] and r["network_calls"] == 0 and not r["mutated"] for r in rows)
    assert "| embedded | LIMIT 50000000 | accepted | 0 | 0 | " in (results / "hostile_queries.md").read_text()


def test_scaleout_concurrency_end_to_end_merges_into_the_sections_measured_before(results, capsys):
    results.mkdir(parents=True)
    committed = json.loads((repo_root() / "results" / "bench" / "scaleout.json").read_text())
    (results / "scaleout.json").write_text(json.dumps({"metaqa": committed["metaqa"]}))
    code, out = _run(["scaleout", "--only", "concurrency", "--questions", "2", "--latency", "0.05", "--workers", "1,2",
                      "--repeats", "1", "--repeats-fast", "1", "--yes"], capsys)
    assert code == 1 and "target not met" in out  # 2 workers cannot be 12x one
    data = _measured(results, "scaleout")
    assert data["metaqa"] == committed["metaqa"]  # the section not run stays as measured
    rows = data["concurrency"]["rows"]
    assert [(r["path"], r["workers"]) for r in rows] == [("runner", 1), ("runner", 2), ("cli", 2)]
    assert all(r["questions"] == r["llm_requests"] == 2 and r["identical_to_1_worker"] for r in rows)
    md = (results / "scaleout.md").read_text()
    assert "## 1. Concurrent questions" in md and "## 3. The whole MetaQA KB" in md


def test_distributed_end_to_end(results, capsys):
    pytest.importorskip("distributed")
    code, out = _run(["distributed", "--questions", "2", "--latency", "0.01", "--workers", "1", "--yes"], capsys)
    assert code == 0, out
    data = _measured(results, "distributed")
    [row] = data["rows"]
    assert row["questions"] == 2 and row["speedup"] == 1.0 and data["latency_s"] == 0.01


def test_embed_end_to_end(results, capsys):
    code, out = _run(["embed", "--n", "50", "--single-runs", "2", "--batch-runs", "2", "--yes"], capsys)
    assert code == 0, out
    data = _measured(results, "embed")
    assert data["encode"]["encoded"] == 50 and data["cold_load"]["matrix_shape"][0] == 50
    assert data["cache_file"] == "<user cache>/bench/embed_bench.sqlite"
    code, out = _run(["embed", "--n", "50", "--yes"], capsys)  # the second time: all from the cache
    assert code == 0 and "already cached" in (results / "embed.md").read_text()


def test_foundation_end_to_end(results, capsys, data_dir_or_skip):
    from kgqa_lib.data.datasets import DatasetNotFound, metaqa_kb_path

    try:
        metaqa_kb_path()
    except DatasetNotFound:
        pytest.skip("the MetaQA KB is not under KGQA_DATA_DIR")
    code, out = _run(["foundation", "--queries", "2", "--skip-embeddings", "--yes"], capsys)
    assert code == 0, out
    data = _measured(results, "foundation")
    assert data["sparql_3hop"]["n"] == 2 and "embed_triples" not in data
