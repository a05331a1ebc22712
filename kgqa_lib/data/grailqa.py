"""GrailQA offline: questions, and the facts of small answer-bearing Freebase-schema KG slices.

No Freebase is available offline, but each GrailQA question's ``graph_query`` (entity and class
nodes with ids and names, edges with real Freebase relations) and ``answer`` (ids and names) hold
its gold facts. :func:`slice_rows` turns one question into those facts — answers typed with the
question node's class and joined to the topic entities by the gold relations (an intermediate class
node becomes an unnamed node, walked through like a CVT) — and :func:`question_ntriples` adds
*distractor* facts (relations and entities of other questions of the same domain attached to each
topic entity), so retrieval has wrong candidates to reject; the KG layer loads them as graphs
(:func:`kgqa_lib.kg.sources.grailqa_slice_kg`, KG ``grailqa``). The pipeline
then runs on real Freebase relation names (``theater.play.productions``); with a Freebase SPARQL
endpoint configured the same questions run on the real KB.

Questions with literal nodes or comparatives (about 2.5% of the ToG sample) are left out.
"""

from __future__ import annotations

import json
import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from .datasets import Dataset, DatasetNotFound, Question, register
from ..paths import external_data_dir

FB = "http://rdf.freebase.com/ns/"
NAME, TYPE = FB + "type.object.name", FB + "type.object.type"
FILE = "grailqa/grailqa_ToG_1000.json"
DOWNLOAD = "GrailQA (ToG's 1,000-question dev sample, grailqa_ToG_1000.json) under $KGQA_DATA_DIR/grailqa/."
_ID = re.compile(r"^(?:[mg]\.[\w]+|[a-z][\w]*(?:\.[\w]+)+)$")


def grailqa_file() -> Path:
    root = external_data_dir()
    if root is None:
        raise DatasetNotFound(f"grailqa needs KGQA_DATA_DIR (unset). {DOWNLOAD}")
    path = root / FILE
    if not path.exists():
        raise DatasetNotFound(f"{path} not found. {DOWNLOAD}")
    return path


def usable(raw: dict[str, Any]) -> bool:
    nodes = raw["graph_query"]["nodes"]
    return raw.get("function") in ("none", "count") and all(n["node_type"] in ("class", "entity") for n in nodes) \
        and any(n["node_type"] == "entity" for n in nodes)


def with_prefix(sexpr: str) -> str:
    """GrailQA's bare ids (``theater.play``, ``m.0yrlqjm``) as ``ns:`` names, for :mod:`kgqa_lib.kg.sexpr`."""
    return re.sub(r"(?<=[\s(])([^\s()]+)", lambda m: "ns:" + m.group(1) if _ID.match(m.group(1)) and
                  m.group(1) not in ("R",) else m.group(1), sexpr)


def compact_sparql(sparql: str) -> str:
    """GrailQA's SPARQL with its default prefix ``:`` written as ``ns:`` (and the PREFIX lines dropped)."""
    body = re.sub(r"PREFIX\s+\w*:\s*<[^>]*>\s*", "", sparql)
    return re.sub(r"(?<![\w:<?])(:)(?=[A-Za-z])", "ns:", body).strip()


@lru_cache(maxsize=2)
def _raw() -> list[dict[str, Any]]:
    return json.loads(grailqa_file().read_text(encoding="utf-8"))


#: Other parts of ``grailqa:<part>`` than ``dev``: part → loader. The KG layer adds the fragment sets
#: (``fragment``, ``fragment-tech``, ``fragment-nontech``: :mod:`kgqa_lib.kg.grailqa_fragment`), whose
#: answers are recomputed on the graph built from every question's facts.
PARTS: dict[str, Any] = {}


def load_grailqa(part: str = "dev", split: str | None = None) -> Dataset:
    """The usable questions of ToG's GrailQA dev sample (``grailqa:dev``, asked against their own
    answer-bearing slices: the *oracle* setting, KG ``grailqa``). ``grailqa:fragment`` (and
    ``:fragment-tech`` / ``:fragment-nontech``): every question on ONE shared graph, KG
    ``grailqa-fragment`` (:data:`PARTS`, from :mod:`kgqa_lib.kg.grailqa_fragment`)."""
    if part in PARTS:
        return PARTS[part](part)
    if part != "dev":
        raise DatasetNotFound(f"unknown GrailQA part {part!r}: use dev (oracle slices), fragment, fragment-tech "
                              "or fragment-nontech" + ("" if PARTS else " (the fragment parts are registered by "
                                                        "importing kgqa_lib.kg.grailqa_fragment)"))
    qs = []
    for raw in _raw():
        if not usable(raw):
            continue
        nodes = raw["graph_query"]["nodes"]
        answers = [a.get("entity_name") or a["answer_argument"] for a in raw["answer"]]
        qs.append(Question(
            qid=f"grailqa-{raw['qid']}", question=raw["question"], answers=answers,
            topic_entities=[n["friendly_name"] for n in nodes if n["node_type"] == "entity"],
            gold_query={"s_expression": raw["s_expression"], "sparql": raw["sparql_query"]},
            metadata={"graph_query": raw["graph_query"], "answer_ids": [a["answer_argument"] for a in raw["answer"]],
                      "function": raw["function"], "level": raw.get("level"), "domains": raw.get("domains", [])},
        ))
    return Dataset("grailqa:dev", qs, kg="grailqa", source_files=[grailqa_file()])



