"""KB-BINDER (Li et al., 2023): draft a logical form in context, bind it to the KG, execute, vote.

The in-context-learning baseline of FuSIC-KBQA (Table 2) and Keqing (Table 2). Generate, then
ground — no KB retrieval in the prompt:

1. :func:`select_exemplars` — (question, draft) pairs from a pool; KB-BINDER-R picks the pool
   questions closest to the question by BM25 (``retrieve``), else a fixed spread of the pool.
   A pool question's draft is its gold s-expression (GrailQA's grammar, :mod:`kgqa_lib.kg.sexpr`)
   with every entity written as its name in quotes and every relation/class by a readable name
   (:func:`to_draft`): MetaQA's come from the gold relation path, ``(JOIN (R directed_by) "Heat")``.
2. :func:`generate_drafts` — the LLM imitates the exemplars for the question: ``samples`` drafts,
   each a distinct sample (temperature > 0, its own sample index; one greedy draft when 1).
   :func:`parse_draft` finds the slots of a draft (mentions, relation names, class names) and
   counts what is malformed (``no_sexpr``, ``parse_error``, ``bad_form``) without raising.
3. :func:`bind_entities` (mention → KG entities by label/alias lookup, exact then fuzzy, top
   ``entity_k``), :func:`bind_relations` (drafted relation/class name → the KG's relations/classes
   by embedding similarity, top ``relation_k``), :func:`candidates` (bound logical forms from the
   combinations, best binding score first, at most ``max_candidates`` per draft).
4. :func:`execute_candidates` — each candidate → SPARQL → the KG, in order; the first that returns
   answers is the draft's answer. :func:`vote` — the answer set most drafts reached (self-consistency).

Pools: a KG's own (MetaQA: the Keqing pool split of dev, every tenth line; the mini-world: the
Keqing templated pool; ``tiny``: its questions), or a FuSIC transfer task's (``task``): its
source questions in the zero-shot setting (``shots=0``), its target shots otherwise.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence
from urllib.parse import unquote

from ..data.datasets import Question
from ..kg.graph import normalise_label
from ..llm.parse import clean_text
from ..llm.prompting import load_prompt
from ..kg.sexpr import COMPARATORS, OPERATORS, SExprError, extract_sexpr, parse_sexpr, to_text
from .base import Context, MethodResult, Settings, Tracer, register_method, setting

MAX_TRACE = 20  # candidates / executions kept per draft in a trace


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KBBinderSettings(Settings):
    """``kgqa run --method kbbinder --help-settings``."""

    task: str = setting("", "a FuSIC transfer task (source>target) whose exemplars to use: its source questions "
                            "(shots=0) or target shots; '' = the KG's own pool (MetaQA: Keqing's pool split of dev)")
    shots: int = setting(5, "with a task: target few-shots the exemplars come from (0 = zero-shot: the source's)",
                         min=0)
    exemplars: int = setting(10, "(question, draft) exemplars in the prompt", min=0)
    retrieve: bool = setting(True, "KB-BINDER-R: exemplars by BM25 over the pool (false: a fixed spread of the pool)")
    samples: int = setting(6, "drafts sampled for self-consistency and voted over (1 = one greedy draft)", min=1)
    temperature: float = setting(0.7, "sampling temperature of the drafts when samples > 1", min=0, max=2)
    entity_k: int = setting(2, "KG entities kept per drafted mention (label/alias lookup, exact then fuzzy)", min=1)
    relation_k: int = setting(3, "KG relations (classes) kept per drafted relation (class) name, by embedding similarity",
                              min=1)
    max_candidates: int = setting(20, "bound on the bound logical forms executed per draft (best binding score first)",
                                  min=1)
    max_answers: int = setting(500, "a query with more answers than this counts as failed (too_many)", min=1)


# --------------------------------------------------------------------------------------------
# Names: how KG relations/classes are written in drafts, and as text for the embedder
# --------------------------------------------------------------------------------------------
def relation_name(kg, iri: str) -> str:
    """A readable name for a relation or class: its local id when that reads as words
    (``directed_by``, ``film.film.directed_by``), else its label in snake case (``P57`` →
    ``director``)."""
    local = unquote(re.split(r"[/#]", iri)[-1])
    if re.search(r"[a-z]{3}", local):
        return local
    label = kg.label(iri) if hasattr(kg, "label") else local
    return re.sub(r"[^\w.]+", "_", label.strip().lower()).strip("_") or local


def name_text(name: str) -> str:
    """``film.film.directed_by`` / ``r:starred_actors`` / ``countryOfCitizenship`` → words."""
    name = re.sub(r"^[A-Za-z]+:(?=\w)", "", name.strip().strip("<>\"'"))
    name = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name)
    return re.sub(r"[\s._/\-]+", " ", name).strip().lower()


def _quote(label: str) -> str:
    return '"' + label.replace('"', "'") + '"'


_NUMBER = re.compile(r"-?\d+(\.\d+)?$")


# --------------------------------------------------------------------------------------------
# Walking an s-expression: one walker finds the slots of a draft and rewrites them
# --------------------------------------------------------------------------------------------
class DraftError(ValueError):
    """The s-expression parses but does not fit the grammar (an operator used wrongly)."""


def _walk(node: Any, visit) -> Any:
    """Rebuild ``node`` with every leaf replaced by ``visit(role, token)``; role is ``entity``
    (a member of a set), ``relation``, ``class`` (a bare name in AND) or ``value`` (compared)."""
    if isinstance(node, str):
        return visit("entity", node)
    op, args = node[0], node[1:]
    if not isinstance(op, str) or op not in OPERATORS or op == "R":
        raise DraftError(f"unknown operator {to_text(op)!r}")
    if op == "JOIN":
        if len(args) != 2:
            raise DraftError("JOIN takes a relation and a set")
        rel, arg = args
        if isinstance(rel, list):
            if len(rel) != 2 or rel[0] != "R" or not isinstance(rel[1], str):
                raise DraftError("a relation is a name or (R name)")
            rel = ["R", visit("relation", rel[1])]
        else:
            rel = visit("relation", rel)
        return ["JOIN", rel, _walk(arg, visit)]
    if op == "AND":
        if len(args) != 2 or all(isinstance(a, str) for a in args):
            raise DraftError("AND takes two sets (or a class and a set)")
        return ["AND"] + [visit("class", a) if isinstance(a, str) else _walk(a, visit) for a in args]
    if op == "OR":
        if not args or not all(isinstance(a, str) for a in args):
            raise DraftError("OR takes entities")
        return ["OR"] + [visit("entity", a) for a in args]
    if op == "COUNT":
        if len(args) != 1:
            raise DraftError("COUNT takes one set")
        return ["COUNT", _walk(args[0], visit)]
    if op in ("ARGMAX", "ARGMIN"):
        if len(args) != 2 or not isinstance(args[1], str):
            raise DraftError(f"{op} takes a set and a relation")
        return [op, _walk(args[0], visit), visit("relation", args[1])]
    if op in COMPARATORS:
        if len(args) != 2 or not all(isinstance(a, str) for a in args):
            raise DraftError(f"{op} takes a relation and a value")
        return [op, visit("relation", args[0]), visit("value", args[1])]
    raise DraftError(f"unknown operator {op!r}")  # pragma: no cover - OPERATORS is closed


def to_draft(sexpr: str, kg, profile) -> str:
    """A gold s-expression (compact KG ids) as the LLM should write it: entities as their names in
    quotes, relations and classes by :func:`relation_name`, values unchanged."""
    def visit(role: str, tok: str) -> str:
        if role == "value" or tok.startswith('"') or _NUMBER.match(tok):
            return tok
        iri = profile.expand(tok) if profile is not None else tok.strip("<>")
        return _quote(kg.label(iri)) if role == "entity" else relation_name(kg, iri)

    return to_text(_walk(parse_sexpr(sexpr), visit))


# --------------------------------------------------------------------------------------------
# Stage 1: the exemplar pool and KB-BINDER-R's selection
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Exemplar:
    qid: str
    question: str
    draft: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def exemplars_from(questions: Sequence[Question], kg_of, kg_name: str, profile) -> list[Exemplar]:
    """Exemplars of questions with a gold logical form (``kg_of(q)``: the KG a question is asked against)."""
    from .fusic import gold_of

    out = []
    for q in questions:
        kg = kg_of(q)
        gold = gold_of(q, kg, kg_name)
        sexpr = gold.sexpr(profile) if gold is not None else ""
        if not sexpr:
            continue
        try:
            out.append(Exemplar(q.qid, q.question, to_draft(sexpr, kg, profile)))
        except (SExprError, DraftError):
            continue
    return out


_POOLS: dict[tuple, list[Exemplar]] = {}


def own_pool(kg_name: str) -> str:
    """The question set whose s-expressions are the exemplars on ``kg_name`` without a transfer task:
    ``tiny``, or Keqing's pool of ``metaqa``, the GrailQA fragment or ``miniworld`` (either schema). Any
    other KG has none: a :class:`~kgqa_lib.errors.UsageError`."""
    from .keqing import GRAILQA_KG

    if kg_name in ("tiny", "metaqa", GRAILQA_KG):
        return kg_name
    if kg_name.startswith("miniworld"):
        return "miniworld"
    from ..errors import UsageError

    raise UsageError(f"kbbinder has no exemplar pool for KG {kg_name!r}: use metaqa, {GRAILQA_KG}, miniworld or tiny, "
                     "or name a FuSIC transfer task with --set task=SOURCE>TARGET")


def exemplar_pool(kg, kg_name: str, task: str = "", shots: int = 0, seed: int = 0) -> list[Exemplar]:
    """The exemplars the drafts imitate: a transfer task's (source questions for ``shots=0``, else
    its first ``shots`` target shots), or the KG's own pool (MetaQA: the Keqing pool split of dev;
    the shared GrailQA fragment: the Keqing pool split of its dev questions, so ``keqing:grailqa``'s
    questions are never exemplars; the mini-world: the Keqing templated pool; ``tiny``: its film
    questions)."""
    key = (kg_name, task, shots, seed)
    if key in _POOLS:
        return _POOLS[key]
    if task:
        from .fusic import get_task, target_shots

        t = get_task(task, seed)
        dom, qs = (t.target, target_shots(t, shots)) if shots else (t.source, t.source.questions)
        pool = exemplars_from(qs, dom.kg_for, dom.kg_name, dom.profile)
    else:
        from ..data.datasets import load_dataset
        from .keqing import pool_for

        qs = load_dataset("tiny:films").questions if own_pool(kg_name) == "tiny" else pool_for(own_pool(kg_name))
        pool = exemplars_from(qs, lambda q: kg, kg_name, _profile(kg_name))
    _POOLS[key] = pool
    return pool


def select_exemplars(question: Question, pool: Sequence[Exemplar], n: int = 10, retrieve: bool = True) -> list[Exemplar]:
    """``n`` exemplars, the question itself left out: the ``n`` best by BM25 between the questions
    (KB-BINDER-R), or a fixed spread over the pool. The closest comes last, next to the question."""
    usable = [e for e in pool if e.qid != question.qid and e.question != question.question]
    if n <= 0 or not usable:
        return []
    if not retrieve:
        step = max(1, len(usable) // n)
        return usable[::step][:n]
    from ..embed.retrieval import BM25Retriever

    ranked = BM25Retriever().rank(question.question, [e.question for e in usable], k=n)
    return [usable[r.index] for r in reversed(ranked)]


# --------------------------------------------------------------------------------------------
# Stage 2: drafts
# --------------------------------------------------------------------------------------------
@dataclass
class Slot:
    kind: str  # entity | relation | class
    text: str  # as the draft writes it (a mention without its quotes)

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.text


@dataclass
class Draft:
    index: int  # the sample index
    text: str  # the LLM's raw output
    sexpr: str = ""  # the s-expression found in it
    slots: list[Slot] = field(default_factory=list)
    error: str | None = None  # no_sexpr | parse_error | bad_form
    message: str = ""
    tree: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "text": self.text, "sexpr": self.sexpr, "error": self.error,
                "message": self.message, "slots": [[s.kind, s.text] for s in self.slots]}


def _mention(tok: str) -> str:
    t = tok.strip()
    if len(t) >= 2 and t[0] == t[-1] == '"':
        return t[1:-1].strip()
    return re.sub(r"^[a-z]+:(?=\S)", "", t).replace("_", " ").strip()


def parse_draft(text: object, index: int = 0) -> Draft:
    """The s-expression in the LLM's output and its slots; never raises (what is wrong is the
    draft's ``error``: ``no_sexpr``, ``parse_error`` or ``bad_form``)."""
    raw = clean_text(text)
    sexpr = extract_sexpr(raw)
    if not sexpr:
        return Draft(index, raw, error="no_sexpr", message="no s-expression in the output")
    try:
        tree = parse_sexpr(sexpr)
    except SExprError as exc:
        return Draft(index, raw, sexpr, error="parse_error", message=str(exc))
    slots: dict[tuple[str, str], Slot] = {}

    def visit(role: str, tok: str) -> str:
        if role == "value" or (role == "entity" and _NUMBER.match(tok)):
            return tok
        name = _mention(tok) if role == "entity" else tok.strip()
        if name:
            slot = Slot(role, name)
            slots.setdefault(slot.key, slot)
        return tok

    try:
        _walk(tree, visit)
    except DraftError as exc:
        return Draft(index, raw, sexpr, error="bad_form", message=str(exc))
    return Draft(index, raw, sexpr, list(slots.values()), tree=tree)


