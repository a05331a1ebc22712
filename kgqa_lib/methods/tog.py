"""Think-on-Graph (Sun et al., ICLR 2024): the LLM explores the KG by beam search, then answers.

The baseline PG&AKV positions itself against (its Table 1 and section 2). Built from ToG's paper
and its public description on our LLM, KG, cache and runner; prompts in our own words. Stages,
one function each (``41_tog_walkthrough`` shows them cell by cell):

1. :func:`link_topic_entities` — the question's topic entities (``q.topic_entities``) through
   ``kg.lookup`` (exact label first, fuzzy only if nothing matches) → one path per entity.
2. :func:`explore_depth` — one depth of the beam search. For the tail entity of every path in the
   beam, :func:`candidate_relations` lists the relations around it (both directions; an incoming
   relation is shown as ``name (reverse)``) and :func:`prune_relations` asks the LLM for the top
   ``width`` with scores (``{relation (Score: 0.4)}``). The entities each kept relation reaches
   are scored by :func:`score_entities` (entity score × relation score; one candidate keeps the
   relation's score without a call), and :func:`prune_entities` keeps the top ``width`` paths
   overall (score 0 dropped).
   ToG-R (``variant="tog-r"``): relation-only exploration — no entity scoring; a path's tail is
   the set of entities its relations reach (at most ``max_entities``), relations are pruned per
   path, and the top ``width`` relation paths are kept.
3. :func:`judge` — after each depth the LLM reads the paths' triples and says ``{Yes}`` (enough;
   its answer comes in the same reply, as in ToG) or ``{No}`` (go deeper).
   Depth floor (``min_depth``, a deviation from ToG, which asks the judge at every depth):
   :func:`judge_skip` says why the judge is not asked at a depth below ``min_depth``; the search then
   goes on as after a ``{No}``, and the step records the reason (``judge_skipped``). Default 0: ToG as
   published. A run on k-hop questions may set ``min_depth=k``; k is the run's setting, never read
   from a question's gold annotations.
4. :func:`answer_from_paths` / :func:`answer_from_own_knowledge` — when the judge did not stop the
   search by ``depth``: ``fallback="own_knowledge"`` (ToG) answers from the LLM's own knowledge
   (our CoT prompt, as ToG's own-knowledge prompt is chain-of-thought), ``"paths"`` from the
   paths found. When the beam empties earlier (nothing left to explore) the answer comes from the
   paths found so far (ToG's "half stop"). Open questions (``kind == "open"``) get a prose answer.

Bounds, named: ``max_relations`` relations per relation-pruning prompt, ``max_entities``
candidates per entity-scoring prompt (and per ToG-R hop; more are sampled with a fixed seed),
``max_triples`` triples per judge/answer prompt, :data:`MAX_NEIGHBOURHOOD` KG triples read around
one entity. LLM calls are counted per question by kind (``calls`` in the trace's ``summary``;
the runner records the total, tokens and seconds). A published cost for ToG of ~11.6
LLM calls and ~7k tokens per WebQSP question is sometimes quoted; it is not in the papers of this
project and could not be found in ToG's paper and code either: treat it as unverified.

LLM output is data: unparseable scores or judgements are counted in error categories
(``relations_unmatched``, ``relations_no_scores``, ``entity_scores_malformed``,
``judge_unparsed``, ...) and the search goes on; infrastructure errors propagate.
"""

from __future__ import annotations

import random
import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal, Sequence

from ..data.datasets import Question
from ..llm.parse import clean_text, extract_braced_answers
from ..llm.prompting import load_prompt
from .base import Context, MethodResult, Settings, Stage, Tracer, register_method, setting
from .baselines import Generation, generate, open_text

MAX_NEIGHBOURHOOD = 5000  # KG triples read around one entity (MetaQA genre hubs have more): the rest is unseen
REVERSE = " (reverse)"


