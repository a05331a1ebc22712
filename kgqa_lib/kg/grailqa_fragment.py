"""One shared Freebase-schema fragment built from the gold facts of every GrailQA question.

The per-question slices of :mod:`kgqa_lib.data.grailqa` hand retrieval a graph that holds little more
than the question's own answer (an *oracle* setting, KG ``grailqa``). Here the gold facts of all
questions of the sample — every question, literals, comparatives and superlatives included — go
into ONE graph (KG ``grailqa-fragment``), so a question's facts must be found among everyone
else's. The facts of one question, from its ``graph_query`` and ``answer``:

- each entity node: its name and class; each answer: its name, the question node's class, and the
  edges of the query with the question node replaced by the answer;
- an intermediate class node (a CVT) becomes one unnamed node of that question;
- a literal node becomes a typed value written as GrailQA's own SPARQL writes it (dates in
  Freebase's ``-08:00``); a comparative's literal (``le``/``lt``/``ge``/``gt``) gets a value that
  satisfies it (the bound, or one unit past it for a strict comparison); a superlative's attribute
  gets the same value for every answer (GrailQA returns all tied answers);
- a COUNT question gets that many instances of the counted class.

WebQSP (``webqsp/WebQSP_GraSP_subset.json``, the only WebQSP file with parses: topic entity,
inferential chain, constraints, answers) adds its facts too: ``topic → r → answer`` for one-hop
chains, ``topic → r1 → cvt → r2 → answer`` for two-hop ones, and entity constraints on the node
they name. (``WebQSP_AoG_test_names.json`` holds answer names only, no facts.)

Every question's gold answers are then **recomputed** by running its gold SPARQL on the fragment
(shared facts can add answers); questions whose gold query returns nothing are dropped and counted.
The built store and the recomputed answers are cached on disk under the user cache, in a folder
keyed by a hash of the input files and of :data:`FRAGMENT_VERSION`.

GrailQA-Tech (the paper's target of W→GI-T, FuSIC-KBQA appendix A.4: "computer, medicine,
astronomy, biology, spaceflight") is :data:`TECH_DOMAINS`: the paper's five domains plus the other
science/engineering domains of this sample (the paper's five hold only ~100 questions here).

Importing this module adds its question sets (``grailqa:fragment``, ``:fragment-tech``,
``:fragment-nontech``) to the data layer's GrailQA parts (:data:`kgqa_lib.data.grailqa.PARTS`).
``python -m kgqa_lib.kg.grailqa_fragment`` prints the sizes.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..data import grailqa
from ..data.datasets import Dataset, DatasetNotFound, Question
from ..data.grailqa import FB, NAME, TYPE, _raw, grailqa_file
from ..text import answer_set

FRAGMENT_VERSION = "1"  # bump when the facts a question contributes change (rebuilds every cache)
KG_NAME = "grailqa-fragment"
XSD = "http://www.w3.org/2001/XMLSchema#"
FREEBASE_TZ = "-08:00"
PAPER_TECH_DOMAINS = ("computer", "medicine", "astronomy", "biology", "spaceflight")  # FuSIC-KBQA, appendix A.4
TECH_DOMAINS = PAPER_TECH_DOMAINS + ("engineering", "physics", "chemistry", "geology", "meteorology", "internet",
                                     "digicams")
WEBQSP_FILE = "webqsp/WebQSP_GraSP_subset.json"
_NO_TZ = ("integer", "int", "float", "double", "decimal", "dateTime")


# ---------------------------------------------------------------------------------------------
# Facts
# ---------------------------------------------------------------------------------------------
def _iri(local: str) -> str:
    return f"<{FB}{local}>"


def _name(s: str, name: str) -> str:
    return f"{_iri(s)} <{NAME}> {json.dumps(name, ensure_ascii=False)} ."


def _split_literal(lit: str) -> tuple[str, str]:
    value, _, dtype = lit.partition("^^")
    return value, dtype or XSD + "string"


def typed_literal(value: str, dtype: str) -> str:
    """As GrailQA's SPARQL writes it: ``"2008-05-08-08:00"^^<…#date>`` (dates in Freebase's timezone)."""
    local = re.split(r"[#/]", dtype)[-1]
    if local not in _NO_TZ and not re.search(r"(Z|[+-]\d\d:\d\d)$", value):
        value += FREEBASE_TZ
    return f"{json.dumps(value)}^^<{dtype}>"


def _shift(value: str, dtype: str, step: int) -> str:
    """``value`` moved one unit (a day, a year, 1) in the direction of ``step`` (a strict comparison)."""
    local = re.split(r"[#/]", dtype)[-1]
    try:
        if local in ("integer", "int"):
            return str(int(value) + step)
        if local in ("float", "double", "decimal"):
            return repr(float(value) + step)
        if local == "date":
            return (_dt.date.fromisoformat(value[:10]) + _dt.timedelta(days=step)).isoformat()
        if local == "gYear":
            return f"{int(value[:4]) + step:04d}"
        if local == "gYearMonth":
            y, m = int(value[:4]), int(value[5:7]) + step
            y, m = (y + (m - 1) // 12, (m - 1) % 12 + 1)
            return f"{y:04d}-{m:02d}"
        if local == "dateTime":
            return (_dt.datetime.fromisoformat(value) + _dt.timedelta(days=step)).isoformat()
    except ValueError:
        pass
    return value


_ARG_VALUE = {"type.datetime": ("2000-01-01", XSD + "date"), "type.int": ("1", XSD + "integer"),
              "type.float": ("1.0", XSD + "float")}


def _literal_node(n: dict[str, Any]) -> str:
    fn = n.get("function", "none")
    if fn in ("argmax", "argmin"):  # the ranked attribute: one value for every answer (all tie)
        value, dtype = _ARG_VALUE.get(n["class"], ("1", XSD + "integer"))
        return typed_literal(value, dtype)
    value, dtype = _split_literal(n["id"])
    if fn in (">", "<"):
        value = _shift(value, dtype, 1 if fn == ">" else -1)
    return typed_literal(value, dtype)


def question_facts(raw: dict[str, Any]) -> set[str]:
    """The N-Triples lines of one GrailQA question's gold facts (see the module docstring)."""
    gq, qid = raw["graph_query"], raw["qid"]
    nodes = {n["nid"]: n for n in gq["nodes"]}
    qnode = next(n for n in gq["nodes"] if n["question_node"] == 1)
    lines: set[str] = set()
    for n in gq["nodes"]:
        if n["node_type"] == "entity":
            lines |= {_name(n["id"], n["friendly_name"]), f"{_iri(n['id'])} <{TYPE}> {_iri(n['class'])} ."}
    if raw["function"] == "count":
        k = int(raw["answer"][0]["answer_argument"]) if raw["answer"] and raw["answer"][0]["answer_argument"].isdigit() else 1
        answers = [(f"m.kgqa_count_{qid}_{i}", f"{qnode['friendly_name']} {i + 1}") for i in range(k)]
    else:
        answers = [(a["answer_argument"], a.get("entity_name") or a["answer_argument"]) for a in raw["answer"]]
    terms: dict[int, str] = {}
    for nid, n in nodes.items():
        if n is qnode:
            continue
        if n["node_type"] == "entity":
            terms[nid] = _iri(n["id"])
        elif n["node_type"] == "literal":
            terms[nid] = _literal_node(n)
        else:  # an intermediate class node: one unnamed node of this question
            terms[nid] = _iri(f"m.kgqa_cvt_{qid}_{nid}")
            lines.add(f"{terms[nid]} <{TYPE}> {_iri(n['class'])} .")
    for aid, name in answers:
        lines |= {_name(aid, name), f"{_iri(aid)} <{TYPE}> {_iri(qnode['class'])} ."}
        for e in gq["edges"]:
            s, o = (_iri(aid) if nodes[x] is qnode else terms[x] for x in (e["start"], e["end"]))
            if not s.startswith("<"):
                continue  # a literal cannot be a subject
            lines.add(f"{s} {_iri(e['relation'])} {o} .")
    return lines


