"""Transfer tasks: a source domain (retriever training data, zero-shot exemplars) and a target
domain (few-shot pool, test questions), each a question set on its own KG schema. A task's "test"
questions are the part of the target's questions the benchmark reports (all of them, or a seeded
sample): on MetaQA they are MetaQA *dev* questions (MetaQA's test set is not used). ``test`` in a
dataset name (``fusic:mw-wd>metaqa:test-1hop``) names that reported part; ``reported`` is accepted
for it too (:data:`REPORTED`). Each target also has a dev part (:func:`dev_questions`,
``fusic:<task>:dev``), disjoint from its test questions and its few shots, where settings are chosen."""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ...data.datasets import Dataset, Question, register
from ...kg import grailqa_fragment  # noqa: F401  (registers grailqa:fragment…, the GrailQA-Tech domains' sets)
from .gold import Gold, gold_of
from .schema import SchemaProfile, profile_for


# ---------------------------------------------------------------------------------------------
# Transfer tasks: source and target domains
# ---------------------------------------------------------------------------------------------
DOMAINS = {
    # name: (kg name, question sets, topic-key prefixes)
    "mw-geo": ("miniworld", ("simple", "multihop"), ("g_", "t_")),
    "mw-cinema": ("miniworld", ("simple", "multihop"), ("p_", "f_")),
    "mw-all": ("miniworld", ("simple", "multihop"), ("g_", "t_", "p_", "f_")),
    # MetaQA dev, METAQA_PER_HOP seeded questions per hop (1, 2, 3); the few-shot pool is dealt over the hops
    "metaqa": ("metaqa", ("1hop", "2hop", "3hop"), ()),
    "grailqa": ("grailqa", ("dev",), ()),  # ORACLE: each question on its own answer-bearing slice
    # one shared graph of every question's gold facts (kgqa_lib.kg.grailqa_fragment), split by domain
    "grailqa-nontech": ("grailqa-fragment", ("fragment-nontech",), ()),
    "grailqa-tech": ("grailqa-fragment", ("fragment-tech",), ()),  # GrailQA-Tech: grailqa_fragment.TECH_DOMAINS
}
TASKS = {
    # the default pair in the notebooks: different domains AND different schemas, all our own data
    "geo-wd>cinema-fb": ("mw-geo@wikidata", "mw-cinema@freebase"),
    "cinema-fb>geo-wd": ("mw-cinema@freebase", "mw-geo@wikidata"),
    # with KGQA_DATA_DIR (MetaQA dev): benchmark only, never committed. mw-wd>metaqa: a real KG (the
    # WikiMovies KB) as target, one dataset per hop: fusic:mw-wd>metaqa:test-1hop (…-2hop, …-3hop). The IRIs
    # differ (P57 vs directed_by) but the mini-world labels its film properties with MetaQA's relation
    # names ("directed by", "starred actors"): the relation names carry over from source to target.
    "metaqa>cinema-fb": ("metaqa", "mw-cinema@freebase"),
    "mw-wd>metaqa": ("mw-all@wikidata", "metaqa"),
    # GrailQA (KGQA_DATA_DIR): real Freebase relation names on answer-bearing slices
    "grailqa>cinema-fb": ("grailqa", "mw-cinema@freebase"),
    "cinema-fb>grailqa": ("mw-cinema@freebase", "grailqa"),
    # shaped like the paper's WebQSP→GrailQA-Tech (W→GI-T): non-technical GrailQA domains → technical
    # ones, both on the shared fragment (no per-question slices)
    "grailqa>grailqa-tech": ("grailqa-nontech", "grailqa-tech"),
}
SHOT_POOL = 10  # target questions reserved for few-shot use, whatever the number of shots
METAQA_PER_HOP = 200  # MetaQA dev questions sampled per hop (seeded): the pool's share, the rest test
#: targets whose data hold more few shots than the pool (Table 3 analogue: shots 0/5/25/100 "where the
#: pool allows"): this many further questions, from the target's data outside its sampled question set
#: (MetaQA dev beyond the METAQA_PER_HOP sample), so a run may fine-tune on up to SHOT_POOL + reserve
#: target shots (the paper samples 100) while its test questions stay those of the 5-shot cells
SHOT_RESERVE = {"metaqa": 90}
STRATA = {"metaqa": "hops"}  # targets whose pool is dealt round-robin over this metadata key (so 5 shots
# of MetaQA are hops 1, 2, 3, 1, 2 rather than whatever a shuffle gives)
_SPLIT = re.compile(r"(test|dev)-(\d+)hop")
#: Another name of a task's reported part: ``reported`` for ``test``, ``reported-<N>hop`` for ``test-<N>hop``
#: (``fusic:mw-wd>metaqa:reported-1hop``: MetaQA dev questions, the task's reported part, not MetaQA's test
#: set). The dataset it loads is named with ``test``, so a run asked either way has the same configuration
#: (its hash names the dataset) and its records match the benchmark cells, which name ``test``.
REPORTED = "reported"