@dataclass(frozen=True)
class ToGSettings(Settings):
    """``kgqa run --method tog --help-settings``."""

    width: int = setting(3, "beam width: relations kept per entity, and paths kept per depth (ToG: 3)", min=1)
    depth: int = setting(3, "maximum search depth (ToG: 3)", min=1)
    min_depth: int = setting(0, "depth floor, a deviation from ToG: the judge is not asked (the search goes on) "
                                "before this depth; 0 = ToG as published (the judge is asked at every depth); "
                                "at most `depth`", min=0)
    variant: Literal["tog", "tog-r"] = setting("tog", "tog: the LLM scores relations and entities; tog-r: "
                                                      "relation-only exploration (entities not scored, all kept)")
    fallback: Literal["own_knowledge", "paths"] = setting(
        "own_knowledge", "when the judge has not stopped the search by `depth`: answer from the LLM's own "
                         "knowledge (ToG) or from the paths found")
    max_relations: int = setting(30, "relations shown in one relation-pruning prompt at most", min=1)
    max_entities: int = setting(20, "candidate entities shown in one entity-scoring prompt (ToG-R: kept per hop) "
                                    "at most; more are sampled with a fixed seed", min=1)
    max_triples: int = setting(40, "triples shown in one judge or answer prompt at most", min=1)


# --------------------------------------------------------------------------------------------
# Records: hops, paths, and what each stage returns
# --------------------------------------------------------------------------------------------
def _label(kg, v: str) -> str:
    return kg.label(v) if "://" in v else v


@dataclass
class Hop:
    relation: str  # relation IRI
    name: str  # as shown to the LLM: "starred actors" or "starred actors (reverse)"
    inverse: bool  # walked from object to subject
    edges: list[tuple[str, str]]  # (from, to) entity IRIs / literal values; ToG: exactly one

    @property
    def targets(self) -> list[str]:
        return list(dict.fromkeys(t for _, t in self.edges))


@dataclass
class Path:
    topic: str  # the topic entity IRI the path starts from
    hops: list[Hop] = field(default_factory=list)
    score: float = 1.0

    def tails(self) -> list[str]:
        return self.hops[-1].targets if self.hops else [self.topic]

    def entities(self) -> set[str]:
        return {self.topic} | {v for h in self.hops for e in h.edges for v in e}

    def triples(self, kg) -> list[tuple[str, str, str]]:
        """The path as KG triples (subject, relation, object), in the KG's own direction."""
        out = []
        for h in self.hops:
            rel = h.name[:-len(REVERSE)] if h.inverse else h.name
            for a, b in h.edges:
                s, o = (b, a) if h.inverse else (a, b)
                out.append((_label(kg, s), rel, _label(kg, o)))
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "score": round(self.score, 4),
                "hops": [{"relation": h.relation, "name": h.name, "inverse": h.inverse,
                          "edges": [list(e) for e in h.edges]} for h in self.hops]}


@dataclass
class TopicEntities:
    names: list[str]  # as the dataset gives them
    linked: list[tuple[str, str, str]]  # (name, IRI, KG label)

    @property
    def iris(self) -> list[str]:
        return list(dict.fromkeys(iri for _, iri, _ in self.linked))

    def as_dict(self) -> dict[str, Any]:
        return {"names": self.names, "linked": [list(x) for x in self.linked]}


@dataclass
class RelationCandidate:
    relation: str  # IRI
    name: str  # shown to the LLM
    inverse: bool
    edges: list[tuple[str, str]]  # (from, to) for every tail entity it leaves


@dataclass
class RelationPruning:
    entity: str  # what the prompt called the entity (labels of the tail set)
    candidates: list[str]  # relation names shown
    kept: list[tuple[str, float]]  # (name, score), best first
    text: str = ""  # the LLM's reply ("" when no call was needed)
    called: bool = False
    error: str | None = None
    n_available: int = 0  # relations around the entity before the bound

    def as_dict(self) -> dict[str, Any]:
        return {"entity": self.entity, "candidates": self.candidates, "kept": [[n, round(s, 4)] for n, s in self.kept],
                "text": self.text, "called": self.called, "error": self.error, "n_available": self.n_available}


@dataclass
class EntityScoring:
    relation: str  # "Billy Zane, place of birth"
    candidates: list[str]  # labels shown
    scores: list[float]  # entity score × relation score, one per candidate
    text: str = ""
    called: bool = False
    error: str | None = None
    n_available: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"relation": self.relation, "candidates": self.candidates, "scores": [round(s, 4) for s in self.scores],
                "text": self.text, "called": self.called, "error": self.error, "n_available": self.n_available}


