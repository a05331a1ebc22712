"""FuSIC transfer pairs: no test question reaches the few-shot pool, the exemplar pools or the
retrievers' training, on every pair. The questions each consumer reads are
recorded where it reads them (``prepared_domain`` for retriever training and FuSIC's exemplars,
``exemplars_from`` for KB-BINDER's), so the test follows the code, not a description of it. The pairs
on external benchmarks skip without KGQA_DATA_DIR. Also: the MetaQA target's per-hop datasets and the
gold SPARQL of its shots (3-hop: MetaQA's "other film" rule)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from kgqa_lib.methods import fusic as F

EXTERNAL = {"metaqa", "grailqa", "grailqa-fragment"}  # KGs that live in KGQA_DATA_DIR


def _needs_data(name: str) -> bool:
    return any(F.DOMAINS[spec.partition("@")[0]][0] in EXTERNAL for spec in F.TASKS[name])


def _task_or_skip(name: str):
    env = os.environ.get("KGQA_DATA_DIR")
    if _needs_data(name) and (not env or not Path(env).is_dir()):
        pytest.skip(f"{name} needs the external benchmarks (set KGQA_DATA_DIR=../shared/datasets)")
    return F.get_task(name)


def _key(q) -> tuple[str, str]:
    return q.qid, " ".join(q.question.casefold().split())


def _seen_by_consumers(monkeypatch, tmp_path, name: str, shots: int) -> dict[str, set[tuple[str, str]]]:
    """The questions the dense retriever's training (fine-tuned and head), FuSIC's exemplars and
    KB-BINDER's exemplar pool read for ``shots`` target shots."""
    from kgqa_lib.embed import retrieval as R
    from kgqa_lib.methods import kbbinder as KB
    from kgqa_lib.methods.fusic import generation as G, retrieval as FR

    read: dict[str, set[tuple[str, str]]] = {}
    who = ["training"]

    def prepared(spec, qids=None, oracle=True, max_hops=2):
        qs = FR.domain_questions(spec, qids)  # (the real lookup: the domain's questions, then its reserve)
        read.setdefault(who[0], set()).update(_key(q) for q in qs)
        return []

    def exemplars_from(questions, kg_of, kg_name, profile):
        read.setdefault("kbbinder", set()).update(_key(q) for q in questions)
        return []

    trained = SimpleNamespace(path=tmp_path / "unused", losses=[], examples=0, steps=0, seconds=0.0)
    monkeypatch.setattr(FR, "record_path", lambda: tmp_path / "record.jsonl")  # (never the committed record)
    monkeypatch.setattr(FR, "prepared_domain", prepared)
    monkeypatch.setattr(G, "prepared_domain", prepared)
    monkeypatch.setattr(R, "train_dense", lambda examples, **kw: trained)
    monkeypatch.setattr(R, "train_head", lambda examples, **kw: (None, trained))
    monkeypatch.setattr(R, "DenseRetriever", lambda *a, **kw: SimpleNamespace())
    monkeypatch.setattr(R, "HeadRetriever", lambda *a, **kw: SimpleNamespace())
    monkeypatch.setattr(KB, "exemplars_from", exemplars_from)
    monkeypatch.setattr(KB, "_POOLS", {})
    FR.trained_retriever.__wrapped__(name, shots)
    FR.trained_head.__wrapped__(name, shots)
    task = F.get_task(name)
    who[0] = "exemplars"
    F.exemplars_for(task.test[0], task, shots, "sparql", [], n=0)
    KB.exemplar_pool(task.target.kg, task.target.kg_name, name, shots)
    return read


