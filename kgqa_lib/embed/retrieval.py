"""Retrievers that rank verbalised KB candidates (paths, relations, types) for a question.

Two with complementary strengths, as FuSIC-KBQA fuses:

- :class:`BM25Retriever` — sparse, no training: exact word overlap (``bm25s``); strong when the
  question says the relation's words ("born", "capital"), blind to paraphrase.
- :class:`DenseRetriever` — a Sentence-Transformers bi-encoder. :func:`train_dense` fine-tunes the
  offline all-MiniLM-L6-v2 on (question, gold candidate) pairs of a *source* domain with in-batch
  and hard negatives (multiple-negatives ranking loss), optionally continues on the target's few
  shots. Training is a plain torch loop on the CPU (seconds to a few minutes), deterministic for a
  seed, and cached on disk under a hash of its inputs: the same inputs never train twice.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..paths import user_cache_dir

_WORD = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Lower-cased words; relation ids such as ``people.person.place_of_birth`` split into words."""
    return _WORD.findall(text.lower().replace("_", " "))


@dataclass
class Ranked:
    index: int  # position in the candidate list given to rank()
    score: float


def _import_bm25s():
    import warnings

    with warnings.catch_warnings():  # tqdm.auto's "IProgress not found" in kernels without ipywidgets
        warnings.filterwarnings("ignore", message="IProgress not found")
        import bm25s
    return bm25s


class BM25Retriever:
    """BM25 over the question's own candidate list (``bm25s``, Lucene variant)."""

    name = "bm25"

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b

    def rank(self, question: str, texts: Sequence[str], k: int | None = None) -> list[Ranked]:
        if not texts:
            return []
        bm25s = _import_bm25s()
        corpus = [tokenize(t) or ["_"] for t in texts]
        model = bm25s.BM25(k1=self.k1, b=self.b)
        model.index(corpus, show_progress=False)
        q = [w for w in tokenize(question) if w in model.vocab_dict] if hasattr(model, "vocab_dict") else tokenize(question)
        scores = np.asarray(model.get_scores(q), dtype=float) if q else np.zeros(len(texts))
        order = sorted(range(len(texts)), key=lambda i: (-scores[i], i))  # ties: the enumeration order
        return [Ranked(i, float(scores[i])) for i in order[:k]]


class DenseRetriever:
    """Cosine similarity between question and candidate embeddings (any Sentence-Transformers
    model directory; the offline MiniLM when ``model`` is None)."""

    name = "dense"

    def __init__(self, model: str | Path | None = None, label: str = "dense") -> None:
        from .embedder import Embedder

        self.model_path = str(model) if model else None
        self.label = label
        self.embedder = Embedder(self.model_path)

    def rank(self, question: str, texts: Sequence[str], k: int | None = None) -> list[Ranked]:
        if not texts:
            return []
        q = self.embedder.encode([question])
        m = self.embedder.encode(list(texts))
        scores = (m @ q[0]).astype(float)
        order = sorted(range(len(texts)), key=lambda i: (-round(scores[i], 6), i))
        return [Ranked(i, float(scores[i])) for i in order[:k]]

    def __repr__(self) -> str:
        return f"DenseRetriever({self.label})"


@dataclass
class TrainingExample:
    question: str
    positive: str
    negatives: list[str] = field(default_factory=list)  # hard negatives: other candidates of the question

    def as_dict(self) -> dict[str, Any]:
        return {"question": self.question, "positive": self.positive, "negatives": self.negatives}


@dataclass
class TrainingReport:
    path: Path
    examples: int
    steps: int
    seconds: float
    losses: list[float]
    cached: bool

    def as_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "examples": self.examples, "steps": self.steps,
                "seconds": round(self.seconds, 2), "first_loss": self.losses[0] if self.losses else None,
                "last_loss": self.losses[-1] if self.losses else None, "cached": self.cached}