@dataclass
class Judgement:
    sufficient: bool
    answers: list[str]
    text: str
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"sufficient": self.sufficient, "answers": self.answers, "text": self.text, "error": self.error}


@dataclass
class DepthStep:
    depth: int
    frontier: list[str]  # labels of the entities explored from
    relations: list[RelationPruning]
    entities: list[EntityScoring]
    n_candidates: int  # candidate paths before pruning
    beam: list[Path]  # the paths kept
    beam_triples: list[list[tuple[str, str, str]]]  # each kept path as triples (for display)
    judgement: Judgement | None = None
    judge_skipped: str | None = None  # why the judge was not asked at this depth (the depth floor), None: it was

    def as_dict(self) -> dict[str, Any]:
        out = {"depth": self.depth, "frontier": self.frontier, "relations": [r.as_dict() for r in self.relations],
               "entities": [e.as_dict() for e in self.entities], "n_candidates": self.n_candidates,
               "beam": [p.as_dict() for p in self.beam], "beam_triples": [[list(t) for t in p] for p in self.beam_triples],
               "judgement": self.judgement.as_dict() if self.judgement else None}
        if self.judge_skipped is not None:  # only under a depth floor: ToG's trace is unchanged
            out["judge_skipped"] = self.judge_skipped
        return out

    @property
    def calls(self) -> Counter:
        c = Counter(relations=sum(r.called for r in self.relations), entities=sum(e.called for e in self.entities))
        c["judge"] = int(self.judgement is not None)
        return c


# --------------------------------------------------------------------------------------------
# Parsing LLM output (total: never raises)
# --------------------------------------------------------------------------------------------
#: ``(Score: 0.4)`` and its tail (closing parentheses, a closing brace); the name before it is found by
#: :func:`_scored`, which reads ``{name (Score: 0.4)}`` lines as the single pattern
#: ``\{?\s*([^{}\n]+?)\s*\(\s*score\s*[:=]?\s*([0-9]*\.?[0-9]+)\s*\)+\s*\}?`` (case-insensitive) would —
#: same names, scores and spans — in time linear in the reply (the pattern itself backtracks over every
#: start on a long line without a score: minutes for a 100k-character reply).
_SCORE_MARK = re.compile(r"\(\s*score\s*[:=]?\s*([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*\)+\s*\}?", re.I)
_NAME_END = re.compile(r"[{}\n]")  # a name holds none of these
_NON_SPACE = re.compile(r"\S")
_NUMBER = re.compile(r"(?<![\w.])(?:0?\.\d+|1\.0*|0|1)(?![\w.])")


def _scored(t: str) -> Iterator[tuple[str, str]]:
    """(name, score text) of each ``{name (Score: 0.4)}`` in ``t``, left to right (see :data:`_SCORE_MARK`).
    A name is the text before a score, back to a brace or a line break (or the previous score), without
    the spaces around it; a score on the line after its name counts; a score with no name before it is
    part of the next score's name."""
    marks = [(m.start(), m.end(), m.group(1)) for m in _SCORE_MARK.finditer(t)]
    starts = [a for a, _, _ in marks]
    index = {a: k for k, a in enumerate(starts)}
    n = len(t)

    def non_space(i: int) -> int:
        m = _NON_SPACE.search(t, i)
        return m.start() if m else n

    p = 0
    while p < n:
        w = non_space(p + 1 if t[p] == "{" else p)  # the name's first character: after an opening brace, spaces
        if w >= n:
            return
        hit, seg_end = None, n
        if t[w] not in "{}":
            k = bisect_right(starts, w)  # the first score after the name's first character…
            if k < len(starts):
                end = _NAME_END.search(t, w, starts[k])
                if end is None:  # … on the name's line, with no brace between
                    hit = (w, k)
                else:
                    seg_end = end.start()
                    if t[seg_end] == "\n" and non_space(seg_end) in index:  # … alone on a following line
                        hit = (w, index[non_space(seg_end)])
            else:
                end = _NAME_END.search(t, w)
                seg_end = end.start() if end else n
        if hit is not None:
            w, k = hit
            a, stop, score = marks[k]
            e = a
            while e > w + 1 and t[e - 1].isspace():
                e -= 1
            yield t[w:e], score
            p = stop
            continue
        if w in index:  # a score right after spaces: its name is the last space (not a line break) before it
            g = w - 1
            while g >= p and t[g] == "\n":
                g -= 1
            if g >= (p + 1 if t[p] == "{" else p):
                yield t[g], marks[index[w]][2]
                p = marks[index[w]][1]
                continue
        # no match starts before the end of this name's line part: move on to it
        p = w if w > p else p + 1 if t[p] in "{}" else seg_end


