"""Table 1 of FuSIC-KBQA (sec. 4.1) for a transfer pair, computed from the data (no LLM): how far the
target's questions are from the source's, in the knowledge base, the logical forms and the
questions' wording.

Table 1's columns, as the paper's caption defines them, and what we compute for each:

- **Dom. JS** — the Jensen–Shannon divergence between the source's and the target's distributions
  of questions over domains. A question's domains: GrailQA's own ``domains`` annotation (Freebase
  domains); on our mini-world the Freebase domain of each relation of its logical form (the first
  part of the Freebase-style relation id, ``location.country.capital`` → ``location``; the
  Wikidata-style schema's relations through their Freebase-style twins in
  :data:`kgqa_lib.data.miniworld.PROPERTIES`); on MetaQA ``film`` for every question (WikiMovies:
  every relation's subject is a film — our stand-in, MetaQA gives no domain). A question with several
  domains counts 1/k towards each.
- **Rel. % New** — the share of target questions (in %) with a relation that no source logical form
  uses. ``new_relation_pct`` compares the KB's relation ids, as the paper's pairs (all on Freebase)
  do; where source and target are different KBs every id is new, so ``new_relation_name_pct``
  compares the relations' schema-neutral names instead (the mini-world's property names, which are
  MetaQA's relation names: ``directed_by``; on GrailQA the ids themselves).
- **Func. JS** — the Jensen–Shannon divergence between the distributions of questions over the
  function of their logical form, in GrailQA's sense (its ``function`` annotation: none, count,
  argmax, argmin, <, <=, >, >=; on the mini-world from the logical form's type: a path or a dated
  value none, count, argmax/argmin, a comparison of entities argmax or argmin by its order; MetaQA
  none).
- **# Relations** — mean relations per logical form, source and target: GrailQA's graph-query edges;
  elsewhere the relations of the gold logical form in the KB's own ids (a mini-world CVT step on the
  Freebase-style schema is two relations, as in Freebase; the qualifier of a dated value one more).
- **Src-Tgt Sim** — the caption: "average minimum cosine distance between source and target
  questions", printed as a similarity (higher for the closer pairs). We read it as, for each target
  question, the cosine similarity of its nearest source question (1 − the minimum cosine distance),
  averaged over the target (``similarity_nearest``), and give the mean cosine similarity over all
  source–target question pairs beside it (``similarity_mean``). The paper does not name its encoder:
  ours is the project's sentence encoder (all-MiniLM-L6-v2, :class:`kgqa_lib.embed.embedder.Embedder`).
- **# Tokens** — mean whitespace-separated tokens per question (the paper does not name its
  tokenizer).
- **Target Gen. Scenario** — each target question against the target's few shots (GrailQA's
  definitions): zero-shot (Z) when its logical form uses a schema item (relation or class) no shot
  uses, i.i.d. (I) when a shot has the same logical form up to its entities and literals, else
  compositional (C). The paper marks which of I, C, Z occur; we count them.

The paper does not say which logarithm its JS divergences use: :func:`js_divergence` takes the base
(2: bounded by 1, a disjoint pair scores 1; e: bounded by ln 2 ≈ 0.693).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..data.datasets import Question


# ---------------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------------
def distribution(counts: Mapping[str, float]) -> dict[str, float]:
    """``counts`` normalised to sum to 1 (an empty or all-zero mapping: {})."""
    total = float(sum(counts.values()))
    return {k: v / total for k, v in counts.items() if v} if total > 0 else {}


def js_divergence(p: Mapping[str, float], q: Mapping[str, float], base: float = 2.0) -> float:
    """The Jensen–Shannon divergence of two distributions over labels (each normalised first), in
    units of log ``base``: JS(p, q) = ½ KL(p ‖ m) + ½ KL(q ‖ m), m = ½ (p + q). 0 for identical
    distributions; for disjoint ones log_base 2 (1 in bits)."""
    p, q = distribution(p), distribution(q)
    if not p or not q:
        raise ValueError("js_divergence: both distributions need some mass")
    out = 0.0
    for k in set(p) | set(q):
        a, b = p.get(k, 0.0), q.get(k, 0.0)
        m = (a + b) / 2
        out += (a * math.log(a / m) if a else 0.0) + (b * math.log(b / m) if b else 0.0)
    return max(0.0, out / 2 / math.log(base))


@dataclass(frozen=True)
class LogicalForm:
    """What Table 1 reads of one question's gold logical form."""

    relations: tuple[str, ...]  # the KB's relation ids, each occurrence
    names: tuple[str, ...]  # the same relations by schema-neutral name (GrailQA: the ids)
    domains: tuple[str, ...]  # the question's domains (distinct)
    function: str  # GrailQA's sense: none, count, argmax, argmin, <, <=, >, >=
    classes: tuple[str, ...] = ()  # classes the logical form names
    template: str = ""  # the logical form with its entities and literals abstracted

    @property
    def schema_items(self) -> frozenset[str]:
        return frozenset(self.relations) | frozenset(self.classes)