def webqsp_facts(raw: dict[str, Any]) -> set[str]:
    """A WebQSP parse's facts: topic → chain → answers (a two-hop chain through one unnamed node),
    plus the constraints that name an entity or a value."""
    lines: set[str] = set()
    parse = (raw.get("Parses") or [{}])[0]
    topic, chain = parse.get("TopicEntityMid"), parse.get("InferentialChain") or []
    if not topic or not 1 <= len(chain) <= 2:
        return lines
    lines.add(_name(topic, parse.get("TopicEntityName") or topic))
    cvt = _iri(f"m.kgqa_wq_{re.sub(r'[^A-Za-z0-9_]', '_', raw['QuestionId'])}")
    hop_nodes = [_iri(topic)] + ([cvt] if len(chain) == 2 else [])
    for a in parse.get("Answers") or []:
        arg = a.get("AnswerArgument", "")
        if a.get("AnswerType") == "Entity":
            ans = _iri(arg)
            lines.add(_name(arg, a.get("EntityName") or arg))
        else:
            ans = json.dumps(arg, ensure_ascii=False)
        path = hop_nodes + [ans]
        for rel, s, o in zip(chain, path, path[1:]):
            lines.add(f"{s} {_iri(rel)} {o} .")
        for c in parse.get("Constraints") or []:
            if c.get("Operator") != "Equal" or not c.get("NodePredicate"):
                continue
            node = (hop_nodes + [ans])[min(int(c.get("SourceNodeIndex", 0)) + 1, len(hop_nodes))]
            if not node.startswith("<"):
                continue
            if c.get("ArgumentType") == "Entity":
                obj = _iri(c["Argument"])
                lines.add(_name(c["Argument"], c.get("EntityName") or c["Argument"]))
            else:
                obj = json.dumps(str(c.get("Argument", "")), ensure_ascii=False)
            lines.add(f"{node} {_iri(c['NodePredicate'])} {obj} .")
    return lines