def _quiet_hf() -> None:
    """No "Loading weights" / "Writing model shards" bars on stderr (notebook outputs stay clean)."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    try:
        from huggingface_hub.utils import disable_progress_bars
        from transformers.utils import logging as hf_logging

        disable_progress_bars()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def retriever_dir() -> Path:
    return user_cache_dir() / "retrievers"


def train_dense(examples: Sequence[TrainingExample], *, base: str | Path | None = None, epochs: int = 2,
                batch_size: int = 16, lr: float = 3e-5, scale: float = 20.0, seed: int = 0,
                hard_negatives: int = 1, progress: bool = False, out_dir: str | Path | None = None) -> TrainingReport:
    """Fine-tune a bi-encoder with the multiple-negatives ranking loss; returns where it is saved.

    Each batch scores every question against every positive in the batch and the hard negatives
    (cross-entropy towards its own positive). The result is saved under a hash of the examples,
    the base model and the hyper-parameters, and reused when asked again."""
    import time

    import torch

    from .embedder import _offline_model_path, sentence_transformer_class

    SentenceTransformer = sentence_transformer_class()

    base_path = str(base) if base else _offline_model_path()
    spec = {"base": base_path, "epochs": epochs, "batch_size": batch_size, "lr": lr, "scale": scale, "seed": seed,
            "hard_negatives": hard_negatives, "examples": [e.as_dict() for e in examples]}
    key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    out = Path(out_dir) if out_dir else retriever_dir() / key
    meta = out / "kgqa_training.json"
    if meta.exists():
        info = json.loads(meta.read_text())
        return TrainingReport(out, info["examples"], info["steps"], info["seconds"], info["losses"], True)
    if not examples:
        raise ValueError("train_dense needs at least one (question, positive) example")

    started = time.perf_counter()
    torch.manual_seed(seed)
    rng = random.Random(seed)
    _quiet_hf()
    model = SentenceTransformer(base_path, device="cpu", local_files_only=True)
    prep = getattr(model, "preprocess", None) or model.tokenize
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    order = list(range(len(examples)))
    losses: list[float] = []
    steps_total = epochs * ((len(order) + batch_size - 1) // batch_size)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps_total, desc="training dense retriever", unit="step")

    def embed(texts: list[str]) -> torch.Tensor:
        feats = prep(texts)
        emb = model(feats)["sentence_embedding"]
        return torch.nn.functional.normalize(emb, dim=-1)

    for batch, docs in _batches(examples, order, epochs, batch_size, hard_negatives, rng):
        q = embed([e.question for e in batch])
        d = embed(docs)
        losses.append(_contrastive_step(opt, q, d, docs, batch, scale))
        if bar:
            bar.update(1)
            bar.set_postfix(loss=losses[-1])
    if bar:
        bar.close()
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save(str(out))
    seconds = time.perf_counter() - started
    meta.write_text(json.dumps({"examples": len(examples), "steps": len(losses), "seconds": round(seconds, 2),
                                "losses": losses, "spec_key": key}))
    return TrainingReport(out, len(examples), len(losses), seconds, losses, False)


def recall_at(ranked: Sequence[Ranked], gold: set[int], k: int) -> float:
    """Share of gold candidates in the top k (1.0 when there is no gold to find)."""
    if not gold:
        return 1.0
    top = {r.index for r in ranked[:k]}
    return len(top & gold) / len(gold)


class HeadRetriever:
    """A dense retriever that trains in seconds: the frozen offline MiniLM embeds questions and
    candidates (vectors cached on disk), and a linear map of the question embedding (384 × 384,
    starting at the identity) is trained with the same multiple-negatives ranking loss as
    :func:`train_dense`. Candidates' vectors never change, so nothing but the map is trained."""

    name = "dense"

    def __init__(self, weight: np.ndarray, label: str = "dense", embedder: Any = None) -> None:
        from .embedder import Embedder

        self.weight = np.asarray(weight, dtype=np.float32)
        self.label = label
        self.embedder = embedder or Embedder()

    def rank(self, question: str, texts: Sequence[str], k: int | None = None) -> list[Ranked]:
        if not texts:
            return []
        q = self.embedder.encode([question])[0] @ self.weight
        q = q / (np.linalg.norm(q) or 1.0)
        m = self.embedder.encode(list(texts))
        scores = (m @ q).astype(float)
        order = sorted(range(len(texts)), key=lambda i: (-round(scores[i], 6), i))
        return [Ranked(i, float(scores[i])) for i in order[:k]]

    def __repr__(self) -> str:
        return f"HeadRetriever({self.label})"


