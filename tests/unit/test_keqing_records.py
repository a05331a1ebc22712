"""Keqing's saved records hold no gold: the strip keeps the predicted relation path and the flags computed
against the gold, never the gold path (:func:`kgqa_lib.bench.keqing.without_gold`); records saved before are
rewritten the same way in place (:func:`~kgqa_lib.bench.keqing.restrip_saved`), byte for byte as the runner
saves records; the reports' tallies of gold paths come from the MetaQA data and are kept, tallies only, beside
the records (:func:`~kgqa_lib.bench.keqing.gold_chain_counts`)."""

from __future__ import annotations

import copy
import gzip
import json
import shutil

import pytest

from kgqa_lib.bench import core
from kgqa_lib.bench import keqing as K
from kgqa_lib.bench import keqing_grailqa as G
from kgqa_lib.evaluate.runner import save_runs
from kgqa_lib.paths import repo_root

DECOMPOSITION = {"predicted_chain": ["^directed_by", "in_language"], "gold_chain": ["directed_by", "in_language"],
                 "chain_correct": False, "seed_named": True, "seed_correct": True, "correct": False}


def _full_record(qid: str = "q1") -> dict:
    """A run record as the runner writes it (question, gold, trace, diagnostics with the gold path)."""
    steps = [{"sub": {"seed_entities": ["Heat"]}, "match": {"chains": [["^directed_by"]]},
              "reasoning": {"mode": "select", "n_candidates": 3, "n_answers": 1, "candidates": ["A", "B", "C"],
                            "calls": 1}}]
    return {"qid": qid, "question": "which language are the films by the director of [Heat] in", "gold": ["English"],
            "prediction": ["English"], "response": "English.", "kind": "factoid", "error": None, "seconds": 2.0,
            "metrics": {"hits@1": 1.0, "f1": 1.0}, "llm": {"calls": 3}, "config_hash": "abc", "config": {"seed": 0},
            "trace": [{"name": "decompose", "output": {"error": None, "text": "sub-questions about [Heat]"},
                       "seconds": 1.0},
                      {"name": "execute_plan", "output": [steps, None], "seconds": 0.5},
                      {"name": "respond", "output": "English.", "seconds": 0.2}],
            "diagnostics": {"decomposition": dict(DECOMPOSITION)}}


def _gold_text(r: dict) -> bool:
    return "gold_chain" in json.dumps(r) or '["directed_by", "in_language"]' in json.dumps(r)


def test_the_strips_keep_the_predicted_path_and_the_flags_not_the_gold_path():
    r = _full_record()
    kept = {k: v for k, v in DECOMPOSITION.items() if k != "gold_chain"}
    for strip in (K.strip, K.strip_full):
        s = strip(r)
        assert s["diagnostics"] == {"decomposition": kept} and not _gold_text(s)
        assert "question" not in s and "gold" not in s and s["prediction"] == ["English"]
        assert K.without_gold(s) == s  # nothing left to cut
    assert r["diagnostics"]["decomposition"] == DECOMPOSITION  # the run record itself is left as it was
    # older records: the check as a trace stage, kept with its flag, without the gold path
    old = {**r, "trace": [{"name": "decomposition_check", "output": {"predicted_chain": ["^directed_by"],
                                                                     "gold_chain": ["directed_by"], "correct": False}},
                          *r["trace"]]}
    del old["diagnostics"]
    s = K.strip(old)
    assert s["trace"][0] == {"name": "decomposition_check", "output": {"predicted_chain": ["^directed_by"], "correct": False}}
    assert "diagnostics" not in s and not _gold_text(s)
    # the report reads the same chain flag from either
    assert K._chain_right(K._decomposition(s)) is False and K._chain_right(K._decomposition(K.strip(r))) is False


def test_a_record_saved_before_is_restripped_to_what_the_strip_saves_now():
    r = _full_record()
    for strip in (K.strip, K.strip_full):
        now = strip(r)
        before = copy.deepcopy(now)  # what earlier code saved: the diagnostics whole
        before["diagnostics"] = copy.deepcopy(r["diagnostics"])
        assert _gold_text(before) and K.without_gold(before) == now


def test_a_grailqa_record_keeps_flags_and_scores_of_the_gold_only(monkeypatch):
    flags = {"level": "zero-shot", "chain": True, "hops": 1, "covered": True,
             "decomposition": {"chain_correct": True, "seed_correct": True, "correct": True},
             "gold_chain": {"hits@1": 1.0, "f1": 1.0}, "topics": {"linked": 1, "gold": 1, "gold_linked": 1}}
    monkeypatch.setattr(G, "grailqa_fields", lambda r: flags)
    s = G.strip(_full_record())
    assert s["grailqa"] == flags and "gold_chain" not in s["diagnostics"]["decomposition"]
    assert K.without_gold(s) == s


def _write(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode(), mtime=0))


