"""FuSIC-KBQA: supervised retrievers fused with in-context learning (Patidar et al., 2024).

Stages, one function each (the notebooks show them cell by cell):

1. :func:`link_entities` — question spans matched to KG labels/aliases; ambiguous labels resolved
   by popularity (degree) and the similarity of the entity's description to the question. The
   ``oracle`` switch takes the dataset's gold topic entities instead (for analysis).
2. :func:`enumerate_candidates` — the KB elements around the linked entities: relation paths up to
   two hops (unlabelled CVT/statement nodes are walked through without counting a hop), each
   written as a SPARQL pattern; the relations seen; the classes of the entities the paths reach.
3. :func:`retrieve` — each retriever (BM25; a bi-encoder trained on the *source* domain, see
   :mod:`kgqa_lib.retrieval`) ranks every aspect; the top K per aspect are kept.
4. :func:`rerank` — the LLM picks and orders the k ≪ K most useful of each retriever's aspect.
5. :func:`generate_query` — few-shot prompt: linked entities, every retriever's re-ranked context,
   exemplars (target few-shots, or source questions in the zero-shot setting) → SPARQL (or an
   s-expression in the "w/o SPARQL" variant, converted by :mod:`kgqa_lib.sexpr`).
6. :func:`execute_query` + :func:`fusic` — execution-guided feedback: when the query does not
   parse, is not a read-only SELECT, names KB elements that do not exist, returns nothing or far
   too much, the LLM is told so (with its earlier attempts) and asked again, up to 4 rounds.

Transfer tasks (:func:`get_task`) pair a source domain (retriever training data, zero-shot
exemplars) with a target domain (few-shot pool, test questions) on different KG schemas.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, Sequence

from ..datasets import Dataset, Question
from ..errors import InfrastructureError
from ..kg import MAX_QUERY_DEPTH, QueryRejected, QuerySyntaxError, QueryTimeout, check_read_only, nesting_depth
from ..parse import clean_text
from ..prompting import load_prompt
from ..sexpr import SExprError, extract_sexpr, to_sparql as sexpr_to_sparql
from .base import Context, MethodResult, Settings, Tracer, register_method, setting

RDFS = "http://www.w3.org/2000/01/rdf-schema#"
MW = "http://kgqa.local/miniworld/"


# ---------------------------------------------------------------------------------------------
# Schema profiles: how a KG's IRIs are written in prompts
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SchemaProfile:
    name: str
    prefixes: tuple[tuple[str, str], ...]  # (prefix, namespace), most specific first
    type_predicate: str | None = None

    @property
    def prefix_map(self) -> dict[str, str]:
        return dict(self.prefixes)

    def compact(self, iri: str) -> str:
        """``http://…/wd/entity/Q42`` → ``wd:Q42`` (or ``<iri>`` when no prefix fits cleanly)."""
        for p, ns in self.prefixes:
            if iri.startswith(ns):
                local = iri[len(ns):]
                if re.fullmatch(r"[A-Za-z0-9_%][A-Za-z0-9_%.\-]*", local) and not local.endswith("."):
                    return f"{p}:{local}"
        return f"<{iri}>"

    def expand(self, token: str) -> str:
        if token.startswith("<") and token.endswith(">"):
            return token[1:-1]
        p, _, local = token.partition(":")
        ns = self.prefix_map.get(p)
        return ns + local if ns is not None else token

    def declarations(self) -> str:
        return "".join(f"PREFIX {p}: <{ns}>\n" for p, ns in self.prefixes)


PROFILES = {
    "miniworld:wikidata": SchemaProfile("wikidata-like", (
        ("wdt", MW + "wd/prop/direct/"), ("ps", MW + "wd/prop/statement/"), ("pq", MW + "wd/prop/qualifier/"),
        ("p", MW + "wd/prop/"), ("wd", MW + "wd/entity/")), type_predicate="wdt:P31"),
    "miniworld:freebase": SchemaProfile("freebase-like", (("ns", MW + "fb/"),), type_predicate="ns:type.object.type"),
    "metaqa": SchemaProfile("metaqa", (("r", "http://kgqa.local/metaqa/relation/"),
                                       ("e", "http://kgqa.local/metaqa/entity/"))),
    "grailqa": SchemaProfile("freebase", (("ns", "http://rdf.freebase.com/ns/"),), type_predicate="ns:type.object.type"),
    "tiny": SchemaProfile("tiny", (("r", "http://kgqa.local/tiny/relation/"), ("e", "http://kgqa.local/tiny/entity/"))),
}


def profile_for(kg_name: str) -> SchemaProfile:
    if kg_name == "miniworld":
        kg_name = "miniworld:wikidata"
    if kg_name not in PROFILES:
        raise ValueError(f"No schema profile for KG {kg_name!r}; known: {', '.join(PROFILES)}")
    return PROFILES[kg_name]


def _type_iri(profile: SchemaProfile) -> str | None:
    return profile.expand(profile.type_predicate) if profile.type_predicate else None


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


def _spans(question: str, max_len: int = 7) -> list[tuple[int, int, str]]:
    """Word n-grams, longest first; a span ending in a possessive is also tried without it
    ("Nolan's" → "Nolan", while "Ocean's Eleven" stays whole)."""
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
    examples: list[str] = field(default_factory=list)  # labels the path reaches (shown to the LLM)

    def display(self) -> str:
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


def _walk(kg, seed: str, type_iri: str | None, max_hops: int = 2, fanout: int = 300) -> dict[tuple[Hop, ...], list[str]]:
    """Relation paths from ``seed`` → the nodes they reach (seed excluded). A step into an
    unlabelled node continues through it without counting as a hop (CVTs, statements)."""
    paths: dict[tuple[Hop, ...], list[str]] = {}
    frontier = [((), seed, 0)]
    visited_pairs = 0
    while frontier:
        path, node, hops = frontier.pop(0)
        for hop, nb, literal in _steps(kg, node, type_iri, fanout):
            visited_pairs += 1
            if nb == seed or nb == node:
                continue  # back to the start (siblings via the same relation are kept: "other films by …")
            new = path + (hop,)
            if len(new) > 4:
                continue
            if not literal and _is_cvt(kg, nb):
                if hops < max_hops:
                    frontier.append((new, nb, hops))  # walk through, no hop counted
                continue
            reached = paths.setdefault(new, [])
            if len(reached) < 50:
                reached.append(nb)
            if hops + 1 < max_hops and not literal and len(paths) < 2000:
                frontier.append((new, nb, hops + 1))
    return paths


