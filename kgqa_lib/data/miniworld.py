"""The mini-world: our own small KG of real-world facts, in two schemas, and its question sets.

Source of truth: hand-written TSV files in ``data/miniworld/source/`` (see FORMAT.md there).
``build()`` turns them into

* a **Wikidata-like** graph: ``Q``/``P`` ids, ``rdfs:label``, ``schema:description``,
  ``skos:altLabel``, direct ``wdt:`` triples, and statement nodes (``p:``/``ps:``/``pq:P585``) for
  facts that carry a year (populations, awards) — as Wikidata models qualifiers;
* a **Freebase-like** graph: ``m.`` mids, dotted ``domain.type.property`` relations,
  ``type.object.name``, and CVT nodes where Freebase has them (film performances, dated
  populations, award honours), so one hop in the first schema is two hops in the second.

Question sets hold a schema-neutral logical form per question; ``sparql(form, schema)`` writes the
gold SPARQL for either schema and the builder stores the answers that query returns.
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..paths import data_dir

SOURCE_DIR_NAME = "source"
DOMAINS = ("geography", "films", "people", "technology")
BASE = "http://kgqa.local/miniworld/"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SKOS_ALT = "http://www.w3.org/2004/02/skos/core#altLabel"
SCHEMA_DESC = "http://schema.org/description"
XSD = "http://www.w3.org/2001/XMLSchema#"

CLASSES = ("country city continent river lake sea mountain mountain_range language currency film genre person "
           "award organization university product programming_language occupation").split()

# property → (Wikidata-like P id, Freebase-like relation, CVT spec or None, is_literal)
# A CVT spec is (relation from subject to the CVT node, relation from the CVT to the value,
# relation from the CVT to the year or None).
PROPERTIES: dict[str, tuple[str, str, tuple[str, str, str | None] | None, bool]] = {
    "continent": ("P30", "location.location.containedby_continent", None, False),
    "capital": ("P36", "location.country.capital", None, False),
    "country": ("P17", "location.location.containedby", None, False),
    "population": ("P1082", "", ("location.statistical_region.population", "measurement_unit.dated_integer.number",
                                 "measurement_unit.dated_integer.year"), True),
    "area_km2": ("P2046", "location.location.area", None, True),
    "length_km": ("P2043", "geography.river.length", None, True),
    "elevation_m": ("P2044", "geography.mountain.elevation", None, True),
    "shares_border_with": ("P47", "location.location.adjoin_s", None, False),
    "flows_through": ("P2505", "geography.river.basin_countries", None, False),
    "mouth": ("P403", "geography.river.mouth", None, False),
    "part_of_range": ("P4552", "geography.mountain.mountain_range", None, False),
    "official_language": ("P37", "location.country.official_language", None, False),
    "currency": ("P38", "location.country.currency_used", None, False),
    "directed_by": ("P57", "film.film.directed_by", None, False),
    "written_by": ("P58", "film.film.written_by", None, False),
    "starred_actors": ("P161", "", ("film.film.starring", "film.performance.actor", None), False),
    "release_year": ("P577", "film.film.initial_release_date", None, True),
    "has_genre": ("P136", "film.film.genre", None, False),
    "in_language": ("P364", "film.film.language", None, False),
    "occupation": ("P106", "people.person.profession", None, False),
    "place_of_birth": ("P19", "people.person.place_of_birth", None, False),
    "birth_year": ("P569", "people.person.date_of_birth", None, True),
    "citizenship": ("P27", "people.person.nationality", None, False),
    "award_received": ("P166", "", ("award.award_winner.awards_won", "award.award_honor.award",
                                    "award.award_honor.year"), False),
    "notable_work": ("P800", "people.person.notable_works", None, False),
    "educated_at": ("P69", "people.person.education", None, False),
    "developer": ("P178", "computer.software.developer", None, False),
    "successor": ("P156", "base.product.successor", None, False),
    "founded_by": ("P112", "organization.organization.founders", None, False),
    "headquarters": ("P159", "organization.organization.headquarters", None, False),
    "founded_year": ("P571", "organization.organization.date_founded", None, True),
    "programming_language": ("P277", "computer.software.languages_used", None, False),
}
SYMMETRIC = {"shares_border_with"}
POINT_IN_TIME = "P585"
INSTANCE_OF = "P31"


@dataclass
class Entity:
    key: str
    cls: str
    label: str
    description: str
    aliases: list[str] = field(default_factory=list)


@dataclass
class Fact:
    s: str
    p: str
    o: str
    year: str = ""


@dataclass
class Source:
    entities: dict[str, Entity]
    facts: list[Fact]
    problems: list[str]


def source_dir() -> Path:
    return data_dir() / "miniworld" / SOURCE_DIR_NAME


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return [{k: (v or "").strip() for k, v in row.items()} for row in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)]


def read_source(folder: Path | None = None) -> Source:
    """Read every ``*_entities.tsv`` and ``*_facts.tsv``; ``problems`` lists what does not check."""
    folder = folder or source_dir()
    entities: dict[str, Entity] = {}
    facts: list[Fact] = []
    problems: list[str] = []
    for f in sorted(folder.glob("*_entities.tsv")):
        for row in _rows(f):
            key = row["key"]
            if key in entities:
                problems.append(f"{f.name}: {key} defined twice")
                continue
            if row["class"] not in CLASSES:
                problems.append(f"{f.name}: {key} has unknown class {row['class']!r}")
            if not row["label"] or not row["description"]:
                problems.append(f"{f.name}: {key} lacks a label or description")
            entities[key] = Entity(key, row["class"], row["label"], row["description"],
                                   [a.strip() for a in row.get("aliases", "").split(";") if a.strip()])
    seen = set()
    for f in sorted(folder.glob("*_facts.tsv")):
        for row in _rows(f):
            fact = Fact(row["subject"], row["property"], row["object"], row.get("year", ""))
            ident = (fact.s, fact.p, fact.o, fact.year)
            if ident in seen:
                continue
            seen.add(ident)
            if fact.p not in PROPERTIES:
                problems.append(f"{f.name}: unknown property {fact.p!r}")
                continue
            if fact.s not in entities:
                problems.append(f"{f.name}: subject {fact.s} not defined")
                continue
            literal = PROPERTIES[fact.p][3]
            if literal:
                try:
                    float(fact.o)
                except ValueError:
                    problems.append(f"{f.name}: {fact.s} {fact.p} expects a number, got {fact.o!r}")
                    continue
            elif fact.o not in entities:
                problems.append(f"{f.name}: object {fact.o} not defined ({fact.s} {fact.p})")
                continue
            facts.append(fact)
    return Source(entities, facts, problems)


# --------------------------------------------------------------------------------------------
# Serialisation to the two schemas
# --------------------------------------------------------------------------------------------
def _lit(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _num(value: str) -> str:
    return f'"{value}"^^<{XSD}integer>' if value.lstrip("-").isdigit() else f'"{value}"^^<{XSD}decimal>'


def _stable_ids(keys: list[str], prefix: str, width: int) -> dict[str, str]:
    """Ids derived from the key's hash order, so adding an entity does not renumber the others."""
    ordered = sorted(keys, key=lambda k: hashlib.sha256(k.encode()).hexdigest())
    ids, used = {}, set()
    for k in ordered:
        n = int(hashlib.sha256(k.encode()).hexdigest(), 16) % (10 ** width)
        while n in used:
            n = (n + 1) % (10 ** width)
        used.add(n)
        ids[k] = f"{prefix}{n}"
    return ids