def canonical_split(split: str) -> str:
    """``reported`` → ``test``, ``reported-3hop`` → ``test-3hop`` (:data:`REPORTED`); any other split as given."""
    return "test" + split[len(REPORTED):] if split == REPORTED or split.startswith(f"{REPORTED}-") else split
#: The dev part of a target (:func:`dev_questions`): questions of the target's data outside its question
#: set — so neither reported (the test questions, all of which a cell may report) nor few shots (the
#: pool, the reserve) — none asking a gold query that one of those (or a source question) asks, each with
#: a gold form in the target's KB. It is reserved for choosing settings. Where they come from, per
#: target domain (``DEV_FROM``): MetaQA — further MetaQA dev questions beyond the METAQA_PER_HOP sample
#: and the shots reserve, ``DEV_PER_HOP`` per hop (shuffled with their own seed, dealt over the hops); the
#: mini-world — the questions of the domain's topics in its question sets of :data:`DEV_SETS`, which no
#: task reports. A target with no spare question has an empty dev part, and ``DEV_NONE`` says why.
DEV_PER_HOP = {"metaqa": 100}
#: the mini-world question sets a domain's dev part is drawn from: the templated set asks about films and
#: people; the spare set (scripts/build_miniworld.py: the simple and multi-hop sets' forms again on further
#: geography and technology topics, with a seed of its own) about geography and technology
DEV_SETS = {"mw-cinema": ("templated",), "mw-geo": ("spare",), "mw-all": ("templated", "spare")}
_SET_TEXT = {"templated": "templated questions", "spare": "spare questions (`miniworld:spare`: the simple and "
             "multi-hop sets' forms again on further geography and technology topics, drawn with a seed of its own)"}
DEV_FROM = {
    "metaqa": f"further MetaQA dev questions outside the seeded {METAQA_PER_HOP}-per-hop sample (so outside every "
              f"reported question and the pool of {SHOT_POOL}) and outside the shots reserve",
    **{d: f"the mini-world's {' and '.join(_SET_TEXT[x] for x in sets)} on the target's topics "
          f"({'question sets' if len(sets) > 1 else 'a question set'} of {'their' if len(sets) > 1 else 'its'} own, "
          "never reported by FuSIC)" for d, sets in DEV_SETS.items()},
}
DEV_NONE = {
    "grailqa-tech": "the fragment KB holds the gold facts of ToG's 1,000-question sample of GrailQA dev only; that "
                    "sample's technical-domain questions are the pool and the reported ones, and any other lacks a "
                    "gold form in the fragment; a GrailQA question outside the sample has no facts in it",
    "grailqa-nontech": "the fragment KB holds the gold facts of ToG's 1,000-question sample of GrailQA dev only, "
                       "and every non-technical question of it is the domain's question set",
    "grailqa": "every question of ToG's 1,000-question sample of GrailQA dev is the domain's question set, and no "
               "other GrailQA question is under KGQA_DATA_DIR",
}


@dataclass
class Domain:
    name: str
    kg_name: str
    kg: Any
    profile: SchemaProfile
    questions: list[Question]
    source_files: list = field(default_factory=list)  # question files (decides whether transcripts are kept)

    def kg_for(self, q: Question):
        """The KG a question is asked against: the domain's, or (GrailQA) the question's own slice."""
        if self.kg_name == "grailqa":
            from ...kg.sources import grailqa_slice_kg

            return grailqa_slice_kg(q.qid)
        return self.kg

    def gold(self, q: Question) -> Gold | None:
        return gold_of(q, self.kg, self.kg_name)


