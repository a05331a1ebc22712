"""Gold-based diagnostics of a finished answer, computed from its trace and the question.

A method never reads a question's gold answers, gold query or gold chain: whatever compares its
intermediate steps with the gold is computed here, after the method returned, from the run
record's trace (the JSON form the runner writes) and the question. The runner stores
:func:`diagnose`'s result under the record's ``"diagnostics"`` key (:data:`DIAGNOSTICS` names what
each method gets); readers take :func:`decomposition_of` a record, which also reads the
``decomposition_check`` trace stage of records written before the diagnostics left the method.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

_ANSWER_REF = re.compile(r"<\s*answer\s*>\s*-?\s*(\d+)", re.I)


def _stage(trace: Sequence[dict[str, Any]], name: str) -> Any:
    return next((s.get("output") for s in trace or [] if s.get("name") == name), None)


def keqing_steps(trace: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The executed sub-question steps of a Keqing record's trace (``[]`` for the chain ablation)."""
    plan = _stage(trace, "execute_plan")
    if isinstance(plan, (list, tuple)) and plan and isinstance(plan[0], list):
        return plan[0]
    return []


def keqing_decomposition(q, trace: Sequence[dict[str, Any]], kg=None) -> dict[str, Any]:
    """Was the question decomposed correctly? Two parts, both needed:

    * the chain: the top-1 template chain of each sub-question, concatenated, equals the gold
      relation path (our measure of the decomposition; the paper reports none);
    * the seed: the entities the first sub-question's seed names link to (exact label first, fuzzy
      only if nothing matches — as the method links them) are the question's topic entities. A
      truncated title fuzzy-linked to another film is a wrong seed even when the chain is right.
      Without a KG the names are compared case-insensitively instead.
    """
    from ..methods.keqing import gold_chain, link_seed

    steps = keqing_steps(trace)
    predicted: list[str] = []
    for st in steps:
        chains = (st.get("match") or {}).get("chains") or []
        if chains:
            predicted += list(chains[0])
    gold = list(gold_chain(q))
    first = steps[0]["sub"] if steps else {}
    names = [n for n in first.get("seed_entities") or [] if not _ANSWER_REF.search(str(n))]
    if kg is not None:
        linked = {v for n in names for v in link_seed(str(n), kg)}
        topic = {v for t in q.topic_entities for v in link_seed(t, kg)}
    else:
        linked = {" ".join(str(n).casefold().split()) for n in names}
        topic = {" ".join(t.casefold().split()) for t in q.topic_entities}
    chain_ok = predicted == gold
    seed_ok = bool(linked) and linked == topic
    return {"predicted_chain": predicted, "gold_chain": gold, "chain_correct": chain_ok,
            "seed_named": bool(names), "seed_correct": seed_ok, "correct": chain_ok and seed_ok}


def keqing_diagnostics(q, trace: Sequence[dict[str, Any]], kg=None) -> dict[str, Any]:
    """A Keqing record's diagnostics: ``{"decomposition": keqing_decomposition(...)}`` when it
    decomposed the question (an ``execute_plan`` stage; not for the chain ablation), else ``{}``."""
    if _stage(trace, "execute_plan") is None:
        return {}
    return {"decomposition": keqing_decomposition(q, trace, kg)}


#: method → its diagnostics: ``fn(question, trace, kg)`` → a dict (``{}``: nothing to add).
DIAGNOSTICS: dict[str, Callable[..., dict[str, Any]]] = {"keqing": keqing_diagnostics}


def diagnose(method: str, q, trace: Sequence[dict[str, Any]], kg=None) -> dict[str, Any]:
    """The gold-based diagnostics of one finished answer of ``method`` (``{}`` for a method without)."""
    fn = DIAGNOSTICS.get(method)
    return fn(q, trace, kg) if fn else {}


def decomposition_of(record: dict[str, Any]) -> dict[str, Any] | None:
    """A Keqing record's decomposition check as ``{"predicted_chain", "gold_chain", "correct"}``,
    ``correct`` being our measure of the decomposition (the template chain equals the gold
    relation path): from the record's diagnostics, or — records written before the check left the
    method — from its ``decomposition_check`` trace stage. None when the record has neither."""
    d = (record.get("diagnostics") or {}).get("decomposition")
    if d is not None:
        return {"predicted_chain": d["predicted_chain"], "gold_chain": d["gold_chain"], "correct": d["chain_correct"]}
    return _stage(record.get("trace"), "decomposition_check")