def draft_messages(question: str, exemplars: Sequence[Exemplar]) -> list[dict[str, str]]:
    """The prompt: instructions, then every exemplar as a (question, draft) turn pair."""
    prompt = load_prompt("kbbinder_draft")
    messages = [{"role": "system", "content": prompt.system}]
    for e in exemplars:
        messages += [{"role": "user", "content": prompt.render(question=e.question)},
                     {"role": "assistant", "content": e.draft}]
    messages.append({"role": "user", "content": prompt.render(question=question)})
    return messages


def generate_drafts(question: str, ctx: Context, exemplars: Sequence[Exemplar], samples: int = 6,
                    temperature: float = 0.7, max_tokens: int = 128) -> list[Draft]:
    """``samples`` drafts of the question's logical form. Each is its own sample (its sample index
    is part of the cache key), drawn at ``temperature``; with one sample, a greedy draft. One call per
    draft, or all at once when the LLM decodes samples together (:func:`~kgqa_lib.llm.chat.chat_samples`)."""
    from ..llm.chat import chat_samples

    messages = draft_messages(question, exemplars)
    n = max(1, samples)
    replies = chat_samples(ctx.llm, messages, n, max_tokens=max_tokens, temperature=temperature if n > 1 else 0.0,
                           seed=ctx.seed)
    return [parse_draft(r.text, i) for i, r in enumerate(replies)]