def domain_distribution(lfs: Sequence[LogicalForm]) -> dict[str, float]:
    """Questions over domains, a question with k domains counting 1/k towards each (normalised)."""
    c: Counter = Counter()
    for lf in lfs:
        for d in lf.domains:
            c[d] += 1 / len(lf.domains)
    return distribution(c)


def function_distribution(lfs: Sequence[LogicalForm]) -> dict[str, float]:
    return distribution(Counter(lf.function for lf in lfs))


def new_relation_share(target: Sequence[LogicalForm], source: Sequence[LogicalForm], by: str = "relations") -> float:
    """The share of ``target`` logical forms with a relation (``by``: ``relations`` = KB ids, ``names``)
    that no ``source`` logical form has."""
    seen = {r for lf in source for r in getattr(lf, by)}
    if not target:
        raise ValueError("new_relation_share: no target logical forms")
    return sum(any(r not in seen for r in getattr(lf, by)) for lf in target) / len(target)


def mean_relations(lfs: Sequence[LogicalForm]) -> float:
    return sum(len(lf.relations) for lf in lfs) / len(lfs)


def mean_tokens(questions: Sequence[str]) -> float:
    return sum(len(q.split()) for q in questions) / len(questions)


def similarities(target: np.ndarray, source: np.ndarray) -> tuple[float, float]:
    """(mean over the target rows of the cosine similarity of the nearest source row, mean cosine
    similarity over all pairs) of two matrices of L2-normalised rows."""
    sims = np.asarray(target, dtype=float) @ np.asarray(source, dtype=float).T
    return float(sims.max(axis=1).mean()), float(sims.mean())


def generalization(target: Sequence[LogicalForm], shots: Sequence[LogicalForm]) -> dict[str, int]:
    """Target logical forms by generalization scenario against the few shots (GrailQA's): ``Z`` a
    schema item no shot has, ``I`` a shot's template, ``C`` the rest (seen items, unseen combination)."""
    items = {i for lf in shots for i in lf.schema_items}
    templates = {lf.template for lf in shots}
    out = {"I": 0, "C": 0, "Z": 0}
    for lf in target:
        out["Z" if not lf.schema_items <= items else "I" if lf.template in templates else "C"] += 1
    return out


# ---------------------------------------------------------------------------------------------
# A question's logical form, per knowledge base
# ---------------------------------------------------------------------------------------------
_ENTITY = re.compile(r"\b[mg]\.[0-9a-z_]+\b")
_LITERAL = re.compile(r"\S+\^\^\S+?(?=[)\s]|$)")
METAQA_DOMAIN = "film"


def freebase_domain(relation: str) -> str:
    """The Freebase domain of a Freebase-style id: its first part (``base.x`` user bases: the first two)."""
    parts = relation.split(".")
    return ".".join(parts[:2]) if parts[0] == "base" and len(parts) > 2 else parts[0]


def _miniworld_form(q: Question) -> dict[str, Any] | None:
    form = q.gold_query.get("form")
    if form:
        return json.loads(form) if isinstance(form, str) else form
    if q.metadata.get("property"):
        return {"type": "path", "path": [q.metadata["property"]], "topic": (q.metadata.get("topic_keys") or [""])[0]}
    return None