@pytest.mark.parametrize("name", list(F.TASKS))
@pytest.mark.parametrize("shots", [0, 5, F.SHOT_POOL, 100])
def test_no_test_question_in_shots_pools_or_retriever_training(monkeypatch, tmp_path, name, shots):
    task = _task_or_skip(name)
    if shots > F.SHOT_POOL and task.target.name != "metaqa":  # only MetaQA holds more shots than its pool
        with pytest.raises(ValueError, match=f"shots={shots}: the target .* holds {F.SHOT_POOL} few shots"):
            F.target_shots(task, shots)
        return
    test = {_key(q) for q in task.test}
    test_ids, test_texts = {k[0] for k in test}, {k[1] for k in test}
    assert len(task.pool) == F.SHOT_POOL and len(task.test) >= 80
    read = _seen_by_consumers(monkeypatch, tmp_path, name, shots)
    assert set(read) == {"training", "exemplars", "kbbinder"}
    for consumer, keys in read.items():
        assert keys, consumer
        assert not {k[0] for k in keys} & test_ids, f"{name}, {shots} shots: a test qid reaches {consumer}"
        assert not {k[1] for k in keys} & test_texts, f"{name}, {shots} shots: a test question's text reaches {consumer}"
    # what they read is exactly: the source (training; zero-shot exemplars) and the first `shots` of the pool
    shot_keys = {_key(q) for q in F.target_shots(task, shots)}
    assert len(shot_keys) == shots
    source = {_key(q) for q in task.source.questions}
    assert read["training"] == source | shot_keys
    assert read["exemplars"] == read["kbbinder"] == (shot_keys if shots else source)
    # the datasets `kgqa run` evaluates are the test questions
    from kgqa_lib.data.datasets import load_dataset

    assert [q.qid for q in load_dataset(f"fusic:{name}")] == [q.qid for q in task.test]
    assert [q.qid for q in load_dataset(f"fusic:{name}:pool")] == [q.qid for q in task.pool]


def test_metaqa_target_per_hop_datasets(data_dir_or_skip):
    """mw-wd>metaqa: ≥ 100 test questions per hop from MetaQA dev, one dataset per hop, the pool dealt
    over the hops (5 shots = hops 1, 2, 3, 1, 2), seeded (the same questions every time)."""
    from kgqa_lib.data.datasets import DatasetError, load_dataset

    task = F.get_task("mw-wd>metaqa")
    assert [q.metadata["hops"] for q in task.pool[:5]] == [1, 2, 3, 1, 2]
    assert all(q.qid.split("-")[2] == "dev" for q in task.pool + task.test)
    parts = {h: load_dataset(f"fusic:mw-wd>metaqa:test-{h}hop") for h in (1, 2, 3)}
    assert all(len(d) >= 100 and d.kg == "metaqa" for d in parts.values())
    assert sum(len(d) for d in parts.values()) == len(task.test)
    assert all(q.metadata["hops"] == h for h, d in parts.items() for q in d)
    assert Counter(q.metadata["hops"] for q in task.test) == {h: len(d) for h, d in parts.items()}
    # the bench cells' --sample 100 (seed 0): 100 questions per hop, the same ones on every call
    sample = load_dataset("fusic:mw-wd>metaqa:test-3hop", sample=100)
    assert len(sample) == 100 and [q.qid for q in sample] == [q.qid for q in load_dataset("fusic:mw-wd>metaqa:test-3hop", sample=100)]
    with pytest.raises(DatasetError, match="test-1hop, test-2hop, test-3hop"):
        load_dataset("fusic:mw-wd>metaqa:test-4hop")
    with pytest.raises(DatasetError, match="use test, dev, pool, test-<N>hop or dev-<N>hop"):
        load_dataset("fusic:mw-wd>metaqa:train")


def _reported_qids(name: str) -> set[str]:
    """The qids of the saved records (the default model's) of every cell of the ``fusic`` bench table on
    task ``name``: the questions its report is scored on."""
    from kgqa_lib import bench
    from kgqa_lib.bench.core import Records

    table = bench.get_table("fusic")
    records = Records(table)
    return {r["qid"] for c in table.cells if c.dataset.split(":")[1] == name for r in records(c.name)}


