"""Metrics. Strict ones first; the lenient substring match is reported beside them, labelled."""

from __future__ import annotations

import math
import re
import string
import unicodedata
from functools import lru_cache
from typing import Iterable, Sequence

import numpy as np

__all__ = ["normalize_answer", "hits_at_1", "any_hit", "exact_set_match", "set_prf", "lenient_match",
           "rouge_l", "bootstrap_ci", "score"]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation) | {"‘", "’", "“", "”", "–", "—"}


def normalize_answer(s: object) -> str:
    """SQuAD-style: lowercase, strip accents and punctuation, drop articles, collapse spaces."""
    s = unicodedata.normalize("NFKD", str(s or ""))
    s = "".join(ch for ch in s if not unicodedata.combining(ch)).lower()
    s = "".join(" " if ch in _PUNCT else ch for ch in s)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _norm_set(xs: Iterable[str]) -> set[str]:
    return {n for n in (normalize_answer(x) for x in xs) if n}


def hits_at_1(predictions: Sequence[str], gold: Sequence[str]) -> float:
    """1.0 if the first prediction equals (after normalisation) any gold answer."""
    if not predictions:
        return 0.0
    return float(normalize_answer(predictions[0]) in _norm_set(gold))


def any_hit(predictions: Sequence[str], gold: Sequence[str]) -> float:
    """1.0 if any prediction is a gold answer."""
    return float(bool(_norm_set(predictions) & _norm_set(gold)))


def exact_set_match(predictions: Sequence[str], gold: Sequence[str]) -> float:
    return float(_norm_set(predictions) == _norm_set(gold))


def set_prf(predictions: Sequence[str], gold: Sequence[str]) -> tuple[float, float, float]:
    """Precision, recall, F1 over normalised answer sets. Both empty → (1, 1, 1); one empty → 0s."""
    p, g = _norm_set(predictions), _norm_set(gold)
    if not p and not g:
        return 1.0, 1.0, 1.0
    if not p or not g:
        return 0.0, 0.0, 0.0
    tp = len(p & g)
    prec, rec = tp / len(p), tp / len(g)
    f1 = 0.0 if tp == 0 else 2 * prec * rec / (prec + rec)
    return prec, rec, f1


def _contains_words(haystack: str, needle: str) -> bool:
    return len(needle) >= 3 and re.search(r"(?:^|\s)" + re.escape(needle) + r"(?:\s|$)", haystack) is not None


def lenient_match(predictions: Sequence[str], gold: Sequence[str]) -> float:
    """LENIENT (ToG-style) substring match: a gold answer inside a prediction or vice versa, on
    word boundaries and only for strings of at least 3 characters (so "a" or "the" never counts
    as a hit for "Barack Obama"). Report it only beside the strict metrics."""
    ps, gs = _norm_set(predictions), _norm_set(gold)
    return float(any(_contains_words(p, g) or _contains_words(g, p) for p in ps for g in gs))


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, references: Sequence[str]) -> float:
    """ROUGE-L F-measure (rouge-score, stemmed), the maximum over the references."""
    if not prediction or not prediction.strip() or not references:
        return 0.0
    return max(_rouge().score(ref, prediction)["rougeL"].fmeasure for ref in references)


def bootstrap_ci(values: Sequence[float], n_resamples: int = 1000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): percentile bootstrap of the mean with ``np.random.default_rng(seed)``."""
    x = np.asarray([v for v in values if v is not None], dtype=float)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if x.size == 1:
        return mean, mean, mean
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_resamples, x.size))].mean(axis=1)
    alpha = (1 - confidence) / 2
    return mean, float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def score(predictions: Sequence[str], gold: Sequence[str], kind: str = "factoid", response: str | None = None) -> dict[str, float]:
    """All applicable metrics for one question. ``open`` questions are scored with ROUGE-L of the
    response (or the joined predictions) against the gold references."""
    if kind == "open":
        text = response if response else " ".join(predictions)
        return {"rouge_l": rouge_l(text, list(gold))}
    p, r, f = set_prf(predictions, gold)
    return {"hits@1": hits_at_1(predictions, gold), "any_hit": any_hit(predictions, gold),
            "exact_match": exact_set_match(predictions, gold), "precision": p, "recall": r, "f1": f,
            "lenient": lenient_match(predictions, gold)}