def _norm(s: str) -> str:
    from ..kg.graph import normalise_label

    return normalise_label(re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", s).strip().strip("\"'`*{}").strip())


def _match(name: str, options: Sequence[str]) -> str | None:
    """The option a reply's name denotes: equal after normalisation; else the longest option the
    name contains ("the place of birth relation"); else the one option that contains the name
    (None when none, or several, do)."""
    key = _norm(name)
    if not key:
        return None
    by_norm = {_norm(o): o for o in options}
    if key in by_norm:
        return by_norm[key]
    inside = [n for n in by_norm if n and re.search(rf"\b{re.escape(n)}\b", key)]
    if inside:
        best = max(inside, key=len)
        return by_norm[best] if sum(len(n) == len(best) for n in inside) == 1 else None
    around = [o for n, o in by_norm.items() if re.search(rf"\b{re.escape(key)}\b", n)]
    return around[0] if len(around) == 1 else None


def parse_scored(text: object, options: Sequence[str]) -> tuple[list[tuple[str, float]], str | None]:
    """``{name (Score: 0.4)}`` lines → [(option, score)] for the options named, best first.

    Never raises. Names are matched to ``options`` after normalisation (:func:`_match`); a name that
    matches none is skipped. Without any scored line, options merely named in the reply get equal
    scores (error ``no_scores``); nothing usable gives ``[]`` with ``unmatched`` (names that match
    no option) or ``empty``."""
    t = clean_text(text)
    if not t:
        return [], "empty"
    found: dict[str, float] = {}
    named_any = False
    for name, score in _scored(t):
        named_any = True
        opt = _match(name, options)
        if opt is not None and opt not in found:
            try:
                found[opt] = max(0.0, float(score))
            except ValueError:
                continue
    if found:
        return sorted(found.items(), key=lambda kv: -kv[1]), None
    # no scores: options named in braces or on their own lines, equal scores
    names = re.findall(r"\{([^{}\n]+)\}", t) or [ln for ln in t.splitlines() if ln.strip()]
    hits = list(dict.fromkeys(o for n in names if (o := _match(n, options)) is not None))
    if hits:
        return [(o, 1.0 / len(hits)) for o in hits], "no_scores"
    return [], "unmatched" if (named_any or names) else "empty"


def parse_entity_scores(text: object, candidates: Sequence[str]) -> tuple[list[float], str | None]:
    """One score per candidate, in the candidates' order. Scored names (``{X (Score: 0.9)}``) first;
    else a bare list of as many numbers as candidates (``0.0, 1.0, 0.0``, as ToG's prompt has
    it); else equal scores (error ``entity_scores_malformed``, ToG's "all entities are created
    equal"). A candidate the reply leaves out scores 0."""
    pairs, err = parse_scored(text, candidates)
    if pairs and err is None:
        got = dict(pairs)
        return [got.get(c, 0.0) for c in candidates], None
    nums = [float(x) for x in _NUMBER.findall(clean_text(text))]
    if len(nums) == len(candidates) and candidates:
        return nums, None
    n = max(1, len(candidates))
    return [1.0 / n] * len(candidates), "entity_scores_malformed"


_VERDICT = re.compile(r"\{\s*(yes|no)\s*\}|^\W*(yes|no)\b", re.I | re.M)


def parse_judgement(text: object) -> Judgement:
    """``{Yes}``/``{No}`` (or a reply that starts with yes/no) → the verdict; after Yes, the answers
    in braces. Never raises: no verdict is ``judge_unparsed`` and counts as No (search on)."""
    t = clean_text(text)
    m = _VERDICT.search(t)
    if not m:
        return Judgement(False, [], t, "judge_unparsed" if t else "judge_empty")
    yes = (m.group(1) or m.group(2)).lower() == "yes"
    if not yes:
        return Judgement(False, [], t)
    rest = t[m.end():]
    parsed = extract_braced_answers(rest) if rest.strip() else None
    answers = [a for a in (parsed.items if parsed and parsed.error is None else []) if a.lower() not in ("yes", "no")]
    return Judgement(True, answers, t)