def path_pattern(seed_q: str, hops: Sequence[Hop], profile: SchemaProfile, target: str = "?x") -> str:
    """``wd:Q1 wdt:P19 ?v0 . ?v0 wdt:P17 ?x .`` for a (relation, inverse) sequence."""
    parts, cur = [], seed_q
    for i, (rel, inv) in enumerate(hops):
        nxt = target if i == len(hops) - 1 else f"?v{i}"
        r = profile.compact(rel)
        parts.append(f"{nxt} {r} {cur} ." if inv else f"{cur} {r} {nxt} .")
        cur = nxt
    return " ".join(parts)


def _rel_text(kg, rel: str, inverse: bool) -> str:
    name = kg.label(rel)
    return f"← {name}" if inverse else f"→ {name}"


def enumerate_candidates(kg, linking: Linking, profile: SchemaProfile, *, max_hops: int = 2,
                         max_paths: int = 400) -> Candidates:
    """Every relation path (≤ 2 hops) from each linked entity, the relations on them, and the
    classes of the entities they reach."""
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


# ---------------------------------------------------------------------------------------------
# Gold KB elements and gold logical forms of a question (training data, exemplars, recall)
# ---------------------------------------------------------------------------------------------
@dataclass
class Gold:
    topics: list[str]  # IRIs
    hops: list[Hop]  # the relation path (empty for compare questions)
    kind: str  # path | count | argmax | argmin | compare
    attr: list[Hop] = field(default_factory=list)  # the compared attribute's relation(s)
    types: list[str] = field(default_factory=list)  # classes of the gold answers
    kind_order: str = "max"  # compare questions: the larger (max) or the smaller (min) wins
    given_sparql: str = ""  # the dataset's own logical forms (GrailQA), used as they are
    given_sexpr: str = ""
    at: tuple[str, str] | None = None  # value_at: (relation on the intermediate node, year)

    @property
    def relations(self) -> set[str]:
        return {r for r, _ in self.hops} | {r for r, _ in self.attr}

    def path_key(self) -> tuple | None:
        return (self.topics[0], tuple(self.hops)) if self.hops and self.topics else None

    def sparql(self, profile: SchemaProfile) -> str:
        """A compact gold query in the style the LLM is asked to write."""
        if self.given_sparql:
            return self.given_sparql
        if self.kind == "compare":
            vals = " ".join(profile.compact(t) for t in self.topics)
            return f"SELECT ?x WHERE {{ VALUES ?x {{ {vals} }} {path_pattern('?x', self.attr, profile, '?value')} }} " \
                   f"ORDER BY {'DESC' if self.kind_order == 'max' else 'ASC'}(?value) LIMIT 1"
        body = path_pattern(profile.compact(self.topics[0]), self.hops, profile)
        if self.at:  # a dated value: constrain the statement / CVT node (?v0) by its year
            body += f" ?v0 {profile.compact(self.at[0])} {self.at[1]} ."
        if self.kind == "count":
            return f"SELECT (COUNT(DISTINCT ?x) AS ?count) WHERE {{ {body} }}"
        if len(self.hops) > 1 and not self.at:  # "which other films …": not the topic itself
            body += f" FILTER(?x != {profile.compact(self.topics[0])})"
        if self.kind in ("argmax", "argmin"):
            return f"SELECT ?x WHERE {{ {body} {path_pattern('?x', self.attr, profile, '?value')} }} " \
                   f"ORDER BY {'DESC' if self.kind == 'argmax' else 'ASC'}(?value) LIMIT 1"
        return f"SELECT DISTINCT ?x WHERE {{ {body} }}"

    def sexpr(self, profile: SchemaProfile) -> str:
        """The same logical form as a GrailQA s-expression."""
        if self.given_sexpr:
            return self.given_sexpr
        def chain(seed: str, hops: Sequence[Hop]) -> str:
            expr = seed
            for rel, inv in hops:  # walking rel forward from the set = (JOIN (R rel) set)
                r = profile.compact(rel)
                expr = f"(JOIN {r} {expr})" if inv else f"(JOIN (R {r}) {expr})"
            return expr

        if len(self.attr) != 1 and self.kind in ("argmax", "argmin", "compare"):
            return ""  # an attribute behind a CVT has no single relation to ARGMAX over
        if self.kind == "compare":
            op = "ARGMAX" if self.kind_order == "max" else "ARGMIN"
            return f"({op} (OR {' '.join(profile.compact(t) for t in self.topics)}) {profile.compact(self.attr[0][0])})"
        if self.at and len(self.hops) == 2:
            (r1, _), (r2, _) = self.hops
            node = f"(AND (JOIN (R {profile.compact(r1)}) {profile.compact(self.topics[0])}) (JOIN {profile.compact(self.at[0])} {self.at[1]}))"
            return f"(JOIN (R {profile.compact(r2)}) {node})"
        body = chain(profile.compact(self.topics[0]), self.hops)
        if self.kind == "count":
            return f"(COUNT {body})"
        if self.kind in ("argmax", "argmin"):
            return f"({self.kind.upper()} {body} {profile.compact(self.attr[0][0])})"
        return body


def _mw_hops(path: Sequence[str], schema: str, kg) -> list[Hop]:
    from ..miniworld import schema_path

    out = []
    for rel in schema_path(list(path), schema):
        inv = rel.startswith("^")
        out.append((kg.relation_iri(rel.lstrip("^")), inv))
    return out


