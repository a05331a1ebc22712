"""`kgqa bench show` and `kgqa bench rescore` (:mod:`kgqa_lib.bench.inspect`): saved records read question
by question, joined with their question and gold answers from the dataset files, and re-scored from
their kept predictions. A fake table on the project's own `tiny:films` (no external data needed), then
the committed records."""

from __future__ import annotations

import gzip
import json

import pytest

from kgqa_lib.bench import core
from kgqa_lib.bench import inspect as bi
from kgqa_lib.cli import main
from kgqa_lib.data.datasets import load_dataset
from kgqa_lib.errors import UsageError, UserError
from kgqa_lib.evaluate.metrics import score

TINY = {q.qid: q for q in load_dataset("tiny:films")}

# what a method answered, per question (stripped records keep it; the gold stays in the dataset file)
ANSWERS = {"tiny-films-00": ["Christopher Nolan"],
           "tiny-films-01": ["2019"],
           "tiny-films-04": ["Gravity", "Roma", "Children of Men"],  # hits@1 1, F1 0.8, not the exact set
           "tiny-films-05": ["Kate Winslet"],  # wrong
           "tiny-films-07": []}  # the method returned nothing


def _record(qid, prediction, kept=True, **extra):
    """A stripped record as a table's strip function saves it (no question, no gold)."""
    return {"qid": qid, "dataset": "tiny:films", "kind": "factoid", "stripped": True,
            "metrics": score(prediction, TINY[qid].answers),
            "prediction": list(prediction) if kept or not prediction else ["(answered)"],
            "seconds": 1.5, "llm": {"calls": 2, "cache_hits": 1}, "method": "keqing", **extra}


def _write(folder, cell, records):
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / f"{cell}.jsonl.gz", "wt", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")


@pytest.fixture
def table(tmp_path, monkeypatch):
    """``fake_i`` in a temporary results folder: ``kept`` (new records: predictions kept, one record of an
    older run among them), ``old`` (every non-empty prediction ``(answered)``), ``ext`` (on an external
    benchmark), ``none`` (not run)."""
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path / "results"))
    cells = tuple(core.Cell(n, "keqing", ds, 5, ("--llm", "local")) for n, ds in
                  (("kept", "tiny:films"), ("old", "tiny:films"), ("ext", "keqing:metaqa:1hop"), ("none", "tiny:films")))
    t = core.Table(name="fake_i", title="fake", cells=cells, report=lambda rs: "", output="fake_i.md")
    monkeypatch.setitem(core.TABLES, t.name, t)
    chain = {"decomposition": {"predicted_chain": ["^directed_by"], "gold_chain": ["directed_by"], "correct": False}}
    kept = [_record(q, a, diagnostics=chain if q == "tiny-films-00" else None,
                    attempts=[{"status": "ok", "rows": 1, "query": "SELECT ?x WHERE { :Inception :directed_by ?x }"}])
            for q, a in ANSWERS.items()]
    kept.append(_record("tiny-films-08", ["Science Fiction"], kept=False))  # saved by an older run
    _write(t.model_dir(), "kept", kept)
    _write(t.model_dir(), "old", [_record(q, a, kept=False) for q, a in ANSWERS.items()])
    _write(t.model_dir(), "ext", [{"qid": "metaqa-1hop-dev-00021", "stripped": True, "prediction": ["(answered)"],
                                   "metrics": {"hits@1": 1.0}, "seconds": 1.0, "llm": {"calls": 1}}])
    return t