# --------------------------------------------------------------------------------------------
# Stage 3: binding
# --------------------------------------------------------------------------------------------
@dataclass
class Option:
    token: str  # what goes into the bound s-expression: <iri> or a literal
    label: str
    score: float


@dataclass
class Binding:
    slot: Slot
    options: list[Option]  # best first; empty = the slot could not be bound

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.slot.kind, "text": self.slot.text,
                "options": [[o.label, round(o.score, 4)] for o in self.options]}


def bind_entities(mentions: Sequence[str], kg, k: int = 2) -> list[list[Option]]:
    """Each mention → up to ``k`` KG entities whose label or alias matches: exact (or normalised)
    first, fuzzy only when nothing matches. A number is never matched fuzzily (1999 is not 1994):
    when no entity is named exactly so, it stays a literal."""
    out = []
    for m in mentions:
        hits = kg.lookup(m, fuzzy=False, limit=k) or ([] if _NUMBER.match(m) else kg.lookup(m, fuzzy=True, limit=k))
        opts = [Option(f"<{iri}>", label or kg.label(iri), float(score)) for iri, score, label in hits[:k]]
        if not opts and _NUMBER.match(m):
            opts = [Option(m, m, 0.5)]
        out.append(opts)
    return out


@dataclass
class Catalogue:
    """A KG's relations (or classes): IRIs, readable names, and their embeddings."""

    iris: list[str]
    names: list[str]
    vectors: Any = None


