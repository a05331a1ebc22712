"""The mini-world dev/test splits (issue 23): fixed once, deterministic, disjoint, covering, stratified."""

from collections import Counter

import pytest

from kgqa_lib.data.datasets import (MINIWORLD_DEV_FRACTION, Dataset, DatasetError, Question, load_dataset,
                                    question_type, split_dev_test)


@pytest.mark.parametrize("part", ["simple", "multihop", "open"])
def test_split_is_disjoint_covering_and_named(part):
    full = load_dataset(f"miniworld:{part}")
    test = load_dataset(f"miniworld:{part}:test")
    dev = load_dataset(f"miniworld:{part}:dev") if MINIWORLD_DEV_FRACTION[part] else Dataset("", [])
    d, t = {q.qid for q in dev}, {q.qid for q in test}
    assert not d & t and d | t == {q.qid for q in full}
    assert test.name == f"miniworld:{part}:test" and test.kg == "miniworld"
    assert len(test) >= 50  # the floor for every reported set
    assert [q.qid for q in test] == [q.qid for q in full if q.qid in t]  # dataset order kept


def test_split_sizes_and_strata():
    sizes = {p: (len(load_dataset(f"miniworld:{p}:dev")), len(load_dataset(f"miniworld:{p}:test")))
             for p in ("simple", "multihop")}
    assert sizes == {"simple": (48, 113), "multihop": (26, 62)}
    for p in ("simple", "multihop"):
        full, dev = load_dataset(f"miniworld:{p}"), load_dataset(f"miniworld:{p}:dev")
        all_types, dev_types = Counter(map(question_type, full)), Counter(map(question_type, dev))
        assert set(all_types) == set(dev_types)  # every type is in dev ...
        for k, n in all_types.items():  # ... in proportion (within one question)
            assert abs(dev_types[k] - 0.3 * n) <= 1, (p, k)
    with pytest.raises(DatasetError, match="no dev questions"):
        load_dataset("miniworld:open:dev")
    with pytest.raises(DatasetError, match="Unknown split"):
        load_dataset("miniworld:simple:train")


def test_split_is_deterministic_and_independent_of_order():
    full = load_dataset("miniworld:simple")
    a, _ = split_dev_test(full, seed=0, dev_fraction=0.3)
    b, _ = split_dev_test(Dataset(full.name, list(reversed(full.questions))), seed=0, dev_fraction=0.3)
    assert {q.qid for q in a} == {q.qid for q in b}
    c, _ = split_dev_test(full, seed=1, dev_fraction=0.3)
    assert {q.qid for q in c} != {q.qid for q in a}  # the seed matters
    assert {q.qid for q in a} == {q.qid for q in load_dataset("miniworld:simple:dev")}  # the registry's split is seed 0


def test_question_type_reads_the_metadata():
    q = lambda **md: Question("x", "?", [], metadata=md)  # noqa: E731
    assert question_type(q(form="count", hops=1)) == "count"
    assert question_type(q(style="list", domain="films")) == "list"
    assert question_type(q(property="population", temporal=True, recent=False)) == "temporal"
    assert question_type(q(property="capital")) == "plain"
    two = Dataset("d", [Question(f"q{i}", "?", [], metadata={"form": "path" if i % 4 else "count"}) for i in range(20)])
    dev, test = split_dev_test(two, dev_fraction=0.5)
    assert Counter(q.metadata["form"] for q in dev) == {"path": 8, "count": 2} and len(test) == 10
    with pytest.raises(ValueError, match="dev_fraction"):
        split_dev_test(two, dev_fraction=1.0)