# --------------------------------------------------------------------------------------------
# Stage 1: topic entities
# --------------------------------------------------------------------------------------------
def link_topic_entities(q: Question, kg) -> TopicEntities:
    """The dataset's topic entity names → KG entities (exact or normalised label; fuzzy only when
    nothing matches, best hit). ToG takes the datasets' topic entity ids; ours are names."""
    linked = []
    for name in q.topic_entities:
        hits = kg.lookup(name, fuzzy=False, limit=5) or kg.lookup(name, fuzzy=True, limit=1)
        linked += [(name, iri, _label(kg, iri)) for iri, _, _ in hits]
    return TopicEntities(list(q.topic_entities), linked)


# --------------------------------------------------------------------------------------------
# Stage 2: one depth of the beam search
# --------------------------------------------------------------------------------------------
def neighbourhood(kg, entity: str) -> dict[tuple[str, bool], list[str]]:
    """(relation IRI, inverse) → the entities/literals it reaches from ``entity`` (at most
    :data:`MAX_NEIGHBOURHOOD` triples read). A literal has no neighbourhood."""
    if "://" not in entity:
        return {}
    out: dict[tuple[str, bool], list[str]] = {}
    for t in kg.triples_around(entity, "both", limit=MAX_NEIGHBOURHOOD):
        if t.s.iri == entity and not t.s.literal:
            out.setdefault((t.r.iri, False), []).append(t.o.iri)
        if t.o.iri == entity and not t.o.literal:
            out.setdefault((t.r.iri, True), []).append(t.s.iri)
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}


def _relation_name(kg, rel: str, inverse: bool) -> str:
    return _label(kg, rel) + (REVERSE if inverse else "")


def candidate_relations(kg, tails: Sequence[str], exclude: set[str]) -> list[RelationCandidate]:
    """The relations around the tail entities that reach something new (not in ``exclude``: the
    path's own entities), sorted by name so the prompt is the same on every run."""
    by_key: dict[tuple[str, bool], list[tuple[str, str]]] = {}
    for e in tails:
        for key, targets in neighbourhood(kg, e).items():
            edges = [(e, t) for t in targets if t not in exclude]
            if edges:
                by_key.setdefault(key, []).extend(edges)
    cands = [RelationCandidate(rel, _relation_name(kg, rel, inv), inv, edges) for (rel, inv), edges in by_key.items()]
    names = Counter(c.name for c in cands)
    for c in cands:  # two relation IRIs with one label: tell them apart
        if names[c.name] > 1:
            c.name = f"{c.name} [{c.relation.rsplit('/', 1)[-1]}]"
    return sorted(cands, key=lambda c: c.name.casefold())


def prune_relations(question: str, entity_name: str, cands: Sequence[RelationCandidate], ctx: Context,
                    width: int, max_relations: int) -> RelationPruning:
    """ToG's relation pruning: the LLM picks the top-``width`` relations with scores. One candidate
    needs no call (score 1); unparseable replies keep no relation (the branch ends, as in ToG) and
    are counted (``relations_unmatched`` / ``relations_empty``); scores without names matched are
    ``relations_no_scores`` (equal scores)."""
    shown = [c.name for c in cands][:max_relations]
    if not shown:
        return RelationPruning(entity_name, [], [], n_available=len(cands))
    if len(shown) == 1:
        return RelationPruning(entity_name, shown, [(shown[0], 1.0)], n_available=len(cands))
    prompt = load_prompt("tog_relations")
    messages = prompt.messages(question=question, entity=entity_name, relations="; ".join(shown), width=str(width))
    r = ctx.llm.chat(messages, max_tokens=24 * width + 24, temperature=0.0, seed=ctx.seed)
    pairs, err = parse_scored(r.text, shown)
    return RelationPruning(entity_name, shown, pairs[:width], r.text, True,
                           f"relations_{err}" if err else None, len(cands))