_CATALOGUES: dict[tuple[int, str], tuple[Any, Catalogue]] = {}


def _inner(kg):
    return getattr(kg, "_inner", kg)  # the runner's Metered proxy


def catalogue(kg, embedder, kind: str = "relation", type_predicate: str | None = None) -> Catalogue:
    """The KG's relations (``kind="relation"``) or classes (objects of ``type_predicate``), named
    and embedded once per KG."""
    key = (id(_inner(kg)), kind)
    hit = _CATALOGUES.get(key)
    if hit is not None and hit[0] is _inner(kg):
        return hit[1]
    if kind == "relation":
        iris = list(kg.relations())
    elif type_predicate:
        res = kg.sparql(f"SELECT DISTINCT ?c WHERE {{ ?x <{type_predicate}> ?c }} LIMIT 5000", timeout=30.0, max_rows=5000)
        iris = sorted({row[res.vars[0]] for row in res.rows if "://" in row.get(res.vars[0], "")})
    else:
        iris = []
    names = [relation_name(kg, i) for i in iris]
    cat = Catalogue(iris, names, embedder.encode([name_text(n) for n in names]) if names else None)
    if len(_CATALOGUES) > 64:  # per-question slices (GrailQA) make many small KGs
        _CATALOGUES.clear()
    _CATALOGUES[key] = (_inner(kg), cat)
    return cat


