"""Loaders for the Freebase/Wikidata benchmarks, read through ``$KGQA_DATA_DIR`` (never copied
into the repository): QALD-10 (the QALD JSON and ToG's 333-question English subset),
SimpleQuestions (ToG's 1,000), WebQSP (test names; the 100 with original parses). GrailQA lives in
:mod:`kgqa_lib.data.grailqa`.

Every question carries its topic entities' ids in ``metadata["topic_ids"]`` (Wikidata QIDs or
Freebase mids) and its KG profile in ``metadata["profile"]`` — what
:mod:`kgqa_lib.kg.slices` needs to cut a per-question KG slice from an endpoint.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from .datasets import Dataset, DatasetNotFound, Question, _external_root, register
from ..paths import external_data_dir

WHERE = {
    "qald10": ("qald10", "QALD-10 (KGQA/QALD-10 on GitHub, MIT): qald_10.json; ToG's English subset "
                         "qald_10-en_ToG_333.json is in the ToG repository (Apache-2.0)"),
    "simplequestions": ("simplequestions", "SimpleQuestions as sampled by ToG: SimpleQA_ToG_1000.json (ToG repository)"),
    "webqsp": ("webqsp", "WebQSP test questions with answer names (WebQSP_AoG_test_names.json) and the original "
                         "parses (WebQSP_GraSP_subset.json)"),
}


def _file(bench: str, name: str) -> Path:
    folder, what = WHERE[bench]
    if external_data_dir() is None and not os.environ.get("KGQA_DATA_DIR"):
        raise DatasetNotFound(f"{bench} needs KGQA_DATA_DIR (unset): set it to the folder holding {folder}/{name}. "
                              f"Source: {what}.")
    root = _external_root(bench, f"Source: {what}.")
    path = root / folder / name
    if not path.exists():
        raise DatasetNotFound(f"{path} is missing (KGQA_DATA_DIR={root}). Source: {what}.")
    return path


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


_WD = re.compile(r"\bwd:(Q\d+)\b|<http://www\.wikidata\.org/entity/(Q\d+)>")


def load_qald10(part: str = "tog", split: str | None = None) -> Dataset:
    """``qald10:tog`` — ToG's 333 English questions (topic QIDs and answer labels given);
    ``qald10:full`` — every QALD-10 question with an English string: answers are the gold bindings
    (QIDs or literal values; booleans as ``true``/``false``), topic QIDs are the ``wd:`` entities of
    the gold query."""
    if part == "tog":
        path = _file("qald10", "qald_10-en_ToG_333.json")
        qs = [Question(qid=f"qald10-tog-{i}", question=r["question"], answers=list(r["answer"].values()),
                       topic_entities=list(r["qid_topic_entity"].values()), gold_query={"sparql": r["sparql"]},
                       metadata={"topic_ids": list(r["qid_topic_entity"]), "answer_ids": list(r["answer"]),
                                 "profile": "wikidata"})
              for i, r in enumerate(_read(path))]
        return Dataset("qald10:tog", qs, kg="wikidata", source_files=[path])
    if part != "full":
        raise ValueError("qald10 parts: tog | full")
    path = _file("qald10", "qald_10.json")
    qs = []
    for r in _read(path)["questions"]:
        text = next((x["string"] for x in r["question"] if x.get("language") == "en"), "")
        if not text:
            continue
        answers: list[str] = []
        for a in r.get("answers", []):
            if "boolean" in a:
                answers.append(str(a["boolean"]).lower())
            for b in a.get("results", {}).get("bindings", []):
                for v in b.values():
                    answers.append(v["value"].rsplit("/", 1)[-1] if v.get("type") == "uri" else v["value"])
        sparql = r.get("query", {}).get("sparql", "")
        topic = list(dict.fromkeys(m.group(1) or m.group(2) for m in _WD.finditer(sparql)))
        qs.append(Question(qid=f"qald10-{r['id']}", question=text, answers=list(dict.fromkeys(answers)),
                           topic_entities=topic, gold_query={"sparql": sparql},
                           metadata={"topic_ids": topic, "profile": "wikidata", "answer_ids": answers}))
    return Dataset("qald10:full", qs, kg="wikidata", source_files=[path])


def load_simplequestions(part: str = "tog", split: str | None = None) -> Dataset:
    """``simplequestions:tog`` — ToG's 1,000 SimpleQuestions (Freebase mids, one relation each)."""
    if part != "tog":
        raise ValueError("simplequestions parts: tog")
    path = _file("simplequestions", "SimpleQA_ToG_1000.json")
    qs = [Question(qid=f"sq-tog-{i}", question=r["question"], answers=[r["answer"]] if isinstance(r["answer"], str) else list(r["answer"]),
                   topic_entities=list(r["topic_entity"].values()), gold_query={"relation": r.get("relation", "")},
                   metadata={"topic_ids": list(r["topic_entity"]), "profile": "freebase"})
          for i, r in enumerate(_read(path))]
    return Dataset("simplequestions:tog", qs, kg="freebase", source_files=[path])


def load_webqsp(part: str = "test", split: str | None = None) -> Dataset:
    """``webqsp:test`` — all 1,639 test questions with answer names; ``webqsp:grasp`` — 100 with the
    original parses (SPARQL, inferential chain, topic mid)."""
    if part == "test":
        path = _file("webqsp", "WebQSP_AoG_test_names.json")
        qs = [Question(qid=r["QuestionId"], question=r["RawQuestion"], answers=list(r["answer"]),
                       topic_entities=list(r["topic_entity"].values()),
                       metadata={"topic_ids": list(r["topic_entity"]), "profile": "freebase"})
              for r in _read(path)]
        return Dataset("webqsp:test", qs, kg="freebase", source_files=[path])
    if part != "grasp":
        raise ValueError("webqsp parts: test | grasp")
    path = _file("webqsp", "WebQSP_GraSP_subset.json")
    qs = []
    for r in _read(path):
        parse = (r.get("Parses") or [{}])[0]
        answers = [a.get("EntityName") or a.get("AnswerArgument", "") for a in parse.get("Answers", [])]
        mid = parse.get("TopicEntityMid")
        qs.append(Question(qid=r["QuestionId"], question=r["RawQuestion"], answers=[a for a in answers if a],
                           topic_entities=[parse.get("TopicEntityName", "")] if mid else [],
                           gold_query={"sparql": parse.get("Sparql", ""),
                                       "path": " → ".join(parse.get("InferentialChain") or [])},
                           metadata={"topic_ids": [mid] if mid else [], "profile": "freebase",
                                     "answer_ids": [a.get("AnswerArgument") for a in parse.get("Answers", [])]}))
    return Dataset("webqsp:grasp", qs, kg="freebase", source_files=[path])


def topic_ids(q: Question) -> list[str]:
    """The topic entities' ids (QIDs / mids) of a benchmark question (GrailQA: its graph query's
    entity nodes)."""
    if q.metadata.get("topic_ids"):
        return list(q.metadata["topic_ids"])
    gq = q.metadata.get("graph_query")
    if gq:
        return [n["id"] for n in gq["nodes"] if n.get("node_type") == "entity"]
    return []


# Freebase/Wikidata benchmarks (KGQA_DATA_DIR): ``qald10:tog|full``, ``simplequestions:tog``, ``webqsp:test|grasp``
register("qald10", lambda part="tog", split=None: load_qald10(part))
register("simplequestions", lambda part="tog", split=None: load_simplequestions(part))
register("webqsp", lambda part="test", split=None: load_webqsp(part))