def _bounded(items: Sequence[str], n: int, key: str) -> list[str]:
    """At most ``n`` of ``items``: all when few, else a sample fixed by ``key`` (same on every run)."""
    if len(items) <= n:
        return list(items)
    picked = set(random.Random(key).sample(range(len(items)), n))
    return [x for i, x in enumerate(items) if i in picked]


def score_entities(question: str, followed: str, candidates: Sequence[str], labels: Sequence[str], rel_score: float,
                   ctx: Context) -> EntityScoring:
    """ToG's entity scoring: the LLM rates the entities one relation reached; each score is
    multiplied by the relation's score. One candidate keeps the relation's score without a call."""
    if len(candidates) <= 1:
        return EntityScoring(followed, list(labels), [rel_score] * len(candidates), n_available=len(candidates))
    prompt = load_prompt("tog_entities")
    entity, _, relation = followed.partition(", ")
    messages = prompt.messages(question=question, entity=entity, relation=relation, candidates="; ".join(labels))
    r = ctx.llm.chat(messages, max_tokens=min(16 + 16 * len(labels), 480), temperature=0.0, seed=ctx.seed)
    scores, err = parse_entity_scores(r.text, list(labels))
    return EntityScoring(followed, list(labels), [s * rel_score for s in scores], r.text, True, err, len(candidates))


def prune_entities(candidates: Sequence[Path], width: int) -> list[Path]:
    """The top-``width`` candidate paths by score (ties keep the order they were found in); paths
    scored 0 are dropped, as in ToG."""
    ranked = sorted(enumerate(candidates), key=lambda ic: (-ic[1].score, ic[0]))
    return [p for _, p in ranked if p.score > 0][:width]


def explore_depth(question: str, beam: Sequence[Path], ctx: Context, depth: int,
                  s: ToGSettings | None = None) -> DepthStep:
    """One depth: relation pruning around the beam's tails, then entity scoring (ToG) or not
    (ToG-R), then the top-``width`` paths."""
    s = s or ToGSettings.of(ctx)
    kg = ctx.kg
    prunings: list[RelationPruning] = []
    scorings: list[EntityScoring] = []
    candidates: list[Path] = []
    frontier: list[str] = []
    if s.variant == "tog":
        units: dict[str, Path] = {}
        for p in beam:  # one relation-pruning call per distinct tail entity (the best path ending there)
            tail = p.tails()[0]
            if "://" in tail and tail not in units:
                units[tail] = p
        for tail, p in units.items():
            frontier.append(_label(kg, tail))
            cands = candidate_relations(kg, [tail], p.entities())
            rp = prune_relations(question, _label(kg, tail), cands, ctx, s.width, s.max_relations)
            prunings.append(rp)
            by_name = {c.name: c for c in cands}
            for name, rel_score in rp.kept:
                c = by_name[name]
                targets = _bounded([t for _, t in c.edges], s.max_entities, f"{ctx.seed}|{tail}|{c.relation}|{c.inverse}")
                labels = [_label(kg, t) for t in targets]
                es = score_entities(question, f"{_label(kg, tail)}, {name}", targets, labels, rel_score, ctx)
                es.n_available = len(c.edges)
                scorings.append(es)
                for t, sc in zip(targets, es.scores):
                    candidates.append(Path(p.topic, p.hops + [Hop(c.relation, c.name, c.inverse, [(tail, t)])], sc))
    else:  # ToG-R: relations only; a path's tail is the set of entities its relations reached
        for p in beam:
            tails = [t for t in p.tails() if "://" in t]
            if not tails:
                continue
            names = [_label(kg, t) for t in tails]
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            frontier.append(shown)
            cands = candidate_relations(kg, tails, p.entities())
            rp = prune_relations(question, shown, cands, ctx, s.width, s.max_relations)
            prunings.append(rp)
            by_name = {c.name: c for c in cands}
            for name, rel_score in rp.kept:
                c = by_name[name]
                keep = set(_bounded(list(dict.fromkeys(t for _, t in c.edges)), s.max_entities,
                                    f"{ctx.seed}|{'|'.join(tails)}|{c.relation}|{c.inverse}"))
                edges = [e for e in c.edges if e[1] in keep]
                candidates.append(Path(p.topic, p.hops + [Hop(c.relation, c.name, c.inverse, edges)], rel_score))
    kept = prune_entities(candidates, s.width)
    return DepthStep(depth, frontier, prunings, scorings, len(candidates), kept, [p.triples(kg) for p in kept])


