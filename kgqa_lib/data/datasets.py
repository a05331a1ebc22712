"""Question records and the dataset registry.

A dataset spec is ``name:part:split`` (e.g. ``metaqa:2hop:dev``, ``tiny:films``) or a path to a
``.jsonl`` file of records. External benchmarks are found through ``$KGQA_DATA_DIR`` and are
never copied into the repository; the project's own sets live under ``data/``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import UserError
from ..paths import data_dir, external_data_dir


@dataclass
class Question:
    """One question, whatever benchmark it comes from."""

    qid: str
    question: str
    answers: list[str]  # gold answer labels
    topic_entities: list[str] = field(default_factory=list)  # labels (or ids) of the topic entities
    kind: str = "factoid"  # "factoid" (Hits@1/F1) or "open" (ROUGE-L against references)
    gold_query: dict[str, str] = field(default_factory=dict)  # e.g. {"sparql": ..., "path": ...}
    metadata: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Question":
        known = {k: d[k] for k in ("qid", "question", "answers", "topic_entities", "kind", "gold_query", "metadata") if k in d}
        return cls(**known)

    def __str__(self) -> str:
        return f"[{self.qid}] {self.question} → {' | '.join(self.answers)}"


class DatasetNotFound(FileNotFoundError):
    """A benchmark's files are missing; the message says where to get them."""


class DatasetError(UserError, ValueError):
    """A dataset spec or file that cannot be read as questions (unknown name, too many parts, a line
    that is not a question record); the message names the place and the expected form."""


def qid_rank_key(qid: str) -> bytes:
    """The order :meth:`Dataset.shard` deals questions in: sha256 of the qid (stable across
    processes, machines and Python versions, unlike ``hash()``), then the qid itself."""
    return hashlib.sha256(str(qid).encode("utf-8")).digest() + str(qid).encode("utf-8")


RECORD_FORM = '{"qid": "q1", "question": "who directed Inception", "answers": ["Christopher Nolan"]}'


@dataclass
class Dataset:
    name: str
    questions: list[Question]
    kg: str | None = None  # the name of the KG this dataset is asked against (see kgqa_lib.kg)
    source_files: list[Path] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.questions)

    def __iter__(self):
        return iter(self.questions)

    def __getitem__(self, i):
        return self.questions[i]

    def head(self, n: int | None) -> "Dataset":
        return Dataset(self.name, self.questions if n is None else self.questions[:n], self.kg, self.source_files)

    def sample(self, n: int | None, seed: int = 0) -> "Dataset":
        """A seeded random subset of ``n`` questions, kept in dataset order (None: all)."""
        if n is None or n >= len(self.questions):
            return self
        import random

        idx = sorted(random.Random(seed).sample(range(len(self.questions)), n))
        return Dataset(f"{self.name}", [self.questions[i] for i in idx], self.kg, self.source_files)

    def shard(self, index: int, count: int) -> "Dataset":
        """The questions of shard ``index`` of ``count`` (0-based), kept in dataset order: the
        questions are ranked by sha256 of their qid (:func:`qid_rank_key`) and dealt round-robin, so
        the shards differ in size by at most one question, and the partition depends on the set of
        qids only — not on their order, the machine or the Python version. ``count`` shards of one
        selection (``--sample``/``--limit`` are applied first) cover it exactly once. (Dealing by
        rank rather than ``hash % n`` keeps the shards even, which a cluster's wall time depends
        on; the price: adding questions to a dataset moves others between shards, so re-run every
        shard of a changed dataset. ``kgqa report`` states and ignores any duplicates.) The name is
        unchanged: a shard's records are the single run's records for those questions."""
        if not 0 <= index < count:
            raise DatasetError(f"shard {index}/{count} does not exist: use i/n with 0 ≤ i < n (e.g. 0/{count})")
        ranked = sorted(range(len(self.questions)), key=lambda i: (qid_rank_key(self.questions[i].qid), i))
        mine = sorted(ranked[index::count])
        return Dataset(self.name, [self.questions[i] for i in mine], self.kg, self.source_files)

    def data_hash(self) -> str:
        h = hashlib.sha256()
        for q in self.questions:
            h.update(json.dumps(q.as_dict(), sort_keys=True, ensure_ascii=False).encode())
        return h.hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Gold: what a method never reads of the question it answers
