"""Stage 2 — candidate KB elements around the linked entities: relation paths (≤ 2 hops as the
paper's TIARA, or 3 with the setting ``max_path_hops``; CVT / statement nodes walked through), the
relations on them and the classes they reach."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Sequence

from .linking import Linking
from .schema import SchemaProfile, _type_iri


# ---------------------------------------------------------------------------------------------
# 2. Candidate KB elements: paths, relations, types
# ---------------------------------------------------------------------------------------------
Hop = tuple[str, bool]  # (relation IRI, inverse?)


@dataclass
class Candidate:
    aspect: str  # "path" | "relation" | "type"
    text: str  # what the retrievers and the LLM read
    query: str  # SPARQL pattern (path) or the prefixed id (relation / type)
    key: Any  # identity for gold matching: (topic, hops) | relation IRI | class IRI
    examples: list[str] = field(default_factory=list)  # labels the path reaches (shown only with show_path_values)

    def program(self) -> str:
        """A path as the SPARQL program that walks it (paper sec. 3: "we use SPARQL to represent the
        retrieved KB data paths as well"; appendix A.1.3 shows them as ``SELECT DISTINCT ?x WHERE {…}``)."""
        return f"SELECT DISTINCT ?x WHERE {{ {self.query} }}" if self.aspect == "path" else self.query

    def display(self, values: bool = False, profile: SchemaProfile | None = None) -> str:
        """A path as the LLM reads it: its SPARQL program and, as a comment, the relations' labels
        (the Wikidata-like schema's ids are opaque; the paper's Freebase ids name themselves).
        ``values`` (the setting ``show_path_values``): the bare pattern and up to two entities it
        reaches instead, as before — a one-hop answer is then visible in the context. ``profile``
        given: the path as an s-expression instead (the setting ``paths_as=logical_form`` when the
        LLM writes s-expressions), with the same comment."""
        if profile is not None and self.aspect == "path":
            return f"{path_sexpr(profile.compact(self.key[0]), self.key[1], profile)}   # {self.text}"
        if not values:
            return f"{self.program()}   # {self.text}"
        ex = f"  [e.g. {', '.join(self.examples[:2])}]" if self.examples else ""
        return f"{self.query}   # {self.text}{ex}"

    def as_dict(self) -> dict[str, Any]:
        return {"aspect": self.aspect, "text": self.text, "query": self.query, "examples": self.examples[:3]}


@dataclass
class Candidates:
    paths: list[Candidate]
    relations: list[Candidate]
    types: list[Candidate]
    nodes_visited: int = 0

    def aspect(self, name: str) -> list[Candidate]:
        return {"path": self.paths, "relation": self.relations, "type": self.types}[name]

    def as_dict(self) -> dict[str, Any]:
        return {"paths": len(self.paths), "relations": len(self.relations), "types": len(self.types),
                "nodes_visited": self.nodes_visited}


ASPECTS = ("path", "relation", "type")


def _is_cvt(kg, iri: str) -> bool:
    """Unlabelled intermediate nodes: Freebase CVTs and Wikidata statement nodes."""
    return not kg.labels(iri)


def _steps(kg, node: str, type_iri: str | None, limit: int) -> list[tuple[Hop, str, bool]]:
    """(hop, neighbour, neighbour is a literal) from ``node``, both directions."""
    out = []
    for t in kg.triples_around(node, "both", limit=limit):
        if t.r.iri == type_iri:
            continue
        if t.s.iri == node:
            out.append(((t.r.iri, False), t.o.iri, t.o.literal))
        else:
            out.append(((t.r.iri, True), t.s.iri, False))
    return out


# Bounds of the walk. FANOUT: triples read around one node (both directions). MAX_WALK_PATHS: no node is
# queued once this many relation paths are known. REACHED: nodes kept per path (examples, types).
# THIRD_HOP_SAMPLE: from the third hop on (``max_path_hops=3``), only the first this many nodes a 2-hop
# path reaches are walked on — relation paths are sequences of relations, and a sample of a path's nodes
# shows which relations leave them (MetaQA: a 2-hop path reaches up to thousands of films; each has the
# same few relations). Hops 1 and 2 are walked exactly as with max_path_hops=2, so a depth-3 candidate
# set is the depth-2 one plus 3-hop paths.
FANOUT, MAX_WALK_PATHS, REACHED, THIRD_HOP_SAMPLE = 300, 2000, 50, 50


def _walk(kg, seed: str, type_iri: str | None, max_hops: int = 2, fanout: int = FANOUT,
          third_hop_sample: int = THIRD_HOP_SAMPLE) -> dict[tuple[Hop, ...], list[str]]:
    """Relation paths of up to ``max_hops`` relations from ``seed`` → the nodes they reach (seed
    excluded). A step into an unlabelled node continues through it without counting as a hop (CVTs,
    statements). Breadth first: every 1-hop path is found before any 2-hop one, and so on."""
    paths: dict[tuple[Hop, ...], list[str]] = {}
    frontier = deque([((), seed, 0)])
    queued: Counter = Counter()  # nodes queued per path, from the second hop on (the sample's bound)
    while frontier:
        path, node, hops = frontier.popleft()
        for hop, nb, literal in _steps(kg, node, type_iri, fanout):
            if nb == seed or nb == node:
                continue  # back to the start (siblings via the same relation are kept: "other films by …")
            new = path + (hop,)
            if len(new) > max_hops + 2:  # at most two CVT steps on a path
                continue
            if not literal and _is_cvt(kg, nb):
                if hops < max_hops and _sampled(queued, new, hops, third_hop_sample):
                    frontier.append((new, nb, hops))  # walk through, no hop counted
                continue
            reached = paths.setdefault(new, [])
            if len(reached) < REACHED:
                reached.append(nb)
            if hops + 1 < max_hops and not literal and len(paths) < MAX_WALK_PATHS \
                    and _sampled(queued, new, hops + 1, third_hop_sample):
                frontier.append((new, nb, hops + 1))
    return paths


def _sampled(queued: Counter, path: tuple, hops: int, sample: int) -> bool:
    """Whether a node ``hops`` relations out on ``path`` may still be walked on: always before the
    second hop (so hops 1–2 are as the paper's 2-hop enumeration), then the first ``sample`` per path."""
    if hops < 2:
        return True
    queued[path] += 1
    return queued[path] <= sample


def path_pattern(seed_q: str, hops: Sequence[Hop], profile: SchemaProfile, target: str = "?x") -> str:
    """``wd:Q1 wdt:P19 ?v0 . ?v0 wdt:P17 ?x .`` for a (relation, inverse) sequence."""
    parts, cur = [], seed_q
    for i, (rel, inv) in enumerate(hops):
        nxt = target if i == len(hops) - 1 else f"?v{i}"
        r = profile.compact(rel)
        parts.append(f"{nxt} {r} {cur} ." if inv else f"{cur} {r} {nxt} .")
        cur = nxt
    return " ".join(parts)


def path_sexpr(seed: str, hops: Sequence[Hop], profile: SchemaProfile) -> str:
    """``(JOIN (R wdt:P17) (JOIN (R wdt:P19) wd:Q1))`` for a (relation, inverse) sequence: walking a
    relation forward from a set is ``(JOIN (R r) set)``, backward ``(JOIN r set)`` (GrailQA's form)."""
    expr = seed
    for rel, inv in hops:
        r = profile.compact(rel)
        expr = f"(JOIN {r} {expr})" if inv else f"(JOIN (R {r}) {expr})"
    return expr


def _rel_text(kg, rel: str, inverse: bool) -> str:
    name = kg.label(rel)
    return f"← {name}" if inverse else f"→ {name}"


def enumerate_candidates(kg, linking: Linking, profile: SchemaProfile, *, max_hops: int = 2,
                         max_paths: int = 400) -> Candidates:
    """Every relation path of up to ``max_hops`` relations (the setting ``max_path_hops``; 2 = the
    paper) from each linked entity — at most ``max_paths`` per entity, shorter and wider-reaching
    first — the relations on them, and the classes of the entities they reach."""
    type_iri = _type_iri(profile)
    paths: list[Candidate] = []
    rel_count: Counter = Counter()
    type_count: Counter = Counter()
    nodes = 0
    for m in linking.mentions:
        walked = _walk(kg, m.iri, type_iri, max_hops)
        ranked = sorted(walked.items(), key=lambda kv: (len(kv[0]), -len(kv[1]), str(kv[0])))
        for hops, reached in ranked[:max_paths]:
            nodes += len(reached)
            text = f"{m.label} " + " ".join(_rel_text(kg, r, inv) for r, inv in hops)
            examples = [kg.label(x) for x in reached[:3]]
            paths.append(Candidate("path", text, path_pattern(profile.compact(m.iri), hops, profile),
                                   (m.iri, tuple(hops)), examples))
            for r, _ in hops:
                rel_count[r] += 1
            if type_iri:
                for x in reached[:5]:
                    if "://" in x:
                        for t in kg.objects(x, type_iri):
                            type_count[t] += 1
    relations = [Candidate("relation", kg.label(r), profile.compact(r), r) for r, _ in
                 sorted(rel_count.items(), key=lambda kv: (-kv[1], kv[0]))]
    types = [Candidate("type", kg.label(t), profile.compact(t), t) for t, _ in
             sorted(type_count.items(), key=lambda kv: (-kv[1], kv[0]))]
    return Candidates(paths, relations, types, nodes)