def logical_form(q: Question, kg_name: str, gold=None) -> LogicalForm | None:
    """The logical form of ``q`` as Table 1 reads it, on the KB ``kg_name`` (a FuSIC domain's:
    ``grailqa``/``grailqa-fragment``, ``miniworld:<schema>``, ``metaqa``); ``gold`` = the question's
    :class:`~kgqa_lib.methods.fusic.gold.Gold` in that KB (needed on the mini-world and MetaQA: the
    relation ids). None when the question has no gold logical form."""
    if kg_name.startswith("grailqa"):
        gq = q.metadata.get("graph_query")
        sexpr = q.gold_query.get("s_expression") or ""
        if not gq:
            return None
        rels = tuple(e["relation"] for e in gq["edges"])
        tokens = re.findall(r"[^\s()]+", _LITERAL.sub(" ", sexpr))
        classes = tuple(sorted({t for t in tokens if t.count(".") == 1 and not _ENTITY.fullmatch(t)}))
        template = " ".join(_ENTITY.sub("ENT", _LITERAL.sub("LIT", sexpr)).split())
        return LogicalForm(rels, rels, tuple(dict.fromkeys(q.metadata.get("domains") or
                                                            [freebase_domain(r) for r in rels])),
                           q.metadata.get("function") or "none", classes, template)
    if gold is None:
        return None
    ids = tuple(r for r, _ in gold.hops) + tuple(r for r, _ in gold.attr) + ((gold.at[0],) if gold.at else ())
    if kg_name.startswith("miniworld"):
        from ..data.miniworld import PROPERTIES

        form = _miniworld_form(q)
        if form is None:
            return None
        names = tuple(p.lstrip("^") for p in form.get("path") or []) + ((form["attr"],) if form.get("attr") else ())
        twins = [PROPERTIES[n][1] or PROPERTIES[n][2][0] for n in names]
        kind = form["type"]
        function = {"path": "none", "value_at": "none", "count": "count", "argmax": "argmax", "argmin": "argmin",
                    "compare": "argmax" if form.get("order", "max") == "max" else "argmin"}[kind]
        template = f"{kind}:{'/'.join(form.get('path') or [])}:{form.get('attr', '')}:{form.get('order', '')}"
        return LogicalForm(ids, names, tuple(dict.fromkeys(freebase_domain(t) for t in twins)), function, (), template)
    if kg_name in ("metaqa", "tiny"):
        path = [p.strip() for p in q.gold_query.get("path", "").split("/") if p.strip()]
        return LogicalForm(ids, tuple(p.lstrip("^") for p in path), (METAQA_DOMAIN,), "none", (),
                           "path:" + "/".join(path))
    return None


# ---------------------------------------------------------------------------------------------
# Table 1 for a pair
# ---------------------------------------------------------------------------------------------
def table1_statistics(source_questions: Sequence[str], source: Sequence[LogicalForm],
                      target_questions: Sequence[str], target: Sequence[LogicalForm],
                      shots: Sequence[LogicalForm] = (), encode: Callable[[list[str]], np.ndarray] | None = None,
                      base: float = 2.0) -> dict[str, Any]:
    """Table 1's statistics (see the module's doc) of a source and a target: their questions' texts and
    logical forms (the texts may be more than the logical forms: all questions count for the wording),
    the target's few shots' logical forms (the generalization scenario; none: not computed).
    ``encode``: texts → L2-normalised rows (default: the project's sentence encoder). JS divergences
    in units of log ``base``."""
    if encode is None:
        from ..embed.embedder import Embedder

        encode = Embedder().encode
    nearest, mean = similarities(encode(list(target_questions)), encode(list(source_questions)))
    return {"n_source": len(source), "n_target": len(target), "n_shots": len(shots), "js_base": base,
            "domain_js": js_divergence(domain_distribution(source), domain_distribution(target), base),
            "new_relation_pct": 100 * new_relation_share(target, source),
            "new_relation_name_pct": 100 * new_relation_share(target, source, by="names"),
            "function_js": js_divergence(function_distribution(source), function_distribution(target), base),
            "relations_source": mean_relations(source), "relations_target": mean_relations(target),
            "similarity_nearest": nearest, "similarity_mean": mean,
            "tokens_source": mean_tokens(source_questions), "tokens_target": mean_tokens(target_questions),
            "generalization": generalization(target, shots) if shots else None}


def task_statistics(task: str, target: Sequence[Question] | None = None, shots: int = 5, seed: int = 0,
                    encode: Callable[[list[str]], np.ndarray] | None = None, base: float = 2.0) -> dict[str, Any]:
    """:func:`table1_statistics` of a FuSIC transfer task (:mod:`kgqa_lib.methods.fusic.tasks`): the
    source domain's questions with a gold logical form (the paper's source training set), the target
    questions ``target`` (default: the task's reported part, all of it), the target's first ``shots``
    few shots (the few-shot cells' 5)."""
    from ..methods.fusic import get_task, target_shots

    t = get_task(task, seed)

    def forms(dom, qs):
        out = [(q, logical_form(q, dom.kg_name, dom.gold(q))) for q in qs]
        return [q.question for q, lf in out if lf is not None], [lf for _, lf in out if lf is not None]

    src_q, src = forms(t.source, t.source.questions)
    tgt_q, tgt = forms(t.target, list(target) if target is not None else t.test)
    _, shot = forms(t.target, target_shots(t, shots)) if shots else ([], [])
    return table1_statistics(src_q, src, tgt_q, tgt, shot, encode, base)