# --------------------------------------------------------------------------------------------
# A method reads a test question's ``qid``, ``question`` text, ``kind``, and the annotations its
# dataset gives at test time — never its gold. The gold of a Question, in one place (the evaluation,
# the dataset builders and the training side — pools, exemplars, retriever training data — may read
# it; ``tests/unit/test_no_gold.py`` runs every registered method on questions as given and with all
# of it replaced by garbage, :func:`without_gold`, and asserts the same prompts, predictions and traces):
#
# * ``answers`` — the gold answers (open questions: the reference texts);
# * every value of ``gold_query`` — ``sparql``/``sparql_wikidata``/``sparql_freebase``, ``path`` (the
#   gold relation chain), ``form``, ``s_expression``, ``relation``, …;
# * the metadata keys of :data:`GOLD_METADATA`;
# * the topic annotations (:data:`TOPIC_METADATA` and ``topic_entities``) of a dataset that gives none at
#   test time (:data:`TOPICS_AT_TEST`): there they are read off the gold logical form.
#
# Declared oracles are the exception, each a named setting, off by default: FuSIC's
# ``oracle_linking`` and Keqing's ``topics=oracle``.

#: Metadata keys that hold gold or are derived from it, by the loader or builder that sets them.
GOLD_METADATA: dict[str, str] = {
    "qtype": "MetaQA: the gold relation path's type (director_to_movie_to_language)",
    "hops": "MetaQA, the mini-world, tiny: the gold path's length",
    "template": "mini-world templated: the gold path's template (movie_to_director)",
    "property": "mini-world simple: the gold relation",
    "form": "mini-world multi-hop: the kind of gold logical form (path, compare, argmax, …)",
    "style": "mini-world open: the kind of answer the references give (describe, list, compare, …)",
    "domain": "mini-world open: the domain the question and its references were written for",
    "ambiguous": "mini-world simple: the topic's label names several entities (set from the gold entity)",
    "same_label": "mini-world simple: the entities sharing the gold topic's label",
    "temporal": "mini-world simple: the gold answer depends on a date",
    "recent": "mini-world simple: the gold fact is recent",
    "graph_query": "GrailQA: the gold graph query (entity and class nodes, relations)",
    "answer_ids": "GrailQA, QALD-10, WebQSP: the gold answers' ids",
    "dataset_answers": "GrailQA fragment: GrailQA's own gold answers",
    "function": "GrailQA: the gold logical form's function (none, count)",
    "level": "GrailQA: the generalisation level, from the gold logical form against GrailQA's training set",
    "domains": "GrailQA: the gold logical form's Freebase domains",
    "chain": "Keqing on GrailQA (keqing.grailqa_question): the gold s-expression is a relation chain",
}
#: Topic annotations: the topic entities' marked mention and ids (and ``Question.topic_entities``) —
#: given at test time by some datasets, gold elsewhere (:data:`TOPICS_AT_TEST`).
TOPIC_METADATA: dict[str, str] = {
    "raw": "the question with the topic's mention in brackets (MetaQA's own text; mini-world templated; Keqing "
           "on GrailQA: from the gold s-expression)",
    "topic_ids": "the topic entities' ids (GrailQA: its graph query's entity nodes; QALD-10, SimpleQuestions, "
                 "WebQSP: from the gold query or parse)",
    "topic_keys": "mini-world: the topic entities' keys in the mini-world's tables",
}
#: Metadata keys that are no gold: what a method may read.
OPEN_METADATA: dict[str, str] = {
    "profile": "the KG schema profile the question is asked against (freebase, wikidata)",
}
#: Does a dataset give its questions' topic entities at test time? By dataset (the ``name`` of a
#: ``name:part:split`` spec, found from the qid, :func:`question_source`). Where it does not, the topic
#: annotations are gold: a method links the question text itself (or runs a declared oracle).
TOPICS_AT_TEST: dict[str, bool] = {
    "metaqa": True,  # MetaQA marks the topic in the question text: "what films did [Nolan] direct"
    "miniworld": True,  # our own sets: every question comes with its topic annotation, for the methods to use
    "tiny": True,  # the quickstart's set, annotated as the mini-world
    "grailqa": False,  # GrailQA gives none: its entity nodes are part of the gold graph query
    "qald10": False,  # QALD-10 gives none: the tog part's come from ToG's files, the full part's from the gold query
    "simplequestions": False,  # the topic is the gold fact's subject (ToG's file copies it)
    "webqsp": False,  # the topic mid is part of WebQSP's gold parse (the AoG/ToG files copy it)
}
#: qid prefix → dataset, as the loaders name their questions (FuSIC's, Keqing's and PG&AKV's sets keep them).
QID_PREFIXES: dict[str, str] = {"metaqa-": "metaqa", "mw-": "miniworld", "tiny-": "tiny", "grailqa-": "grailqa",
                                "qald10-": "qald10", "sq-tog-": "simplequestions", "WebQTest-": "webqsp",
                                "WebQTrn-": "webqsp"}


