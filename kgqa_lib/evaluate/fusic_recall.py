"""Retrieval recall per retriever and aspect, before and after re-ranking (the paper's Table 7)."""

from __future__ import annotations

from typing import Any, Sequence

from ..data.datasets import Question
from ..methods.base import Context
from ..methods.fusic.candidates import enumerate_candidates
from ..methods.fusic.generation import context_sizes, rerank_sizes
from ..methods.fusic.linking import link_entities
from ..methods.fusic.reranking import rerank
from ..methods.fusic.retrieval import answer_types, retrieve
from ..methods.fusic.tasks import Task


# ---------------------------------------------------------------------------------------------
# Retrieval recall (the paper's Table 7)
# ---------------------------------------------------------------------------------------------
def retrieval_recall(q: Question, task: Task, retrievers: Sequence[Any], ctx: Context, K: int = 10,
                     rerank_with_llm: bool = True, ks: Sequence[int] = (), candidates: Any = None) -> list[dict[str, Any]]:
    """For each retriever and aspect of one question: are *all* its gold KB elements among the
    candidates, the retriever's top K, the LLM's re-ranked top k, and the (shorter) final context?
    Aspects without a gold element (no class for a literal answer, no path for a comparison) are
    left out. Candidates as the pipeline enumerates them with ``ctx``'s settings (``max_path_hops``);
    ``ks``: also a column ``in top k`` per k ≤ K of the retriever's own ranking (no LLM); ``candidates``:
    the question's, enumerated already (:func:`enumerate_candidates` with the same settings)."""
    dom = task.target
    gold = dom.gold(q)
    if gold is None:
        return []
    kg = dom.kg_for(q)
    gold.types = gold.types or answer_types(dom, gold, kg)
    wanted = {"path": {gold.path_key()} - {None}, "relation": gold.relations, "type": set(gold.types)}
    from ..methods.fusic.settings import FuSICSettings

    st = FuSICSettings.of(ctx)
    cands = candidates if candidates is not None else \
        enumerate_candidates(kg, link_entities(q, kg, ctx.embedder), dom.profile, max_hops=st.max_path_hops)
    preset = st.context_size
    sizes, keep = context_sizes(len(retrievers), preset), rerank_sizes(preset)
    rows = []
    for r in retrieve(q.question, cands, retrievers, K):
        want = wanted[r.aspect]
        if not want:
            continue
        have = lambda items: want <= {c.key for c in items}  # noqa: E731
        ranked = (rerank(q.question, r, ctx, keep[r.aspect], profile=dom.profile).items if rerank_with_llm
                  else [c for c, _ in r.items])
        rows.append({"qid": q.qid, "retriever": r.retriever, "aspect": r.aspect,
                     "in candidates": have(cands.aspect(r.aspect)), "in top K": have([c for c, _ in r.items]),
                     **{f"in top {k}": have([c for c, _ in r.items[:k]]) for k in ks},
                     "after re-ranking": have(ranked[:keep[r.aspect]]), "in context": have(ranked[:sizes[r.aspect]])})
    return rows