@pytest.mark.parametrize("name", list(F.TASKS))
def test_dev_part_is_disjoint_from_the_reported_questions_and_the_shots(name):
    """Every target's dev part (``fusic:<task>:dev``, where settings are chosen) holds no reported question
    (the task's test questions, and every question a saved record of the bench table is scored on), no
    few shot (pool and reserve) and no source question — by id, by text and by gold query — each
    question with a gold form; its size is the one the report prints (``dev_size``, also per hop);
    the same questions on every call. A target with no spare question has none, and says why."""
    from kgqa_lib.data.datasets import DatasetError, load_dataset

    task = _task_or_skip(name)
    dev = F.dev_questions(name)
    dom = task.target
    reported = set(map(_key, task.test))
    recorded = _reported_qids(name)
    assert recorded <= {k[0] for k in reported}  # the records are scored on the task's test questions only
    shots = set(map(_key, F.target_shots(task, F.SHOT_POOL + len(F.domain_reserve(dom.name)))))
    source = set(map(_key, task.source.questions))
    keys = list(map(_key, dev))
    assert len(set(keys)) == len(keys) and len({k[1] for k in keys}) == len(keys)
    for other, what in ((reported, "a reported question"), (shots, "a few shot"), (source, "a source question")):
        assert not {k[0] for k in keys} & {k[0] for k in other}, f"{name}: {what}'s qid is in the dev part"
        assert not {k[1] for k in keys} & {k[1] for k in other}, f"{name}: {what}'s text is in the dev part"
    assert not {k[0] for k in keys} & recorded
    gold = lambda q: dom.gold(q).sparql(dom.profile)  # noqa: E731
    used = {gold(q) for q in [*task.test, *F.target_shots(task, len(shots))] if dom.gold(q) is not None}
    assert all(dom.gold(q) is not None for q in dev) and not {gold(q) for q in dev} & used
    assert len(dev) == F.dev_size(name)
    for h in sorted({q.metadata.get("hops") for q in dev} - {None}):
        assert sum(q.metadata.get("hops") == h for q in dev) == F.dev_size(name, h)
    assert [q.qid for q in F.dev_questions.__wrapped__(name)] == [q.qid for q in dev]
    tgt = dom.name.partition("@")[0]
    if dev:
        assert [q.qid for q in load_dataset(f"fusic:{name}:dev")] == [q.qid for q in dev]
    else:
        assert tgt in F.DEV_NONE
        with pytest.raises(DatasetError, match="has no questions"):
            load_dataset(f"fusic:{name}:dev")
    if tgt == "metaqa":  # DEV_PER_HOP further MetaQA dev questions per hop, outside the sampled set
        assert {h: sum(q.metadata["hops"] == h for q in dev) for h in (1, 2, 3)} == {h: F.DEV_PER_HOP["metaqa"] for h in (1, 2, 3)}
        assert all(q.qid.split("-")[2] == "dev" for q in dev)
        assert not {q.qid for q in dev} & {q.qid for q in dom.questions}
        assert [q.qid for q in load_dataset(f"fusic:{name}:dev-2hop")] == [q.qid for q in dev if q.metadata["hops"] == 2]


def test_cinema_to_geography_has_a_dev_part_from_the_spare_set():
    """cinema → geography's dev part (``fusic:cinema-fb>geo-wd:dev``) is the mini-world's spare geography and
    technology questions (scripts/build_miniworld.py, a seed of its own): on the target's topics, none a pool or
    reported question or a source question by id, text or gold query (on either schema), all from the spare set;
    geography → cinema's stays the templated set's."""
    from kgqa_lib.data.datasets import load_dataset

    name = "cinema-fb>geo-wd"
    task, dev = F.get_task(name), F.dev_questions(name)
    assert len(dev) >= 50 and F.dev_size(name) == len(dev)
    assert all(q.qid.startswith("mw-spare-") and q.metadata["topic_keys"][0].startswith(("g_", "t_")) for q in dev)
    spare = {q.qid for q in load_dataset("miniworld:spare")}
    assert {q.qid for q in dev} <= spare
    others = [*task.pool, *task.test, *task.source.questions]
    assert not {q.qid for q in dev} & {q.qid for q in others}
    assert not set(map(_key, dev)) & set(map(_key, others)) and not {k[1] for k in map(_key, dev)} & {
        k[1] for k in map(_key, others)}
    for schema in ("sparql_wikidata", "sparql_freebase", "form"):  # the same question asked again: same gold query
        assert not {q.gold_query[schema] for q in dev} & {q.gold_query[schema] for q in [*task.pool, *task.test]}, schema
    every = [q for s in ("simple", "multihop", "templated", "open") for q in load_dataset(f"miniworld:{s}")]
    assert not {q.gold_query.get("form") for q in load_dataset("miniworld:spare")} & {
        q.gold_query.get("form") for q in every if q.gold_query.get("form")}  # no other set asks a spare form
    assert not {k for q in load_dataset("miniworld:spare") for k in q.metadata["topic_keys"]} & {
        k for q in every for k in q.metadata.get("topic_keys") or []}  # nor about a spare question's topic
    assert "miniworld:spare" in F.DEV_FROM["mw-geo"] and "mw-geo" not in F.DEV_NONE
    assert {q.qid.split("-")[1] for q in F.dev_questions("geo-wd>cinema-fb")} == {"templated"}