def slice_rows(q: Question, max_answers: int = 100) -> list[tuple[str, str, str, bool]]:
    """The gold facts of one question as (subject, relation, object, object is literal) IRIs."""
    gq = q.metadata["graph_query"]
    nodes = {n["nid"]: n for n in gq["nodes"]}
    qnode = next(n for n in gq["nodes"] if n["question_node"] == 1)
    rows: list[tuple[str, str, str, bool]] = []
    for n in gq["nodes"]:
        if n["node_type"] == "entity":
            rows += [(FB + n["id"], NAME, n["friendly_name"], True), (FB + n["id"], TYPE, FB + n["class"], False)]
    if q.metadata["function"] == "count":  # the answer is a number: make that many typed instances
        k = int(q.answers[0]) if q.answers and q.answers[0].isdigit() else 1
        answers = [(f"m.count_{q.qid.split('-')[-1]}_{i}", f"{qnode['friendly_name']} {i + 1}") for i in range(min(k, max_answers))]
    else:
        answers = list(zip(q.metadata["answer_ids"], q.answers))[:max_answers]
    mids = {nid: f"m.mid_{q.qid.split('-')[-1]}_{nid}" for nid, n in nodes.items()
            if n["node_type"] == "class" and n is not qnode}
    for mid_nid, mid in mids.items():
        rows.append((FB + mid, TYPE, FB + nodes[mid_nid]["class"], False))
    for aid, name in answers:
        rows += [(FB + aid, NAME, name, True), (FB + aid, TYPE, FB + qnode["class"], False)]
        for e in gq["edges"]:
            ends = []
            for nid in (e["start"], e["end"]):
                n = nodes[nid]
                ends.append(aid if n is qnode else n["id"] if n["node_type"] == "entity" else mids[nid])
            rows.append((FB + ends[0], FB + e["relation"], FB + ends[1], False))
    return rows


def _nt(s: str, p: str, o: str, literal: bool) -> str:
    obj = json.dumps(o, ensure_ascii=False) if literal else f"<{o}>"
    return f"<{s}> <{p}> {obj} ."


@lru_cache(maxsize=2)
def _relation_pool() -> dict[str, list[tuple[str, str]]]:
    """(relation, an entity it touches) of every usable question, by domain."""
    pool: dict[str, list[tuple[str, str]]] = {}
    for q in load_grailqa():
        gq = q.metadata["graph_query"]
        ents = [FB + n["id"] for n in gq["nodes"] if n["node_type"] == "entity"]
        for e in gq["edges"]:
            for d in q.metadata.get("domains") or ["_"]:
                pool.setdefault(d, []).append((FB + e["relation"], ents[0]))
    return pool


def question_ntriples(q: Question, distractors: int = 3, seed: int = 0) -> str:
    """One question's slice plus ``distractors`` facts per topic entity: relations of other
    questions of the same domain (never this question's own) pointing at their entities."""
    rows = set(slice_rows(q))
    own = {FB + e["relation"] for e in q.metadata["graph_query"]["edges"]}
    pool = [x for d in (q.metadata.get("domains") or ["_"]) for x in _relation_pool().get(d, []) if x[0] not in own]
    rng = random.Random(f"{seed}:{q.qid}")
    for n in q.metadata["graph_query"]["nodes"]:
        if n["node_type"] != "entity" or not pool:
            continue
        for rel, other in rng.sample(pool, min(distractors, len(pool))):
            if other != FB + n["id"]:
                rows.add((FB + n["id"], rel, other, False))
                rows.add((other, NAME, other.rsplit("/", 1)[-1], True))
    return "\n".join(_nt(*r) for r in sorted(rows)) + "\n"


register("grailqa", lambda part="dev", split=None: load_grailqa(part))
