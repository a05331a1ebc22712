"""Stage 4 — LLM re-ranking: the LLM picks and orders the k ≪ K most useful candidates of each
retriever's aspect (paper sec. 3 and appendix A.1.2)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from ...llm.parse import clean_text
from ...llm.prompting import load_prompt
from ..base import Context
from .candidates import Candidate
from .retrieval import Retrieved
from .schema import SchemaProfile


# ---------------------------------------------------------------------------------------------
# 4. LLM re-ranking
# ---------------------------------------------------------------------------------------------
_ASPECT_WORDS = {"path": "relation paths", "relation": "relations", "type": "entity types"}


@dataclass
class Reranked:
    retriever: str
    aspect: str
    items: list[Candidate]
    picked: list[int]  # 1-based numbers the LLM gave (valid ones)
    response: str = ""
    error: str | None = None  # "no_numbers" | "out_of_range" (fell back to the retriever's order)
    called: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"retriever": self.retriever, "aspect": self.aspect, "items": [c.query for c in self.items],
                "picked": self.picked, "response": self.response, "error": self.error, "called": self.called}


def parse_choice(text: str, n: int, k: int) -> tuple[list[int], str | None]:
    """Numbers 1..n in the order the LLM wrote them (duplicates and out-of-range dropped)."""
    t = clean_text(text)
    nums = [int(x) for x in re.findall(r"(?<![\w.])(\d{1,3})(?!\w|\.\d)", t)]
    if not nums:
        return [], "no_numbers"
    valid, seen = [], set()
    for x in nums:
        if 1 <= x <= n and x not in seen:
            seen.add(x)
            valid.append(x)
    if not valid:
        return [], "out_of_range"
    return valid[:k], None


def rerank_messages(question: str, retrieved: Retrieved, ctx: Context, k: int,
                    profile: SchemaProfile | None = None) -> list[dict[str, str]] | None:
    """The messages of one re-ranking call (:func:`rerank`): the question, the retriever's K candidates of one
    aspect numbered, and how many to pick; None when no call is made (a single candidate, or a list of k or
    fewer with ``rerank_short_lists=false``)."""
    from .settings import FuSICSettings

    s = FuSICSettings.of(ctx)
    if s.rerank_paths_as == "sexpr" and profile is None:
        raise ValueError("rerank_paths_as=sexpr needs the target KB's schema profile: "
                         "rerank(..., profile=task.target.profile)")
    items = [c for c, _ in retrieved.items]
    if len(items) <= 1 or (len(items) <= k and not s.rerank_short_lists):
        return None
    as_sexpr = profile if s.rerank_paths_as == "sexpr" else None
    listing = "\n".join(f"{i}. {c.display(s.show_path_values, as_sexpr)}" if c.aspect == "path"
                        else f"{i}. {c.query} ({c.text})" for i, c in enumerate(items, 1))
    return load_prompt("fusic_rerank").messages(question=question, what=_ASPECT_WORDS[retrieved.aspect],
                                                candidates=listing, k=str(min(k, len(items))))


def rerank(question: str, retrieved: Retrieved, ctx: Context, k: int,
           profile: SchemaProfile | None = None) -> Reranked:
    """The LLM picks and orders the k most useful candidates of one aspect. A list of k or fewer is
    re-ranked too ("If the number of candidates are ten or less then just rerank the candidates",
    appendix A.1.2), so each retriever makes the paper's 3 re-rank calls; with the setting
    ``rerank_short_lists=false`` such a list keeps the retriever's order, no call. A single candidate is never sent. Paths are shown as SPARQL programs
    (``show_path_values``: with the entities they reach; ``rerank_paths_as=sexpr``: as s-expressions,
    the paper's form, which needs the target's ``profile``). A malformed answer falls back to the
    retriever's order and is counted. The prompt: :func:`rerank_messages`."""
    items = [c for c, _ in retrieved.items]
    messages = rerank_messages(question, retrieved, ctx, k, profile)
    if messages is None:
        return Reranked(retrieved.retriever, retrieved.aspect, items, list(range(1, len(items) + 1)))
    want = min(k, len(items))
    r = ctx.llm.chat(messages, max_tokens=max(40, 5 * want), temperature=0.0, seed=ctx.seed)
    picked, err = parse_choice(r.text, len(items), k)
    chosen = [items[i - 1] for i in picked]
    for c in items:  # fill up to k with the retriever's order
        if len(chosen) >= k:
            break
        if c not in chosen:
            chosen.append(c)
    return Reranked(retrieved.retriever, retrieved.aspect, chosen, picked, r.text, err, True)


def trim(reranked: Sequence[Reranked], sizes: dict[str, int]) -> list[Reranked]:
    """Each re-ranked list cut to its context size (see :func:`context_sizes`)."""
    return [Reranked(r.retriever, r.aspect, r.items[:sizes[r.aspect]], r.picked, r.response, r.error, r.called)
            for r in reranked]