def question_source(q: Question) -> str | None:
    """The dataset a question comes from, by its qid (:data:`QID_PREFIXES`); None for a user's own file."""
    return next((name for prefix, name in QID_PREFIXES.items() if str(q.qid).startswith(prefix)), None)


def topics_at_test(q: Question) -> bool:
    """Whether the question's dataset gives its topic entities at test time (:data:`TOPICS_AT_TEST`; a
    user's own file: its annotations are the user's input, so yes)."""
    return TOPICS_AT_TEST.get(question_source(q) or "", True)


def _garble(value: Any, garbage: str, n: list[int]) -> Any:
    """A value of the same shape as ``value`` that differs from it."""
    n[0] += 1
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7919
    if isinstance(value, float):
        return value + 0.5
    if isinstance(value, dict):
        return {k: _garble(v, garbage, n) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_garble(v, garbage, n) for v in value] or [f"{garbage} {n[0]}"]
    return f"{garbage} {n[0]}"


def without_gold(q: Question, garbage: str = "xyzzy") -> Question:
    """``q`` with every gold field replaced by garbage of the same shape (strings by ``"<garbage> <n>"``,
    numbers shifted, flags flipped): ``answers``, every ``gold_query`` value, the :data:`GOLD_METADATA`
    keys and, where the dataset gives no topics at test time (:func:`topics_at_test`),
    ``topic_entities`` and the :data:`TOPIC_METADATA` keys. The qid, the question text, the kind and the
    other metadata stay. A method (its declared oracles aside) must answer it as it answers ``q``."""
    n = [0]
    topics = not topics_at_test(q)
    meta = {k: (_garble(v, garbage, n) if k in GOLD_METADATA or (topics and k in TOPIC_METADATA) else v)
            for k, v in q.metadata.items()}
    return Question(q.qid, q.question, _garble(list(q.answers), garbage, n),
                    _garble(list(q.topic_entities), garbage, n) if topics else list(q.topic_entities), q.kind,
                    {k: _garble(v, garbage, n) for k, v in q.gold_query.items()}, meta)


# --------------------------------------------------------------------------------------------
# MetaQA
# --------------------------------------------------------------------------------------------
METAQA_DOWNLOAD = (
    "MetaQA (Zhang et al., 2018; CC BY 3.0) is published by its authors as 'MetaQA' (vanilla "
    "questions and kb.txt). Download it, then set KGQA_DATA_DIR to a folder holding "
    "metaqa/kb.txt (or kb_augmented.txt) and metaqa/qa_<split>_<N>hop.txt with qa_<split>_qtype_<N>hop.txt."
)

# qtype words → relation, read as "<from>_to_<to>"
_METAQA_REL = {
    ("movie", "director"): "directed_by",
    ("movie", "writer"): "written_by",
    ("movie", "actor"): "starred_actors",
    ("movie", "year"): "release_year",
    ("movie", "genre"): "has_genre",
    ("movie", "language"): "in_language",
    ("movie", "tags"): "has_tags",
    ("movie", "tag"): "has_tags",
    ("movie", "imdbrating"): "has_imdb_rating",
    ("movie", "imdbvotes"): "has_imdb_votes",
}


def metaqa_qtype_to_path(qtype: str) -> list[str]:
    """``director_to_movie_to_language`` → ``['^directed_by', 'in_language']``.

    A leading ``^`` marks an inverse hop (object → subject), as in SPARQL property paths."""
    nodes = qtype.split("_to_")
    path = []
    for a, b in zip(nodes, nodes[1:]):
        if (a, b) in _METAQA_REL:
            path.append(_METAQA_REL[(a, b)])
        elif (b, a) in _METAQA_REL:
            path.append("^" + _METAQA_REL[(b, a)])
        else:
            raise ValueError(f"Unknown MetaQA hop {a}_to_{b} in qtype {qtype!r}")
    return path


_BRACKET = re.compile(r"\[([^\]]+)\]")