# ---------------------------------------------------------------------------------------------
# The built fragment (cached on disk)
# ---------------------------------------------------------------------------------------------
def _webqsp_file() -> Path | None:
    from ..paths import external_data_dir

    root = external_data_dir()
    path = root / WEBQSP_FILE if root else None
    return path if path and path.exists() else None


def _inputs() -> list[Path]:
    return [grailqa_file()] + ([p] if (p := _webqsp_file()) else [])


def input_hash() -> str:
    h = hashlib.sha256(f"fragment-v{FRAGMENT_VERSION}\n".encode())
    for p in _inputs():
        h.update(p.name.encode() + b"\n" + p.read_bytes())
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    from ..paths import user_cache_dir

    return user_cache_dir() / "kg" / f"{KG_NAME}-{input_hash()}"


def _write_atomic(path: Path, text: str) -> None:
    import os

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _ntriples_file(folder: Path) -> Path:
    path = folder / "fragment.nt"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        lines: set[str] = set()
        for raw in _raw():
            lines |= question_facts(raw)
        if (wq := _webqsp_file()) is not None:
            for raw in json.loads(wq.read_text(encoding="utf-8")):
                lines |= webqsp_facts(raw)
        _write_atomic(path, "\n".join(sorted(lines)) + "\n")
    return path


@lru_cache(maxsize=1)
def load_fragment_kg():
    """The fragment as an embedded KG (built once, then reopened from the user cache)."""
    from .graph import load_rdf

    folder = cache_dir()
    return load_rdf(_ntriples_file(folder), store_dir=folder / "store", namespace=FB, name=KG_NAME, entity_ns=FB,
                    relation_ns=FB, label_predicate=NAME, alias_predicate=FB + "common.topic.alias",
                    description_predicate=FB + "common.topic.description")


_FB_PNAME = re.compile(r'("(?:[^"\\]|\\.)*")|(?<![\w<?$:/#.-])(?:ns)?:([A-Za-z0-9_][\w.\-]*[\w\-]|[A-Za-z0-9_])')


