"""Stage 3 — retrieval: each supervised retriever (BM25; a bi-encoder trained on the source domain)
ranks every aspect (paths, relations, types) and keeps its top K (paper sec. 3, "Retrieval Stage").
Also the retrievers' training data and the trained retrievers."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

from ...data.datasets import Question
from .candidates import ASPECTS, Candidate, Candidates, Hop, enumerate_candidates
from .gold import Gold
from .linking import Linking, link_entities
from .schema import _type_iri
from .tasks import Domain, get_task, load_domain


# ---------------------------------------------------------------------------------------------
# 3. Retrieval
# ---------------------------------------------------------------------------------------------
@dataclass
class Retrieved:
    retriever: str
    aspect: str
    items: list[tuple[Candidate, float]]  # top-K, best first

    def as_dict(self) -> dict[str, Any]:
        return {"retriever": self.retriever, "aspect": self.aspect,
                "items": [{"query": c.query, "text": c.text, "score": round(s, 4)} for c, s in self.items]}


def retrieve(question: str, candidates: Candidates, retrievers: Sequence[Any], K: int = 10) -> list[Retrieved]:
    """Each retriever ranks each aspect's candidates by the question; the top K are kept."""
    out = []
    for r in retrievers:
        for aspect in ASPECTS:
            cands = candidates.aspect(aspect)
            ranked = r.rank(question, [c.text for c in cands], K)
            out.append(Retrieved(getattr(r, "label", r.name), aspect, [(cands[x.index], x.score) for x in ranked]))
    return out


# ---------------------------------------------------------------------------------------------
# Retriever training data and the trained retrievers
# ---------------------------------------------------------------------------------------------
def _gold_candidates(cands: Candidates, gold: Gold) -> dict[str, set[int]]:
    """Indices of the gold path/relations/types among the candidates."""
    key = gold.path_key()
    return {"path": {i for i, c in enumerate(cands.paths) if key and c.key == key},
            "relation": {i for i, c in enumerate(cands.relations) if c.key in gold.relations},
            "type": {i for i, c in enumerate(cands.types) if c.key in set(gold.types)}}


def answer_types(domain: Domain, gold: Gold, kg=None) -> list[str]:
    """Classes of the entities the gold path reaches."""
    tp = _type_iri(domain.profile)
    kg = kg or domain.kg
    if not tp or not gold.hops:
        return []
    reached = _follow(kg, gold.topics[0], gold.hops)
    counts = Counter(t for x in reached[:20] if "://" in x for t in kg.objects(x, tp))
    return [t for t, _ in counts.most_common(2)]


def _follow(kg, seed: str, hops: Sequence[Hop]) -> list[str]:
    return kg.follow_path(seed, [("^" if inv else "") + rel for rel, inv in hops])


@dataclass
class Prepared:
    """A question after linking and candidate enumeration (what retrieval needs)."""
    question: Question
    linking: Linking
    candidates: Candidates
    gold: Gold | None


def prepare(q: Question, domain: Domain, embedder=None, oracle: bool = False) -> Prepared:
    kg = domain.kg_for(q)
    gold = domain.gold(q)
    if gold is not None:
        gold.types = gold.types or answer_types(domain, gold, kg)
    linking = link_entities(q, kg, embedder, oracle=oracle, topic_iris=gold.topics if (oracle and gold) else ())
    return Prepared(q, linking, enumerate_candidates(kg, linking, domain.profile), gold)


def training_examples(prepared: Sequence[Prepared], negatives: int = 8, seed: int = 0) -> list:
    """(question, gold candidate text, other candidates) for every aspect with a gold element."""
    from ...embed.retrieval import TrainingExample

    rng = random.Random(seed)
    out = []
    for p in prepared:
        if p.gold is None:
            continue
        gold_idx = _gold_candidates(p.candidates, p.gold)
        for aspect in ASPECTS:
            cands = p.candidates.aspect(aspect)
            others = [c.text for i, c in enumerate(cands) if i not in gold_idx[aspect]]
            for i in sorted(gold_idx[aspect]):
                out.append(TrainingExample(p.question.question, cands[i].text,
                                           rng.sample(others, min(negatives, len(others)))))
    return out


@lru_cache(maxsize=16)
def prepared_domain(spec: str, qids: tuple[str, ...] | None = None, oracle: bool = True) -> list[Prepared]:
    """Source/pool questions prepared with oracle linking (training needs the gold entity)."""
    dom = load_domain(spec)
    qs = [q for q in dom.questions if qids is None or q.qid in qids]
    return [prepare(q, dom, oracle=oracle) for q in qs]


@lru_cache(maxsize=8)
def trained_retriever(task: str, shots: int = 0, epochs: int = 2, seed: int = 0, progress: bool = False):
    """The dense retriever of a task: MiniLM fine-tuned on the source domain (then on ``shots``
    target questions from the pool). Deterministic and cached on disk."""
    from ...embed.retrieval import DenseRetriever, train_dense

    t = get_task(task, seed)
    report = train_dense(training_examples(prepared_domain(t.source.name), seed=seed), epochs=epochs, seed=seed,
                         progress=progress)
    path, reports = report.path, [report]
    if shots:
        few = prepared_domain(t.target.name, tuple(q.qid for q in t.pool[:shots]))
        ft = train_dense(training_examples(few, seed=seed), base=path, epochs=epochs, seed=seed, progress=progress)
        path, reports = ft.path, reports + [ft]
    r = DenseRetriever(path, label="dense")
    r.training = reports  # type: ignore[attr-defined]
    return r


@lru_cache(maxsize=8)
def trained_head(task: str, shots: int = 0, seed: int = 0):
    """The dense retriever of a task trained in seconds (issue 20 §5): a linear map over the frozen
    MiniLM's question embeddings, trained on the source domain, then on ``shots`` target questions
    from the pool (the same training examples as :func:`trained_retriever`)."""
    from ...embed.retrieval import HeadRetriever, train_head

    t = get_task(task, seed)
    weight, report = train_head(training_examples(prepared_domain(t.source.name), seed=seed), seed=seed)
    reports = [report]
    if shots:
        few = prepared_domain(t.target.name, tuple(q.qid for q in t.pool[:shots]))
        weight, ft = train_head(training_examples(few, seed=seed), base=weight, seed=seed)
        reports.append(ft)
    r = HeadRetriever(weight, label="dense")
    r.training = reports  # type: ignore[attr-defined]
    return r


def make_retrievers(names: str, task: str, shots: int, seed: int = 0, dense_training: str | None = None) -> list[Any]:
    """The retrievers named (comma-separated). ``dense``: trained on the task's source domain (and
    its target shots) as ``dense_training`` says — ``finetune`` (default: the whole MiniLM) or
    ``head`` (a linear map over frozen embeddings); see the setting of that name."""
    from ...embed.retrieval import BM25Retriever, DenseRetriever
    from .settings import FuSICSettings

    dense_training = dense_training or FuSICSettings().dense_training

    out = []
    for n in [x.strip() for x in names.split(",") if x.strip()]:
        if n == "none":  # no retrieval: the naive baseline
            continue
        if n == "bm25":
            out.append(BM25Retriever())
        elif n == "dense":
            out.append(trained_head(task, shots, seed=seed) if dense_training == "head"
                       else trained_retriever(task, shots, seed=seed))
        elif n == "minilm":  # the untrained encoder, for the ablation "does source training help?"
            out.append(DenseRetriever(None, label="minilm"))
        else:
            raise ValueError(f"Unknown retriever {n!r}: use bm25, dense, minilm (or none)")
    return out
