"""Saved benchmark records (``results/bench/runs/**.jsonl.gz``) keep what a method produced (predictions, the
chains and queries it wrote, the candidates it selected, stage outcomes), ids, metrics and costs — never a
question's text, its gold answers or its gold annotations (gold relation chains, gold queries, s-expressions,
gold topics). A flag, count or score computed against the gold when the record was saved may sit under a
gold-named key (``"n_gold": 2``, ``"gold_chain": {"hits@1": 1.0}``); text may not.

Every committed record of every table and every model is scanned, except the folders of tables whose records
are the project's own mini-world data and are saved whole (every table keeping its records there has
``strip=None``)."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from kgqa_lib import bench
from kgqa_lib.paths import repo_root

RUNS = repo_root() / "results" / "bench" / "runs"

#: keys that name a question's text or its gold: a value under one may hold numbers, booleans and nulls only
GOLD_KEY = re.compile(r"^(?:gold|golds|gold_(?:answers?|chains?|paths?|query|queries|sparql|sexpr|s_expression|"
                      r"topics?|entities|relations?|logical_form)|answers?_gold|sexpr|s_expression|logical_form|"
                      r"question|questions|question_text|raw_question|topic_entities)$", re.I)


def _text(value: Any) -> bool:
    """Whether a value holds text anywhere (a string, in any nesting of lists and dicts)."""
    if isinstance(value, str):
        return True
    if isinstance(value, dict):
        return any(_text(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_text(v) for v in value)
    return False


def gold_fields(record: dict[str, Any]) -> list[str]:
    """The dotted paths (``[]`` for a list's items) of a record's gold-named keys that hold text. The record's
    ``config`` (the settings a command gave, prompt-file hashes) is the user's input, not the benchmark's."""
    out: list[str] = []

    def walk(x: Any, path: str) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                p = f"{path}.{k}" if path else str(k)
                if GOLD_KEY.match(str(k)) and _text(v):
                    out.append(p)
                else:
                    walk(v, p)
        elif isinstance(x, list):
            for v in x:
                walk(v, f"{path}[]")

    walk({k: v for k, v in record.items() if k != "config"}, "")
    return out


def whole_record_folders() -> set[str]:
    """Record folders whose every table saves its records whole (``strip is None``): the mini-world's own data."""
    strips: dict[str, list[bool]] = {}
    for t in bench.tables():
        strips.setdefault(t.records_root.name, []).append(t.strip is None)
    return {name for name, whole in strips.items() if all(whole)}


def saved_files(runs: Path = RUNS) -> Iterator[Path]:
    """Every saved record file under ``runs`` (each model's folder, re-runs' side files included)."""
    skip = whole_record_folders()
    for folder in sorted(p for p in runs.iterdir() if p.is_dir() and p.name not in skip):
        yield from sorted(folder.glob("**/*.jsonl.gz"))


def scan(runs: Path = RUNS) -> list[str]:
    """``<file>: <field> (<n> records)`` for every gold-named field holding text in a saved record."""
    found = []
    for path in saved_files(runs):
        fields: Counter = Counter()
        for line in gzip.decompress(path.read_bytes()).decode("utf-8").splitlines():
            if line.strip():
                fields.update(gold_fields(json.loads(line)))
        found += [f"{path.relative_to(runs)}: {f} ({n} records)" for f, n in sorted(fields.items())]
    return found


def test_the_scan_finds_gold_text_and_lets_flags_and_counts_pass():
    record = {"qid": "q1", "metrics": {"hits@1": 1.0}, "prediction": ["A Film"],
              "diagnostics": {"decomposition": {"predicted_chain": ["directed_by"], "gold_chain": ["directed_by"],
                                                "chain_correct": True}},
              "trace": [{"name": "decomposition_check", "output": {"gold_chain": ["written_by"], "correct": False}}],
              "selection": {"n_gold": 2, "gold_in_candidates": 1}, "grailqa": {"gold_chain": {"hits@1": 1.0}},
              "funnel": {"gold": {"retrieved": True}}, "config": {"settings": {"question": "set by the user"}}}
    assert gold_fields(record) == ["diagnostics.decomposition.gold_chain", "trace[].output.gold_chain"]
    assert gold_fields({"question": "who directed Heat", "gold": ["Michael Mann"], "gold_query": {"sparql": "SELECT"},
                        "s_expression": "(JOIN r m.0)", "topic_entities": ["Heat"]}) == \
        ["question", "gold", "gold_query", "s_expression", "topic_entities"]
    assert gold_fields({"qid": "q", "gold_chain": [], "gold": None, "attempts": [{"query": "SELECT ?x"}]}) == []


def test_the_scan_skips_only_folders_of_tables_saved_whole(tmp_path):
    whole = whole_record_folders()
    assert {"pgakv_t2", "tog_miniworld"} <= whole
    assert not whole & {"keqing_metaqa", "keqing_full", "keqing_ablations", "keqing_grailqa", "fusic", "baselines_metaqa",
                        "pgakv_metaqa"}
    # a saved record with gold text, in a model folder and in a re-run's side file, is named with its field
    for name in ("keqing_full/some-model/keqing_full_1hop.jsonl.gz", "fusic/m/x.again.jsonl.gz",
                 "tog_miniworld/m/tog_simple.jsonl.gz"):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress((json.dumps({"qid": "q", "gold": ["x"]}) + "\n").encode(), mtime=0))
    assert scan(tmp_path) == ["fusic/m/x.again.jsonl.gz: gold (1 records)",
                              "keqing_full/some-model/keqing_full_1hop.jsonl.gz: gold (1 records)"]


def test_no_saved_record_holds_a_question_or_its_gold():
    found = scan()
    assert not found, "saved records hold gold or question text:\n" + "\n".join(found)