def _domain_questions(name: str, metaqa_per_hop: int, seed: int) -> tuple[list[Question], list]:
    from ...data.datasets import load_dataset

    _, sets, prefixes = DOMAINS[name]
    qs, files = [], []
    for s in sets:
        if name == "metaqa":
            ds = load_dataset(f"metaqa:{s}:dev", sample=metaqa_per_hop, seed=seed)
            qs += list(ds)
        elif name == "grailqa":
            ds = load_dataset("grailqa:dev")
            qs += list(ds)
        elif DOMAINS[name][0] == "grailqa-fragment":
            ds = load_dataset(f"grailqa:{s}")
            qs += list(ds)
        else:
            ds = load_dataset(f"miniworld:{s}")
            qs += [q for q in ds if q.kind == "factoid" and (q.metadata.get("topic_keys") or [""])[0].startswith(prefixes)]
        files += list(ds.source_files)
    return qs, files


@lru_cache(maxsize=8)
def load_domain(spec: str, metaqa_per_hop: int = METAQA_PER_HOP, seed: int = 0) -> Domain:
    """``mw-geo@wikidata`` → the geography/technology questions on the Wikidata-like KG."""
    from ...kg.sources import load_named

    name, _, schema = spec.partition("@")
    if name not in DOMAINS:
        raise ValueError(f"Unknown domain {name!r}; known: {', '.join(DOMAINS)}")
    kg_name = DOMAINS[name][0] + (f":{schema}" if schema else "")
    kg = load_named(kg_name)
    qs, files = _domain_questions(name, metaqa_per_hop, seed)
    return Domain(spec, kg_name, kg, profile_for(kg_name), qs, files)


@dataclass
class Task:
    name: str
    source: Domain
    target: Domain
    pool: list[Question]  # SHOT_POOL target questions for few-shot use
    test: list[Question]  # the rest of the target questions


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def _dealt(order: list[Question], key: str) -> list[Question]:
    """``order`` dealt round-robin over the values of ``metadata[key]`` (in sorted order)."""
    groups: dict[Any, list[Question]] = {}
    for q in order:
        groups.setdefault(q.metadata.get(key), []).append(q)
    rows = [groups[k] for k in sorted(groups, key=str)]
    return [g[i] for i in range(max(map(len, rows), default=0)) for g in rows if i < len(g)]


@lru_cache(maxsize=8)
def get_task(name: str, seed: int = 0) -> Task:
    """The task's source and target; the target's usable questions (a gold form in its KG) shuffled
    with ``seed``: the first SHOT_POOL are the few-shot pool (dealt over the hops for MetaQA, STRATA),
    the rest — less any whose text is a pool question's — the test questions."""
    if name not in TASKS:
        raise ValueError(f"Unknown transfer task {name!r}; known: {', '.join(TASKS)}")
    src, tgt = TASKS[name]
    source, target = load_domain(src, seed=seed), load_domain(tgt, seed=seed)
    usable = [q for q in target.questions if target.gold(q) is not None]
    rng = random.Random(seed)
    order = sorted(usable, key=lambda q: q.qid)
    rng.shuffle(order)
    key = STRATA.get(tgt.partition("@")[0])
    pool = (_dealt(order, key) if key else order)[:SHOT_POOL]
    ids, texts = {q.qid for q in pool}, {_norm(q.question) for q in pool}
    return Task(name, source, target, pool, [q for q in order if q.qid not in ids and _norm(q.question) not in texts])


@lru_cache(maxsize=4)
def domain_reserve(spec: str, seed: int = 0) -> tuple[Question, ...]:
    """The target's further few shots (SHOT_RESERVE): questions of its data outside the domain's
    sampled set — by id and by text, so none repeats a test question — with a gold form in its KG,
    shuffled with ``seed`` and dealt over the hops as the pool is. Empty for the other domains."""
    from ...data.datasets import load_dataset

    name = spec.partition("@")[0]
    n = SHOT_RESERVE.get(name, 0)
    if not n:
        return ()
    dom = load_domain(spec, seed=seed)
    ids, texts = {q.qid for q in dom.questions}, {_norm(q.question) for q in dom.questions}
    rest = [q for s in DOMAINS[name][1] for q in load_dataset(f"{DOMAINS[name][0]}:{s}:dev")
            if q.qid not in ids and _norm(q.question) not in texts]
    rng = random.Random(seed)
    rng.shuffle(rest)
    out: list[Question] = []
    seen: set[str] = set()
    for q in _dealt(rest, STRATA[name]) if name in STRATA else rest:
        if len(out) == n:
            break
        if dom.gold(q) is not None and _norm(q.question) not in seen:
            out.append(q)
            seen.add(_norm(q.question))
    return tuple(out)