@lru_cache(maxsize=1)
def _mw_ids() -> dict[str, dict[str, str]]:
    from ..miniworld import out_dir

    return json.loads((out_dir() / "ids.json").read_text())


def gold_of(q: Question, kg, kg_name: str) -> Gold | None:
    """The gold KB elements of a mini-world or MetaQA question in ``kg``'s schema (None if unknown)."""
    if kg_name.startswith("miniworld"):
        schema = "freebase" if kg_name.endswith("freebase") else "wikidata"
        form = q.gold_query.get("form")
        if form:
            form = json.loads(form) if isinstance(form, str) else form
        elif q.metadata.get("property"):
            form = {"type": "path", "path": [q.metadata["property"]], "topic": q.metadata["topic_keys"][0]}
        else:
            return None
        ids = _mw_ids()
        iri = (lambda key: kg.entity_iri(ids[key][schema]) if schema == "wikidata" else kg.entity_ns + ids[key][schema])
        if form["type"] == "value_at":
            from ..miniworld import BASE, POINT_IN_TIME, PROPERTIES

            pid, _, cvt, _ = PROPERTIES[form["attr"]]
            if schema == "wikidata":
                hops = [(f"{BASE}wd/prop/{pid}", False), (f"{BASE}wd/prop/statement/{pid}", False)]
                at = f"{BASE}wd/prop/qualifier/{POINT_IN_TIME}"
            else:
                hops = [(kg.entity_ns + cvt[0], False), (kg.entity_ns + cvt[1], False)]
                at = kg.entity_ns + cvt[2]
            return Gold([iri(form["topic"])], hops, "value_at", at=(at, str(int(form["year"]))))
        if form["type"] == "compare":
            g = Gold([iri(k) for k in form["entities"]], [], "compare", _mw_hops([form["attr"]], schema, kg))
            g.kind_order = form.get("order", "max")
        else:
            attr = _mw_hops([form["attr"]], schema, kg) if form.get("attr") else []
            g = Gold([iri(form["topic"])], _mw_hops(form["path"], schema, kg), form["type"], attr)
    elif kg_name == "grailqa":
        from ..grailqa import compact_sparql, with_prefix

        gq = q.metadata["graph_query"]
        nodes = {n["nid"]: n for n in gq["nodes"]}
        qn = next(n["nid"] for n in gq["nodes"] if n["question_node"] == 1)
        topic = next(n for n in gq["nodes"] if n["node_type"] == "entity")
        # the relation chain from the (first) topic entity to the question node
        hops, cur, seen = [], topic["nid"], {topic["nid"]}
        while cur != qn:
            step = next(((e["relation"], e["end"] if e["start"] == cur else e["start"], e["start"] != cur)
                         for e in gq["edges"] if cur in (e["start"], e["end"]) and
                         (e["end"] if e["start"] == cur else e["start"]) not in seen), None)
            if step is None:
                break
            rel, cur, inverse = step
            seen.add(cur)
            hops.append((kg.relation_iri(rel), inverse))
        g = Gold([kg.entity_ns + n["id"] for n in gq["nodes"] if n["node_type"] == "entity"],
                 hops if cur == qn else [], "count" if q.metadata["function"] == "count" else "path",
                 given_sparql=compact_sparql(q.gold_query["sparql"]), given_sexpr=with_prefix(q.gold_query["s_expression"]))
        g.types = [kg.entity_ns + nodes[qn]["class"]]
        return g
    elif kg_name == "metaqa" or kg_name == "tiny":
        path = [p.strip() for p in q.gold_query.get("path", "").split("/") if p.strip()]
        if not path or not q.topic_entities:
            return None
        hops = [(kg.relation_iri(p.lstrip("^")), p.startswith("^")) for p in path]
        g = Gold([kg.entity_iri(q.topic_entities[0])], hops, "path")
    else:
        return None
    return g


# ---------------------------------------------------------------------------------------------
# 3. Retrieval
# ---------------------------------------------------------------------------------------------
@dataclass
class Retrieved:
    retriever: str
    aspect: str
    items: list[tuple[Candidate, float]]  # top-K, best first

    def as_dict(self) -> dict[str, Any]:
        return {"retriever": self.retriever, "aspect": self.aspect,
                "items": [{"query": c.query, "text": c.text, "score": round(s, 4)} for c, s in self.items]}


def retrieve(question: str, candidates: Candidates, retrievers: Sequence[Any], K: int = 10) -> list[Retrieved]:
    """Each retriever ranks each aspect's candidates by the question; the top K are kept."""
    out = []
    for r in retrievers:
        for aspect in ASPECTS:
            cands = candidates.aspect(aspect)
            ranked = r.rank(question, [c.text for c in cands], K)
            out.append(Retrieved(getattr(r, "label", r.name), aspect, [(cands[x.index], x.score) for x in ranked]))
    return out


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


def rerank(question: str, retrieved: Retrieved, ctx: Context, k: int) -> Reranked:
    """The LLM picks and orders the k most useful candidates of one aspect (no call when there
    are k or fewer). A malformed answer falls back to the retriever's order and is counted."""
    items = [c for c, _ in retrieved.items]
    if len(items) <= k:
        return Reranked(retrieved.retriever, retrieved.aspect, items, list(range(1, len(items) + 1)))
    listing = "\n".join(f"{i}. {c.display() if c.aspect == 'path' else f'{c.query} ({c.text})'}"
                        for i, c in enumerate(items, 1))
    messages = load_prompt("fusic_rerank").messages(question=question, what=_ASPECT_WORDS[retrieved.aspect],
                                                     candidates=listing, k=str(k))
    r = ctx.llm.chat(messages, max_tokens=40, temperature=0.0, seed=ctx.seed)
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


# ---------------------------------------------------------------------------------------------
# 5. Logical-form generation
# ---------------------------------------------------------------------------------------------
def context_block(linking: Linking, contexts: Sequence[Reranked], profile: SchemaProfile) -> str:
    """The retrieved KB context as the LLM reads it, one section per retriever."""
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
                lines += [f"  {c.display()}" for c in part.items]
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