@dataclass
class Schema:
    name: str  # "wikidata" or "freebase"
    entity_ns: str
    relation_ns: str
    ids: dict[str, str]  # entity key → local id

    def iri(self, key: str) -> str:
        return self.entity_ns + self.ids[key]


def wikidata_schema(src: Source) -> Schema:
    keys = list(src.entities) + [f"class:{c}" for c in CLASSES]
    return Schema("wikidata", BASE + "wd/entity/", BASE + "wd/prop/", _stable_ids(keys, "Q", 5))


def freebase_schema(src: Source) -> Schema:
    keys = list(src.entities)
    ids = {k: "m.0" + v[1:] for k, v in _stable_ids(keys, "x", 6).items()}
    return Schema("freebase", BASE + "fb/", BASE + "fb/", ids)


def to_wikidata(src: Source, sch: Schema) -> list[str]:
    wdt = BASE + "wd/prop/direct/"
    p_ns, ps_ns, pq_ns = BASE + "wd/prop/", BASE + "wd/prop/statement/", BASE + "wd/prop/qualifier/"
    lines = []
    for c in CLASSES:
        q = sch.iri(f"class:{c}")
        lines.append(f"<{q}> <{RDFS_LABEL}> {_lit(c.replace('_', ' '))} .")
    for e in src.entities.values():
        s = sch.iri(e.key)
        lines.append(f"<{s}> <{RDFS_LABEL}> {_lit(e.label)} .")
        lines.append(f"<{s}> <{SCHEMA_DESC}> {_lit(e.description)} .")
        lines.extend(f"<{s}> <{SKOS_ALT}> {_lit(a)} ." for a in e.aliases)
        lines.append(f"<{s}> <{wdt}{INSTANCE_OF}> <{sch.iri('class:' + e.cls)}> .")
    latest: dict[tuple[str, str], tuple[int, str]] = {}
    for i, f in enumerate(src.facts):
        pid, _, _, literal = PROPERTIES[f.p]
        s = sch.iri(f.s)
        o = _num(f.o) if literal else f"<{sch.iri(f.o)}>"
        if f.year:
            st = f"{BASE}wd/statement/{sch.ids[f.s]}-{pid}-{i}"
            lines.append(f"<{s}> <{p_ns}{pid}> <{st}> .")
            lines.append(f"<{st}> <{ps_ns}{pid}> {o} .")
            lines.append(f"<{st}> <{pq_ns}{POINT_IN_TIME}> {_num(f.year)} .")
            if literal:  # the direct triple holds the latest value only (Wikidata's preferred rank)
                prev = latest.get((f.s, f.p))
                if prev is None or int(f.year) > prev[0]:
                    latest[(f.s, f.p)] = (int(f.year), o)
                continue
            # an entity value with a date (an award) also gets its direct triple, as in Wikidata
        lines.append(f"<{s}> <{wdt}{pid}> {o} .")
        if f.p in SYMMETRIC:
            lines.append(f"<{sch.iri(f.o)}> <{wdt}{pid}> <{s}> .")
    for (skey, p), (_, o) in sorted(latest.items()):
        lines.append(f"<{sch.iri(skey)}> <{wdt}{PROPERTIES[p][0]}> {o} .")
    return lines


