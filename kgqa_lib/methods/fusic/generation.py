"""Stage 5 — logical-form generation: the retrieved context, the exemplars and the question in one
few-shot prompt (paper sec. 3 "Generation Stage", appendix A.1.3)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from ...data.datasets import Question
from ...llm.parse import clean_text
from ...llm.prompting import load_prompt
from ...kg.sexpr import extract_sexpr
from ..base import Context
from .linking import Linking
from .reranking import Reranked
from .retrieval import prepared_domain, retrieve
from .schema import SchemaProfile
from .tasks import Task, target_shots


# ---------------------------------------------------------------------------------------------
# 5. Logical-form generation
# ---------------------------------------------------------------------------------------------
def context_block(linking: Linking | None, contexts: Sequence[Reranked], profile: SchemaProfile, *,
                  show_values: bool = False, paths_in: str = "sparql") -> str:
    """The retrieved KB context as the LLM reads it, one section per retriever: the linked entities,
    the paths as SPARQL programs (paper sec. 3; ``show_values``: with the entities they reach, the
    setting ``show_path_values``; ``paths_in="sexpr"``: as s-expressions, the setting ``paths_as``), the
    relations and types with their labels. ``linking=None`` (the naive baseline): no KB context at all,
    an empty string."""
    if linking is None:
        return ""
    lines = ["Entities: " + ("; ".join(f"{profile.compact(m.iri)} ({m.label})" for m in linking.mentions) or "none found")]
    by_retriever: dict[str, list[Reranked]] = {}
    for c in contexts:
        by_retriever.setdefault(c.retriever, []).append(c)
    for i, (name, parts) in enumerate(by_retriever.items(), 1):
        for part in parts:
            if not part.items:
                continue
            title = {"path": "Paths", "relation": "Relations", "type": "Types"}[part.aspect]
            if part.aspect == "path":
                lines.append(f"{title} (retriever {i}):")
                lines += [f"  {c.display(show_values, profile if paths_in == 'sexpr' else None)}" for c in part.items]
            else:
                lines.append(f"{title} (retriever {i}): " + "; ".join(f"{c.query} ({c.text})" for c in part.items))
    return "\n".join(lines)


@dataclass
class Exemplar:
    question: str
    context: str
    target: str  # gold SPARQL or s-expression

    def as_dict(self) -> dict[str, Any]:
        return {"question": self.question, "context": self.context, "target": self.target}


def _fence(language: str, text: str) -> str:
    return f"```{'sparql' if language == 'sparql' else 'lisp'}\n{text}\n```"


#: the s-expression prompt's words for the paths, and what they become when the paths are shown as
#: s-expressions (the setting ``paths_as=logical_form``; a substitution, so the prompt file — whose hash
#: is in every FuSIC run's configuration — stays as it is)
PATHS_AS_SPARQL = "candidate relation paths (as SPARQL queries)"
PATHS_AS_SEXPR = "candidate relation paths (as s-expressions)"


def build_messages(question: str, context: str, exemplars: Sequence[Exemplar], language: str,
                   profile: SchemaProfile, *, naive: bool = False, paths_in: str = "sparql") -> list[dict[str, str]]:
    """The generation prompt: system instructions, the exemplars as dialogue turns, the question
    with its context. ``naive``: the paper's naive LLM FS-ICL baseline (sec. 4.2.1: the question
    and exemplars of question → logical form, no KB retrieval), SPARQL only. ``paths_in="sexpr"``:
    the instructions say the paths are s-expressions (the contexts were written so)."""
    name = "fusic_naive" if naive and language == "sparql" else "fusic_sparql" if language == "sparql" else "fusic_sexpr"
    prompt = load_prompt(name)
    shots = "".join(f"Question: {e.question}\n{e.context}{chr(10) if e.context else ''}>>> assistant\n"
                    f"{_fence(language, e.target)}\n>>> user\n" for e in exemplars)
    messages = prompt.messages(exemplars=shots, question=question, context=context)
    if paths_in == "sexpr":
        if PATHS_AS_SPARQL not in messages[0]["content"]:
            raise ValueError(f"the prompt {name} no longer says {PATHS_AS_SPARQL!r}: update PATHS_AS_SPARQL")
        messages[0] = {**messages[0], "content": messages[0]["content"].replace(PATHS_AS_SPARQL, PATHS_AS_SEXPR)}
    return messages


_FENCED = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)(?:```|$)", re.S)
_SELECT = re.compile(r"((?:PREFIX\s+\S+\s*<[^>]*>\s*)*(?:SELECT|ASK|INSERT|DELETE|CONSTRUCT|DESCRIBE|LOAD|CLEAR|DROP|WITH)\b.*)", re.S | re.I)


MAX_ANSWER_CHARS = 20_000  # of an LLM answer searched for a query (answers are < 1,000 characters; the
# query regex is quadratic in the number of PREFIX lines, 3 s of CPU for 3,000 of them)


def extract_query(text: str, language: str = "sparql") -> tuple[str, str | None]:
    """The query in a chatty answer: a fenced block if any, else from the first query keyword;
    trailing prose after the last closing brace dropped. ``("", "no_query")`` when none. Only
    the first ``MAX_ANSWER_CHARS`` characters are read."""
    t = clean_text(text)[:MAX_ANSWER_CHARS]
    if language == "sexpr":
        q = extract_sexpr(t)
        return (q, None) if q else ("", "no_query")
    m = _FENCED.search(t)
    body = m.group(1) if m else t
    s = _SELECT.search(body) or _SELECT.search(t)
    if not s:
        return "", "no_query"
    q = s.group(1).strip()
    if "}" in q:  # cut prose after the query (keep ORDER BY / LIMIT after the last brace)
        head, tail = q.rsplit("}", 1)
        tail_kept = re.match(r"\s*((?:GROUP BY|ORDER BY|LIMIT|OFFSET|HAVING)[^\n]*)?", tail, re.I)
        q = head + "}" + (" " + tail_kept.group(1).strip() if tail_kept and tail_kept.group(1) else "")
    return q, None


# ---------------------------------------------------------------------------------------------
# Exemplars
# ---------------------------------------------------------------------------------------------
EXEMPLAR_CHOICES = ("static", "similarity", "bm25")


def exemplar_order(q: Question, pool: Sequence[Question], n: int, choice: str = "static", seed: int = 0,
                   embedder=None, *, shots: bool = True) -> list[int]:
    """Indices into ``pool`` of the n exemplars, in prompt order (see :func:`exemplars_for`).
    static: few-shot (``shots``) the first n in the pool's order; zero-shot n drawn with ``seed`` from
    the pool sorted by qid (independent of the question). similarity: the n closest to ``q``, the
    closest last (right before the question). bm25: the same by BM25 between the questions' words
    (KB-BINDER's and gf-LLM's dynamic selection, FuSIC paper sec. 4.1 and 5), ties in pool order."""
    if choice not in EXEMPLAR_CHOICES:
        raise ValueError(f"exemplar choice {choice!r}: one of {', '.join(EXEMPLAR_CHOICES)}")
    n = min(n, len(pool))
    if choice == "static":
        if shots:
            return list(range(n))
        import random

        by_qid = sorted(range(len(pool)), key=lambda i: pool[i].qid)
        return random.Random(f"fusic-exemplars:{seed}").sample(by_qid, n)
    if choice == "bm25":
        from ...embed.retrieval import BM25Retriever

        return [r.index for r in reversed(BM25Retriever().rank(q.question, [p.question for p in pool], k=n))]
    from ...embed.embedder import Embedder

    emb = embedder or Embedder()
    vecs = emb.encode([q.question] + [p.question for p in pool])
    sims = vecs[1:] @ vecs[0]
    return list(reversed(sorted(range(len(pool)), key=lambda i: (-float(sims[i]), pool[i].qid))[:n]))


def exemplars_for(q: Question, task: Task, shots: int, language: str, retrievers: Sequence[Any], n: int = 5,
                  k_sizes: dict[str, int] | None = None, embedder=None, *, show_values: bool = False,
                  naive: bool = False, max_hops: int = 2, choice: str = "static", seed: int = 0,
                  paths_in: str = "sparql", sparql_form: str = "concise") -> list[Exemplar]:
    """The n exemplars of the generation prompt (the paper's 5, appendix A.1.3): from the target's
    few shots, or (zero-shot) from the source domain. ``choice`` (the setting ``exemplar_choice``):
    ``static`` = the paper (sec. 3: "few-shot exemplars from the target. For zero-shot, target
    exemplars are replaced with randomly selected exemplars from the source training set"; sec. 5:
    dynamic selection gave "only minor improvements beyond random exemplar selection and static
    exemplars") — the first n target shots in the pool's order, or n source questions drawn once
    with ``seed``, the same for every question (so the prompt's exemplar block repeats and a prefix
    cache can reuse it); ``similarity`` = the n closest to the question by sentence embedding, the
    closest last (our earlier default). Each exemplar carries its own retrieved context
    (retriever top-k, no LLM), written as the question's is (``show_values``); ``naive``: question
    and logical form only. ``max_hops``: the exemplars' candidate paths, as the question's (the
    setting ``max_path_hops``). ``sparql_form``: how a GrailQA exemplar's SPARQL is written
    (:meth:`Gold.sparql`; the setting ``exemplar_sparql``)."""
    if shots:  # the first n shots first: the static exemplars are the same n whatever the number of shots
        dom, ids = task.target, tuple(x.qid for x in target_shots(task, shots))
        pool = [*prepared_domain(dom.name, ids[:n], max_hops=max_hops),
                *prepared_domain(dom.name, ids[n:], max_hops=max_hops)]
    else:
        dom, pool = task.source, prepared_domain(task.source.name, max_hops=max_hops)
    logical_form = ((lambda g: g.sparql(dom.profile, sparql_form)) if language == "sparql"
                    else (lambda g: g.sexpr(dom.profile)))
    pool = [p for p in pool if p.gold is not None and logical_form(p.gold)]
    if not pool or n <= 0:
        return []
    order = exemplar_order(q, [p.question for p in pool], n, choice, seed, embedder, shots=bool(shots))
    k_sizes = k_sizes or context_sizes(len(retrievers))
    out = []
    for i in order:
        p = pool[i]
        target = logical_form(p.gold)
        if naive:
            out.append(Exemplar(p.question.question, "", target))
            continue
        ctxs = [Reranked(x.retriever, x.aspect, [c for c, _ in x.items[:k_sizes[x.aspect]]], [])
                for x in retrieve(p.question.question, p.candidates, retrievers, max(k_sizes.values()))]
        out.append(Exemplar(p.question.question, context_block(p.linking, ctxs, dom.profile, show_values=show_values,
                                                             paths_in=paths_in),
                            target))
    return out


# Context sizes: appendix A.1.3 — "When using a single retriever, we use 5 shots with top-5 retrieval
# results for data paths and top-10 for relations and entity types. ... (top-3 paths and top-5 relations
# and types for 2 retrievers)". The re-ranking prompts of appendix A.1.2 ask for five paths, ten types
# and ten relations whatever the number of retrievers: the LLM re-ranks to RERANK_K, then each list
# is cut to its context size (so one re-ranking serves the one- and the two-retriever configurations).
CONTEXT_SIZES = {
    "paper": ({"path": 5, "relation": 10, "type": 10}, {"path": 3, "relation": 5, "type": 5}),
    # our earlier default, for the small local model's short context: (re-rank k = one retriever, two or more)
    "compact": ({"path": 5, "relation": 4, "type": 2}, {"path": 3, "relation": 3, "type": 1}),
}
RERANK_K = dict(CONTEXT_SIZES["paper"][0])  # what the LLM keeps of each retriever's top K (appendix A.1.2)


def rerank_sizes(preset: str = "paper") -> dict[str, int]:
    """k per aspect the LLM re-ranks to (the setting ``context_size``: paper | compact)."""
    return dict(CONTEXT_SIZES[preset][0])


def context_sizes(n_retrievers: int, preset: str = "paper") -> dict[str, int]:
    """k per aspect and retriever in the generation prompt, smaller as retrievers are added so the
    prompt stays in budget (appendix A.1.3: top-5 paths and top-10 relations and types for one
    retriever; top-3 paths and top-5 relations and types for two — and, our extension, for more)."""
    one, several = CONTEXT_SIZES[preset]
    return dict(one) if n_retrievers <= 1 else dict(several)


def generate_query(messages: list[dict[str, str]], ctx: Context, max_tokens: int = 200) -> str:
    """One LLM call for the logical form."""
    return ctx.llm.chat(messages, max_tokens=max_tokens, temperature=0.0, seed=ctx.seed).text