def build_messages(question: str, context: str, exemplars: Sequence[Exemplar], language: str,
                   profile: SchemaProfile) -> list[dict[str, str]]:
    prompt = load_prompt("fusic_sparql" if language == "sparql" else "fusic_sexpr")
    shots = "".join(f"Question: {e.question}\n{e.context}\n>>> assistant\n{_fence(language, e.target)}\n>>> user\n"
                    for e in exemplars)
    return prompt.messages(exemplars=shots, question=question, context=context)


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
# 6. Execution (+ the feedback the LLM gets)
# ---------------------------------------------------------------------------------------------
@dataclass
class Execution:
    query: str  # as written by the LLM
    sparql: str  # as executed (prefixes added; converted from an s-expression)
    status: str  # ok | empty | no_query | parse_error | rejected | unknown_prefix | unknown_iri | unanchored | too_many | timeout
    answers: list[str] = field(default_factory=list)
    rows: int = 0
    message: str = ""  # what the LLM is told when status != ok

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self) -> dict[str, Any]:
        return {"query": self.query, "sparql": self.sparql, "status": self.status, "answers": self.answers[:20],
                "rows": self.rows, "message": self.message}


_PNAME = re.compile(r"(?<![\w<?$])([A-Za-z][\w-]*):([A-Za-z0-9_%][A-Za-z0-9_%.\-]*[A-Za-z0-9_%]|[A-Za-z0-9_%])")
_IRI = re.compile(r"<(https?://[^>\s]+)>")


def _with_prefixes(query: str, profile: SchemaProfile) -> str:
    """Our prefixed names written out as full IRIs (pyoxigraph 0.5 rejects a local name with two
    dots, ``ns:film.film.directed_by``), the LLM's own PREFIX lines for our prefixes dropped, and
    any other prefix it uses left to its declarations."""
    prefixes = profile.prefix_map
    query = re.sub(r"PREFIX\s+(\w+):\s*<[^>]*>\s*", lambda m: "" if m.group(1) in prefixes else m.group(0), query, flags=re.I)
    head, sep, body = query.partition("{")
    body = re.sub(r'("(?:[^"\\]|\\.)*")|' + _PNAME.pattern,
                  lambda m: m.group(1) or (f"<{prefixes[m.group(2)]}{m.group(3)}>" if m.group(2) in prefixes else m.group(0)),
                  body)
    head = re.sub(_PNAME.pattern, lambda m: f"<{prefixes[m.group(1)]}{m.group(2)}>" if m.group(1) in prefixes else m.group(0), head)
    return head + sep + body


_STANDARD = {"rdf", "rdfs", "xsd", "owl", "skos", "schema"}


def _unknown_terms(query: str, kg, profile: SchemaProfile) -> tuple[list[str], list[str]]:
    """(prefixes used but never declared, ids the KG has never seen). The query is the one
    about to run: our prefixed names are already written out as IRIs; a prefixed name left is
    the LLM's own (``foaf:name`` with its own PREFIX line, or ``wdt:P19`` copied from an exemplar
    of another KB)."""
    declared = {m.group(1): m.group(2) for m in re.finditer(r"PREFIX\s+(\w*):\s*<([^>]*)>", query, re.I)}
    body = re.sub(r"PREFIX\s+\S+\s*<[^>]*>", "", query, flags=re.I)
    body = re.sub(r'"(?:[^"\\]|\\.)*"', '""', body)
    undeclared, unknown = [], []
    for m in _PNAME.finditer(body):
        prefix = m.group(1)
        if prefix in declared:
            if prefix not in _STANDARD and not kg.has_term(declared[prefix] + m.group(2)) and m.group(0) not in unknown:
                unknown.append(m.group(0))
        elif prefix not in undeclared and prefix not in _STANDARD:
            undeclared.append(prefix)
    ours = tuple(ns for _, ns in profile.prefixes)
    for m in _IRI.finditer(body):
        iri = m.group(1)
        if iri.startswith(ours) and not iri.startswith(RDFS) and not kg.has_term(iri):
            shown = profile.compact(iri)
            if shown not in unknown:
                unknown.append(shown)
    return undeclared, unknown


_PATTERN_SPLIT = re.compile(r"\s\.\s|\s\.$|;")


def _exists(kg, s: str, p: str, o: str) -> bool:
    try:
        return bool(kg.sparql(f"ASK {{ {s} {p} {o} }}", timeout=5).boolean)
    except InfrastructureError:
        raise  # the endpoint is down: not a diagnosis, not an answer
    except Exception:  # noqa: BLE001 - a diagnosis is best effort
        return True


def diagnose_empty(sparql: str, kg, profile: SchemaProfile) -> str:
    """Why did a query return nothing? Each triple pattern with a fixed entity is tried alone;
    one that matches nothing — but would the other way round — is named, with the fix. (The
    small model's most frequent mistake here is walking a relation backwards.)"""
    body = sparql[sparql.find("{") + 1: sparql.rfind("}")] if "{" in sparql else ""
    body = re.sub(r"FILTER\s*\((?:[^()]|\([^()]*\))*\)", " ", body, flags=re.I)
    body = re.sub(r"VALUES\s+\?\w+\s*\{[^}]*\}", " ", body, flags=re.I)
    for part in _PATTERN_SPLIT.split(body.replace("{", " ").replace("}", " ")):
        toks = part.split()
        if len(toks) != 3 or not toks[1].startswith("<"):
            continue
        subj, rel, obj = toks
        s_fixed, o_fixed = subj.startswith("<"), obj.startswith("<")
        if s_fixed == o_fixed:
            continue
        if not _exists(kg, subj if s_fixed else "?s", rel, obj if o_fixed else "?o"):
            shown = " ".join(profile.compact(t[1:-1]) if t.startswith("<") else t for t in toks)
            if _exists(kg, obj if o_fixed else "?s", rel, subj if s_fixed else "?o"):
                fixed = " ".join(profile.compact(t[1:-1]) if t.startswith("<") else t for t in (obj, rel, subj))
                return f" The pattern `{shown}` matches nothing; the KB has it the other way round: `{fixed}`."
            return f" The pattern `{shown}` matches nothing in the KB."
    return " Each pattern matches something on its own, but not together: check how the variables join."