FB_NAME = BASE + "fb/type.object.name"  # noqa: E305
FB_DESC = BASE + "fb/common.topic.description"
FB_ALIAS = BASE + "fb/common.topic.alias"
FB_TYPE = BASE + "fb/type.object.type"


def to_freebase(src: Source, sch: Schema) -> list[str]:
    ns = sch.relation_ns
    lines = []
    for e in src.entities.values():
        s = sch.iri(e.key)
        lines.append(f"<{s}> <{FB_NAME}> {_lit(e.label)} .")
        lines.append(f"<{s}> <{FB_DESC}> {_lit(e.description)} .")
        lines.extend(f"<{s}> <{FB_ALIAS}> {_lit(a)} ." for a in e.aliases)
        lines.append(f"<{s}> <{FB_TYPE}> <{ns}type.{e.cls}> .")
    for i, f in enumerate(src.facts):
        _, rel, cvt, literal = PROPERTIES[f.p]
        s = sch.iri(f.s)
        o = _num(f.o) if literal else f"<{sch.iri(f.o)}>"
        if cvt:
            to_cvt, to_value, to_year = cvt
            node = f"{sch.entity_ns}m.cvt{sch.ids[f.s][3:]}{i}"
            lines.append(f"<{s}> <{ns}{to_cvt}> <{node}> .")
            lines.append(f"<{node}> <{ns}{to_value}> {o} .")
            if to_year and f.year:
                lines.append(f"<{node}> <{ns}{to_year}> {_num(f.year)} .")
        else:
            lines.append(f"<{s}> <{ns}{rel}> {o} .")
            if f.p in SYMMETRIC:
                lines.append(f"<{sch.iri(f.o)}> <{ns}{rel}> <{s}> .")
    return lines