def expand_freebase(sparql: str) -> str:
    """``ns:film.film.directed_by`` and GrailQA's ``:film.film.directed_by`` as full IRIs (pyoxigraph
    0.5 rejects a local name with two dots), their PREFIX lines dropped; strings left alone."""
    sparql = re.sub(r"PREFIX\s+(?:ns)?:\s*<http://rdf\.freebase\.com/ns/>\s*", "", sparql, flags=re.I)
    return _FB_PNAME.sub(lambda m: m.group(1) or f"<{FB}{m.group(2)}>", sparql)


def webqsp_sparql(sparql: str) -> str:
    """WebQSP's Virtuoso SPARQL in standard SPARQL 1.1: ``OR``/``AND`` in filters as ``||``/``&&``,
    ``xsd:datetime(…)`` as ``xsd:dateTime(…)``, and ``xsd:`` declared when used."""
    out = re.sub(r'("(?:[^"\\]|\\.)*")|\bOR\b|\bAND\b',
                 lambda m: m.group(1) or ("||" if m.group(0) == "OR" else "&&"), sparql)
    out = out.replace("xsd:datetime(", "xsd:dateTime(")
    if "xsd:" in out and "PREFIX xsd:" not in out:
        out = "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n" + out
    return out


def run_trusted(kg, sparql: str) -> list[str]:
    """Run a query we wrote or the dataset ships (not an LLM's) directly on the store: the values
    of its first variable (IRIs or literal values)."""
    import pyoxigraph as ox

    from .graph import GRAPH_IRI

    res = kg.store.query(expand_freebase(sparql), default_graph=ox.NamedNode(GRAPH_IRI))
    var = res.variables[0]
    return [row[var].value for row in res if row[var] is not None]


def _answers_of(kg, values: list[str]) -> tuple[list[str], list[str]]:
    ids, names = [], []
    for v in dict.fromkeys(values):
        ids.append(v[len(FB):] if v.startswith(FB) else v)
        names.append(kg.label(v) if "://" in v else v)
    return list(dict.fromkeys(names)), ids


@lru_cache(maxsize=1)
def recomputed_gold() -> dict[str, Any]:
    """``{"answers": {qid: {"answers", "answer_ids"}}, "dropped": [qid, …], "webqsp": {…}}``: every
    question's gold SPARQL run on the fragment (cached next to the store)."""
    folder = cache_dir()
    path = folder / "gold.json"
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    kg = load_fragment_kg()
    out: dict[str, Any] = {"answers": {}, "dropped": [], "webqsp": {}, "webqsp_dropped": []}
    for raw in _raw():
        qid = f"grailqa-{raw['qid']}"
        try:
            values = run_trusted(kg, raw["sparql_query"])
        except (SyntaxError, ValueError, OSError, RuntimeError):
            values = []
        if not values or values == ["0"]:
            out["dropped"].append(qid)
            continue
        names, ids = _answers_of(kg, values)
        out["answers"][qid] = {"answers": names, "answer_ids": ids}
    if (wq := _webqsp_file()) is not None:
        for raw in json.loads(wq.read_text(encoding="utf-8")):
            sparql = webqsp_sparql(((raw.get("Parses") or [{}])[0]).get("Sparql", ""))
            try:
                values = run_trusted(kg, sparql) if sparql else []
            except (SyntaxError, ValueError, OSError, RuntimeError):
                values = []
            if values:
                names, ids = _answers_of(kg, values)
                out["webqsp"][raw["QuestionId"]] = {"answers": names, "answer_ids": ids}
            else:
                out["webqsp_dropped"].append(raw["QuestionId"])
    _write_atomic(path, json.dumps(out, ensure_ascii=False, indent=0))
    return out


# ---------------------------------------------------------------------------------------------
# Questions
# ---------------------------------------------------------------------------------------------
def is_tech(domains: list[str]) -> bool:
    return any(d in TECH_DOMAINS for d in domains)


