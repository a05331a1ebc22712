"""Loaders of the Freebase/Wikidata benchmarks (KGQA_DATA_DIR; skipped without it)."""

from __future__ import annotations

import re

import pytest

from kgqa_lib.data.benchmarks import topic_ids
from kgqa_lib.data.datasets import DatasetNotFound, load_dataset

EXPECTED = {"qald10:tog": (333, r"Q\d+"), "qald10:full": (394, r"Q\d+"), "simplequestions:tog": (1000, r"m\.\w+"),
            "webqsp:test": (1639, r"[mg]\.\w+"), "webqsp:grasp": (100, r"[mg]\.\w+"), "grailqa:dev": (967, r"[mg]\.\w+")}


@pytest.mark.parametrize("spec", sorted(EXPECTED))
def test_loaders_give_topic_ids(spec, data_dir_or_skip):
    ds = load_dataset(spec)
    n, pattern = EXPECTED[spec]
    assert len(ds) == n
    with_topic = [q for q in ds if topic_ids(q)]
    assert len(with_topic) >= 0.95 * n
    assert all(re.fullmatch(pattern, t) for q in with_topic for t in topic_ids(q))
    assert all(q.question and isinstance(q.answers, list) for q in ds)
    assert sum(bool(q.answers) for q in ds) >= 0.9 * n


def test_missing_data_says_where(monkeypatch, tmp_path):
    monkeypatch.setenv("KGQA_DATA_DIR", str(tmp_path))
    with pytest.raises(DatasetNotFound, match="qald_10-en_ToG_333.json is missing.*Source"):
        load_dataset("qald10:tog")
    monkeypatch.delenv("KGQA_DATA_DIR")
    with pytest.raises(DatasetNotFound, match="needs KGQA_DATA_DIR"):
        load_dataset("webqsp:test")