def ontology(wd: Schema) -> list[str]:
    """Classes and relation labels for both schemas (loaded beside either graph)."""
    lines = []
    for prop, (pid, rel, cvt, _) in PROPERTIES.items():
        words = prop.replace("_", " ").replace(" km2", " (km²)").replace(" km", " (km)").replace(" m", " (m)")
        lines.append(f"<{BASE}wd/prop/direct/{pid}> <{RDFS_LABEL}> {_lit(words)} .")
        lines.append(f"<{BASE}wd/prop/{pid}> <{RDFS_LABEL}> {_lit(words + ' (statement)')} .")
        lines.append(f"<{BASE}wd/prop/statement/{pid}> <{RDFS_LABEL}> {_lit(words)} .")
        for r in ([rel] if rel else []) + (list(x for x in cvt if x) if cvt else []):
            lines.append(f"<{BASE}fb/{r}> <{FB_NAME}> {_lit(r)} .")
    lines.append(f"<{BASE}wd/prop/direct/{INSTANCE_OF}> <{RDFS_LABEL}> \"instance of\" .")
    lines.append(f"<{BASE}wd/prop/qualifier/{POINT_IN_TIME}> <{RDFS_LABEL}> \"point in time\" .")
    for c in CLASSES:
        lines.append(f"<{BASE}fb/type.{c}> <{FB_NAME}> {_lit(c.replace('_', ' '))} .")
    return lines


# --------------------------------------------------------------------------------------------
# Logical forms → SPARQL for either schema
# --------------------------------------------------------------------------------------------
def _hop(schema: str, prop: str, a: str, b: str, fresh) -> str:
    """A triple pattern walking ``prop`` from ``a`` to ``b`` (``^prop``: backwards)."""
    inverse = prop.startswith("^")
    prop = prop.lstrip("^")
    pid, rel, cvt, _ = PROPERTIES[prop]
    if inverse:
        a, b = b, a
    if schema == "wikidata":  # direct ("truthy") triples; for dated literals that is the latest value
        return f"{a} <{BASE}wd/prop/direct/{pid}> {b} ."
    ns = BASE + "fb/"
    if cvt:
        node = fresh()
        return f"{a} <{ns}{cvt[0]}> {node} . {node} <{ns}{cvt[1]}> {b} ."
    return f"{a} <{ns}{rel}> {b} ."


def schema_path(path: list[str], schema: str) -> list[str]:
    """A schema-neutral relation path (``["^starred_actors", "directed_by"]``) in one schema's relations.

    Wikidata-like: one ``P`` id per hop. Freebase-like: a hop through a CVT becomes two relations
    (``starred_actors`` → ``film.film.starring``, ``film.performance.actor``); ``^`` reverses both.
    """
    out: list[str] = []
    for prop in path:
        inverse = prop.startswith("^")
        pid, rel, cvt, _ = PROPERTIES[prop.lstrip("^")]
        if schema == "wikidata":
            hops = [pid]
        elif schema == "freebase":
            hops = [cvt[0], cvt[1]] if cvt else [rel]
        else:
            raise ValueError("schema must be 'wikidata' or 'freebase'")
        out += ["^" + h for h in reversed(hops)] if inverse else hops
    return out


def _label_pred(schema: str) -> str:
    return RDFS_LABEL if schema == "wikidata" else FB_NAME


