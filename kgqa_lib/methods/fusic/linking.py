"""Stage 1 — entity linking: question spans matched to KG labels/aliases (paper sec. 3, the
retrievers' entity linker)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ...data.datasets import Question


# ---------------------------------------------------------------------------------------------
# 1. Entity linking
# ---------------------------------------------------------------------------------------------
_STOP = {"what", "which", "who", "whom", "where", "when", "how", "many", "much", "is", "was", "are", "were", "the",
         "a", "an", "of", "in", "on", "by", "for", "to", "did", "does", "do", "and", "or", "that", "with", "from",
         "its", "it", "has", "have", "had", "as", "at", "be", "been", "also", "name", "film", "films", "movie",
         "movies", "country", "city", "river", "language", "year", "born", "than", "more", "most", "first"}


@dataclass
class Mention:
    span: str
    iri: str
    label: str
    candidates: list[dict[str, Any]]  # every entity of the label: iri, label, description, degree, score

    def as_dict(self) -> dict[str, Any]:
        return {"span": self.span, "iri": self.iri, "label": self.label, "candidates": self.candidates}


@dataclass
class Linking:
    mentions: list[Mention]
    oracle: bool = False

    @property
    def entities(self) -> list[str]:
        return [m.iri for m in self.mentions]

    def as_dict(self) -> dict[str, Any]:
        return {"oracle": self.oracle, "mentions": [m.as_dict() for m in self.mentions]}


def _degree(kg, iri: str, cap: int = 500) -> int:
    return len(kg.triples_around(iri, "both", limit=cap))


def _disambiguate(question: str, span: str, iris: list[str], kg, embedder) -> Mention:
    """Several entities share the label: prefer the one whose description is closest to the
    question, then the better connected one (popularity)."""
    cands = []
    for iri in iris:
        cands.append({"iri": iri, "label": kg.label(iri), "description": kg.description(iri), "degree": _degree(kg, iri)})
    sims = [0.0] * len(cands)
    if embedder is not None and len(cands) > 1 and any(c["description"] for c in cands):
        vecs = embedder.encode([question] + [f"{c['label']}, {c['description']}" for c in cands])
        sims = [float(vecs[0] @ v) for v in vecs[1:]]
    for c, s in zip(cands, sims):
        c["score"] = round(s + 0.05 * math.log1p(c["degree"]), 4)
    cands.sort(key=lambda c: (-c["score"], c["iri"]))
    return Mention(span, cands[0]["iri"], cands[0]["label"], cands)


def _spans(question: str, max_len: int = 12) -> list[tuple[int, int, str]]:
    """Word n-grams of up to ``max_len`` words, longest first; a span ending in a possessive is also
    tried without it ("Nolan's" → "Nolan", while "Ocean's Eleven" stays whole). Twelve words, as
    film titles run long ("Where Were You When the Lights Went Out?", "Abbott and Costello Meet the
    Killer, Boris Karloff"): with seven, 37 of MetaQA's 9,992 1-hop dev questions could not link
    their topic entity, with twelve 8 (titles of stop words, "More", or of 13+ words)."""
    words = re.findall(r"[\w'’.\-:&]+|[^\w\s]", question.rstrip("?.! "))
    out = []
    for n in range(min(max_len, len(words)), 0, -1):
        for i in range(len(words) - n + 1):
            ws = words[i:i + n]
            if all(w.lower() in _STOP or not any(ch.isalnum() for ch in w) for w in ws):
                continue
            span = " ".join(ws).strip(" ,;")
            out.append((i, i + n, span))
            if span.endswith(("'s", "’s")):
                out.append((i, i + n, span[:-2]))
    return out


def link_entities(question: Question, kg, embedder=None, *, oracle: bool = False, topic_iris: Sequence[str] = ()) -> Linking:
    """Question spans → KG entities: the longest spans with an exact or normalised label/alias
    match win (no fuzzy matching: a near-miss link is worse than none for query generation).
    A one-word span must be capitalised (or a number), so "film" never links to an entity *Film*;
    in an all-lower-case question (GrailQA's) a one-word span of four letters or more counts.
    ``oracle``: the gold topic entities (``topic_iris`` when given, else the dataset's labels)."""
    if oracle:
        mentions = []
        if topic_iris:
            for iri in topic_iris:
                mentions.append(Mention(kg.label(iri), iri, kg.label(iri), [{"iri": iri, "label": kg.label(iri)}]))
        else:
            for name in question.topic_entities:
                hits = [iri for iri, score, _ in kg.lookup(name, fuzzy=False) if score >= 0.99]
                if hits:
                    mentions.append(_disambiguate(question.question, name, hits, kg, embedder))
        return Linking(mentions, oracle=True)
    taken: set[int] = set()
    mentions: list[Mention] = []
    cased = any(ch.isupper() for ch in question.question)
    for i, j, span in _spans(question.question):
        if taken & set(range(i, j)):
            continue
        if j - i == 1 and not (span[:1].isupper() or span[:1].isdigit()) and (cased or len(span) < 4):
            continue
        hits = [iri for iri, score, _ in kg.lookup(span, fuzzy=False) if score >= 0.99]
        if not hits:
            continue
        taken |= set(range(i, j))
        mentions.append(_disambiguate(question.question, span, hits, kg, embedder))
    return Linking(mentions)