# --------------------------------------------------------------------------------------------
# Stage 3: the judgement, and stage 4: the answer
# --------------------------------------------------------------------------------------------
def paths_text(paths: Sequence[Path], kg, max_triples: int) -> str:
    """The paths' triples, de-duplicated, one ``(s | r | o)`` per line, at most ``max_triples``."""
    seen = list(dict.fromkeys(t for p in paths for t in p.triples(kg)))
    lines = [f"({s} | {r} | {o})" for s, r, o in seen[:max_triples]]
    return "\n".join(lines) or "(none)"


def judge_skip(depth: int, min_depth: int) -> str | None:
    """Why the judge is not asked after ``depth`` under the depth floor ``min_depth`` (a deviation
    from ToG, which asks at every depth); None when it is asked (always, with ``min_depth`` 0 or 1)."""
    if depth >= min_depth:
        return None
    return (f"depth floor: depth {depth} < min_depth {min_depth}, the judge is asked from depth {min_depth} on "
            "(a deviation from ToG, which asks it at every depth)")


def judge(question: str, paths: Sequence[Path], ctx: Context, max_triples: int = 40) -> Judgement:
    """ToG's reasoning step: are the paths enough to answer? ``{Yes}`` carries the answer."""
    prompt = load_prompt("tog_judge")
    r = ctx.llm.chat(prompt.messages(question=question, triples=paths_text(paths, ctx.kg, max_triples)),
                     max_tokens=96, temperature=0.0, seed=ctx.seed)
    return parse_judgement(r.text)


def answer_from_paths(q: Question, paths: Sequence[Path], ctx: Context, max_triples: int = 40) -> Generation:
    """The answer from the paths (and the LLM's knowledge where they are silent): braces for
    factoid questions, prose for open ones."""
    name = "tog_answer_open" if q.kind == "open" else "tog_answer"
    messages = load_prompt(name).messages(triples=paths_text(paths, ctx.kg, max_triples), question=q.question)
    r = ctx.llm.chat(messages, max_tokens=160 if q.kind == "open" else 64, temperature=0.0, seed=ctx.seed)
    return Generation(messages[-1]["content"], r.text, r.prompt_tokens, r.completion_tokens, r.cache_hit)


def answer_from_own_knowledge(q: Question, ctx: Context) -> Generation:
    """ToG's last resort: the LLM answers alone (our chain-of-thought prompt; prose for open questions)."""
    return generate(q.question, ctx, "cot_open" if q.kind == "open" else "cot", 256)


# --------------------------------------------------------------------------------------------
# The pipeline
# --------------------------------------------------------------------------------------------
@dataclass
class Search:
    topic: TopicEntities
    steps: list[DepthStep]
    stopped: str  # "judged_sufficient", "max_depth", "beam_empty", "no_topic_entity" (a judge skipped by the
    #              depth floor never stops the search: "judged_sufficient" is a judge's Yes at depth ≥ min_depth)
    paths: list[Path]  # the last non-empty beam

    def as_dict(self) -> dict[str, Any]:
        return {"topic": self.topic.as_dict(), "steps": [s.as_dict() for s in self.steps], "stopped": self.stopped,
                "paths": [p.as_dict() for p in self.paths]}


def beam_search(q: Question, ctx: Context, topic: TopicEntities, s: ToGSettings | None = None) -> Search:
    """Explore depth by depth until the judge says the paths suffice, the beam empties, or ``depth``.
    Below ``min_depth`` (the depth floor, :func:`judge_skip`) the judge is not asked and the search goes on."""
    s = s or ToGSettings.of(ctx)
    if not topic.iris:
        return Search(topic, [], "no_topic_entity", [])
    beam = [Path(iri) for iri in topic.iris]
    paths: list[Path] = []
    steps: list[DepthStep] = []
    for d in range(1, s.depth + 1):
        step = explore_depth(q.question, beam, ctx, d, s)
        steps.append(step)
        if not step.beam:
            return Search(topic, steps, "beam_empty", paths)
        beam = paths = step.beam
        step.judge_skipped = judge_skip(d, s.min_depth)
        if step.judge_skipped is not None:
            continue
        step.judgement = judge(q.question, beam, ctx, s.max_triples)
        if step.judgement.sufficient:
            return Search(topic, steps, "judged_sufficient", paths)
    return Search(topic, steps, "max_depth", paths)


