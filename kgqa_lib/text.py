"""Answer strings compared the same way everywhere: SQuAD-style normalisation and ROUGE-L.

The metrics (:mod:`kgqa_lib.evaluate.metrics`) score with these; a method may use them too (a
majority vote over normalised answers, the most central of several texts), and the KG layer
compares recomputed answers with a dataset's own.
"""

from __future__ import annotations

import re
import string
import unicodedata
from functools import lru_cache
from typing import Iterable, Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = frozenset(string.punctuation)


def _is_punct(ch: str) -> bool:
    return ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


def normalize_answer(s: object) -> str:
    """SQuAD-style normalisation: lowercase, strip accents, remove punctuation, remove the articles
    a/an/the, collapse whitespace.

    Punctuation is deleted, not replaced by a space, as in the SQuAD script ("Kang-ho" → "kangho",
    "U.S." → "us", "1,000" → "1000"); it covers ASCII punctuation and every Unicode punctuation
    character (curly quotes, dashes). Accents are stripped by NFKD decomposition ("Amélie" →
    "amelie"). ``None`` → ``""``."""
    if s is None:
        return ""
    text = unicodedata.normalize("NFKD", str(s))
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = "".join(ch for ch in text if not _is_punct(ch))
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_set(xs: Iterable[object]) -> set[str]:
    """Normalised, non-empty answers as a set (answers that normalise to "" are dropped)."""
    return {n for n in (normalize_answer(x) for x in xs) if n}


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, references: Sequence[str]) -> float:
    """ROUGE-L F-measure (``rouge_score.rouge_scorer``, Porter stemming) of ``prediction`` against
    each reference; the maximum over the references. Empty prediction or no references → 0.0."""
    if not prediction or not str(prediction).strip():
        return 0.0
    refs = [str(r) for r in references if r is not None and str(r).strip()]
    if not refs:
        return 0.0
    return max(_rouge().score(ref, str(prediction))["rougeL"].fmeasure for ref in refs)
