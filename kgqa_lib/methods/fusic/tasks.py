"""Transfer tasks: a source domain (retriever training data, zero-shot exemplars) and a target
domain (few-shot pool, test questions), each a question set on its own KG schema."""

from __future__ import annotations

import random
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
    "metaqa": ("metaqa", ("1hop", "2hop"), ()),
    "grailqa": ("grailqa", ("dev",), ()),  # ORACLE: each question on its own answer-bearing slice
    # one shared graph of every question's gold facts (kgqa_lib.kg.grailqa_fragment), split by domain
    "grailqa-nontech": ("grailqa-fragment", ("fragment-nontech",), ()),
    "grailqa-tech": ("grailqa-fragment", ("fragment-tech",), ()),  # GrailQA-Tech: grailqa_fragment.TECH_DOMAINS
}
TASKS = {
    # the default pair in the notebooks: different domains AND different schemas, all our own data
    "geo-wd>cinema-fb": ("mw-geo@wikidata", "mw-cinema@freebase"),
    "cinema-fb>geo-wd": ("mw-cinema@freebase", "mw-geo@wikidata"),
    # with KGQA_DATA_DIR (MetaQA dev): benchmark only, never committed
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


def _domain_questions(name: str, metaqa_n: int, seed: int) -> tuple[list[Question], list]:
    from ...data.datasets import load_dataset

    _, sets, prefixes = DOMAINS[name]
    qs, files = [], []
    for s in sets:
        if name == "metaqa":
            ds = load_dataset(f"metaqa:{s}:dev", sample=metaqa_n // len(sets), seed=seed)
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
def load_domain(spec: str, metaqa_n: int = 400, seed: int = 0) -> Domain:
    """``mw-geo@wikidata`` → the geography/technology questions on the Wikidata-like KG."""
    from ...kg.sources import load_named

    name, _, schema = spec.partition("@")
    if name not in DOMAINS:
        raise ValueError(f"Unknown domain {name!r}; known: {', '.join(DOMAINS)}")
    kg_name = DOMAINS[name][0] + (f":{schema}" if schema else "")
    kg = load_named(kg_name)
    qs, files = _domain_questions(name, metaqa_n, seed)
    return Domain(spec, kg_name, kg, profile_for(kg_name), qs, files)


@dataclass
class Task:
    name: str
    source: Domain
    target: Domain
    pool: list[Question]  # SHOT_POOL target questions for few-shot use
    test: list[Question]  # the rest of the target questions


@lru_cache(maxsize=8)
def get_task(name: str, seed: int = 0) -> Task:
    if name not in TASKS:
        raise ValueError(f"Unknown transfer task {name!r}; known: {', '.join(TASKS)}")
    src, tgt = TASKS[name]
    source, target = load_domain(src, seed=seed), load_domain(tgt, seed=seed)
    usable = [q for q in target.questions if target.gold(q) is not None]
    rng = random.Random(seed)
    order = sorted(usable, key=lambda q: q.qid)
    rng.shuffle(order)
    return Task(name, source, target, order[:SHOT_POOL], order[SHOT_POOL:])


def task_dataset(name: str, split: str = "test") -> Dataset:
    """``fusic:geo-wd>cinema-fb`` → the target's test questions (``:pool`` → the few-shot pool)."""
    t = get_task(name)
    qs = t.test if split == "test" else t.pool
    return Dataset(f"fusic:{name}:{split}", qs, kg=t.target.kg_name,
                   source_files=t.source.source_files + t.target.source_files)


# FuSIC transfer tasks: ``fusic:<task>`` = the target's test questions, ``fusic:<task>:pool`` its few shots
register("fusic", lambda task, split="test": task_dataset(task, split))