def test_show_joins_question_and_gold_with_the_prediction_and_the_methods_outputs(table, capsys):
    d = bi.show("fake_i", "kept", ["tiny-films-04", "tiny-films-00"])
    assert d["data"] is None and [r["qid"] for r in d["rows"]] == ["tiny-films-04", "tiny-films-00"]
    four, zero = d["rows"]
    assert four["question"] == "which films did Alfonso Cuarón direct" and four["gold"] == ["Roma", "Gravity"]
    assert four["prediction"] == ["Gravity", "Roma", "Children of Men"] and four["metrics"]["f1"] == pytest.approx(0.8)
    outputs = dict(zero["outputs"])
    assert "predicted chain ^directed_by" in outputs["decomposition"] and "gold chain directed_by" in outputs["decomposition"]
    assert "query: SELECT ?x" in outputs["attempt 1"] and "status ok" in outputs["attempt 1"]

    assert main(["bench", "show", "fake_i", "kept", "tiny-films-07"]) == 0
    out = capsys.readouterr().out
    assert "question:   which actors appear in films directed by Bong Joon-ho" in out
    assert "gold:       Song Kang-ho | Chris Evans" in out
    assert "prediction: (none: the method returned no answer)" in out and "2 LLM calls (1 from the cache)" in out
    assert main(["bench", "show", "fake_i", "kept", "--limit", "1", "tiny-films-01", "tiny-films-00"]) == 0  # qids after an option
    assert [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[")] == ["[tiny-films-01]", "[tiny-films-00]"]


def test_show_picks_the_first_records_or_the_wrong_ones_and_says_when_a_prediction_was_not_kept(table, capsys):
    assert [r["qid"] for r in bi.show("fake_i", "kept", limit=2)["rows"]] == ["tiny-films-00", "tiny-films-01"]
    wrong = bi.show("fake_i", "kept", wrong=True)
    assert [r["qid"] for r in wrong["rows"]] == ["tiny-films-04", "tiny-films-05", "tiny-films-07"]  # hits@1 0 or F1 < 1
    assert "3 wrong records" in wrong["selected"]
    assert main(["bench", "show", "fake_i", "old", "tiny-films-00"]) == 0
    out = capsys.readouterr().out
    assert ("prediction: prediction not kept in this record (older saved records); re-run the cell to keep it"
            in out)
    assert "gold:       Christopher Nolan" in out  # the gold still comes from the dataset


def test_show_without_the_data_says_in_one_line_why_the_question_is_not_shown(table, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("KGQA_DATA_DIR", str(tmp_path / "no_benchmarks_here"))
    d = bi.show("fake_i", "ext")
    assert d["rows"][0]["question"] is None and d["rows"][0]["prediction"] is None
    assert d["data"].startswith("question and gold answers not shown: the dataset files of keqing:metaqa:1hop")
    assert "set KGQA_DATA_DIR" in d["data"] and "\n" not in d["data"]
    assert main(["bench", "show", "fake_i", "ext"]) == 0
    out = capsys.readouterr().out
    assert "question and gold answers not shown" in out and "question:" not in out


def test_rescore_recomputes_the_stored_metric_from_kept_predictions(table):
    for metric, key in (("hits@1", "hits@1"), ("f1", "f1"), ("exact_set", "exact_match"), ("any_hit", "any_hit")):
        d = bi.rescore("fake_i", metric, cells=["kept", "old", "none"])
        assert d["key"] == key
        kept, old, none = d["rows"]
        stored = [_record(q, a)["metrics"][key] for q, a in ANSWERS.items()]
        assert kept["status"] == "rescored" and kept["n"] == len(ANSWERS) and kept["not_kept"] == 1  # the older record
        assert kept["mean"] == pytest.approx(sum(stored) / len(stored)) == pytest.approx(kept["stored"])
        assert kept["differ"] == 0 and kept["low"] <= kept["mean"] <= kept["high"]
        assert old["status"] == "not kept" and old["not_kept"] == 4  # (its empty prediction is no re-score on its own)
        assert none["status"] == "not run"
    exact = bi.rescore("fake_i", "exact_set", cells=["kept"])["rows"][0]
    assert exact["mean"] == pytest.approx(2 / 5)  # 00 and 01: the normalised sets equal; 04 has one more answer
    assert bi.rescore("fake_i", "rouge_l", cells=["kept"])["rows"][0]["status"] == "not applicable"


def test_rescore_counts_a_stored_value_that_is_not_what_the_prediction_gives(table):
    recs = [_record("tiny-films-00", ["Christopher Nolan"]), _record("tiny-films-01", ["2019"])]
    recs[1]["metrics"]["hits@1"] = 0.0  # scored against other gold, or by other code
    _write(table.model_dir(), "kept", recs)
    row = bi.rescore("fake_i", "hits@1", cells=["kept"])["rows"][0]
    assert row["mean"] == 1.0 and row["stored"] == 0.5 and row["differ"] == 1


def test_rescore_cli_prints_each_cell_and_the_cells_it_cannot_rescore(table, capsys):
    assert main(["bench", "rescore", "fake_i", "--metric", "exact_set", "--cells", "kept", "old", "none"]) == 0
    out = capsys.readouterr().out
    assert "exact_set (= exact_match) re-scored" in out
    row = next(line for line in out.splitlines() if line.startswith("kept "))
    assert row.split()[1] == "5" and "40.0 [" in row and "1 (1 prediction not kept (older records))" in row
    assert "cannot be re-scored: predictions not kept (older records; re-run the cells to keep them): old" in out
    assert "not run (no saved records): none" in out


def test_rescore_without_the_data_is_one_line_saying_to_set_kgqa_data_dir(table, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("KGQA_DATA_DIR", str(tmp_path / "no_benchmarks_here"))
    ext = [{"qid": "metaqa-1hop-dev-00021", "stripped": True, "prediction": ["Kiss and Make-Up"],
            "metrics": {"hits@1": 1.0}, "seconds": 1.0, "llm": {"calls": 1}}]
    _write(table.model_dir(), "ext", ext)
    with pytest.raises(UserError, match="KGQA_DATA_DIR"):
        bi.rescore("fake_i", "hits@1")
    assert main(["bench", "rescore", "fake_i", "--metric", "hits@1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: kgqa bench rescore needs the gold answers of keqing:metaqa:1hop for cells ext")
    assert "set KGQA_DATA_DIR" in err and len(err.strip().splitlines()) == 1
    # the cells on the project's own data need no KGQA_DATA_DIR
    assert main(["bench", "rescore", "fake_i", "--metric", "hits@1", "--cells", "kept"]) == 0


@pytest.mark.parametrize("argv, names", [
    (["bench", "show", "no_such", "kept"], "unknown benchmark table 'no_such'"),
    (["bench", "show", "fake_i", "kpet"], "table fake_i has no cell 'kpet' (did you mean 'kept'?); valid: kept, old"),
    (["bench", "show", "fake_i", "kept", "tiny-films-99"], "cell kept has no record of qid 'tiny-films-99'"),
    (["bench", "show", "fake_i", "none"], "fake_i has no saved records of cell none"),
    (["bench", "show", "fake_i", "kept", "--llm", "local:qwen2.5-0.5b"], "no saved records of model qwen2.5-0.5b"),
    (["bench", "show", "embed", "x"], "embed is a measurement table"),
    (["bench", "rescore", "fake_i", "--metric", "exactset"], "unknown metric 'exactset' (did you mean 'exact_set'?)"),
    (["bench", "rescore", "fake_i", "--metric", "f1", "--cells", "kept", "olf"], "has no cell 'olf'"),
    (["bench", "rescore", "fake_i"], "--metric"),
    (["bench", "show", "fake_i", "kept", "--wrnog"], "unrecognized arguments: --wrnog"),
])
def test_errors_are_one_line_naming_the_valid_names(table, capsys, argv, names):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and names in err and len(err.strip().splitlines()) == 1
    if "valid" in names or "unknown" in names:
        assert "; valid: " in err


def test_unknown_names_are_usage_errors(table):
    with pytest.raises(UsageError, match="valid: tiny-films-00, tiny-films-01"):
        bi.show("fake_i", "kept", ["nope"])
    with pytest.raises(UsageError, match="valid: hits@1, any_hit, exact_set"):
        bi.metric_key("em")


# ---------------------------------------------------------------- the committed records
@pytest.fixture
def committed(monkeypatch):
    monkeypatch.delenv("KGQA_RESULTS_DIR", raising=False)


def test_committed_miniworld_records_rescore_to_their_stored_means(committed):
    """pgakv_t2's records are whole (the mini-world is our own data): every prediction is kept, and
    re-scoring from it against today's dataset files gives each cell's stored mean exactly."""
    for metric, kind in (("hits@1", "factoid"), ("rouge_l", "open")):
        rows = bi.rescore("pgakv_t2", metric)["rows"]
        done = [r for r in rows if r["status"] == "rescored"]
        assert len(done) == (16 if kind == "factoid" else 5)
        assert all(r["status"] == "not applicable" for r in rows if r not in done)
        for r in done:
            assert r["n"] == r["records"] and r["not_kept"] == 0 and r["differ"] == 0 and r["gold_changed"] == 0
            assert r["mean"] == pytest.approx(r["stored_all"])


def test_committed_external_records_join_their_questions_and_rescore_what_they_kept(committed, data_dir_or_skip):
    """On MetaQA (KGQA_DATA_DIR): a record shows its question and gold; every cell of keqing_full either
    says its predictions were not kept (older records) or re-scores to its stored values."""
    d = bi.show("keqing_full", "keqing_full_1hop", limit=1)
    assert d["data"] is None and d["rows"][0]["question"] and d["rows"][0]["gold"]
    for r in bi.rescore("keqing_full", "hits@1")["rows"]:
        assert r["status"] in ("not kept", "rescored", "not run")
        if r["status"] == "rescored":
            assert r["differ"] == 0 and r["missing"] == 0