def _external_root(what: str, download: str) -> Path:
    """``$KGQA_DATA_DIR`` or a :class:`DatasetNotFound` that says whether it is unset or wrong."""
    try:
        return external_data_dir(required=True)
    except FileNotFoundError as exc:
        raise DatasetNotFound(f"{what}: {exc} {download}") from None


def load_metaqa(hops: int | str = 1, split: str = "dev") -> Dataset:
    if str(hops).removesuffix("hop") not in ("1", "2", "3"):
        raise ValueError(f"Unknown MetaQA set {hops!r}: MetaQA has 1hop, 2hop and 3hop (e.g. metaqa:2hop:dev)")
    hops = int(str(hops).removesuffix("hop"))
    root = _external_root(f"metaqa:{hops}hop:{split}", METAQA_DOWNLOAD)
    qfile = root / "metaqa" / f"qa_{split}_{hops}hop.txt"
    tfile = root / "metaqa" / f"qa_{split}_qtype_{hops}hop.txt"
    if not qfile.exists():
        raise DatasetNotFound(f"{qfile} not found. {METAQA_DOWNLOAD}")
    qtypes = tfile.read_text(encoding="utf-8").splitlines() if tfile.exists() else []
    questions = []
    for i, line in enumerate(qfile.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        text, _, ans = line.partition("\t")
        topic = _BRACKET.findall(text)
        qtype = qtypes[i] if i < len(qtypes) else ""
        gold = {"path": " / ".join(metaqa_qtype_to_path(qtype))} if qtype else {}
        questions.append(Question(
            qid=f"metaqa-{hops}hop-{split}-{i:05d}",
            question=_BRACKET.sub(r"\1", text).strip(),
            answers=[a for a in ans.split("|") if a],
            topic_entities=topic,
            gold_query=gold,
            metadata={"hops": hops, "qtype": qtype, "raw": text},
        ))
    return Dataset(f"metaqa:{hops}hop:{split}", questions, kg="metaqa", source_files=[qfile])


def metaqa_kb_path() -> Path:
    root = _external_root("the MetaQA KB", METAQA_DOWNLOAD)
    for name in ("kb.txt", "kb_augmented.txt"):
        p = root / "metaqa" / name
        if p.exists():
            return p
    raise DatasetNotFound(f"No metaqa/kb.txt or metaqa/kb_augmented.txt under {root}. {METAQA_DOWNLOAD}")


# --------------------------------------------------------------------------------------------
# Our own sets (JSON lines of Question records)
# --------------------------------------------------------------------------------------------
def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null",
             float: "a fractional number"}
    return names.get(type(value), "a number")


def _record_problem(d: dict[str, Any]) -> str | None:
    """What is wrong with the fields of a question record read from a file (None: nothing)."""
    qid = d["qid"]
    if not isinstance(qid, str) and not (isinstance(qid, int) and not isinstance(qid, bool)):
        return f"'qid' must be a string (or a whole number), got {_json_type(qid)}"
    if not isinstance(d["question"], str):
        return f"'question' must be a string, got {_json_type(d['question'])}"
    if not _is_strings(d["answers"]):
        return "'answers' must be a list of strings" + ("" if isinstance(d["answers"], list) else
                                                       f", got {_json_type(d['answers'])}")
    if "topic_entities" in d and not _is_strings(d["topic_entities"]):
        return "'topic_entities' must be a list of strings (e.g. [\"Inception\"])"
    if d.get("kind", "factoid") not in ("factoid", "open"):
        return f"unknown question kind {d['kind']!r}: expected 'factoid' or 'open'"
    for key in ("gold_query", "metadata"):
        if key in d and not isinstance(d[key], dict):
            return f"'{key}' must be a JSON object, got {_json_type(d[key])}"
    return None


