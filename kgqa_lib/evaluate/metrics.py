"""Per-question metrics: pure functions over answer strings.

Strict metrics (all after :func:`~kgqa_lib.text.normalize_answer`):

- ``hits_at_1``  — the first prediction is a gold answer.
- ``any_hit``    — some prediction is a gold answer.
- ``exact_set_match`` — the prediction set equals the gold set.
- ``set_prf``    — precision, recall and F1 of the prediction set against the gold set.
- ``rouge_l``    — ROUGE-L F-measure of a free-text response (open questions).

``lenient_match`` (the ToG-style substring match) is LENIENT: report it only beside the strict
metrics, labelled as such, never instead of them. ``bootstrap_ci`` turns per-question values into
a mean with a percentile-bootstrap confidence interval. ``score`` bundles the applicable metrics
for one question.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from ..text import answer_set, normalize_answer, rouge_l

__all__ = ["normalize_answer", "hits_at_1", "any_hit", "exact_set_match", "set_prf", "lenient_match",
           "rouge_l", "bootstrap_ci", "score", "FACTOID_KEYS", "OPEN_KEYS"]

FACTOID_KEYS = ("hits@1", "any_hit", "exact_match", "precision", "recall", "f1", "lenient")
OPEN_KEYS = ("rouge_l",)

_LENIENT_MIN_CHARS = 3


def hits_at_1(predictions: Sequence[str], gold: Sequence[str]) -> float:
    """1.0 if the FIRST prediction, normalised, equals any normalised gold answer, else 0.0.
    No predictions (or a first prediction that normalises to "") → 0.0."""
    if not predictions:
        return 0.0
    first = normalize_answer(predictions[0])
    return float(bool(first) and first in answer_set(gold))


def any_hit(predictions: Sequence[str], gold: Sequence[str]) -> float:
    """1.0 if any normalised prediction equals any normalised gold answer, else 0.0."""
    return float(bool(answer_set(predictions) & answer_set(gold)))


def exact_set_match(predictions: Sequence[str], gold: Sequence[str]) -> float:
    """1.0 if the normalised prediction set equals the normalised gold set (order and duplicates
    ignored), else 0.0. Both empty → 1.0 (consistent with :func:`set_prf`)."""
    return float(answer_set(predictions) == answer_set(gold))


def set_prf(predictions: Sequence[str], gold: Sequence[str]) -> tuple[float, float, float]:
    """(precision, recall, F1) of the normalised prediction set P against the gold set G:
    precision = |P∩G|/|P|, recall = |P∩G|/|G|, F1 their harmonic mean (0 when P∩G is empty).

    Conventions: both empty → (1, 1, 1) (correctly predicting "no answer"); exactly one empty →
    (0, 0, 0)."""
    p, g = answer_set(predictions), answer_set(gold)
    if not p and not g:
        return 1.0, 1.0, 1.0
    if not p or not g:
        return 0.0, 0.0, 0.0
    tp = len(p & g)
    prec, rec = tp / len(p), tp / len(g)
    f1 = 0.0 if tp == 0 else 2 * prec * rec / (prec + rec)
    return prec, rec, f1


def _contains_words(haystack: str, needle: str) -> bool:
    """``needle`` occurs in ``haystack`` as whole words and has at least 3 characters."""
    return len(needle) >= _LENIENT_MIN_CHARS and re.search(
        r"(?<!\S)" + re.escape(needle) + r"(?!\S)", haystack) is not None


def lenient_match(predictions: Sequence[str], gold: Sequence[str]) -> float:
    """LENIENT (ToG-style) substring match — report only beside the strict metrics.

    1.0 if, after normalisation, some prediction equals a gold answer, or some gold answer is
    contained in some prediction, or some prediction is contained in some gold answer; else 0.0.

    Guard against the known abuse of plain substring matching (a prediction like "a", "the" or a
    single letter "hitting" "Barack Obama"): the contained string must have at least 3 characters
    and must match on word boundaries ("Obama" is in "Barack Obama", but not in "Obamacare").
    Articles are already removed by normalisation, so "the" normalises to "" and never matches."""
    ps, gs = answer_set(predictions), answer_set(gold)
    if ps & gs:
        return 1.0
    return float(any(_contains_words(p, g) or _contains_words(g, p) for p in ps for g in gs))


def bootstrap_ci(values: Sequence[float], n_resamples: int = 1000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): the mean of ``values`` and a percentile-bootstrap confidence interval of
    the mean — ``n_resamples`` resamples with replacement drawn with
    ``np.random.default_rng(seed)``, the ``(1-confidence)/2`` and ``(1+confidence)/2`` quantiles
    of the resampled means. Deterministic for a given seed. ``None`` values are skipped; no values
    → (nan, nan, nan); one value v → (v, v, v). The interval always contains the mean (in the
    degenerate case where a percentile falls on the wrong side of it, it is widened to the mean)."""
    x = np.asarray([v for v in values if v is not None], dtype=float)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if x.size == 1:
        return mean, mean, mean
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)
    step = max(1, 2_000_000 // x.size)  # bound the index matrix to ~16 MB
    for i in range(0, n_resamples, step):
        n = min(step, n_resamples - i)
        means[i:i + n] = x[rng.integers(0, x.size, size=(n, x.size))].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return mean, float(min(low, mean)), float(max(high, mean))


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval (low, high) of a proportion ``k`` of ``n``: unlike a bootstrap it does not
    collapse to a point at 0 of n or n of n, so a handful of questions shows how little it says.
    n = 0 → (nan, nan)."""
    if n <= 0:
        return math.nan, math.nan
    from statistics import NormalDist

    z = NormalDist().inv_cdf((1 + confidence) / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def score(predictions: Sequence[str], gold: Sequence[str], kind: str = "factoid",
          response: str | None = None) -> dict[str, float]:
    """All applicable metrics for one question, as a dict.

    ``factoid``: hits@1, any_hit, exact_match, precision, recall, f1, lenient (see the functions).
    ``open``: rouge_l of ``response`` (or, without one, the predictions joined by spaces) against
    the gold references."""
    predictions = list(predictions or [])
    gold = list(gold or [])
    if kind == "open":
        text = response if response and str(response).strip() else " ".join(str(p) for p in predictions)
        return {"rouge_l": rouge_l(text, gold)}
    if kind != "factoid":
        raise ValueError(f"unknown question kind {kind!r}: expected 'factoid' or 'open'")
    p, r, f = set_prf(predictions, gold)
    return {"hits@1": hits_at_1(predictions, gold), "any_hit": any_hit(predictions, gold),
            "exact_match": exact_set_match(predictions, gold), "precision": p, "recall": r, "f1": f,
            "lenient": lenient_match(predictions, gold)}