@lru_cache(maxsize=4)
def load_fragment(part: str = "fragment") -> Dataset:
    """``grailqa:fragment`` (every kept question), ``grailqa:fragment-tech`` (GrailQA-Tech: a
    domain in :data:`TECH_DOMAINS`), ``grailqa:fragment-nontech`` (the rest); answers recomputed on
    the fragment, the dataset's own answers kept as ``metadata["dataset_answers"]``."""
    if part not in ("fragment", "fragment-tech", "fragment-nontech"):
        raise DatasetNotFound(f"unknown GrailQA part {part!r}: use dev (oracle slices), fragment, fragment-tech "
                              "or fragment-nontech")
    gold = recomputed_gold()["answers"]
    qs = []
    for raw in _raw():
        qid = f"grailqa-{raw['qid']}"
        domains = raw.get("domains", [])
        if qid not in gold or (part == "fragment-tech" and not is_tech(domains)) or \
                (part == "fragment-nontech" and is_tech(domains)):
            continue
        nodes = raw["graph_query"]["nodes"]
        qs.append(Question(
            qid=qid, question=raw["question"], answers=list(gold[qid]["answers"]),
            topic_entities=[n["friendly_name"] for n in nodes if n["node_type"] == "entity"],
            gold_query={"s_expression": raw["s_expression"], "sparql": raw["sparql_query"]},
            metadata={"graph_query": raw["graph_query"], "answer_ids": list(gold[qid]["answer_ids"]),
                      "dataset_answers": [a.get("entity_name") or a["answer_argument"] for a in raw["answer"]],
                      "function": raw["function"], "level": raw.get("level"), "domains": domains,
                      "topic_ids": [n["id"] for n in nodes if n["node_type"] == "entity"], "profile": "freebase"},
        ))
    return Dataset(f"grailqa:{part}", qs, kg=KG_NAME, source_files=_inputs())


for _part in ("fragment", "fragment-tech", "fragment-nontech"):  # grailqa:fragment… (the data layer's table)
    grailqa.PARTS[_part] = load_fragment


@dataclass
class FragmentStats:
    triples: int
    entities_named: int
    relations: int
    questions: int
    kept: int
    dropped: list[str]
    same_as_dataset: int
    webqsp_kept: int = 0
    webqsp_dropped: list[str] = field(default_factory=list)
    domains_kept: dict[str, int] = field(default_factory=dict)
    tech: int = 0
    nontech: int = 0


def stats() -> FragmentStats:
    kg, gold = load_fragment_kg(), recomputed_gold()
    ds = load_fragment("fragment")
    same = sum(answer_set(q.answers) == answer_set(q.metadata["dataset_answers"]) for q in ds)
    rels = {line.split(" ", 2)[1] for line in _ntriples_file(cache_dir()).read_text(encoding="utf-8").splitlines() if line}
    dom = Counter(d for q in ds for d in q.metadata["domains"])
    tech = sum(is_tech(q.metadata["domains"]) for q in ds)
    return FragmentStats(len(kg), sum(1 for _ in kg._label_pairs(NAME)), len(rels), len(_raw()), len(ds),
                         gold["dropped"], same, len(gold["webqsp"]), gold["webqsp_dropped"], dict(dom.most_common()),
                         tech, len(ds) - tech)


def main() -> None:  # python -m kgqa_lib.kg.grailqa_fragment
    s = stats()
    print(f"fragment: {cache_dir()}")
    print(f"triples {s.triples:,} · named entities {s.entities_named:,} · relations {s.relations:,}")
    print(f"GrailQA questions {s.questions}: kept {s.kept} (gold SPARQL answers on the fragment), dropped "
          f"{len(s.dropped)} (gold query returns nothing){': ' + ', '.join(s.dropped[:20]) if s.dropped else ''}")
    print(f"recomputed answers equal the dataset's for {s.same_as_dataset}/{s.kept}")
    print(f"WebQSP parses (GraSP subset): kept {s.webqsp_kept}, dropped {len(s.webqsp_dropped)}")
    print(f"GrailQA-Tech ({', '.join(TECH_DOMAINS)}): {s.tech} · non-tech (source): {s.nontech}")
    print("per domain (kept): " + ", ".join(f"{d} {n}" for d, n in s.domains_kept.items()))


if __name__ == "__main__":
    main()