def test_restrip_saved_rewrites_every_models_records_in_place_as_the_runner_saves_them(tmp_path, monkeypatch):
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path))
    root = K.TABLE_FULL.records_root
    before = [dict(K.strip(_full_record(f"q{i}")), diagnostics=copy.deepcopy(_full_record()["diagnostics"]))
              for i in range(3)]
    before.append(K.strip(_full_record("q3")))  # one already without the gold path
    _write(root / "model-a" / "keqing_full_2hop.jsonl.gz", before)
    _write(root / "model-b" / "keqing_full_2hop.again.jsonl.gz", before[:1])
    (root / K.CEILING_FILE).write_text("{}\n")
    clean = root / "model-b" / "keqing_full_1hop.jsonl.gz"
    _write(clean, before[3:])
    untouched = clean.read_bytes()
    out = K.restrip_saved("keqing_full")
    assert out == {"keqing_full/model-a/keqing_full_2hop.jsonl.gz": (3, 4),
                   "keqing_full/model-b/keqing_full_1hop.jsonl.gz": (0, 1),
                   "keqing_full/model-b/keqing_full_2hop.again.jsonl.gz": (1, 1)}
    assert clean.read_bytes() == untouched and (root / K.CEILING_FILE).read_text() == "{}\n"
    # the bytes are what the runner's save_runs writes for the stripped records, in the same order
    live = tmp_path / "live" / "keqing_full_2hop.jsonl"
    live.parent.mkdir()
    live.write_text("".join(json.dumps(K.without_gold(r)) + "\n" for r in before))
    save_runs([live], tmp_path / "expected")
    assert (root / "model-a" / "keqing_full_2hop.jsonl.gz").read_bytes() == \
        (tmp_path / "expected" / "keqing_full_2hop.jsonl.gz").read_bytes()
    assert all(c == 0 for c, _ in K.restrip_saved("keqing_full").values())  # a second pass changes nothing


def test_the_gold_path_tallies_come_from_the_data_and_are_kept_as_tallies(tmp_path, monkeypatch):
    gold = {"a": ("r1", "r2"), "b": ("r1", "r2"), "c": ("r3",)}
    monkeypatch.setattr(K, "gold_chains_of", lambda hops: gold)
    items = [("c", "x"), ("a", "y"), ("b", "y")]
    counts = K.gold_chain_counts(tmp_path, "wrong_2hop", 2, items)
    assert list(counts.items()) == [(("x", ("r3",)), 1), (("y", ("r1", "r2")), 2)]  # in the order each first occurs
    stored = json.loads((tmp_path / K.CHAINS_FILE).read_text())
    assert set(stored) == {"wrong_2hop"} and "a" not in json.dumps(stored["wrong_2hop"]["counts"])  # no question id
    monkeypatch.setattr(K, "gold_chains_of", lambda hops: None)  # without the data: the kept tally
    assert list(K.gold_chain_counts(tmp_path, "wrong_2hop", 2, items).items()) == list(counts.items())
    assert K.gold_chain_counts(tmp_path, "wrong_2hop", 2, items[:2]) is None  # other questions: not kept, no data
    assert K.gold_chain_counts(tmp_path, "lost_2hop", 2, []) == {}
    monkeypatch.setattr(K, "gold_chains_of", lambda hops: {"a": ("r1",)})
    assert K.gold_chain_counts(tmp_path, "lost_2hop", 2, [("z",)]) is None  # a question the data does not hold


def test_the_kept_tallies_are_what_the_metaqa_data_gives(data_dir_or_skip, tmp_path, monkeypatch):
    """The committed reports' gold-path tallies (kept in gold_chains.json) against the same tallies computed
    from the data, on a copy of the records without the kept file."""
    if not (data_dir_or_skip / "metaqa").is_dir():
        pytest.skip("MetaQA not under KGQA_DATA_DIR")
    runs = repo_root() / "results" / "bench" / "runs"
    kept_wrong = K.wrong_sequences(core.Records(K.TABLE))
    kept_lost = K.full_tables(core.Records(K.TABLE_FULL))["disagreements"].rows
    assert kept_wrong is not None and all("needs KGQA_DATA_DIR" not in str(c) for row in kept_lost for c in row)
    for name in ("keqing_metaqa", "keqing_full", "baselines_metaqa"):
        shutil.copytree(runs / name, tmp_path / "bench" / "runs" / name,
                        ignore=shutil.ignore_patterns(K.CHAINS_FILE))
    monkeypatch.setenv("KGQA_RESULTS_DIR", str(tmp_path))
    assert K.wrong_sequences(core.Records(K.TABLE)) == kept_wrong
    assert K.full_tables(core.Records(K.TABLE_FULL))["disagreements"].rows == kept_lost


def test_the_gold_chain_tallies_hold_relation_names_and_counts_only():
    """The committed ``gold_chains.json`` files (what two Keqing reports tally of gold chains, kept so the reports
    regenerate without the data) hold MetaQA relation names, counts and hashes: no qid, no question, no answer."""
    import json
    import re

    from kgqa_lib.paths import repo_root

    files = sorted((repo_root() / "results" / "bench" / "runs").glob("*/gold_chains.json"))
    assert files
    relation = re.compile(r"^\^?[a-z_]+( / \^?[a-z_]+)*$")  # a relation, or a chain of them joined by " / "
    for f in files:
        def walk(x, key=""):
            if isinstance(x, dict):
                for k, v in x.items():
                    walk(v, k)
            elif isinstance(x, list):
                for v in x:
                    walk(v, key)
            elif isinstance(x, str):
                assert (key == "items" and re.fullmatch(r"[0-9a-f]{16}", x)) or relation.match(x), (f.name, key, x)
            else:
                assert isinstance(x, (int, float)), (f.name, key, x)

        walk(json.loads(f.read_text(encoding="utf-8")))