def _dev_candidates(spec: str, seed: int) -> list[Question]:
    """The target's questions a dev part may take from (:data:`DEV_FROM`), in the order it takes them;
    [] for a target without (:data:`DEV_NONE`)."""
    from ...data.datasets import load_dataset

    name = spec.partition("@")[0]
    if name == "metaqa":
        rest = [q for s in DOMAINS[name][1] for q in load_dataset(f"{DOMAINS[name][0]}:{s}:dev")]
        random.Random(f"dev:{seed}").shuffle(rest)  # a stream of its own: the reserve's order is untouched
        return _dealt(rest, STRATA[name])
    if DOMAINS[name][0] == "miniworld":
        prefixes = DOMAINS[name][2]
        return [q for s in DEV_SETS[name] for q in load_dataset(f"miniworld:{s}") if q.kind == "factoid"
                and (q.metadata.get("topic_keys") or [""])[0].startswith(prefixes)]
    return []


@lru_cache(maxsize=8)
def dev_questions(name: str, seed: int = 0) -> tuple[Question, ...]:
    """The task's dev part (:data:`DEV_FROM`): target questions outside the target's question set (so
    neither reported nor pooled), outside its shots reserve and the source's questions — by id, by
    text and by gold query (a paraphrase of a reported question is left out) — each with a gold form
    in the target's KB; MetaQA: :data:`DEV_PER_HOP` per hop. Empty where the target has no spare
    question (:data:`DEV_NONE`)."""
    t = get_task(name, seed)
    dom = t.target
    kept = [*dom.questions, *t.pool, *t.test, *domain_reserve(dom.name, seed), *t.source.questions]
    ids, texts = {q.qid for q in kept}, {_norm(q.question) for q in kept}
    golds = set()
    for q in [*dom.questions, *domain_reserve(dom.name, seed)]:
        g = dom.gold(q)
        if g is not None:
            golds.add(g.sparql(dom.profile))
    name = dom.name.partition("@")[0]
    per = DEV_PER_HOP.get(name)
    out: list[Question] = []
    taken: Counter = Counter()
    for q in _dev_candidates(dom.name, seed):
        hop = q.metadata.get("hops")
        if per is not None and len(out) == per * len(DOMAINS[name][1]):
            break
        if per is not None and taken[hop] >= per:
            continue
        if q.qid in ids or _norm(q.question) in texts:
            continue
        g = dom.gold(q)
        key = g.sparql(dom.profile) if g is not None else None
        if not key or key in golds:
            continue
        out.append(q)
        ids.add(q.qid)
        texts.add(_norm(q.question))
        golds.add(key)
        taken[hop] += 1
    return tuple(out)


#: KGs that live under KGQA_DATA_DIR (their questions too): a dev part there is sized by declaration
EXTERNAL_KGS = ("metaqa", "grailqa", "grailqa-fragment")


def dev_size(name: str, hops: int | None = None) -> int:
    """The number of questions in the task's dev part (of ``hops`` hops when given), known without the
    external data, so a report can print it anywhere: on a target under KGQA_DATA_DIR the declared size
    (:data:`DEV_PER_HOP` per hop; 0 for a target in :data:`DEV_NONE`) — the unit tests check it against
    :func:`dev_questions` when the data is there; on the mini-world (committed data) counted."""
    tgt = TASKS[name][1].partition("@")[0]
    if DOMAINS[tgt][0] in EXTERNAL_KGS:
        if tgt in DEV_PER_HOP:
            return DEV_PER_HOP[tgt] * (1 if hops is not None else len(DOMAINS[tgt][1]))
        if tgt not in DEV_NONE:
            raise ValueError(f"{name}: the target {tgt} declares no dev part size (DEV_PER_HOP) nor why it has none")
        return 0
    return sum(1 for q in dev_questions(name) if hops is None or q.metadata.get("hops") == hops)