def execute_query(query: str, kg, profile: SchemaProfile, *, language: str = "sparql", max_answers: int = 100,
                  timeout: float = 10.0, exclude: Sequence[str] = (), anchors: Sequence[str] = ()) -> Execution:
    """Run the LLM's query read-only with a timeout and a row cap; map IRIs to labels.
    ``exclude``: the question's own entities, dropped from the answers when others remain (a
    path that walks back to its start, "which other films by the director of X" — the rule
    MetaQA's gold answers follow). ``anchors``: the linked entities; a query that uses none of
    them answers some other question (status ``unanchored``). Every failure becomes a status and
    a message for the feedback round, never an exception."""
    if not query.strip():
        return Execution(query, "", "no_query", message="No query was found in your answer.")
    sparql = query
    if language == "sexpr":
        try:
            sparql = sexpr_to_sparql(query, type_predicate=profile.type_predicate)
        except SExprError as exc:
            return Execution(query, "", "parse_error", message=f"The s-expression is malformed: {exc}.")
    depth = nesting_depth(sparql)
    if depth > MAX_QUERY_DEPTH:  # pyoxigraph's parser overflows the C stack (segfault) at ~3000 levels
        return Execution(query, sparql, "parse_error",
                         message=f"The query nests brackets {depth} levels deep; write a flat query.")
    try:
        form = check_read_only(sparql)
    except QuerySyntaxError:
        form = None  # reported by the KG below (status parse_error, in the engine's words), as it always was
    except QueryRejected as exc:
        return Execution(query, sparql, "rejected", message=f"Only a read-only SELECT query is allowed ({exc}).")
    except Exception as exc:  # noqa: BLE001
        return Execution(query, sparql, "parse_error", message=f"The query does not parse: {str(exc)[:200]}")
    sparql = _with_prefixes(sparql, profile)
    undeclared, unknown = _unknown_terms(sparql, kg, profile)
    if undeclared:
        ours = ", ".join(f"{p}:" for p, _ in profile.prefixes)
        return Execution(query, sparql, "unknown_prefix",
                         message=f"This KB has no prefix {', '.join(p + ':' for p in undeclared)} — its ids are written with "
                                 f"{ours} as in the context (the examples may come from another KB).")
    if unknown:
        return Execution(query, sparql, "unknown_iri",
                         message=f"These names do not exist in the KB: {', '.join(unknown[:5])}. Use only ids from the context.")
    if anchors and not any(f"<{a}>" in sparql for a in anchors):
        named = "; ".join(f"{profile.compact(a)} ({kg.label(a)})" for a in anchors[:3])
        return Execution(query, sparql, "unanchored",
                         message=f"The query does not use the question's entity: {named}. Start the query from it.")
    try:
        res = kg.sparql(sparql, timeout=timeout, max_rows=max_answers + 1)
    except QueryTimeout:
        return Execution(query, sparql, "timeout", message=f"The query ran longer than {timeout:.0f} s; make it more specific.")
    except (QueryRejected, SyntaxError, ValueError) as exc:
        return Execution(query, sparql, "parse_error", message=f"The query does not parse: {str(exc)[:200]}")
    except InfrastructureError:
        raise  # the endpoint is down: the question is not answered (see kgqa_lib.errors)
    except Exception as exc:  # noqa: BLE001 - the store's own errors
        return Execution(query, sparql, "parse_error", message=f"The query failed: {type(exc).__name__}: {str(exc)[:160]}")
    if form == "ASK":
        return Execution(query, sparql, "ok", ["yes" if res.boolean else "no"], 1)
    if not res.rows or not res.vars:
        return Execution(query, sparql, "empty", message="The query returned no results." + diagnose_empty(sparql, kg, profile))
    var = res.vars[0]
    values = [row[var] for row in res.rows if var in row]
    if any(v not in exclude for v in values):
        values = [v for v in values if v not in exclude]
    if not values:
        return Execution(query, sparql, "empty", message=f"The query returned no value for ?{var}.")
    if len(values) > max_answers:
        return Execution(query, sparql, "too_many", rows=len(values),
                         message=f"The query returned more than {max_answers} results: it is not anchored to the question's entity.")
    answers = []
    for v in values:
        lab = kg.label(v) if "://" in v else v
        if lab not in answers:
            answers.append(lab)
    return Execution(query, sparql, "ok", answers, len(values))


# ---------------------------------------------------------------------------------------------
# Transfer tasks: source and target domains
# ---------------------------------------------------------------------------------------------
DOMAINS = {
    # name: (kg name, question sets, topic-key prefixes)
    "mw-geo": ("miniworld", ("simple", "multihop"), ("g_", "t_")),
    "mw-cinema": ("miniworld", ("simple", "multihop"), ("p_", "f_")),
    "mw-all": ("miniworld", ("simple", "multihop"), ("g_", "t_", "p_", "f_")),
    "metaqa": ("metaqa", ("1hop", "2hop"), ()),
    "grailqa": ("grailqa", ("dev",), ()),
}
TASKS = {
    # the default pair in the notebooks: different domains AND different schemas, all our own data
    "geo-wd>cinema-fb": ("mw-geo@wikidata", "mw-cinema@freebase"),
    "cinema-fb>geo-wd": ("mw-cinema@freebase", "mw-geo@wikidata"),
    # with KGQA_DATA_DIR (MetaQA dev): benchmark only, never committed
    "metaqa>cinema-fb": ("metaqa", "mw-cinema@freebase"),
    "mw-wd>metaqa": ("mw-all@wikidata", "metaqa"),
    # GrailQA (KGQA_DATA_DIR): real Freebase relation names on answer-bearing slices
    "grailqa>cinema-fb": ("grailqa", "mw-cinema@freebase"),
    "cinema-fb>grailqa": ("mw-cinema@freebase", "grailqa"),
}
SHOT_POOL = 10  # target questions reserved for few-shot use, whatever the number of shots