def bind_relations(names: Sequence[str], cat: Catalogue, embedder, k: int = 3) -> list[list[Option]]:
    """Each drafted name → the ``k`` catalogue entries whose names are most similar (cosine of
    their embeddings); a name the KG has verbatim scores 1.0 and comes first."""
    from ..embed.embedder import cosine_topk

    if not names:
        return []
    if not cat.iris:
        return [[] for _ in names]
    idx, scores = cosine_topk(embedder.encode([name_text(n) for n in names]), cat.vectors, k)
    out = []
    for name, row, srow in zip(names, idx.tolist(), scores.tolist()):
        opts = [Option(f"<{cat.iris[i]}>", cat.names[i], float(s)) for i, s in zip(row, srow)]
        exact = [o for o in opts if o.label == name]  # ties broken towards the name as written
        out.append(exact + [o for o in opts if o not in exact])
    return out


def bind(draft: Draft, kg, embedder, *, entity_k: int = 2, relation_k: int = 3,
         type_predicate: str | None = None) -> list[Binding]:
    """Every slot of a draft with its KG options (entities by lookup, relations/classes by embedding)."""
    ents = [s for s in draft.slots if s.kind == "entity"]
    rels = [s for s in draft.slots if s.kind == "relation"]
    classes = [s for s in draft.slots if s.kind == "class"]
    opts: dict[tuple[str, str], list[Option]] = {}
    for s, o in zip(ents, bind_entities([s.text for s in ents], kg, entity_k)):
        opts[s.key] = o
    if rels:
        for s, o in zip(rels, bind_relations([s.text for s in rels], catalogue(kg, embedder), embedder, relation_k)):
            opts[s.key] = o
    if classes:
        cat = catalogue(kg, embedder, "class", type_predicate)
        for s, o in zip(classes, bind_relations([s.text for s in classes], cat, embedder, relation_k)):
            opts[s.key] = o
    return [Binding(s, opts[s.key]) for s in draft.slots]


@dataclass
class Candidate:
    sexpr: str  # the bound logical form
    score: float  # the sum of its options' scores
    choice: list[str]  # the label chosen for each slot

    def as_dict(self) -> dict[str, Any]:
        return {"sexpr": self.sexpr, "score": round(self.score, 4), "choice": self.choice}


def best_combinations(sizes_scores: Sequence[Sequence[float]], bound: int) -> list[tuple[float, tuple[int, ...]]]:
    """The ``bound`` best index combinations (one option per slot; score = the sum), best first,
    found best-first from (0, 0, …) without enumerating the whole product. Ties: lower indices first."""
    if any(len(s) == 0 for s in sizes_scores) or bound <= 0:
        return []
    n = len(sizes_scores)
    start = (0,) * n

    def total(idx: tuple[int, ...]) -> float:
        return sum(sizes_scores[i][j] for i, j in enumerate(idx))

    heap = [(-total(start), start)]
    seen = {start}
    out = []
    while heap and len(out) < bound:
        neg, idx = heapq.heappop(heap)
        out.append((-neg, idx))
        for i in range(n):
            if idx[i] + 1 < len(sizes_scores[i]):
                nxt = idx[:i] + (idx[i] + 1,) + idx[i + 1:]
                if nxt not in seen:
                    seen.add(nxt)
                    heapq.heappush(heap, (-total(nxt), nxt))
    return out