def target_shots(task: Task, shots: int) -> list[Question]:
    """The first ``shots`` target few shots: the pool's (SHOT_POOL), then the target's reserve
    (:data:`SHOT_RESERVE`, MetaQA only). Raises ``ValueError`` when the target holds fewer."""
    if shots <= len(task.pool):
        return task.pool[:max(shots, 0)]
    more = domain_reserve(task.target.name)
    if shots > len(task.pool) + len(more):
        raise ValueError(f"shots={shots}: the target {task.target.name} of fusic:{task.name} holds "
                         f"{len(task.pool) + len(more)} few shots (a pool of {len(task.pool)}"
                         + (f" + a reserve of {len(more)}" if more else "; only MetaQA has a reserve")
                         + "); use fewer shots")
    return task.pool + list(more[:shots - len(task.pool)])


def task_dataset(name: str, split: str = "test") -> Dataset:
    """``fusic:geo-wd>cinema-fb`` → the target's test questions (the reported part; ``:test`` and
    ``:reported`` say the same); ``:pool`` → the few-shot pool; ``:dev`` → the dev part
    (:func:`dev_questions`, where settings are chosen); ``:test-2hop`` (also ``:reported-2hop``) /
    ``:dev-2hop`` → those of that many hops (MetaQA: ``fusic:mw-wd>metaqa:test-3hop`` =
    ``fusic:mw-wd>metaqa:reported-3hop``, the reported MetaQA *dev* questions of 3 hops — MetaQA's test set
    is not used; ``fusic:mw-wd>metaqa:dev-3hop``). A ``reported`` split loads the dataset named with
    ``test`` (:data:`REPORTED`)."""
    from ...data.datasets import DatasetError

    split = canonical_split(split)
    t = get_task(name)
    m = _SPLIT.fullmatch(split)
    if split == "test":
        qs = t.test
    elif split == "pool":
        qs = t.pool
    elif split == "dev":
        qs = list(dev_questions(name))
        if not qs:
            raise DatasetError(f"fusic:{name}:dev has no questions: "
                               + DEV_NONE.get(t.target.name.partition("@")[0], "the target has no spare question"))
    elif m:
        part = t.test if m.group(1) == "test" else list(dev_questions(name))
        qs = [q for q in part if q.metadata.get("hops") == int(m.group(2))]
        if not qs:
            hops = sorted({q.metadata["hops"] for q in part if "hops" in q.metadata})
            raise DatasetError(f"fusic:{name}:{split} has no questions; "
                               + (f"its hops: {', '.join(f'{m.group(1)}-{h}hop' for h in hops)}" if hops else
                                  f"its questions carry no hop count (use :{m.group(1)} or :pool)"))
    else:
        raise DatasetError(f"Unknown split {split!r} of fusic:{name}: use test, dev, pool, test-<N>hop or dev-<N>hop "
                           "(e.g. test-1hop; test names the reported part, also called reported, reported-<N>hop)")
    return Dataset(f"fusic:{name}:{split}", qs, kg=t.target.kg_name,
                   source_files=t.source.source_files + t.target.source_files)


def dataset_task(dataset: str) -> str | None:
    """The transfer task whose questions a dataset name asks: ``fusic:mw-wd>metaqa:test-1hop`` →
    ``mw-wd>metaqa``; None for a dataset of no task."""
    head, _, rest = dataset.partition(":")
    return (rest.partition(":")[0] or None) if head == "fusic" else None


def check_task(dataset: str, task: str, method: str, default: bool = False) -> None:
    """A method that finds its KGs through a transfer task (``task``; "" = none) run on another task's
    questions (``fusic:OTHER:…``) asks them against the wrong KG: a
    :class:`~kgqa_lib.errors.UsageError` naming the setting to give. ``default``: ``task`` is the
    method's default, not a given setting."""
    want = dataset_task(dataset)
    if want is None or not task or task == want:
        return
    from ...errors import UsageError

    raise UsageError(f"{dataset} holds questions of the transfer task {want}, but {method} would run the task "
                     f"{task}{' (its default)' if default else ''}, whose KGs are others: add --set task={want}")


# FuSIC transfer tasks: ``fusic:<task>`` = the target's test questions (its reported part; ``:test`` = ``:reported``),
# ``fusic:<task>:pool`` its few shots, ``fusic:<task>:dev`` its dev part
register("fusic", lambda task, split="test": task_dataset(task, split))