def _errors(search: Search) -> Counter:
    c: Counter = Counter()
    for st in search.steps:
        c.update(r.error for r in st.relations if r.error)
        c.update(e.error for e in st.entities if e.error)
        if st.judgement is not None and st.judgement.error:
            c[st.judgement.error] += 1
    return c


def _calls(search: Search) -> Counter:
    c: Counter = Counter(relations=0, entities=0, judge=0)
    for st in search.steps:
        c.update(st.calls)
    return c


@register_method("tog", prompts=("tog_relations", "tog_entities", "tog_judge", "tog_answer", "tog_answer_open",
                                  "cot", "cot_open"), settings=ToGSettings, needs=("kg",))
def tog(q: Question, ctx: Context) -> MethodResult:
    """Think-on-Graph. Settings (``--set``): ``width`` (3), ``depth`` (3), ``variant`` (tog | tog-r:
    relation-only), ``fallback`` (own_knowledge: ToG's answer without paths when the search did
    not stop by ``depth`` | paths), ``max_relations`` (30), ``max_entities`` (20), ``max_triples`` (40),
    ``min_depth`` (0: ToG; k: the depth floor, a deviation — the judge is not asked before depth k;
    the summary then says ``min_depth`` and at how many depths the judge was skipped)."""
    if ctx.kg is None:
        raise ValueError("tog needs a knowledge graph: run it on a dataset with a KG (miniworld:multihop, "
                         "metaqa:2hop:dev) or pass --kg")
    s = ToGSettings.of(ctx)
    if s.width < 1 or s.depth < 1 or min(s.max_relations, s.max_entities, s.max_triples) < 1:
        raise ValueError("tog: width, depth, max_relations, max_entities and max_triples must be at least 1")
    if not 0 <= s.min_depth <= s.depth:
        raise ValueError(f"tog: min_depth must be between 0 and depth ({s.depth}): the judge is asked at the last "
                         f"depth at the latest, got {s.min_depth}")
    tr = Tracer()
    topic = tr.record("link_topic_entities", link_topic_entities, q, ctx.kg)
    search = tr.record("beam_search", beam_search, q, ctx, topic, s)
    calls = _calls(search)
    last = search.steps[-1].judgement if search.steps else None
    gen: Generation | None = None
    answers: list[str] = []
    response = ""
    error: str | None = None
    source = "judge"
    if search.stopped == "judged_sufficient" and q.kind != "open" and last is not None and last.answers:
        answers, response = last.answers, last.text
    elif search.stopped == "judged_sufficient" or (search.paths and search.stopped == "beam_empty") or \
            (search.paths and s.fallback == "paths"):
        source = "paths"
        gen = tr.record("answer_from_paths", answer_from_paths, q, search.paths, ctx, s.max_triples)
    else:
        source = "own_knowledge"
        gen = tr.record("answer_from_own_knowledge", answer_from_own_knowledge, q, ctx)
    if gen is not None:
        calls["answer"] += 1
        if q.kind == "open":
            text = open_text(gen.text) if source == "own_knowledge" else gen.text.strip()
            answers, response, error = ([text] if text else []), text, (None if text else "empty")
        else:
            parsed = extract_braced_answers(gen.text)
            answers, response, error = parsed.items, gen.text, parsed.error
    errs = _errors(search)
    summary = {"stopped": search.stopped, "answer_from": source, "depth_reached": len(search.steps),
               "calls": dict(calls), "llm_calls": sum(calls.values()), "errors": dict(errs)}
    if s.min_depth:  # the depth floor (a deviation from ToG): which, and at how many depths the judge was not asked
        summary |= {"min_depth": s.min_depth, "judge_skipped": sum(st.judge_skipped is not None for st in search.steps)}
    tr.stages.append(Stage("summary", summary))
    if error is None:
        error = next(iter(errs), None) or ("no_topic_entity" if search.stopped == "no_topic_entity" else None)
    return MethodResult(answers, response, tr.stages, error)