def sparql(form: dict[str, Any], schema: Schema) -> str:
    """Gold SPARQL for a logical form. Forms:

    * ``{"type": "path", "topic": KEY, "path": [PROP, ...]}`` — answers at the end of the path
      (``^PROP`` walks backwards; the topic entity is excluded from the answers);
    * ``{"type": "count", ...path form...}`` — the number of distinct answers;
    * ``{"type": "argmax"|"argmin", ...path form..., "attr": PROP}`` — the answer with the
      largest/smallest numeric ``attr``;
    * ``{"type": "compare", "entities": [KEY, ...], "attr": PROP, "order": "max"|"min"}``.
    * ``{"type": "value_at", "topic": KEY, "attr": PROP, "year": YEAR}`` — a dated value (a number,
      or the label of a dated entity value such as an award).
    """
    n = [0]

    def fresh() -> str:
        n[0] += 1
        return f"?v{n[0]}"

    kind = form["type"]
    label = _label_pred(schema.name)
    if kind in ("path", "count", "argmax", "argmin"):
        topic = f"<{schema.iri(form['topic'])}>"
        cur, body = topic, []
        for i, prop in enumerate(form["path"]):
            nxt = "?x" if i == len(form["path"]) - 1 else f"?h{i}"
            body.append(_hop(schema.name, prop, cur, nxt, fresh))
            body.append(f"FILTER({nxt} != {topic})")  # MetaQA's rule: the topic is excluded at every hop
            cur = nxt
        if kind == "count":
            return f"SELECT (COUNT(DISTINCT ?x) AS ?answer) WHERE {{ {' '.join(body)} }}"
        if kind in ("argmax", "argmin"):
            body.append(_hop(schema.name, form["attr"], "?x", "?val", fresh))
            order = "DESC(?val)" if kind == "argmax" else "ASC(?val)"
            return (f"SELECT ?answer WHERE {{ {' '.join(body)} ?x <{label}> ?answer . }} "
                    f"ORDER BY {order} LIMIT 1")
        return f"SELECT DISTINCT ?answer WHERE {{ {' '.join(body)} OPTIONAL {{ ?x <{label}> ?l }} BIND(COALESCE(?l, STR(?x)) AS ?answer) }}"
    if kind == "compare":
        values = " ".join(f"<{schema.iri(k)}>" for k in form["entities"])
        order = "DESC(?val)" if form.get("order", "max") == "max" else "ASC(?val)"
        return (f"SELECT ?answer WHERE {{ VALUES ?x {{ {values} }} {_hop(schema.name, form['attr'], '?x', '?val', fresh)} "
                f"?x <{label}> ?answer . }} ORDER BY {order} LIMIT 1")
    if kind == "value_at":
        topic = f"<{schema.iri(form['topic'])}>"
        pid, _, cvt, literal = PROPERTIES[form["attr"]]
        value = "?answer" if literal else "?value"
        name = "" if literal else f" {value} <{label}> ?answer ."
        if schema.name == "wikidata":
            return (f"SELECT ?answer WHERE {{ {topic} <{BASE}wd/prop/{pid}> ?st . ?st <{BASE}wd/prop/statement/{pid}> {value} ; "
                    f"<{BASE}wd/prop/qualifier/{POINT_IN_TIME}> {int(form['year'])} .{name} }}")
        ns = BASE + "fb/"
        return (f"SELECT ?answer WHERE {{ {topic} <{ns}{cvt[0]}> ?c . ?c <{ns}{cvt[1]}> {value} ; "
                f"<{ns}{cvt[2]}> {int(form['year'])} .{name} }}")
    raise ValueError(f"unknown logical form type {kind!r}")


# --------------------------------------------------------------------------------------------
# The built files (loaded as graphs by kgqa_lib.kg.sources.load_miniworld_kg)
# --------------------------------------------------------------------------------------------
def out_dir() -> Path:
    return data_dir() / "miniworld"