def candidates(draft: Draft, bindings: Sequence[Binding], bound: int = 20) -> list[Candidate]:
    """Bound logical forms: the draft with every slot replaced by one of its options, the
    ``bound`` best combinations (sum of option scores) first. A slot without options → none."""
    if draft.tree is None:
        return []
    combos = best_combinations([[o.score for o in b.options] for b in bindings], bound)
    out = []
    for score, idx in combos:
        chosen = {b.slot.key: b.options[j] for b, j in zip(bindings, idx)}

        def visit(role: str, tok: str) -> str:
            if role == "value" or (role == "entity" and _NUMBER.match(tok)):
                return tok
            key = (role, _mention(tok) if role == "entity" else tok.strip())
            return chosen[key].token if key in chosen else tok

        out.append(Candidate(to_text(_walk(draft.tree, visit)), score, [chosen[b.slot.key].label for b in bindings]))
    return out


# --------------------------------------------------------------------------------------------
# Stage 4: execution and the vote
# --------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    """One draft, grounded: its bindings, candidates, what each executed candidate returned."""

    draft: Draft
    bindings: list[Binding] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    executions: list[dict[str, Any]] = field(default_factory=list)  # {sexpr, status, n}
    answers: list[str] = field(default_factory=list)
    winner: str = ""  # the bound logical form that answered
    status: str = "no_answer"  # ok | no_sexpr | parse_error | bad_form | unbound_entity | unbound_relation | unbound_class | no_answer

    def as_dict(self) -> dict[str, Any]:
        return {"draft": self.draft.as_dict(), "status": self.status, "bindings": [b.as_dict() for b in self.bindings],
                "n_candidates": len(self.candidates), "candidates": [c.as_dict() for c in self.candidates[:MAX_TRACE]],
                "executions": self.executions[:MAX_TRACE], "winner": self.winner, "answers": self.answers[:MAX_TRACE]}


def execute_candidates(cands: Sequence[Candidate], kg, profile, exclude: Sequence[str] = (), max_answers: int = 500,
                       memo: dict[str, Any] | None = None) -> tuple[int | None, list[Any]]:
    """Run the candidates in order (s-expression → SPARQL → the KG) until one returns answers;
    (its index or None, the executions). ``memo`` shares executions between drafts of one question."""
    from .fusic import execute_query

    memo = {} if memo is None else memo
    runs = []
    for i, c in enumerate(cands):
        if c.sexpr not in memo:
            memo[c.sexpr] = execute_query(c.sexpr, kg, profile, language="sexpr", max_answers=max_answers,
                                          exclude=exclude)
        ex = memo[c.sexpr]
        runs.append(ex)
        if ex.ok:
            return i, runs
    return None, runs


def ground(draft: Draft, kg, embedder, profile, *, entity_k: int = 2, relation_k: int = 3, bound: int = 20,
           max_answers: int = 500, memo: dict[str, Any] | None = None) -> Outcome:
    """Bind one draft, build its candidates, execute them: the draft's answers (or why none)."""
    if draft.error:
        return Outcome(draft, status=draft.error)
    from .fusic import _type_iri

    bindings = bind(draft, kg, embedder, entity_k=entity_k, relation_k=relation_k,
                    type_predicate=_type_iri(profile) if profile is not None else None)
    unbound = next((b for b in bindings if not b.options), None)
    if unbound is not None:
        return Outcome(draft, bindings, status=f"unbound_{unbound.slot.kind}")
    cands = candidates(draft, bindings, bound)
    exclude = [o.token.strip("<>") for b in bindings if b.slot.kind == "entity" for o in b.options]
    win, runs = execute_candidates(cands, kg, profile, exclude, max_answers, memo)
    executions = [{"sexpr": c.sexpr, "status": r.status, "n": len(r.answers) or r.rows} for c, r in zip(cands, runs)]
    if win is None:
        return Outcome(draft, bindings, cands, executions, status="no_answer")
    return Outcome(draft, bindings, cands, executions, list(runs[win].answers), cands[win].sexpr, "ok")


@dataclass
class Vote:
    answers: list[str]
    winner: int | None  # the draft whose answers won (the earliest of the most frequent set)
    tally: list[tuple[list[str], int]]  # each distinct answer set (first answers) and its votes, most first
    statuses: dict[str, int]  # draft outcomes by status

    def as_dict(self) -> dict[str, Any]:
        return {"answers": self.answers[:MAX_TRACE], "winner": self.winner,
                "tally": [[a[:5], n] for a, n in self.tally], "statuses": self.statuses}


