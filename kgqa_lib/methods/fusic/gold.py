"""Gold KB elements and gold logical forms of a question (retriever training data, exemplars,
retrieval recall). Never shown to the LLM for a test question."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

from ...data.datasets import Question
from .candidates import Hop, path_pattern, path_sexpr
from .schema import SchemaProfile


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
    given_sparql: str = ""  # the dataset's own logical forms (GrailQA), prefixes shortened
    given_sexpr: str = ""
    at: tuple[str, str] | None = None  # value_at: (relation on the intermediate node, year)

    @property
    def relations(self) -> set[str]:
        return {r for r, _ in self.hops} | {r for r, _ in self.attr}

    def path_key(self) -> tuple | None:
        return (self.topics[0], tuple(self.hops)) if self.hops and self.topics else None

    def sparql(self, profile: SchemaProfile, form: str = "concise") -> str:
        """A compact gold query in the style the LLM is asked to write. A question with the dataset's
        own logical forms (GrailQA): ``form="concise"`` writes its s-expression as SPARQL
        (:func:`kgqa_lib.kg.sexpr.to_sparql`: ``SELECT DISTINCT ?x WHERE { ns:m.… ns:rel ?x . … }``,
        the form of the retrieved paths and of the paper's exemplars, appendix A.1.3; "" when it
        does not convert); ``form="dataset"``: the dataset's own SPARQL as given (GrailQA's nested
        ``SELECT (?x0 AS ?value) WHERE { SELECT DISTINCT ?x0 … VALUES … FILTER … }``)."""
        if form not in ("concise", "dataset"):
            raise ValueError(f"form={form!r}: use concise or dataset")
        if self.given_sparql and (form == "dataset" or not self.given_sexpr):
            return self.given_sparql
        if self.given_sexpr:
            from ...kg.sexpr import SExprError, to_sparql

            try:
                return to_sparql(self.given_sexpr, type_predicate=profile.type_predicate)
            except SExprError:
                return ""
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
            body += f" FILTER({' && '.join(self._others(profile))})"
        if self.kind in ("argmax", "argmin"):
            return f"SELECT ?x WHERE {{ {body} {path_pattern('?x', self.attr, profile, '?value')} }} " \
                   f"ORDER BY {'DESC' if self.kind == 'argmax' else 'ASC'}(?value) LIMIT 1"
        return f"SELECT DISTINCT ?x WHERE {{ {body} }}"

    def _others(self, profile: SchemaProfile) -> list[str]:
        """The "other" constraints of a multi-hop path: the answer is not the topic, and a node reached
        by walking a relation out and straight back (film → director ← other film) is not the node
        it started from — MetaQA's rule for its 3-hop answers (the films of the director *other than*
        the topic film; without it the gold query's F1 on MetaQA 3-hop dev is 0.90)."""
        nodes = [profile.compact(self.topics[0])] + [f"?v{i}" for i in range(len(self.hops) - 1)] + ["?x"]
        out = [f"?x != {nodes[0]}"]
        for i in range(len(self.hops) - 1):
            (r1, inv1), (r2, inv2) = self.hops[i], self.hops[i + 1]
            if r1 == r2 and inv1 != inv2 and (nodes[i + 2], nodes[i]) != ("?x", nodes[0]):
                out.append(f"{nodes[i + 2]} != {nodes[i]}")
        return out

    def sexpr(self, profile: SchemaProfile) -> str:
        """The same logical form as a GrailQA s-expression."""
        if self.given_sexpr:
            return self.given_sexpr
        if len(self.attr) != 1 and self.kind in ("argmax", "argmin", "compare"):
            return ""  # an attribute behind a CVT has no single relation to ARGMAX over
        if self.kind == "compare":
            op = "ARGMAX" if self.kind_order == "max" else "ARGMIN"
            return f"({op} (OR {' '.join(profile.compact(t) for t in self.topics)}) {profile.compact(self.attr[0][0])})"
        if self.at and len(self.hops) == 2:
            (r1, _), (r2, _) = self.hops
            node = f"(AND (JOIN (R {profile.compact(r1)}) {profile.compact(self.topics[0])}) (JOIN {profile.compact(self.at[0])} {self.at[1]}))"
            return f"(JOIN (R {profile.compact(r2)}) {node})"
        body = path_sexpr(profile.compact(self.topics[0]), self.hops, profile)
        if self.kind == "count":
            return f"(COUNT {body})"
        if self.kind in ("argmax", "argmin"):
            return f"({self.kind.upper()} {body} {profile.compact(self.attr[0][0])})"
        return body


def _mw_hops(path: Sequence[str], schema: str, kg) -> list[Hop]:
    from ...data.miniworld import schema_path

    out = []
    for rel in schema_path(list(path), schema):
        inv = rel.startswith("^")
        out.append((kg.relation_iri(rel.lstrip("^")), inv))
    return out


@lru_cache(maxsize=1)
def _mw_ids() -> dict[str, dict[str, str]]:
    from ...data.miniworld import out_dir

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
            from ...data.miniworld import BASE, POINT_IN_TIME, PROPERTIES

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
    elif kg_name in ("grailqa", "grailqa-fragment"):  # oracle slices / the shared fragment
        from ...data.grailqa import compact_sparql, with_prefix

        gq = q.metadata["graph_query"]
        nodes = {n["nid"]: n for n in gq["nodes"]}
        qn = next(n["nid"] for n in gq["nodes"] if n["question_node"] == 1)
        topic = next((n for n in gq["nodes"] if n["node_type"] == "entity"), None)
        if topic is None:  # "(ARGMAX rail.locomotive …)": no entity to start from
            return None
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