@dataclass
class Domain:
    name: str
    kg_name: str
    kg: Any
    profile: SchemaProfile
    questions: list[Question]
    source_files: list = field(default_factory=list)  # question files (decides whether transcripts are kept)

    def kg_for(self, q: Question):
        """The KG a question is asked against: the domain's, or (GrailQA) the question's own slice."""
        if self.kg_name == "grailqa":
            from ..grailqa import slice_kg

            return slice_kg(q.qid)
        return self.kg

    def gold(self, q: Question) -> Gold | None:
        return gold_of(q, self.kg, self.kg_name)


def _domain_questions(name: str, metaqa_n: int, seed: int) -> tuple[list[Question], list]:
    from ..datasets import load_dataset

    _, sets, prefixes = DOMAINS[name]
    qs, files = [], []
    for s in sets:
        if name == "metaqa":
            ds = load_dataset(f"metaqa:{s}:dev", sample=metaqa_n // len(sets), seed=seed)
            qs += list(ds)
        elif name == "grailqa":
            ds = load_dataset("grailqa:dev")
            qs += list(ds)
        else:
            ds = load_dataset(f"miniworld:{s}")
            qs += [q for q in ds if q.kind == "factoid" and (q.metadata.get("topic_keys") or [""])[0].startswith(prefixes)]
        files += list(ds.source_files)
    return qs, files


@lru_cache(maxsize=8)
def load_domain(spec: str, metaqa_n: int = 400, seed: int = 0) -> Domain:
    """``mw-geo@wikidata`` → the geography/technology questions on the Wikidata-like KG."""
    from ..kg import load_named

    name, _, schema = spec.partition("@")
    if name not in DOMAINS:
        raise ValueError(f"Unknown domain {name!r}; known: {', '.join(DOMAINS)}")
    kg_name = DOMAINS[name][0] + (f":{schema}" if schema else "")
    kg = load_named(kg_name)
    qs, files = _domain_questions(name, metaqa_n, seed)
    return Domain(spec, kg_name, kg, profile_for(kg_name), qs, files)


@dataclass
class Task:
    name: str
    source: Domain
    target: Domain
    pool: list[Question]  # SHOT_POOL target questions for few-shot use
    test: list[Question]  # the rest of the target questions


@lru_cache(maxsize=8)
def get_task(name: str, seed: int = 0) -> Task:
    if name not in TASKS:
        raise ValueError(f"Unknown transfer task {name!r}; known: {', '.join(TASKS)}")
    src, tgt = TASKS[name]
    source, target = load_domain(src, seed=seed), load_domain(tgt, seed=seed)
    usable = [q for q in target.questions if target.gold(q) is not None]
    rng = random.Random(seed)
    order = sorted(usable, key=lambda q: q.qid)
    rng.shuffle(order)
    return Task(name, source, target, order[:SHOT_POOL], order[SHOT_POOL:])


def task_dataset(name: str, split: str = "test") -> Dataset:
    """``fusic:geo-wd>cinema-fb`` → the target's test questions (``:pool`` → the few-shot pool)."""
    t = get_task(name)
    qs = t.test if split == "test" else t.pool
    return Dataset(f"fusic:{name}:{split}", qs, kg=t.target.kg_name,
                   source_files=t.source.source_files + t.target.source_files)


# ---------------------------------------------------------------------------------------------
# Retriever training data and the trained retrievers
# ---------------------------------------------------------------------------------------------
def _gold_candidates(cands: Candidates, gold: Gold) -> dict[str, set[int]]:
    """Indices of the gold path/relations/types among the candidates."""
    key = gold.path_key()
    return {"path": {i for i, c in enumerate(cands.paths) if key and c.key == key},
            "relation": {i for i, c in enumerate(cands.relations) if c.key in gold.relations},
            "type": {i for i, c in enumerate(cands.types) if c.key in set(gold.types)}}


def answer_types(domain: Domain, gold: Gold, kg=None) -> list[str]:
    """Classes of the entities the gold path reaches."""
    tp = _type_iri(domain.profile)
    kg = kg or domain.kg
    if not tp or not gold.hops:
        return []
    reached = _follow(kg, gold.topics[0], gold.hops)
    counts = Counter(t for x in reached[:20] if "://" in x for t in kg.objects(x, tp))
    return [t for t, _ in counts.most_common(2)]


def _follow(kg, seed: str, hops: Sequence[Hop]) -> list[str]:
    return kg.follow_path(seed, [("^" if inv else "") + rel for rel, inv in hops])


@dataclass
class Prepared:
    """A question after linking and candidate enumeration (what retrieval needs)."""
    question: Question
    linking: Linking
    candidates: Candidates
    gold: Gold | None


def prepare(q: Question, domain: Domain, embedder=None, oracle: bool = False) -> Prepared:
    kg = domain.kg_for(q)
    gold = domain.gold(q)
    if gold is not None:
        gold.types = gold.types or answer_types(domain, gold, kg)
    linking = link_entities(q, kg, embedder, oracle=oracle, topic_iris=gold.topics if (oracle and gold) else ())
    return Prepared(q, linking, enumerate_candidates(kg, linking, domain.profile), gold)


def training_examples(prepared: Sequence[Prepared], negatives: int = 8, seed: int = 0) -> list:
    """(question, gold candidate text, other candidates) for every aspect with a gold element."""
    from ..retrieval import TrainingExample

    rng = random.Random(seed)
    out = []
    for p in prepared:
        if p.gold is None:
            continue
        gold_idx = _gold_candidates(p.candidates, p.gold)
        for aspect in ASPECTS:
            cands = p.candidates.aspect(aspect)
            others = [c.text for i, c in enumerate(cands) if i not in gold_idx[aspect]]
            for i in sorted(gold_idx[aspect]):
                out.append(TrainingExample(p.question.question, cands[i].text,
                                           rng.sample(others, min(negatives, len(others)))))
    return out


@lru_cache(maxsize=16)
def prepared_domain(spec: str, qids: tuple[str, ...] | None = None, oracle: bool = True) -> list[Prepared]:
    """Source/pool questions prepared with oracle linking (training needs the gold entity)."""
    dom = load_domain(spec)
    qs = [q for q in dom.questions if qids is None or q.qid in qids]
    return [prepare(q, dom, oracle=oracle) for q in qs]


@lru_cache(maxsize=8)
def trained_retriever(task: str, shots: int = 0, epochs: int = 2, seed: int = 0, progress: bool = False):
    """The dense retriever of a task: MiniLM fine-tuned on the source domain (then on ``shots``
    target questions from the pool). Deterministic and cached on disk."""
    from ..retrieval import DenseRetriever, train_dense

    t = get_task(task, seed)
    report = train_dense(training_examples(prepared_domain(t.source.name), seed=seed), epochs=epochs, seed=seed,
                         progress=progress)
    path, reports = report.path, [report]
    if shots:
        few = prepared_domain(t.target.name, tuple(q.qid for q in t.pool[:shots]))
        ft = train_dense(training_examples(few, seed=seed), base=path, epochs=epochs, seed=seed, progress=progress)
        path, reports = ft.path, reports + [ft]
    r = DenseRetriever(path, label="dense")
    r.training = reports  # type: ignore[attr-defined]
    return r


def make_retrievers(names: str, task: str, shots: int, seed: int = 0) -> list[Any]:
    from ..retrieval import BM25Retriever, DenseRetriever

    out = []
    for n in [x.strip() for x in names.split(",") if x.strip()]:
        if n == "bm25":
            out.append(BM25Retriever())
        elif n == "dense":
            out.append(trained_retriever(task, shots, seed=seed))
        elif n == "minilm":  # the untrained encoder, for the ablation "does source training help?"
            out.append(DenseRetriever(None, label="minilm"))
        else:
            raise ValueError(f"Unknown retriever {n!r}: use bm25, dense, minilm")
    return out


# ---------------------------------------------------------------------------------------------
# Exemplars
# ---------------------------------------------------------------------------------------------
def exemplars_for(q: Question, task: Task, shots: int, language: str, retrievers: Sequence[Any], n: int = 3,
                  k_sizes: dict[str, int] | None = None, embedder=None) -> list[Exemplar]:
    """The n exemplars closest to the question: from the target's few shots, or (zero-shot) from
    the source domain. Each carries its own retrieved context (retriever top-k, no LLM)."""
    if shots:
        dom, pool = task.target, prepared_domain(task.target.name, tuple(x.qid for x in task.pool[:shots]))
    else:
        dom, pool = task.source, prepared_domain(task.source.name)
    pool = [p for p in pool if p.gold is not None and (language == "sparql" or p.gold.sexpr(dom.profile))]
    if not pool:
        return []
    from ..embed import Embedder

    emb = embedder or Embedder()
    vecs = emb.encode([q.question] + [p.question.question for p in pool])
    sims = vecs[1:] @ vecs[0]
    order = sorted(range(len(pool)), key=lambda i: (-float(sims[i]), pool[i].question.qid))[:n]
    k_sizes = k_sizes or context_sizes(len(retrievers))
    out = []
    for i in reversed(order):  # the closest exemplar right before the question
        p = pool[i]
        ctxs = [Reranked(x.retriever, x.aspect, [c for c, _ in x.items[:k_sizes[x.aspect]]], [])
                for x in retrieve(p.question.question, p.candidates, retrievers, max(k_sizes.values()))]
        target = p.gold.sparql(dom.profile) if language == "sparql" else p.gold.sexpr(dom.profile)
        out.append(Exemplar(p.question.question, context_block(p.linking, ctxs, dom.profile), target))
    return out


RERANK_K = {"path": 5, "relation": 4, "type": 2}  # what the LLM keeps of each retriever's top K


def context_sizes(n_retrievers: int) -> dict[str, int]:
    """k per aspect and retriever in the generation prompt: smaller as retrievers are added, so
    the prompt stays in budget (the re-ranked lists are cut to these sizes)."""
    return dict(RERANK_K) if n_retrievers <= 1 else {"path": 3, "relation": 3, "type": 1}


# ---------------------------------------------------------------------------------------------
# Retrieval recall (the paper's Table 7)
# ---------------------------------------------------------------------------------------------
def retrieval_recall(q: Question, task: Task, retrievers: Sequence[Any], ctx: Context, K: int = 10,
                     rerank_with_llm: bool = True) -> list[dict[str, Any]]:
    """For each retriever and aspect of one question: are *all* its gold KB elements among the
    candidates, the retriever's top K, the LLM's re-ranked top k, and the (shorter) final context?
    Aspects without a gold element (no class for a literal answer, no path for a comparison) are
    left out."""
    dom = task.target
    gold = dom.gold(q)
    if gold is None:
        return []
    kg = dom.kg_for(q)
    gold.types = gold.types or answer_types(dom, gold, kg)
    wanted = {"path": {gold.path_key()} - {None}, "relation": gold.relations, "type": set(gold.types)}
    linking = link_entities(q, kg, ctx.embedder)
    cands = enumerate_candidates(kg, linking, dom.profile)
    sizes = context_sizes(len(retrievers))
    rows = []
    for r in retrieve(q.question, cands, retrievers, K):
        want = wanted[r.aspect]
        if not want:
            continue
        have = lambda items: want <= {c.key for c in items}  # noqa: E731
        ranked = rerank(q.question, r, ctx, RERANK_K[r.aspect]).items if rerank_with_llm else [c for c, _ in r.items]
        rows.append({"qid": q.qid, "retriever": r.retriever, "aspect": r.aspect,
                     "in candidates": have(cands.aspect(r.aspect)), "in top K": have([c for c, _ in r.items]),
                     "after re-ranking": have(ranked[:RERANK_K[r.aspect]]), "in context": have(ranked[:sizes[r.aspect]])})
    return rows


# ---------------------------------------------------------------------------------------------
# The pipeline
# ---------------------------------------------------------------------------------------------
@dataclass
class Attempt:
    round: int
    response: str
    execution: Execution

    def as_dict(self) -> dict[str, Any]:
        return {"round": self.round, "response": self.response, **self.execution.as_dict()}


def generate_query(messages: list[dict[str, str]], ctx: Context, max_tokens: int = 200) -> str:
    """One LLM call for the logical form."""
    return ctx.llm.chat(messages, max_tokens=max_tokens, temperature=0.0, seed=ctx.seed).text


def feedback_message(execution: Execution, language: str) -> str:
    what = "SPARQL query" if language == "sparql" else "s-expression"
    return f"{execution.message}\nWrite a corrected {what} for the same question, using only the ids in the context."


def egf_loop(messages: list[dict[str, str]], kg, profile: SchemaProfile, ctx: Context, language: str,
             rounds: int = 4, exclude: Sequence[str] = ()) -> list[Attempt]:
    """Generate, execute; while the execution failed and rounds remain, show the LLM what happened
    (its earlier answers stay in the dialogue) and ask again."""
    attempts: list[Attempt] = []
    dialogue = list(messages)
    for rnd in range(rounds + 1):
        text = generate_query(dialogue, ctx)
        query, _ = extract_query(text, language)
        ex = execute_query(query, kg, profile, language=language, max_answers=FuSICSettings.of(ctx).max_answers, exclude=exclude,
                           anchors=exclude)
        attempts.append(Attempt(rnd, text, ex))
        if ex.ok:
            break
        repeated = any(a.execution.query.strip() == ex.query.strip() for a in attempts[:-1]) and ex.query.strip()
        note = "You wrote the same query as before. " if repeated else ""
        dialogue += [{"role": "assistant", "content": text}, {"role": "user", "content": note + feedback_message(ex, language)}]
    return attempts


@dataclass(frozen=True)
class FuSICSettings(Settings):
    """``kgqa run --method fusic --help-settings``."""

    task: str = setting("geo-wd>cinema-fb", "the transfer task, source>target (its KGs and questions)")
    shots: int = setting(5, "few-shot examples of the target available to the retrievers (0 = zero-shot)")
    retrievers: str = setting("bm25,dense", "comma-separated supervised retrievers: bm25, dense ('' = none, "
                                            "the naive baseline)")
    rerank: bool = setting(True, "re-rank the retrieved candidates with the LLM")
    egf_rounds: int = setting(4, "execution-guided feedback rounds after the first query")
    language: Literal["sparql", "sexpr"] = setting("sparql", "what the LLM writes: SPARQL or s-expressions")
    oracle_linking: bool = setting(False, "link the gold topic entities instead of the question's mentions")
    K: int = setting(10, "candidates each retriever returns per aspect before re-ranking")
    exemplars: int = setting(3, "exemplars of the target shown in the prompt")
    max_answers: int = setting(100, "answers kept from a query's result")


def settings_of(ctx: Context) -> dict[str, Any]:
    """The method's settings, defaults filled in (a dict, as the stages take them)."""
    from dataclasses import asdict

    return asdict(FuSICSettings.of(ctx))


@register_method("fusic", prompts=("fusic_rerank", "fusic_sparql", "fusic_sexpr"), settings=FuSICSettings)
def fusic(q: Question, ctx: Context) -> MethodResult:
    """FuSIC-KBQA on a transfer task. Settings (``--set``): ``task``, ``shots`` (0 = zero-shot),
    ``retrievers`` ("bm25,dense"; "" = no retrieval, the naive baseline), ``rerank``,
    ``egf_rounds``, ``language`` (sparql | sexpr), ``oracle_linking``, ``K``, ``exemplars``."""
    s = settings_of(ctx)
    task = get_task(s["task"], ctx.seed)
    dom = task.target
    kg = dom.kg_for(q)
    tr = Tracer()
    embedder = ctx.embedder
    linking = tr.record("link_entities", link_entities, q, kg, embedder, oracle=s["oracle_linking"],
                        topic_iris=(dom.gold(q).topics if s["oracle_linking"] and dom.gold(q) else ()))
    cands = tr.record("enumerate_candidates", enumerate_candidates, kg, linking, dom.profile)
    retrievers = make_retrievers(s["retrievers"], s["task"], s["shots"], ctx.seed)
    sizes = context_sizes(len(retrievers))
    retrieved = tr.record("retrieve", retrieve, q.question, cands, retrievers, s["K"])
    if s["rerank"]:  # re-rank to a fixed k (shared by every configuration), then cut to the context size
        ranked = [tr.record(f"rerank:{r.retriever}:{r.aspect}", rerank, q.question, r, ctx, RERANK_K[r.aspect])
                  for r in retrieved]
    else:
        ranked = [Reranked(r.retriever, r.aspect, [c for c, _ in r.items], []) for r in retrieved]
    contexts = trim(ranked, sizes)
    context = context_block(linking, contexts, dom.profile)
    shots = tr.record("exemplars", exemplars_for, q, task, s["shots"], s["language"], retrievers, s["exemplars"],
                      sizes, embedder)
    messages = build_messages(q.question, context, shots, s["language"], dom.profile)
    attempts = tr.record("generate_and_execute", egf_loop, messages, kg, dom.profile, ctx, s["language"],
                         s["egf_rounds"], linking.entities)
    final = attempts[-1].execution
    error = None if final.ok else f"query_{final.status}"
    return MethodResult(final.answers if final.ok else [], final.sparql or attempts[-1].response, tr.stages, error)