def vote(outcomes: Sequence[Outcome]) -> Vote:
    """Self-consistency: the answer set (compared as normalised labels) that most drafts reached;
    a tie goes to the earliest draft. Drafts without answers do not vote."""
    statuses = dict(Counter(o.status for o in outcomes))
    keys = [frozenset(normalise_label(a) for a in o.answers) if o.answers else None for o in outcomes]
    counts = Counter(k for k in keys if k)
    if not counts:
        return Vote([], None, [], statuses)
    best = max(counts.values())
    winner = next(i for i, k in enumerate(keys) if k and counts[k] == best)
    first = {}
    for o, k in zip(outcomes, keys):
        if k and k not in first:
            first[k] = o.answers
    tally = sorted(((first[k], n) for k, n in counts.items()), key=lambda t: -t[1])
    return Vote(list(outcomes[winner].answers), winner, tally, statuses)


# --------------------------------------------------------------------------------------------
# The method
# --------------------------------------------------------------------------------------------
def _profile(kg_name: str):
    """The schema profile of a KG (its prefixes and type predicate); a bare one for other KGs."""
    from .fusic import PROFILES, SchemaProfile, profile_for

    name = "miniworld:wikidata" if kg_name == "miniworld" else kg_name
    return profile_for(name) if name in PROFILES else SchemaProfile(kg_name or "kg", ())


def _kg_name(s: KBBinderSettings) -> str:
    name = s.kg or "miniworld"
    if name.startswith("sparql+"):
        from ..kg.remote import parse_kg_url

        name = parse_kg_url(name)[1].get("profile", "wikidata")
    return name


def error_of(outcomes: Sequence[Outcome]) -> str | None:
    """The run's error category when no draft answered: the most frequent draft status."""
    failed = Counter(o.status for o in outcomes if o.status != "ok")
    return failed.most_common(1)[0][0] if failed else "no_answer"


def check_run(dataset: str, settings: Any) -> None:
    """A given transfer task is the dataset's (``fusic:TASK:…``); without one, the KG has a pool."""
    from .fusic import check_task

    s = KBBinderSettings.of(settings)
    check_task(dataset, s.task, "kbbinder")
    if not s.task:
        own_pool(_kg_name(s))


@register_method("kbbinder", prompts=("kbbinder_draft",), settings=KBBinderSettings, needs=("kg", "embedder"),
                 check=check_run)
def kbbinder(q: Question, ctx: Context) -> MethodResult:
    """KB-BINDER(-R) with self-consistency. Settings (``--set``): ``task`` (a FuSIC transfer task; ''
    = the KG's own pool), ``shots`` (0 = zero-shot), ``exemplars`` (10), ``retrieve`` (BM25
    exemplars, true), ``samples`` (6), ``temperature`` (0.7), ``entity_k`` (2), ``relation_k`` (3),
    ``max_candidates`` (20 per draft), ``max_answers`` (500)."""
    s = KBBinderSettings.of(ctx)
    if s.task:
        from .fusic import get_task

        dom = get_task(s.task, ctx.seed).target
        kg, kg_name, profile = dom.kg_for(q), dom.kg_name, dom.profile
    else:
        if ctx.kg is None:
            raise ValueError("kbbinder needs a KG: run it on a dataset with a KG (keqing:metaqa:1hop, keqing:miniworld) "
                             "or name a FuSIC transfer task with --set task=SOURCE>TARGET")
        kg, kg_name = ctx.kg, _kg_name(s)
        profile = _profile(kg_name)
    embedder = ctx.embedder
    if embedder is None:
        from ..embed.embedder import Embedder

        embedder = Embedder()
    tr = Tracer()
    pool = exemplar_pool(kg, kg_name, s.task, s.shots, ctx.seed)
    shots = tr.record("select_exemplars", select_exemplars, q, pool, s.exemplars, s.retrieve)
    drafts = tr.record("draft", generate_drafts, q.question, ctx, shots, s.samples, s.temperature)
    memo: dict[str, Any] = {}
    outcomes = [tr.record(f"ground_{d.index}", ground, d, kg, embedder, profile, entity_k=s.entity_k,
                          relation_k=s.relation_k, bound=s.max_candidates, max_answers=s.max_answers, memo=memo)
                for d in drafts]
    v = tr.record("vote", vote, outcomes)
    response = outcomes[v.winner].winner if v.winner is not None else "\n".join(d.text for d in drafts)
    return MethodResult(v.answers, response, tr.stages, None if v.answers else error_of(outcomes))