def test_metaqa_reserve_adds_shots_outside_the_sampled_questions(data_dir_or_skip):
    """shots 25/100 (Table 3): MetaQA's pool of 10, then 90 more dev questions outside the
    domain's sampled set (by id and text, so outside the test questions), dealt over the hops, each
    with a gold form; the exemplars stay the 5-shot cell's (static); more shots than held is an error."""
    task = F.get_task("mw-wd>metaqa")
    reserve = F.domain_reserve("metaqa")
    assert len(reserve) == F.SHOT_RESERVE["metaqa"] == 90 and reserve == F.domain_reserve("metaqa")
    sampled = {_key(q) for q in task.target.questions}
    assert not {k[0] for k in map(_key, reserve)} & {k[0] for k in sampled}
    assert not {k[1] for k in map(_key, reserve)} & {k[1] for k in sampled}
    assert len({_key(q)[1] for q in reserve}) == 90 and all(task.target.gold(q) is not None for q in reserve)
    assert [q.metadata["hops"] for q in reserve[:6]] == [1, 2, 3, 1, 2, 3]
    shots = F.target_shots(task, 100)
    assert shots[:F.SHOT_POOL] == task.pool and shots[F.SHOT_POOL:] == list(reserve)
    assert F.target_shots(task, 25) == shots[:25] and F.target_shots(task, 5) == task.pool[:5]
    with pytest.raises(ValueError, match="holds 100 few shots .*use fewer shots"):
        F.target_shots(task, 101)
    q = task.test[0]
    five, hundred = (F.exemplars_for(q, task, n, "sparql", [], naive=True) for n in (5, 100))
    assert [e.question for e in hundred] == [e.question for e in five] and len(five) == 5


def test_metaqa_shots_gold_sparql_gives_the_gold_answers(data_dir_or_skip):
    """The exemplars' SPARQL (from MetaQA's question types, 3-hop too) executed on the KB gives the
    dataset's answers for every pool question, and for ≥ 95% of the test questions (F1 averaged)."""
    from kgqa_lib.evaluate.metrics import set_prf

    task = F.get_task("mw-wd>metaqa")
    d = task.target

    def f1(q):
        g = d.gold(q)
        ex = F.execute_query(g.sparql(d.profile), d.kg, d.profile, exclude=g.topics, max_answers=5000)
        return set_prf(ex.answers, q.answers)[2]

    assert [f1(q) for q in task.pool] == [1.0] * F.SHOT_POOL
    for h in (1, 2, 3):
        qs = [q for q in task.test if q.metadata["hops"] == h][:60]
        assert sum(map(f1, qs)) / len(qs) >= 0.93, h  # measured on 300 dev questions per hop: 0.98 / 0.96 / 0.97


def test_out_and_back_paths_exclude_where_they_started():
    """film → director ← other film → writer: the other film is not the topic (MetaQA's 3-hop rule);
    without the out-and-back step only the answer is constrained."""
    prof = F.profile_for("metaqa")
    r = lambda n: f"http://kgqa.local/metaqa/relation/{n}"  # noqa: E731
    topic = "http://kgqa.local/metaqa/entity/Heat"
    three = F.Gold([topic], [(r("directed_by"), False), (r("directed_by"), True), (r("written_by"), False)], "path")
    assert three.sparql(prof).endswith("FILTER(?x != e:Heat && ?v1 != e:Heat) }")
    two = F.Gold([topic], [(r("directed_by"), False), (r("directed_by"), True)], "path")
    assert two.sparql(prof).endswith("FILTER(?x != e:Heat) }")
    onward = F.Gold([topic], [(r("starred_actors"), False), (r("starred_actors"), True), (r("starred_actors"), False)],
                    "path")
    assert "?v1 != e:Heat" in onward.sparql(prof) and "?x != ?v0" in onward.sparql(prof)
    chain = F.Gold([topic], [(r("directed_by"), False), (r("written_by"), True)], "path")
    assert chain.sparql(prof).endswith("FILTER(?x != e:Heat) }")
