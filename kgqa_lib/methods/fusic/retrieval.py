"""Stage 3 — retrieval: each supervised retriever (BM25; a bi-encoder trained on the source domain)
ranks every aspect (paths, relations, types) and keeps its top K (paper sec. 3, "Retrieval Stage").
Also the retrievers' training data and the trained retrievers."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from ...data.datasets import Question
from .candidates import ASPECTS, Candidate, Candidates, Hop, enumerate_candidates
from .gold import Gold
from .linking import Linking, link_entities
from .schema import _type_iri
from .tasks import Domain, domain_reserve, get_task, load_domain, target_shots


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
    kg = kg if kg is not None else domain.kg  # (not `kg or …`: a KG's len() counts every triple)
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


def prepare(q: Question, domain: Domain, embedder=None, oracle: bool = False, max_hops: int = 2) -> Prepared:
    """Link ``q`` and enumerate its candidates (paths of up to ``max_hops`` relations)."""
    kg = domain.kg_for(q)
    gold = domain.gold(q)
    if gold is not None:
        gold.types = gold.types or answer_types(domain, gold, kg)
    linking = link_entities(q, kg, embedder, oracle=oracle, topic_iris=gold.topics if (oracle and gold) else ())
    return Prepared(q, linking, enumerate_candidates(kg, linking, domain.profile, max_hops=max_hops), gold)


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


def prepared_domain(spec: str, qids: tuple[str, ...] | None = None, oracle: bool = True,
                    max_hops: int = 2) -> list[Prepared]:
    """Source/pool questions prepared with oracle linking (training needs the gold entity). The
    retrievers are trained on 2-hop candidates (the paper's); ``max_hops`` 3: the exemplars' context
    with the setting ``max_path_hops=3``. Cached per value, however the arguments are passed."""
    return _prepared_domain(spec, qids, oracle, max_hops)


@lru_cache(maxsize=16)
def _prepared_domain(spec: str, qids: tuple[str, ...] | None, oracle: bool, max_hops: int) -> list[Prepared]:
    dom = load_domain(spec)
    return [prepare(q, dom, oracle=oracle, max_hops=max_hops) for q in domain_questions(spec, qids)]


def domain_questions(spec: str, qids: tuple[str, ...] | None = None) -> list[Question]:
    """A domain's questions (``qids``: those of them): its own in its order, then any of its reserve
    (further target shots, :data:`tasks.SHOT_RESERVE`) in theirs."""
    dom = load_domain(spec)
    qs = [q for q in dom.questions if qids is None or q.qid in qids]
    if qids is not None and len(qs) < len(set(qids)):
        qs += [q for q in domain_reserve(spec) if q.qid in qids]
    return qs


def prepared_shots(task: str, shots: int, max_hops: int = 2, seed: int = 0) -> list[Prepared]:
    """The first ``shots`` target few shots of a task (:func:`tasks.target_shots`), prepared: the
    pool's in the domain's order, then the reserve's."""
    t = get_task(task, seed)
    return prepared_domain(t.target.name, tuple(q.qid for q in target_shots(t, shots)), max_hops=max_hops)


# ---------------------------------------------------------------------------------------------
# The dense retriever's rankings, recorded: a replay need not train it
# ---------------------------------------------------------------------------------------------
RECORD_FILE = "fusic_dense.jsonl"  # data/retriever_cache/: committed, as the LLM transcripts are


def record_path() -> Path:
    from ...paths import data_dir

    return data_dir() / "retriever_cache" / RECORD_FILE


_RECORD: dict[str, Any] = {}  # path → {"rank": {(spec, key): pairs}, "training": {spec: reports}}


def _record() -> dict[str, Any]:
    path = record_path()
    if str(path) not in _RECORD:
        rank, training = {}, {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                e = json.loads(line)
                if "training" in e:
                    training[e["spec"]] = e["training"]
                else:
                    rank[e["spec"], e["key"]] = e["ranked"]
        _RECORD[str(path)] = {"rank": rank, "training": training}
    return _RECORD[str(path)]


def _append(entry: dict[str, Any]) -> None:
    path = record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")


def training_spec(stages: Sequence[Sequence[Any]], epochs: int, seed: int) -> str:
    """A hash of everything that decides the trained retriever's rankings, the same on every
    machine: each training stage's examples (the source's, then the target shots'), the base model's
    name, epochs, seed, :func:`~kgqa_lib.embed.retrieval.train_dense`'s other hyper-parameters (its
    defaults) and the versions of torch, transformers and sentence-transformers."""
    import importlib.metadata as md
    import inspect

    from ...embed.embedder import DEFAULT_MODEL
    from ...embed.retrieval import train_dense

    hyper = {k: p.default for k, p in inspect.signature(train_dense).parameters.items()
             if p.default is not inspect.Parameter.empty and k not in ("base", "progress", "out_dir")}
    spec = {"base": DEFAULT_MODEL, "stages": [[e.as_dict() for e in st] for st in stages],
            "hyper": {**hyper, "epochs": epochs, "seed": seed},
            "versions": {d: md.version(d) for d in ("torch", "transformers", "sentence-transformers")}}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def _rank_key(question: str, texts: Sequence[str], k: int | None) -> str:
    return hashlib.sha256(json.dumps([question, list(texts), k]).encode()).hexdigest()[:24]


class RecordedDense:
    """The dense retriever of a task whose rankings are recorded: a ranking found in the record
    (``data/retriever_cache/fusic_dense.jsonl``, keyed by :func:`training_spec` and a hash of the
    question, the candidates and k — no text is stored) is returned as recorded; a miss trains (or
    loads from the disk cache) the fine-tuned MiniLM and ranks with it, and, when ``record`` is on
    (set by :func:`make_retrievers`: a pipeline run on the project's own data whose LLM keeps
    transcripts, in any mode), appends the ranking and the training report — a replay that missed
    one trains once and records it, so the next replay does not. The rankings are what
    :class:`~kgqa_lib.embed.retrieval.DenseRetriever` returns, so a run is the same either way; a replay
    whose rankings are all recorded never trains. Without a recorded training report for the spec
    the model is trained at once, as before."""

    name = "dense"

    def __init__(self, spec: str, train, own: bool = False, label: str = "dense") -> None:
        self.spec, self._train, self.own, self.label = spec, train, own, label
        self.record = False
        self._dense = None
        recorded = _record()["training"].get(spec)
        if recorded is None:
            self._model()
        else:
            from ...embed.retrieval import TrainingReport, retriever_dir

            self.training = [TrainingReport(retriever_dir() / r["path"], r["examples"], r["steps"], r["seconds"],
                                            r["losses"], True) for r in recorded]

    def _model(self):
        if self._dense is None:
            self._dense = self._train()
            self.training = self._dense.training
        return self._dense

    def rank(self, question: str, texts: Sequence[str], k: int | None = None) -> list:
        from ...embed.retrieval import Ranked

        key = _rank_key(question, texts, k)
        hit = _record()["rank"].get((self.spec, key))
        if hit is not None:
            return [Ranked(i, s) for i, s in hit]
        ranked = self._model().rank(question, texts, k)
        if self.record:
            if self.spec not in _record()["training"]:
                reports = [{"path": t.path.name, "examples": t.examples, "steps": t.steps, "seconds": round(t.seconds, 2),
                            "losses": t.losses} for t in self.training]
                _record()["training"][self.spec] = reports
                _append({"spec": self.spec, "training": reports})
            pairs = [[r.index, r.score] for r in ranked]
            _record()["rank"][self.spec, key] = pairs
            _append({"spec": self.spec, "key": key, "ranked": pairs})
        return ranked

    def __repr__(self) -> str:
        return f"RecordedDense({self.label}, spec={self.spec})"


def _own_data(t) -> bool:
    """Both domains are the project's own data (what ``kgqa run`` keeps transcripts of)."""
    from ...paths import data_dir

    files = list(t.source.source_files) + list(t.target.source_files)
    return bool(files) and all(data_dir().resolve() in Path(p).resolve().parents for p in files)


@lru_cache(maxsize=8)
def trained_retriever(task: str, shots: int = 0, epochs: int = 2, seed: int = 0, progress: bool = False):
    """The dense retriever of a task: MiniLM fine-tuned on the source domain (then on its first
    ``shots`` target few shots, :func:`tasks.target_shots`). Deterministic and cached on disk; its
    rankings are recorded (:class:`RecordedDense`: for the project's own data, so a replay of the
    notebooks need not train)."""
    from ...embed.retrieval import DenseRetriever, train_dense

    t = get_task(task, seed)
    src = training_examples(prepared_domain(t.source.name), seed=seed)
    few = training_examples(prepared_shots(task, shots, seed=seed), seed=seed) if shots else []

    def train():
        report = train_dense(src, epochs=epochs, seed=seed, progress=progress)
        path, reports = report.path, [report]
        if shots:
            ft = train_dense(few, base=path, epochs=epochs, seed=seed, progress=progress)
            path, reports = ft.path, reports + [ft]
        r = DenseRetriever(path, label="dense")
        r.training = reports  # type: ignore[attr-defined]
        return r

    return RecordedDense(training_spec([src, few] if shots else [src], epochs, seed), train, own=_own_data(t))


@lru_cache(maxsize=8)
def trained_head(task: str, shots: int = 0, seed: int = 0):
    """The dense retriever of a task trained in seconds: a linear map over the frozen
    MiniLM's question embeddings, trained on the source domain, then on ``shots`` target questions
    from the pool (the same training examples as :func:`trained_retriever`)."""
    from ...embed.retrieval import HeadRetriever, train_head

    t = get_task(task, seed)
    weight, report = train_head(training_examples(prepared_domain(t.source.name), seed=seed), seed=seed)
    reports = [report]
    if shots:
        few = prepared_shots(task, shots, seed=seed)
        weight, ft = train_head(training_examples(few, seed=seed), base=weight, seed=seed)
        reports.append(ft)
    r = HeadRetriever(weight, label="dense")
    r.training = reports  # type: ignore[attr-defined]
    return r


def make_retrievers(names: str, task: str, shots: int, seed: int = 0, dense_training: str | None = None,
                    record: bool | None = None) -> list[Any]:
    """The retrievers named (comma-separated). ``dense``: trained on the task's source domain (and
    its target shots) as ``dense_training`` says — ``finetune`` (default: the whole MiniLM) or
    ``head`` (a linear map over frozen embeddings); see the setting of that name. ``record``: whether
    the fine-tuned retriever's new rankings are appended to the committed record (the pipeline: its
    LLM keeps transcripts; only ever for the project's own data; None: unchanged, initially off)."""
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
            r = trained_head(task, shots, seed=seed) if dense_training == "head" else trained_retriever(task, shots, seed=seed)
            if record is not None and isinstance(r, RecordedDense):
                r.record = record and r.own
            out.append(r)
        elif n == "minilm":  # the untrained encoder, for the ablation "does source training help?"
            out.append(DenseRetriever(None, label="minilm"))
        else:
            raise ValueError(f"Unknown retriever {n!r}: use bm25, dense, minilm (or none)")
    return out