def train_head(examples: Sequence[TrainingExample], *, base: np.ndarray | None = None, epochs: int = 30,
               batch_size: int = 32, lr: float = 1e-3, scale: float = 20.0, seed: int = 0, hard_negatives: int = 1,
               embedder: Any = None) -> tuple[np.ndarray, TrainingReport]:
    """Train :class:`HeadRetriever`'s map (from ``base``, else the identity) on (question, positive,
    negatives) examples; deterministic for a seed. Returns (weight, report); the report's path is
    empty (the map is small: it is kept in memory, not saved)."""
    import time

    import torch

    from .embedder import Embedder

    if not examples:
        raise ValueError("train_head needs at least one (question, positive) example")
    started = time.perf_counter()
    emb = embedder or Embedder()
    texts = sorted({e.question for e in examples} | {e.positive for e in examples} |
                   {n for e in examples for n in e.negatives})
    vecs = emb.encode(texts)
    index = {t: i for i, t in enumerate(texts)}
    V = torch.tensor(np.asarray(vecs, dtype=np.float32))
    torch.manual_seed(seed)
    rng = random.Random(seed)
    W = torch.nn.Parameter(torch.tensor(base, dtype=torch.float32) if base is not None else torch.eye(V.shape[1]))
    opt = torch.optim.Adam([W], lr=lr)
    order = list(range(len(examples)))
    losses: list[float] = []
    for batch, docs in _batches(examples, order, epochs, batch_size, hard_negatives, rng):
        q = torch.nn.functional.normalize(V[[index[e.question] for e in batch]] @ W, dim=-1)
        d = V[[index[t] for t in docs]]
        losses.append(_contrastive_step(opt, q, d, docs, batch, scale))
    weight = W.detach().numpy().copy()
    return weight, TrainingReport(Path(""), len(examples), len(losses), time.perf_counter() - started, losses, False)


def _batches(examples: Sequence[TrainingExample], order: list[int], epochs: int, batch_size: int,
             hard_negatives: int, rng: random.Random):
    """The training batches: per epoch ``order`` reshuffled and cut into batches, each with its
    documents — the batch's positives, then per example up to ``hard_negatives`` of its negatives
    (sampled, the positive excluded). Lazily, so the random draws interleave as the loop runs."""
    for _ in range(epochs):
        rng.shuffle(order)
        for start in range(0, len(order), batch_size):
            batch = [examples[i] for i in order[start:start + batch_size]]
            docs = [e.positive for e in batch]
            for e in batch:
                negs = [n for n in e.negatives if n != e.positive]
                docs.extend(rng.sample(negs, min(hard_negatives, len(negs))))
            yield batch, docs


def _contrastive_step(opt, q, d, docs: list[str], batch: list, scale: float) -> float:
    """One in-batch contrastive update (question i's positive is document i; the rest are negatives)
    of the parameters behind ``q``/``d``; returns the loss, rounded."""
    import torch

    logits = scale * q @ d.T
    # two positives of one batch may be the same text: do not punish picking the twin
    same = torch.tensor([[docs[j] == batch[i].positive and j != i for j in range(len(docs))]
                         for i in range(len(batch))])
    loss = torch.nn.functional.cross_entropy(logits.masked_fill(same, -1e4), torch.arange(len(batch)))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return round(float(loss.detach()), 4)