def load_jsonl(path: str | Path, name: str | None = None, kg: str | None = None) -> Dataset:
    path = Path(path)
    if not path.exists():
        raise DatasetNotFound(f"{path} not found.")
    if not path.is_file():
        raise DatasetError(f"{path} is not a file: give a .jsonl file of question records, one per line: {RECORD_FORM}")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}): a dataset file holds one "
                           f"JSON question record per line: {RECORD_FORM}") from None
    questions, seen = [], set()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError as exc:
            raise DatasetError(f"{path}, line {i}: not JSON ({exc}); each line must be one question record: "
                               f"{RECORD_FORM}") from None
        if not isinstance(d, dict):
            raise DatasetError(f"{path}, line {i}: a JSON {type(d).__name__}, not a question record: {RECORD_FORM}")
        missing = [k for k in ("qid", "question", "answers") if k not in d]
        if missing:
            raise DatasetError(f"{path}, line {i}: missing {', '.join(missing)}; every record needs qid, question "
                               f"and answers: {RECORD_FORM}")
        problem = _record_problem(d)
        if problem:
            raise DatasetError(f"{path}, line {i}: {problem}: {RECORD_FORM}")
        if d["qid"] in seen:
            raise DatasetError(f"{path}, line {i}: qid {d['qid']!r} is used twice; give every question its own qid "
                               "(run files are resumed by qid)")
        seen.add(d["qid"])
        questions.append(Question.from_dict(d))
    if not questions:
        raise DatasetError(f"{path} holds no questions: write one JSON record per line: {RECORD_FORM}")
    return Dataset(name or path.stem, questions, kg=kg, source_files=[path])


def load_tiny(part: str = "films") -> Dataset:
    """The quickstart's tiny set: a few questions over ``data/tiny/kb.txt`` (written by us)."""
    return load_jsonl(data_dir() / "tiny" / f"questions_{part}.jsonl", name=f"tiny:{part}", kg="tiny")


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------
def question_type(q: Question) -> str:
    """The type a question is stratified by in :func:`split_dev_test`, from its metadata: the
    logical form of a multi-hop question (``path``, ``compare``, ``argmax``, ``argmin``, ``count``),
    the style of an open one (``describe``, ``list``, ``compare``, ``awards``, ``new_knowledge``),
    and for a simple question its flags (``ambiguous``, ``temporal``, ``recent``, joined by ``+``;
    ``plain`` when none)."""
    md = q.metadata or {}
    for key in ("form", "style"):
        if md.get(key):
            return str(md[key])
    flags = [f for f in ("ambiguous", "temporal", "recent") if md.get(f)]
    return "+".join(flags) or "plain"


def split_dev_test(dataset: Dataset, seed: int = 0, dev_fraction: float = 0.3,
                   stratify: Callable[[Question], str] | None = question_type) -> tuple[Dataset, Dataset]:
    """``(dev, test)``: a seeded split of ``dataset``, stratified by ``stratify(question)`` (None: not
    stratified). Deterministic: it depends on the qids, their types, ``seed`` and ``dev_fraction``
    only, not on the order of the questions. The dev set has ``round(n * dev_fraction)`` questions,
    shared out over the types by largest remainder (ties: the larger type, then the type's name);
    within a type, the qids sorted and shuffled with ``random.Random(f"{seed}:{type}")`` give the
    dev questions first. Both parts keep the dataset's order and are named ``<name>:dev`` / ``<name>:test``."""
    import random

    if not 0.0 <= dev_fraction < 1.0:
        raise ValueError(f"dev_fraction must be in [0, 1), got {dev_fraction!r}")
    strata: dict[str, list[str]] = {}
    for q in dataset.questions:
        strata.setdefault(stratify(q) if stratify else "all", []).append(q.qid)
    total = round(len(dataset.questions) * dev_fraction)
    quota = {k: len(v) * dev_fraction for k, v in strata.items()}
    n_dev = {k: int(v) for k, v in quota.items()}
    left = total - sum(n_dev.values())
    for k in sorted(strata, key=lambda k: (-(quota[k] - n_dev[k]), -len(strata[k]), k))[:max(0, left)]:
        n_dev[k] += 1
    dev_ids: set[str] = set()
    for k, qids in strata.items():
        order = sorted(qids)
        random.Random(f"{seed}:{k}").shuffle(order)
        dev_ids.update(order[:n_dev[k]])
    dev = [q for q in dataset.questions if q.qid in dev_ids]
    test = [q for q in dataset.questions if q.qid not in dev_ids]
    return (Dataset(f"{dataset.name}:dev", dev, dataset.kg, dataset.source_files),
            Dataset(f"{dataset.name}:test", test, dataset.kg, dataset.source_files))


# The mini-world splits, fixed once: seed 0, stratified by question_type. 30 % dev keeps
# ≥ 50 test questions on the factoid sets (simple 48 dev / 113 test, multihop 26 / 62). The open set
# is all test (50): its metric (ROUGE-L of prose) cannot score pruning offline, so the settings are
# chosen on the factoid dev questions and the open questions are never looked at when choosing.
MINIWORLD_SPLIT_SEED = 0
MINIWORLD_DEV_FRACTION = {"simple": 0.3, "multihop": 0.3, "open": 0.0}


def load_miniworld(part: str = "simple", split: str | None = None) -> Dataset:
    """Our mini-world question sets: ``simple``, ``multihop``, ``open``, ``templated``, ``spare``
    (``data/miniworld/questions/``; asked against ``miniworld`` = the Wikidata-like schema; ``spare``: geography
    and technology questions no other set asks, never reported — FuSIC's dev part of cinema → geography).
    ``split``: ``dev`` or ``test`` of ``simple``/``multihop``/``open`` (:data:`MINIWORLD_DEV_FRACTION`;
    the open set has no dev questions)."""
    path = data_dir() / "miniworld" / "questions" / f"{part}.jsonl"
    if not path.exists():
        raise DatasetNotFound(f"{path} not found: run `python scripts/build_miniworld.py` (sets: simple, "
                              "multihop, open, templated, spare)")
    ds = load_jsonl(path, name=f"miniworld:{part}", kg="miniworld")
    if split is None:
        return ds
    if split not in ("dev", "test"):
        raise DatasetError(f"Unknown split {split!r} of miniworld:{part}: use miniworld:{part}:dev or miniworld:{part}:test")
    if part not in MINIWORLD_DEV_FRACTION:
        raise DatasetError(f"miniworld:{part} has no dev/test split; split sets: "
                           f"{', '.join(f'miniworld:{p}' for p in MINIWORLD_DEV_FRACTION)}")
    if split == "dev" and MINIWORLD_DEV_FRACTION[part] == 0.0:
        raise DatasetError(f"miniworld:{part} has no dev questions (all {len(ds)} are test: settings are chosen on the "
                           f"factoid dev sets); use miniworld:{part}:test")
    dev, test = split_dev_test(ds, MINIWORLD_SPLIT_SEED, MINIWORLD_DEV_FRACTION[part])
    return dev if split == "dev" else test


#: The dataset registry: ``name`` of a ``name:part:split`` spec → its loader (called with the parts).
#: The sets of this module are here; the modules that provide others add them with :func:`register`
#: when imported: GrailQA and the Freebase/Wikidata benchmarks (this layer, registered by importing
#: :mod:`kgqa_lib.data`), GrailQA's fragment sets (:mod:`kgqa_lib.kg.grailqa_fragment`), FuSIC's
#: transfer tasks and Keqing's sets (their method modules, registered by importing
#: :mod:`kgqa_lib.methods`). ``import kgqa_lib.registry`` registers every one.
_LOADERS: dict[str, Callable[..., Dataset]] = {
    "miniworld": load_miniworld,
    "metaqa": lambda part="1hop", split="dev": load_metaqa(part, split),
    "tiny": lambda part="films", split=None: load_tiny(part),
}


def register(name: str, loader: Callable[..., Dataset]) -> None:
    """Add the loader of ``name:part:split`` specs: ``loader(*parts)`` returns the :class:`Dataset`
    (its parameters, with their defaults, are the parts a spec may give)."""
    _LOADERS[name] = loader


def load_dataset(spec: str, limit: int | None = None, sample: int | None = None, seed: int = 0) -> Dataset:
    """Resolve ``metaqa:2hop:dev``, ``tiny:films`` or a ``.jsonl`` path into a :class:`Dataset`;
    ``limit`` keeps the first questions, ``sample`` a seeded random subset."""
    if spec.endswith(".jsonl") or "/" in spec:
        ds = load_jsonl(spec)
    else:
        name, *rest = spec.split(":")
        if name not in _LOADERS:
            raise DatasetError(f"Unknown dataset {spec!r}; known: {', '.join(sorted(_LOADERS))} (or a .jsonl path; "
                               "`import kgqa_lib.registry` registers the sets of every layer, e.g. fusic, keqing)")
        import inspect

        try:
            inspect.signature(_LOADERS[name]).bind(*rest)
        except TypeError:
            n = len(inspect.signature(_LOADERS[name]).parameters)
            form = f"{name}:{':'.join(['PART', 'SPLIT'][:n])}"
            what = f"takes at most {n} part(s) after '{name}:'" if len(rest) > n else "needs more parts"
            raise DatasetError(f"Unknown dataset {spec!r}: {name} {what} (the form is {form})") from None
        ds = _LOADERS[name](*rest)
    return ds.sample(sample, seed).head(limit)
