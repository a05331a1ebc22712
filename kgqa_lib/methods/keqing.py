"""Keqing (Wang et al., 2023): knowledge-based QA as a chain of thought the KG guides.

Stages, one function each (the notebooks show them cell by cell):

1. :func:`decompose` — the LLM turns the question into a JSON list of templated sub-questions
   (``question`` with ``[mask]``, ``id``, ``dep``, ``seed_entities``: names or ``<ANSWER>-k``),
   few-shot, with exemplars picked from a training pool by embedding similarity. The output is
   parsed defensively (:func:`parse_decomposition` repairs what it can and names what it could not).
2. :func:`build_template_bank` — question templates from the pool's one-hop questions, each with
   the logical chain (relation path) that answers it: every chain is assigned to the template its
   questions use most often, and the mapping is inverted (template → chains).
3. :func:`match_templates` — top-K templates per sub-question by cosine similarity → candidate chains.
4. :func:`retrieve_candidates` — the chains executed on the KG from the sub-question's seeds →
   candidate triples grouped by chain. The question's topic entity is never an answer of any hop
   (MetaQA's convention, also when a chain returns to its start). With ``dense_supplement`` > 0,
   :func:`dense_supplement` adds the paper's supplement (sec. 3.2): triples around the seeds ranked by
   sentence-embedding similarity with the sub-question, reaching entities the chains did not.
5. :func:`select_candidates` — candidate reasoning as in the paper (sec. 3.3): the LLM reads the
   verbalised candidate triples of a sub-question and selects its answer entities (C* ⊆ C);
   answers flow into the sub-questions that depend on them. :func:`reason` (the LLM chooses among
   chain groups) and :func:`keep_all` (no LLM) are the named alternatives (``reasoning`` setting).
6. :func:`respond` — the LLM summarises the execution log into an answer that shows the path.

``pipeline=released`` runs, after the same decomposition, what the authors' released code
(``NoviceStone/Keqing``, ``chat.py``) does instead of stages 2–6: every 1-hop fact of each seed entity,
read by the LLM one seed at a time, and no response (:func:`execute_released`).

Pools and splits: MetaQA has no train split here, so dev is split by line number — every tenth
line is the pool (templates and exemplars), the rest is what we evaluate (``keqing:metaqa:Nhop``).
The mini-world ``templated`` set is split the same way per template (the first two questions of
each template are the pool); its one-hop pool does not cover every relation the multi-hop
questions need, so our own sub-question phrasings (``data/keqing/seed_templates.jsonl``) join
the bank there.

GrailQA (``keqing:grailqa``) runs on the shared Freebase fragment (KG ``grailqa-fragment``, built from
the gold facts of the 1,000 GrailQA dev questions). The fragment's questions are split once, seeded
and stratified by GrailQA level: :data:`GRAILQA_POOL_FRACTION` of them are the pool (templates and
exemplars), the rest is the test set (``keqing:grailqa``; ``keqing:grailqa:pool`` gives the pool).
What Keqing needs of a *pool* question is derived from its gold s-expression (:func:`grailqa_question`):
the topic entity and relation chain of a pure relation chain from one entity (:func:`sexpr_chain`), and
the question text with the topic's mention in brackets (``metadata["raw"]``) when the mention occurs
in it. Questions with constraints or aggregations have no chain: they never make templates or
exemplars, and stay in the test set (``metadata["chain"]`` False), answered as Keqing can. GrailQA
gives no topic entities at test time, so the test questions' gold-derived topic and mention are gold
(:data:`kgqa_lib.data.datasets.TOPICS_AT_TEST`), read only by the evaluation: Keqing links a test
question's topic entities from its text with FuSIC's entity linker (:func:`question_topics`, setting
``topics=linked``, the default); ``topics=oracle`` reads the gold-derived ones — an oracle, labelled as
such (the first ``keqing_grailqa`` records were made with it, before the setting existed). On MetaQA
(topics marked in the question text) and the mini-world (annotated) the dataset's topics are used either way.
Measured (1,000 fragment questions): pool 600, test 400; chain questions 901 (1-hop 686, 2-hop 206,
3-hop 9); the test set holds 41 non-chain questions. 3 chain questions do not name their topic verbatim
(a plural, a typo); the one in the pool makes no template. The bank: 388 templates over 267
chains; 432 pool questions can be exemplars; 170 of the 359 test chain questions have every hop in the
bank (3 of the 85 i.i.d. ones: GrailQA's levels are relative to its training set, not to this pool).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Literal, Mapping, Sequence

import numpy as np

from ..data.datasets import Dataset, DatasetError, Question, load_dataset, register, split_dev_test
from ..errors import UsageError
from ..embed.embedder import cosine_topk
from ..llm.parse import clean_text
from ..paths import data_dir
from ..llm.prompting import load_prompt
from .base import Context, MethodResult, Settings, Stage, Tracer, register_method, setting

MASK = "[mask]"
_ANSWER_REF = re.compile(r"<\s*answer\s*>\s*-?\s*(\d+)", re.I)


# --------------------------------------------------------------------------------------------
# Pools, splits and the template bank
# --------------------------------------------------------------------------------------------
def mask_question(raw: str) -> str:
    """``what movies did [Nolan] direct`` → ``what movies did [mask] direct`` (lower case, no ``?``)."""
    text = re.sub(r"\[[^\]]+\]", MASK, raw.strip())
    return re.sub(r"\s+", " ", text).rstrip(" ?").lower()


def gold_chain(q: Question) -> tuple[str, ...]:
    """A question's gold relation path, ``('^directed_by', 'in_language')``: read for the *pool*
    questions (templates, worked examples, fine-tuning data), never for the question being answered
    (its decomposition is checked against it after the method, by :mod:`kgqa_lib.evaluate.diagnostics`)."""
    path = q.gold_query.get("path", "")
    return tuple(p.strip() for p in path.split("/") if p.strip())


def _in_pool(i: int) -> bool:
    return i % 10 == 0


@lru_cache(maxsize=4)
def _metaqa_split(hops: int) -> tuple[tuple[Question, ...], tuple[Question, ...]]:
    ds = load_dataset(f"metaqa:{hops}hop:dev")
    pool = tuple(q for i, q in enumerate(ds.questions) if _in_pool(i))
    test = tuple(q for i, q in enumerate(ds.questions) if not _in_pool(i))
    return pool, test


@lru_cache(maxsize=1)
def _miniworld_split() -> tuple[tuple[Question, ...], tuple[Question, ...]]:
    ds = load_dataset("miniworld:templated")
    seen: Counter = Counter()
    pool, test = [], []
    for q in ds.questions:
        t = q.metadata.get("template", "")
        (pool if seen[t] < 2 else test).append(q)
        seen[t] += 1
    return tuple(pool), tuple(test)


# ---- GrailQA on the shared Freebase fragment ------------------------------------------------
GRAILQA_KG = "grailqa-fragment"
GRAILQA_POOL_FRACTION = 0.6  # of the fragment's questions: the pool; the rest is the test set
GRAILQA_SPLIT_SEED = 0
_FREEBASE_ENTITY = re.compile(r"^[mg]\.[A-Za-z0-9_]+$")


def sexpr_chain(sexpr: str) -> tuple[str, tuple[str, ...]] | None:
    """``(entity id, relation chain)`` of an s-expression that is a pure relation chain from one
    entity, else None. ``(JOIN r X)`` (the x with ``x r X``) is the hop ``^r`` from X, ``(JOIN (R r) X)``
    the hop ``r``; the innermost hop comes first. The outermost ``(AND <class> …)`` — GrailQA's answer
    type, which every question carries — is dropped; anything else (an AND inside, a second entity or
    class, COUNT, ARGMAX/ARGMIN, a comparative, a literal where the chain starts) is no chain."""
    from ..kg.sexpr import SExprError, parse_sexpr

    try:
        node = parse_sexpr(sexpr)
    except SExprError:
        return None
    if isinstance(node, list) and len(node) == 3 and node[0] == "AND" and isinstance(node[1], str) \
            and not _FREEBASE_ENTITY.match(node[1]):
        node = node[2]
    hops: list[str] = []
    while isinstance(node, list) and len(node) == 3 and node[0] == "JOIN":
        rel = node[1]
        if isinstance(rel, str):
            hops.append("^" + rel)
        elif isinstance(rel, list) and len(rel) == 2 and rel[0] == "R" and isinstance(rel[1], str):
            hops.append(rel[1])
        else:
            return None
        node = node[2]
    if not hops or not isinstance(node, str) or not _FREEBASE_ENTITY.match(node):
        return None
    return node, tuple(reversed(hops))


def bracket_mention(text: str, name: str) -> str | None:
    """``text`` with the first whole-word, case-insensitive occurrence of ``name`` in brackets (None
    when the name does not occur verbatim)."""
    m = re.search(rf"(?<!\w){re.escape(name.strip())}(?!\w)", text, flags=re.I) if name.strip() else None
    return f"{text[:m.start()]}[{m.group(0)}]{text[m.end():]}" if m else None


def grailqa_question(q: Question) -> Question:
    """A fragment question with what Keqing needs, from its gold s-expression: for a chain question
    the topic entity alone as ``topic_entities``, the chain as ``gold_query["path"]`` (``r1/^r2``) and,
    when its mention occurs verbatim, ``metadata["raw"]`` with the mention in brackets (a question
    without it never becomes a template). ``metadata["chain"]`` says which kind it is. All of it is
    gold: the pool's templates and exemplars are made of it, and the evaluation reads it (decomposition
    check, gold-chain ceiling); of a test question the method reads it only as the declared oracle
    ``topics=oracle`` (:func:`question_topics`)."""
    found = sexpr_chain(q.gold_query.get("s_expression", ""))
    meta, gold_query, topics = dict(q.metadata), dict(q.gold_query), list(q.topic_entities)
    meta["chain"] = found is not None
    if found:
        names = dict(zip(meta.get("topic_ids", []), q.topic_entities))
        topics = [names.get(found[0], found[0])]
        gold_query["path"] = "/".join(found[1])
        raw = bracket_mention(q.question, topics[0])
        if raw:
            meta["raw"] = raw
    return replace(q, topic_entities=topics, gold_query=gold_query, metadata=meta)


@lru_cache(maxsize=1)
def _grailqa_split() -> tuple[tuple[Question, ...], tuple[Question, ...]]:
    ds = load_dataset("grailqa:fragment")
    ds = Dataset(ds.name, [grailqa_question(q) for q in ds.questions], ds.kg, ds.source_files)
    pool, test = split_dev_test(ds, GRAILQA_SPLIT_SEED, GRAILQA_POOL_FRACTION,
                                stratify=lambda q: str(q.metadata.get("level")))
    return tuple(pool.questions), tuple(test.questions)


def keqing_dataset(source: str = "miniworld", part: str | None = None) -> Dataset:
    """``keqing:miniworld`` (the templated test questions), ``keqing:metaqa:2hop`` (MetaQA dev
    without the pool lines; add ``--sample 200``) or ``keqing:grailqa`` (the fragment's questions
    outside the pool). ``...:pool`` gives the pool instead."""
    want_pool = part == "pool"
    if source == "grailqa":
        if part not in (None, "pool"):
            raise DatasetError(f"keqing:grailqa:{part} is no dataset: use keqing:grailqa (the test questions) or "
                               "keqing:grailqa:pool")
        pool, test = _grailqa_split()
        return Dataset(f"keqing:grailqa{':pool' if want_pool else ''}", list(pool if want_pool else test),
                       kg=GRAILQA_KG, source_files=list(load_dataset("grailqa:fragment").source_files))
    if source == "miniworld":
        pool, test = _miniworld_split()
        return Dataset(f"keqing:miniworld{':pool' if want_pool else ''}", list(pool if want_pool else test),
                       kg="miniworld", source_files=list(load_dataset("miniworld:templated").source_files))
    if source == "metaqa":
        if part not in ("1hop", "2hop", "3hop"):
            raise DatasetError(f"keqing:metaqa{':' + part if part else ''} is no dataset: use keqing:metaqa:1hop, "
                               ":2hop or :3hop")
        pool, test = _metaqa_split(int(str(part).rstrip("hop")))
        ds = load_dataset(f"metaqa:{part}:dev")
        return Dataset(f"keqing:metaqa:{part}", list(test), kg="metaqa", source_files=ds.source_files)
    raise DatasetError(f"Unknown Keqing source {source!r}: 'miniworld', 'metaqa' or 'grailqa'")


# Keqing: ``keqing:miniworld`` / ``keqing:metaqa:2hop`` = what is evaluated; ``keqing:miniworld:pool`` its pool
register("keqing", lambda source="miniworld", part=None: keqing_dataset(source, part))


def pool_kg(kg_name: str) -> str:
    """The KG whose training pool serves ``kg_name``: ``metaqa``, the GrailQA fragment, or ``miniworld``
    for the mini-world in either schema. Any other KG has no pool (Keqing's exemplars and templates
    come from one): a :class:`~kgqa_lib.errors.UsageError` naming the KGs that have one."""
    if kg_name in ("metaqa", GRAILQA_KG):
        return kg_name
    if kg_name == "miniworld" or kg_name.startswith("miniworld:"):
        return "miniworld"
    raise UsageError(f"Keqing has no question pool for the KG {kg_name!r} (its exemplars and templates come from "
                     f"one): run it on metaqa, {GRAILQA_KG} or the mini-world (miniworld, miniworld:freebase, or an "
                     "endpoint with #profile=miniworld:wikidata|miniworld:freebase)")


def pool_for(kg_name: str) -> list[Question]:
    """The training pool of a KG's questions: exemplars and templates come from here only
    (:func:`pool_kg`; a KG without a pool is an error, not the mini-world's pool)."""
    kg = pool_kg(kg_name)
    if kg == "metaqa":
        return [q for h in (1, 2, 3) for q in _metaqa_split(h)[0]]
    if kg == GRAILQA_KG:
        return list(_grailqa_split()[0])
    return list(_miniworld_split()[0])


@dataclass(frozen=True)
class Template:
    text: str  # "what movies did [mask] direct"
    chains: tuple[tuple[str, ...], ...]  # the logical chains assigned to it, most frequent first
    count: int  # pool questions behind it
    source: str = "pool"  # "pool" (masked pool questions) or "seed" (our own phrasings)


@dataclass
class TemplateBank:
    templates: list[Template]
    canonical: dict[tuple[str, ...], str]  # chain → its most frequent template
    vectors: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.templates)

    def chain_names(self) -> list[tuple[str, ...]]:
        return sorted(self.canonical)


def seed_templates() -> list[tuple[str, tuple[str, ...]]]:
    rows = (data_dir() / "keqing" / "seed_templates.jsonl").read_text(encoding="utf-8").splitlines()
    return [(d["text"], tuple(d["chain"])) for d in map(json.loads, filter(str.strip, rows))]


def build_template_bank(pool: Sequence[Question], *, phrasings: str = "all", seeds: bool = False) -> TemplateBank:
    """Templates from the pool's one-hop questions, each with the chains that answer it.

    Counting (template, chain) pairs over the pool, every chain is assigned to the template its
    questions use most often; inverting gives template → chains. With ``phrasings="all"`` the other
    phrasings of a chain stay in the bank too, each with the chain its questions use most (MetaQA
    words one relation in several ways: "who directed [mask]", "[mask] was directed by who");
    ``"canonical"`` keeps one template per chain, literally as the paper describes. ``seeds`` adds
    our own phrasings for every relation direction (``data/keqing/seed_templates.jsonl``)."""
    pair: Counter = Counter()
    for q in pool:
        chain = gold_chain(q)
        raw = q.metadata.get("raw", "")
        if len(chain) == 1 and "[" in raw:
            pair[(mask_question(raw), chain)] += 1
    if seeds:
        for text, chain in seed_templates():
            pair.setdefault((text, chain), 0)
    by_chain: dict[tuple[str, ...], Counter] = defaultdict(Counter)
    by_text: dict[str, Counter] = defaultdict(Counter)
    for (text, chain), n in pair.items():
        by_chain[chain][text] += n
        by_text[text][chain] += n
    canonical = {c: max(texts.items(), key=lambda kv: (kv[1], -len(kv[0]), kv[0]))[0] for c, texts in by_chain.items()}
    assigned: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    for c, t in canonical.items():  # each chain → its most frequent template, inverted
        assigned[t].append(c)
    templates = []
    seed_texts = {t for t, _ in seed_templates()} if seeds else set()
    for text, chains in sorted(by_text.items()):
        own = assigned.get(text)
        if own is None:
            if phrasings == "canonical":
                continue
            own = [max(chains.items(), key=lambda kv: (kv[1], kv[0]))[0]]
        own = sorted(own, key=lambda c: -chains[c])
        templates.append(Template(text, tuple(own), sum(chains.values()),
                                  "seed" if text in seed_texts and sum(chains.values()) == 0 else "pool"))
    return TemplateBank(templates, canonical)


def embed_bank(bank: TemplateBank, embedder) -> TemplateBank:
    if bank.vectors is None:
        bank.vectors = embedder.encode([t.text for t in bank.templates])
    return bank


# --------------------------------------------------------------------------------------------
# Before the stages: the question as Keqing may read it (its topic entities)
# --------------------------------------------------------------------------------------------
TOPIC_MODES = ("linked", "oracle")


@dataclass
class Topics:
    """A test question's topic entities as Keqing uses them (topic exclusion, the masked template that
    picks the exemplars, fallback seeds) and where they came from: ``given`` (the dataset gives them at
    test time: MetaQA's brackets, the mini-world's annotations), ``linked`` (FuSIC's entity linker on the
    question text and the KG) or ``oracle`` (the dataset's gold-derived annotation: ``topics=oracle``)."""

    source: str
    names: list[str]
    raw: str | None = None  # the question with the topic's mention in brackets (None: no mention)
    mentions: list[dict[str, str]] = field(default_factory=list)  # linked: span, entity, label of each

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "names": self.names, "raw": self.raw, "mentions": self.mentions}


def question_topics(q: Question, kg, embedder=None, mode: str = "linked") -> Topics:
    """The topic entities of the question being answered. A dataset that gives them at test time
    (:func:`kgqa_lib.data.datasets.topics_at_test`) is read as it is, whatever ``mode``. Otherwise
    (GrailQA), ``linked``: FuSIC's linker (:func:`kgqa_lib.methods.fusic.linking.link_entities`, exact
    label/alias matches of question spans, longest first) on the question text alone — the linked
    entities' labels, the first (longest) mention in brackets; ``oracle``: the dataset's gold-derived
    annotation (GrailQA: the gold s-expression's entity, :func:`grailqa_question`)."""
    from ..data.datasets import topics_at_test

    if mode not in TOPIC_MODES:
        raise ValueError(f"unknown topics {mode!r}; use one of {', '.join(TOPIC_MODES)}")
    if topics_at_test(q) or mode == "oracle":
        return Topics("given" if topics_at_test(q) else "oracle", list(q.topic_entities), q.metadata.get("raw"))
    from .fusic.linking import link_entities

    linking = link_entities(Question(q.qid, q.question, []), kg, embedder)  # the text, nothing else
    names = list(dict.fromkeys(m.label for m in linking.mentions if m.label))
    raw = bracket_mention(q.question, linking.mentions[0].span) if linking.mentions else None
    return Topics("linked", names, raw, [{"span": m.span, "entity": m.iri, "label": m.label} for m in linking.mentions])


def as_read(q: Question, topics: Topics) -> Question:
    """What the stages read of the question being answered: its qid, text and kind, and the topics
    (``metadata["raw"]`` the bracketed mention) — no answers, no gold query, no other metadata."""
    return Question(q.qid, q.question, [], list(topics.names), q.kind, {}, {"raw": topics.raw} if topics.raw else {})


# --------------------------------------------------------------------------------------------
# Stage 1: decomposition
# --------------------------------------------------------------------------------------------
@dataclass
class SubQuestion:
    id: int
    question: str  # templated, "[mask]" for the seed
    dep: list[int]  # ids it depends on ([] for none; the prompt writes -1)
    seed_entities: list[str]  # names, or "<ANSWER>-k"

    def as_dict(self) -> dict[str, Any]:
        return {"question": self.question, "id": self.id, "dep": self.dep or [-1], "seed_entities": self.seed_entities}


@dataclass
class Decomposition:
    text: str  # the LLM's raw output
    subquestions: list[SubQuestion]
    error: str | None = None  # "no_json", "bad_json_repaired", "bad_item", "fallback", ...
    exemplars: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text, "subquestions": [s.as_dict() for s in self.subquestions], "error": self.error,
                "exemplars": self.exemplars}


def gold_decomposition(q: Question, bank: TemplateBank) -> list[SubQuestion] | None:
    """The decomposition a pool question should get: one sub-question per hop, worded with the
    canonical template of that hop's relation, each depending on the previous one."""
    chain = gold_chain(q)
    if not chain or any((c,) not in bank.canonical for c in chain):
        return None
    topic = q.topic_entities[0] if q.topic_entities else ""
    return [SubQuestion(i, bank.canonical[(c,)], [i - 1] if i else [], [f"<ANSWER>-{i - 1}"] if i else [topic])
            for i, c in enumerate(chain)]


def format_decomposition(subs: Sequence[SubQuestion]) -> str:
    return json.dumps([s.as_dict() for s in subs], ensure_ascii=False)


def question_template(q: Question) -> str:
    """The question with its topic entity masked: similarity should follow the question's shape,
    not its entity (otherwise "films starring Tom Hardy" finds questions about other actors' films
    rather than other three-hop questions)."""
    raw = q.metadata.get("raw", "")
    if "[" in raw:
        return mask_question(raw)
    text = q.question
    for t in q.topic_entities:
        text = re.sub(re.escape(t), MASK, text, flags=re.I)
    return re.sub(r"\s+", " ", text).strip().rstrip(" ?").lower()


def select_exemplars(q: Question, pool: Sequence[Question], bank: TemplateBank, embedder, n: int = 4,
                     by: str = "embedding") -> list[tuple[Question, list[SubQuestion]]]:
    """``n`` pool questions (with their gold decompositions) to show as worked examples: the most
    similar ones (``by="embedding"``) or a fixed spread over hops (``by="fixed"``)."""
    usable = [(p, d) for p in pool if p.qid != q.qid and (d := gold_decomposition(p, bank))]
    if not usable or n <= 0:
        return []
    if by == "fixed":
        by_hops: dict[int, list] = defaultdict(list)
        for p, d in usable:
            by_hops[len(d)].append((p, d))
        out, i = [], 0
        while len(out) < n and any(by_hops.values()):
            for h in sorted(by_hops):
                if by_hops[h] and len(out) < n:
                    out.append(by_hops[h].pop(0))
            i += 1
        return out
    vecs = embedder.encode([question_template(p) for p, _ in usable])
    idx, _ = cosine_topk(embedder.encode([question_template(q)])[0], vecs, n)
    return [usable[i] for i in reversed(idx.tolist())]  # most similar last, next to the question


KG_DOMAINS = {"miniworld": "movies", "metaqa": "movies"}  # what a question is about, per template-bank KG
_DOMAIN_PHRASE = " about movies"  # as the prompt files word it


def domain_system(prompt, kg_name: str) -> str:
    """The decomposition / chain instruction for ``kg_name``: the prompt files say "a question about
    movies" (MetaQA and the mini-world, the papers' setting); for a KG of another domain the phrase
    names that domain, or is left out where the KG has none (GrailQA's Freebase fragment spans 80+
    domains: "You split a question into simple sub-questions …"). The prompt files, and so every
    MetaQA/mini-world prompt and configuration hash, are unchanged."""
    if _DOMAIN_PHRASE not in prompt.system:
        raise ValueError(f"prompt {prompt.name!r} no longer says {_DOMAIN_PHRASE.strip()!r}: update keqing.domain_system")
    domain = KG_DOMAINS.get(kg_name)
    return prompt.system.replace(_DOMAIN_PHRASE, f" about {domain}" if domain else "", 1)


def decompose(q: Question, ctx: Context, exemplars: Sequence[tuple[Question, list[SubQuestion]]],
              max_tokens: int = 300, kg_name: str = "miniworld") -> Decomposition:
    """Ask the LLM for the sub-questions (few-shot, exemplars as earlier turns); the instruction names
    the KG's domain (:func:`domain_system`)."""
    prompt = load_prompt("keqing_decompose")
    messages = [{"role": "system", "content": domain_system(prompt, kg_name)}]
    for p, d in exemplars:
        messages += [{"role": "user", "content": prompt.render(question=p.question)},
                     {"role": "assistant", "content": format_decomposition(d)}]
    messages.append({"role": "user", "content": prompt.render(question=q.question)})
    r = ctx.llm.chat(messages, max_tokens=max_tokens, temperature=0.0, seed=ctx.seed)
    dec = parse_decomposition(r.text, q)
    dec.exemplars = [p.question for p, _ in exemplars]
    return dec


def _loads_lenient(text: str) -> tuple[Any, bool]:
    try:
        return json.loads(text), False
    except (json.JSONDecodeError, ValueError, RecursionError):  # RecursionError: "[[[[…" nested too deeply
        pass
    fixed = re.sub(r",\s*([\]}])", r"\1", text)  # trailing commas
    fixed = re.sub(r"(?<![\w\\])'([^'\n]*)'", r'"\1"', fixed)  # single-quoted strings
    fixed = re.sub(r"\bNone\b", "null", fixed)
    try:
        return json.loads(fixed), True
    except (json.JSONDecodeError, ValueError, RecursionError):
        return None, True


def _as_int_list(v: Any) -> list[int]:
    vals = v if isinstance(v, list) else [v]
    out = []
    for x in vals:
        try:
            i = int(str(x).strip())
        except ValueError:
            continue
        if i >= 0:
            out.append(i)
    return out


def parse_decomposition(text: object, q: Question | None = None) -> Decomposition:
    """The sub-questions in the LLM's output. Never raises: broken JSON is repaired where it can
    be (trailing commas, single quotes, objects outside a list), items without a question are
    dropped (``bad_item``), and with nothing usable the whole question becomes one sub-question
    seeded with the topic entities (``fallback``)."""
    raw = clean_text(text)
    error = None
    start, end = raw.find("["), raw.rfind("]")
    data = None
    if start >= 0 and end > start:
        data, repaired = _loads_lenient(raw[start:end + 1])
        if repaired and data is not None:
            error = "bad_json_repaired"
    if not isinstance(data, list):  # objects one by one
        objs = []
        for m in re.finditer(r"\{[^{}]*\}", raw):
            d, _ = _loads_lenient(m.group(0))
            if isinstance(d, dict):
                objs.append(d)
        data = objs
        error = "bad_json_repaired" if objs else "no_json"
    subs: list[SubQuestion] = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not str(item.get("question", "")).strip():
            error = error or "bad_item"
            continue
        sid = _as_int_list(item.get("id", i))
        seeds = item.get("seed_entities", item.get("seeds", []))
        seeds = [str(s).strip() for s in (seeds if isinstance(seeds, list) else [seeds]) if str(s).strip()]
        subs.append(SubQuestion(sid[0] if sid else i, str(item["question"]).strip(), _as_int_list(item.get("dep", [])), seeds))
    ids = [s.id for s in subs]
    if len(set(ids)) != len(ids):  # renumber in order, keep the references that still make sense
        subs = [SubQuestion(i, s.question, [d for d in s.dep if d < i], s.seed_entities) for i, s in enumerate(subs)]
        error = error or "bad_ids"
    if not subs:
        topic = list(q.topic_entities) if q else []
        masked = q.question if q else ""
        for t in topic:
            masked = re.sub(re.escape(t), MASK, masked, flags=re.I)
        subs = [SubQuestion(0, masked, [], topic)]
        error = "fallback"
    return Decomposition(raw, subs, error)


# --------------------------------------------------------------------------------------------
# Stage 3: template matching
# --------------------------------------------------------------------------------------------
@dataclass
class Match:
    subquestion: int
    text: str  # what was embedded (seed names masked)
    templates: list[tuple[str, float]]  # top-K (template, cosine)
    chains: list[tuple[str, ...]]  # candidate chains, in template order, deduplicated

    def as_dict(self) -> dict[str, Any]:
        return {"subquestion": self.subquestion, "text": self.text,
                "templates": [[t, round(float(s), 4)] for t, s in self.templates],
                "chains": [list(c) for c in self.chains]}


def masked_text(sub: SubQuestion) -> str:
    """The sub-question as a template: seed names replaced by ``[mask]`` (the model may write them in)."""
    text = sub.question
    for s in sub.seed_entities:
        if s and not _ANSWER_REF.search(s):
            text = re.sub(re.escape(s), MASK, text, flags=re.I)
    text = _ANSWER_REF.sub(MASK, text)
    return re.sub(r"\s+", " ", text).strip().rstrip(" ?").lower()


def match_templates(subs: Sequence[SubQuestion], bank: TemplateBank, embedder, K: int = 1) -> list[Match]:
    """The top-K templates of each sub-question by cosine similarity, and their chains."""
    embed_bank(bank, embedder)
    texts = [masked_text(s) for s in subs]
    if not texts:
        return []
    idx, scores = cosine_topk(embedder.encode(texts), bank.vectors, max(1, K))
    out = []
    for s, t, row, srow in zip(subs, texts, idx, scores):
        chosen = [(bank.templates[i].text, float(sc)) for i, sc in zip(row.tolist(), srow.tolist())]
        chains: list[tuple[str, ...]] = []
        for i in row.tolist():
            for c in bank.templates[i].chains:
                if c not in chains:
                    chains.append(c)
        out.append(Match(s.id, t, chosen, chains))
    return out


# --------------------------------------------------------------------------------------------
# Stage 4: knowledge retrieval
# --------------------------------------------------------------------------------------------
def relation_path(kg_name: str, chain: Sequence[str]) -> list[str] | None:
    """A chain in the KG's own relations (the mini-world's are Wikidata-like ``P`` ids); None
    when the KG has no such relation."""
    if kg_name.startswith("miniworld"):
        from ..data.miniworld import PROPERTIES, schema_path

        if any(c.lstrip("^") not in PROPERTIES for c in chain):
            return None
        return schema_path(list(chain), "freebase" if kg_name.endswith("freebase") else "wikidata")
    return list(chain)


DENSE = "(dense supplement)"  # the chain name of the dense supplement's group (sec. 3.2, ``dense_supplement``)
ONE_HOP = "(1-hop facts)"  # the chain name of a seed's 1-hop facts (``pipeline=released``)


@dataclass
class CandidateGroup:
    chain: tuple[str, ...]
    triples: list[tuple[str, str, str]]  # (head label, relation, tail label), one per reached entity
    tails: list[str]  # reached entity IRIs / literal values, most supported first
    reached: list[str] = field(default_factory=list)  # the entity of each triple (same order as ``triples``)
    # a group no chain made (the dense supplement, a seed's 1-hop facts): each triple (s, r, o) as the KG
    # states it, and for the supplement its cosine with the sub-question ([] for a chain's group)
    stated: list[tuple[str, str, str]] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = {"chain": list(self.chain), "n": len(self.tails), "triples": [list(t) for t in self.triples[:20]]}
        if self.scores:
            out["scores"] = [round(float(s), 4) for s in self.scores[:20]]
        return out


def link_seed(name: str, kg, topic_hint: Sequence[str] = ()) -> list[str]:
    """The KG entities a seed name denotes (exact label first; fuzzy only if nothing matches)."""
    hits = kg.lookup(name, fuzzy=False, limit=5) or kg.lookup(name, fuzzy=True, limit=1)
    return [iri for iri, _, _ in hits]


def _walk(kg, kg_name: str, seed: str, chain: Sequence[str], exclude: set[str]) -> list[tuple[str, str]]:
    """(entity reached, the entity it was reached from on the last hop); ``exclude`` never appears."""
    frontier = [(seed, seed)]
    rels = relation_path(kg_name, chain)
    if rels is None:
        return []
    for rel in rels:
        nxt: dict[tuple[str, str], None] = {}
        for node, _ in frontier:
            for v in kg.follow_path(node, [rel], exclude_seed=True):
                if v not in exclude:
                    nxt[(v, node)] = None
        frontier = list(nxt)
    return frontier


def retrieve_candidates(kg, kg_name: str, seeds: Sequence[str], chains: Sequence[tuple[str, ...]],
                        exclude: set[str], max_seeds: int = 200) -> list[CandidateGroup]:
    """Execute each candidate chain from every seed; the topic entity (``exclude``) is never reached."""
    groups = []
    for chain in chains:
        support: Counter = Counter()
        triples: list[tuple[str, str, str]] = []
        reached: list[str] = []
        rel_name = " / ".join(c.replace("_", " ") for c in chain)
        for seed in list(seeds)[:max_seeds]:
            for v, src in _walk(kg, kg_name, seed, chain, exclude):
                if support[v] == 0:
                    triples.append((_label(kg, src), rel_name, _label(kg, v)))
                    reached.append(v)
                support[v] += 1
        tails = sorted(support, key=lambda v: -support[v])  # stable: ties keep the order they were reached in
        groups.append(CandidateGroup(tuple(chain), triples, tails, reached))
    return groups


def _label(kg, v: str) -> str:
    return kg.label(v) if "://" in v else v


def _neighbours(kg, seed: str, limit: int | None = None) -> list[tuple[str, str, bool, tuple[str, str, str]]]:
    """The 1-hop facts of ``seed``, both directions: (the other entity, the relation's label, whether
    the seed is the object, (s, r, o) labels as the KG states the fact), each fact once. A literal
    value has none."""
    if "://" not in seed:
        return []
    out: dict[tuple[str, str, str], tuple[str, str, bool, tuple[str, str, str]]] = {}
    for t in kg.triples_around(seed, "both", limit=limit):
        inverse = t.s.iri != seed
        other = t.s if inverse else t.o
        rel = t.r.label or t.r.iri
        out.setdefault((t.s.iri, t.r.iri, t.o.iri), (other.iri, rel, inverse, (t.s.label, rel, t.o.label)))
    return list(out.values())


DENSE_MAX_SEEDS = 50  # seeds whose neighbourhoods the dense supplement reads (in the order they were reached)
DENSE_PER_SEED = 500  # triples read around one seed (a hub — a genre, a year — has thousands)


def dense_supplement(kg, sub_text: str, seeds: Sequence[str], exclude: set[str], known: set[str], embedder,
                     n: int) -> CandidateGroup:
    """Stage 4b, the paper's supplement to the chains (sec. 3.2: "the triplets retrieved by DPR will also
    be included as supplementary answer candidates"): the triples around the sub-question's seeds
    (1 hop, both directions; the first :data:`DENSE_MAX_SEEDS` seeds, :data:`DENSE_PER_SEED` triples
    each) are verbalised as sentences ``s r o`` and ranked by cosine similarity with the sub-question (as
    shown to the LLM, seeds filled in) under the project's sentence encoder; the ``n`` best triples that
    reach an entity the chains did not reach (one triple per entity, its best; never a seed or the
    topic, ``exclude``) form one more candidate group. The paper's retriever is DPR (a BERT bi-encoder
    trained for passage retrieval) over its knowledge base; here the encoder is the project's
    all-MiniLM-L6-v2 and the search space the seeds' neighbourhood, where every triple names a candidate
    answer next to the seed."""
    if n <= 0 or embedder is None:
        return CandidateGroup((DENSE,), [], [], [])
    seeds = list(dict.fromkeys(seeds))
    skip = set(exclude) | set(known) | set(seeds)
    facts: list[tuple[str, str, tuple[str, str, str]]] = []  # (reached entity, its triple from the seed, stated)
    for seed in seeds[:DENSE_MAX_SEEDS]:
        for other, rel, inverse, stated in _neighbours(kg, seed, DENSE_PER_SEED):
            if other not in skip:
                facts.append((other, (_label(kg, seed), ("^" if inverse else "") + rel, stated[2] if not inverse else stated[0]),
                              stated))
    if not facts:
        return CandidateGroup((DENSE,), [], [], [])
    texts = [f"{s} {r} {o}" for _, _, (s, r, o) in facts]
    idx, scores = cosine_topk(embedder.encode([sub_text])[0], embedder.encode(texts), len(texts))
    group = CandidateGroup((DENSE,), [], [], [])
    for i, sc in zip(idx.tolist(), scores.tolist()):
        v, triple, stated = facts[i]
        if v in group.tails:
            continue
        group.triples.append(triple)
        group.tails.append(v)
        group.reached.append(v)
        group.stated.append(stated)
        group.scores.append(float(sc))
        if len(group.tails) >= n:
            break
    return group


# --------------------------------------------------------------------------------------------
# Stage 5: candidate reasoning
# --------------------------------------------------------------------------------------------
@dataclass
class Reasoning:
    subquestion: int
    question: str  # the sub-question with its seeds filled in
    chosen: list[int]  # indices of the chosen candidate groups
    answers: list[str]  # entity IRIs / values
    text: str = ""  # the LLM's output ("" when no call was needed)
    called: bool = False
    error: str | None = None
    mode: str = "group"  # "select" (the paper's C* ⊆ C), "group" (choose chain groups), "all" (no LLM)
    n_candidates: int = 0  # candidate entities the chains reached
    candidates: list[str] = field(default_factory=list)  # their labels (the first MAX_TRACE)
    selected: list[str] = field(default_factory=list)  # labels the LLM selected that are candidates
    unmatched: int = 0  # names the LLM wrote that are no candidate (made up, or a subject)
    over_bound: bool = False  # more candidates than one call may show: all kept, no selection call
    calls: int = 0
    dense: int = 0  # of the candidates: the dense supplement's (``dense_supplement``; 0 without it)
    dense_selected: int = 0  # of the answers: the dense supplement's

    def as_dict(self) -> dict[str, Any]:
        out = {"subquestion": self.subquestion, "question": self.question, "chosen": self.chosen,
               "n_answers": len(self.answers), "text": self.text, "called": self.called, "error": self.error}
        if self.mode != "group":
            out.update(mode=self.mode, n_candidates=self.n_candidates, candidates=self.candidates[:MAX_TRACE],
                       selected=self.selected[:MAX_TRACE], unmatched=self.unmatched, over_bound=self.over_bound,
                       calls=self.calls)
        if self.dense:
            out.update(dense=self.dense, dense_selected=self.dense_selected)
        return out


MAX_TRACE = 100  # candidate / selected labels kept in a trace
REASONING_MODES = ("select", "group", "all")
SELECT_FORMATS = {"rules": "keqing_select", "text": "keqing_select_text"}


def fill_mask(template: str, names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit]) + (f" and {len(names) - limit} others" if len(names) > limit else "")
    return template.replace(MASK, shown or "?") if MASK in template else template


def candidates_block(groups: Sequence[CandidateGroup], per_group: int = 6) -> str:
    lines = []
    for i, g in enumerate(groups):
        if not g.tails:
            continue
        shown = "; ".join(f"({h} | {r} | {t})" for h, r, t in g.triples[:per_group])
        more = f" … and {len(g.tails) - per_group} more" if len(g.tails) > per_group else ""
        lines.append(f"{i + 1}. {shown}{more}")
    return "\n".join(lines)


def reason(sub_text: str, groups: Sequence[CandidateGroup], ctx: Context, sub_id: int = 0,
           max_tokens: int = 24) -> Reasoning:
    """The LLM picks which candidate facts answer the sub-question; their entities are its
    answers. With a single non-empty candidate group there is nothing to choose and no call."""
    live = [i for i, g in enumerate(groups) if g.tails]
    if not live:
        return Reasoning(sub_id, sub_text, [], [], error="no_candidates")
    if len(live) == 1:
        return Reasoning(sub_id, sub_text, live, list(groups[live[0]].tails))
    prompt = load_prompt("keqing_reason")
    messages = prompt.messages(question=sub_text, candidates=candidates_block(groups))
    r = ctx.llm.chat(messages, max_tokens=max_tokens, temperature=0.0, seed=ctx.seed)
    nums = [int(n) - 1 for n in re.findall(r"\d+", clean_text(r.text))]
    chosen = [n for n in dict.fromkeys(nums) if n in live]
    error = None
    if not chosen:  # unparseable or out of range: take the best-matching template's group
        chosen, error = [live[0]], "bad_choice"
    answers = list(dict.fromkeys(v for i in chosen for v in groups[i].tails))
    return Reasoning(sub_id, sub_text, chosen, answers, r.text, True, error)


def verbalise(group: CandidateGroup, i: int, fmt: str = "rules") -> str:
    """The i-th candidate fact of a group as the LLM sees it: a tuple ``(s, r, o)`` (``rules``: the
    format explained in the instruction, for off-the-shelf models) or a sentence ``s r o.`` (``text``:
    the serialised form of the paper's Fig. 4, for fine-tuned models). A one-relation inverse chain
    (``^directed_by`` from a director) is turned round, so the fact reads as the KG states it; a group
    no chain made (the dense supplement, a seed's 1-hop facts) holds its facts as the KG states them."""
    if group.stated:
        s, rel, o = group.stated[i]
        rel = rel.replace("_", " ")
    else:
        head, _, tail = group.triples[i]
        chain = group.chain
        rel = " / ".join(c.lstrip("^").replace("_", " ") for c in chain)
        s, o = (tail, head) if len(chain) == 1 and chain[0].startswith("^") else (head, tail)
    return f"({s}, {rel}, {o})" if fmt == "rules" else f"{s} {rel} {o}."


def candidate_facts(groups: Sequence[CandidateGroup], which: Sequence[int],
                    fmt: str = "rules") -> list[tuple[str, str, str]]:
    """(entity, its label, the verbalised fact that reached it) for every candidate of the chosen
    groups, each entity once (the first group that reached it)."""
    out: dict[str, tuple[str, str, str]] = {}
    for gi in which:
        g = groups[gi]
        for i, v in enumerate(g.reached):
            if v not in out:
                out[v] = (v, g.triples[i][2], verbalise(g, i, fmt))
    return list(out.values())


def _norm(name: str) -> str:
    return re.sub(r"[^\w]+", " ", name.casefold()).strip()


def parse_selection(text: object) -> tuple[list[str] | None, bool]:
    """The names in the LLM's answer: a JSON list (repaired leniently), else a comma/line list.
    Returns (names, parsed_as_list); ``None`` when the text holds nothing at all."""
    t = clean_text(text)
    if not t:
        return None, False
    m = re.search(r"\[(.*?)\]", t, re.S)
    if m:
        body = "[" + m.group(1) + "]"
        for loader in (json.loads, __import__("ast").literal_eval):
            try:
                v = loader(body)
            except Exception:  # noqa: BLE001 - LLM output is data
                continue
            if isinstance(v, (list, tuple)):
                return [str(x).strip() for x in v if str(x).strip()], True
        items = [x.strip().strip("'\"").strip() for x in m.group(1).split(",")]
        return [x for x in items if x], True
    items = [x.strip().strip("'\"-*•. ").strip() for x in re.split(r"[\n,;]", t)]
    return [x for x in items if x], False


def match_selection(names: Sequence[str], cands: Sequence[tuple[str, str, str]]) -> tuple[list[str], list[str], int]:
    """Map the names the LLM wrote onto candidates by their (normalised) labels: the selected
    entities (every entity carrying a named label), their labels, and how many names matched none."""
    by_label: dict[str, list[str]] = defaultdict(list)
    label_of: dict[str, str] = {}
    for v, label, _ in cands:
        by_label[_norm(label)].append(v)
        label_of[v] = label
    chosen: dict[str, None] = {}
    unmatched = 0
    for n in names:
        hit = by_label.get(_norm(n))
        if hit:
            chosen.update(dict.fromkeys(hit))
        else:
            unmatched += 1
    iris = list(chosen)
    return iris, [label_of[v] for v in iris], unmatched


def select_candidates(sub_text: str, groups: Sequence[CandidateGroup], ctx: Context, sub_id: int = 0,
                      fmt: str = "rules", max_candidates: int = 40) -> Reasoning:
    """Candidate reasoning as in the paper (sec. 3.3, Eq. 4): the LLM reads the verbalised candidate
    triples of a sub-question and selects the answer entities, C* ⊆ C. One call per sub-question
    with two or more candidate entities (with one, the selection could only keep it: no call).

    Bound: one call shows at most ``max_candidates`` facts. Above it, several chain groups are first
    narrowed by the group choice (:func:`reason`, one more call); if the rest is still above the
    bound, every candidate is kept without a selection call (``over_bound``, counted). An answer
    that names no candidate falls back to all candidates (``select_empty`` when the LLM selected
    nothing, ``select_unmatched`` when its names match none): a malformed answer never ends a run.
    With the dense supplement among the groups (:func:`dense_supplement`), the fallback keeps the
    chains' candidates only (the supplement's when the chains reached none), and the reasoning counts
    the supplement's candidates and answers (``dense``, ``dense_selected``)."""
    if fmt not in SELECT_FORMATS:
        raise ValueError(f"unknown candidate format {fmt!r}; use one of {', '.join(SELECT_FORMATS)}")
    live = [i for i, g in enumerate(groups) if g.tails]
    if not live:
        return Reasoning(sub_id, sub_text, [], [], error="no_candidates", mode="select")
    r = _select(sub_text, groups, ctx, sub_id, fmt, max_candidates, live)
    supplement = {v for i in r.chosen if groups[i].chain == (DENSE,) for v in groups[i].tails}
    if supplement:
        if r.error in ("select_empty", "select_unmatched"):
            chains = [i for i in r.chosen if groups[i].chain != (DENSE,)]
            kept = [c[0] for c in candidate_facts(groups, chains, fmt)]
            r.answers = kept or r.answers
        r.dense = len(supplement)
        r.dense_selected = sum(1 for v in r.answers if v in supplement)
    return r


def _select(sub_text: str, groups: Sequence[CandidateGroup], ctx: Context, sub_id: int, fmt: str,
            max_candidates: int, live: list[int]) -> Reasoning:
    which, text, calls, error = live, "", 0, None
    n_all = len(candidate_facts(groups, live, fmt))
    if n_all > max_candidates and len(live) > 1:
        g = reason(sub_text, groups, ctx, sub_id)
        which, text, calls, error = g.chosen, g.text, 1, g.error
    cands = candidate_facts(groups, which, fmt)
    labels = [c[1] for c in cands]
    if len(cands) > max_candidates:
        return Reasoning(sub_id, sub_text, list(which), [c[0] for c in cands], text, calls > 0, error, "select",
                         n_all, labels, [], 0, True, calls)
    if len(cands) == 1:  # one candidate entity: a selection could only keep it (an empty or
        # unmatched one falls back to it), so no call is made
        return Reasoning(sub_id, sub_text, list(which), [cands[0][0]], text, calls > 0, error, "select",
                         n_all, labels, [labels[0]], 0, False, calls)
    prompt = load_prompt(SELECT_FORMATS[fmt])
    facts = "\n".join(c[2] for c in cands) if fmt == "rules" else " ".join(c[2] for c in cands)
    r = ctx.llm.chat(prompt.messages(facts=facts, question=sub_text), max_tokens=min(24 + 12 * len(cands), 480),
                     temperature=0.0, seed=ctx.seed)
    calls += 1
    names, _ = parse_selection(r.text)
    iris, chosen_labels, unmatched = match_selection(names or [], cands)
    if not iris:  # nothing usable: keep every candidate, and say why
        error = "select_unmatched" if names else "select_empty"
        return Reasoning(sub_id, sub_text, list(which), [c[0] for c in cands], r.text, True, error, "select",
                         n_all, labels, [], unmatched, False, calls)
    return Reasoning(sub_id, sub_text, list(which), iris, r.text, True, error, "select", n_all, labels,
                     chosen_labels, unmatched, False, calls)


def keep_all(sub_text: str, groups: Sequence[CandidateGroup], sub_id: int = 0) -> Reasoning:
    """No candidate reasoning: every entity the chains reached answers the sub-question."""
    live = [i for i, g in enumerate(groups) if g.tails]
    if not live:
        return Reasoning(sub_id, sub_text, [], [], error="no_candidates", mode="all")
    tails = list(dict.fromkeys(v for i in live for v in groups[i].tails))
    return Reasoning(sub_id, sub_text, live, tails, mode="all", n_candidates=len(tails))


# --------------------------------------------------------------------------------------------
# Execution of the whole plan, and stage 6: the response
# --------------------------------------------------------------------------------------------
@dataclass
class Step:
    sub: SubQuestion
    seeds: list[str]
    match: Match
    groups: list[CandidateGroup]
    reasoning: Reasoning

    def as_dict(self) -> dict[str, Any]:
        return {"sub": self.sub.as_dict(), "n_seeds": len(self.seeds), "match": self.match.as_dict(),
                "groups": [g.as_dict() for g in self.groups], "reasoning": self.reasoning.as_dict()}


def order_subquestions(subs: Sequence[SubQuestion]) -> list[SubQuestion]:
    """Dependencies first (a cycle or a dangling reference keeps the written order)."""
    done: list[SubQuestion] = []
    pending = list(subs)
    ids = {s.id for s in subs}
    while pending:
        ready = [s for s in pending if all(d in {x.id for x in done} or d not in ids for d in s.dep)]
        nxt = ready[0] if ready else pending[0]
        done.append(nxt)
        pending.remove(nxt)
    return done


def resolve_seeds(s: SubQuestion, answers: dict[int, list[str]], topic: set[str], kg) -> tuple[list[str], bool]:
    """The entities a sub-question starts from: its seed names linked (:func:`link_seed`) and the answers
    of the sub-questions its ``<ANSWER>-k`` references name. True when the model named no usable seed: a
    first sub-question then starts from the topic entity, a later one from the answers of what it
    depends on."""
    seeds: list[str] = []
    for name in s.seed_entities:
        ref = _ANSWER_REF.search(name)
        if ref:
            seeds += answers.get(int(ref.group(1)), [])
        else:
            seeds += link_seed(name, kg)
    unlinked = not s.seed_entities or (not seeds and not any(_ANSWER_REF.search(n) for n in s.seed_entities))
    if unlinked:
        seeds = [v for d in s.dep for v in answers.get(d, [])] or sorted(topic)
    return list(dict.fromkeys(seeds)), unlinked


def linked_topics(q: Question, kg) -> set[str]:
    """The question's topic entities linked in the KG (:func:`link_seed`): never an answer of any hop."""
    topic: set[str] = set()
    for t in q.topic_entities:
        topic.update(link_seed(t, kg))
    return topic


def retrieve_step(s: SubQuestion, seeds: Sequence[str], match: Match, ctx: Context, kg_name: str, topic: set[str],
                  reasoning: str = "select", max_candidates: int = 40, last_only: bool = False,
                  dense: int = 0) -> tuple[str, list[CandidateGroup]]:
    """Knowledge retrieval for one sub-question (the paper's sec. 3.2): the sub-question as the LLM will read
    it (its template, seeds filled in) and its candidate groups — each candidate chain of ``match`` run from
    ``seeds`` (:func:`retrieve_candidates`), plus, with ``dense`` > 0, the dense supplement
    (:func:`dense_supplement`) when an LLM reasons over this sub-question (see :func:`execute_plan`)."""
    kg = ctx.kg
    groups = retrieve_candidates(kg, kg_name, seeds, match.chains, topic)
    shown = fill_mask(s.question if MASK in s.question else match.text, [_label(kg, v) for v in seeds])
    if dense > 0 and reasoning != "all" and not last_only:
        known = {v for g in groups for v in g.tails}
        room = dense if reasoning != "select" else min(dense, max(0, max_candidates - len(known)))
        groups = groups + [dense_supplement(kg, shown, seeds, topic, known, ctx.embedder, room)]
    return shown, groups


def reason_step(shown: str, groups: Sequence[CandidateGroup], ctx: Context, sub_id: int, reasoning: str = "select",
                fmt: str = "rules", max_candidates: int = 40, last_only: bool = False) -> Reasoning:
    """Candidate reasoning for one sub-question (the paper's sec. 3.3) by the ``reasoning`` mode:
    :func:`select_candidates` (select), :func:`reason` (group) or :func:`keep_all` (all, or ``last_only``:
    a sub-question before the last when only the last is reasoned over)."""
    if last_only:
        return keep_all(shown, groups, sub_id)
    if reasoning == "select":
        return select_candidates(shown, groups, ctx, sub_id, fmt, max_candidates)
    if reasoning == "group":
        return reason(shown, groups, ctx, sub_id)
    return keep_all(shown, groups, sub_id)


def reached_from(kg, kg_name: str, seeds: Sequence[str], chain: Sequence[str], exclude: set[str],
                 max_seeds: int = 200) -> list[tuple[str, str]]:
    """(seed, entity reached) for every seed and every entity ``chain`` reaches from it, as
    :func:`retrieve_candidates` walks it (which keeps one triple per entity): every edge of a drawing of
    the retrieval, also of a multi-hop chain (from the seed, not from the last hop's entity)."""
    return list(dict.fromkeys((seed, v) for seed in list(seeds)[:max_seeds]
                              for v, _ in _walk(kg, kg_name, seed, chain, exclude)))


def execute_plan(q: Question, subs: Sequence[SubQuestion], bank: TemplateBank, ctx: Context, kg_name: str,
                 K: int = 1, reasoning: str = "select", fmt: str = "rules",
                 max_candidates: int = 40, reason_steps: str = "every",
                 dense: int = 0) -> tuple[list[Step], str | None]:
    """Match, retrieve and reason for every sub-question in dependency order. ``reasoning``:
    ``select`` (the paper's candidate reasoning, :func:`select_candidates`), ``group`` (the LLM
    chooses among chain groups, no call for one group: :func:`reason`) or ``all`` (no LLM).
    ``reason_steps``: ``every`` sub-question (the paper) or only the ``last`` one (earlier ones keep
    every entity their chains reach, :func:`keep_all`). ``dense`` > 0 adds up to that many
    dense-retrieved triples to the chains' candidates of every sub-question the LLM reasons over
    (:func:`dense_supplement`, the paper's supplement "if there remains additional token budget": with
    the candidate selection, no more than the room the chains' candidates leave under
    ``max_candidates``; none to a sub-question that keeps every candidate without an LLM)."""
    if reasoning not in REASONING_MODES:
        raise ValueError(f"unknown reasoning {reasoning!r}; use one of {', '.join(REASONING_MODES)}")
    kg = ctx.kg
    ordered = order_subquestions(subs)
    matches = {m.subquestion: m for m in match_templates(ordered, bank, ctx.embedder, K)}
    answers: dict[int, list[str]] = {}
    topic = linked_topics(q, kg)
    steps: list[Step] = []
    error = None
    for s in ordered:
        seeds, unlinked = resolve_seeds(s, answers, topic, kg)
        if unlinked:
            error = error or "seed_unlinked"
        last_only = reason_steps == "last" and s is not ordered[-1]
        shown, groups = retrieve_step(s, seeds, matches[s.id], ctx, kg_name, topic, reasoning, max_candidates,
                                      last_only, dense)
        r = reason_step(shown, groups, ctx, s.id, reasoning, fmt, max_candidates, last_only)
        if r.error in ("bad_choice", "select_empty", "select_unmatched"):
            error = error or r.error
        answers[s.id] = r.answers
        steps.append(Step(s, seeds, matches[s.id], groups, r))
    return steps, error


# --------------------------------------------------------------------------------------------
# Keqing as released by its authors (``pipeline=released``)
# --------------------------------------------------------------------------------------------
def one_hop_facts(kg, seed: str, max_facts: int | None = None) -> tuple[CandidateGroup, int, int]:
    """The released code's knowledge retrieval: every 1-hop fact of ``seed`` (both directions), as a
    group whose facts read as the KG states them; with how many facts and how many relations (a relation
    and its inverse are one, as the released code counts them) the seed has. ``max_facts``: at most that
    many facts in the group (the released code sends all to its LLM; a hub would not fit the local model's
    context), taken in turn from each relation so that every relation keeps some."""
    facts = _neighbours(kg, seed)
    by_rel: dict[tuple[str, bool], list] = defaultdict(list)
    for f in facts:
        by_rel[(f[1], f[2])].append(f)
    bound = len(facts) if max_facts is None else min(max_facts, len(facts))
    shown: list = []
    queues = [list(v) for v in by_rel.values()]
    while len(shown) < bound:
        for qu in queues:
            if qu and len(shown) < bound:
                shown.append(qu.pop(0))
    label = _label(kg, seed)
    group = CandidateGroup((ONE_HOP,), [(label, ("^" if inv else "") + rel, st[0] if inv else st[2])
                                        for _, rel, inv, st in shown],
                           list(dict.fromkeys(v for v, _, _, _ in shown)), [v for v, _, _, _ in shown],
                           [st for _, _, _, st in shown])
    return group, len(facts), len({rel for rel, _ in by_rel})


def _fill_one(question: str, label: str) -> str:
    """The released code's sub-question for one seed: its mask (or answer reference) replaced by
    ``[label]``; a question without either as it is."""
    text = _ANSWER_REF.sub(MASK, question)
    return text.replace(MASK, f"[{label}]") if MASK in text else text


def reason_released(question: str, seed: str, ctx: Context, sub_id: int = 0, fmt: str = "rules",
                    max_facts: int = 200) -> tuple[CandidateGroup, Reasoning]:
    """The released code's candidate reasoning for one seed entity: the LLM reads every 1-hop fact of the
    seed (:func:`one_hop_facts`; at most ``max_facts`` in one call, ``over_bound`` when it has more) and the
    sub-question with the seed's name in brackets, and lists the answers, with the prompt of the default
    selection (:data:`SELECT_FORMATS`). When the seed's facts hold one relation only, every neighbour is an
    answer and no call is made, as in the released code. The names the LLM writes are mapped onto the
    entities of the facts shown (the seed included) by label; names that match none are dropped and
    counted (``unmatched``). An empty list is an empty answer: there is no fallback."""
    kg = ctx.kg
    shown = _fill_one(question, _label(kg, seed))
    group, n_facts, n_rels = one_hop_facts(kg, seed)
    if n_rels > 1 and n_facts > max_facts:
        group, _, _ = one_hop_facts(kg, seed, max_facts)
    if not group.tails:
        return group, Reasoning(sub_id, shown, [], [], error="no_candidates", mode="released")
    labels = [_label(kg, v) for v in group.tails]
    if n_rels == 1:
        return group, Reasoning(sub_id, shown, [0], list(group.tails), mode="released", n_candidates=len(group.tails),
                                candidates=labels[:MAX_TRACE])
    facts = list(dict.fromkeys(verbalise(group, i, fmt) for i in range(len(group.reached))))
    prompt = load_prompt(SELECT_FORMATS[fmt])
    r = ctx.llm.chat(prompt.messages(facts="\n".join(facts) if fmt == "rules" else " ".join(facts), question=shown),
                     max_tokens=min(24 + 12 * len(group.tails), 480), temperature=0.0, seed=ctx.seed)
    names, _ = parse_selection(r.text)
    cands = [(seed, _label(kg, seed), "")] + [(v, lb, "") for v, lb in zip(group.tails, labels)]
    iris, chosen, unmatched = match_selection(names or [], cands)
    error = None if iris else ("select_unmatched" if names else "select_empty")
    return group, Reasoning(sub_id, shown, [0], iris, r.text, True, error, "released", len(group.tails),
                            labels[:MAX_TRACE], chosen, unmatched, n_facts > len(group.reached), 1)


def execute_released(q: Question, subs: Sequence[SubQuestion], ctx: Context, fmt: str = "rules",
                     max_facts: int = 200, max_seeds: int = 200) -> tuple[list[Step], str | None]:
    """Keqing as its authors released it (``NoviceStone/Keqing``, ``chat.py``), after the decomposition:
    for every sub-question in dependency order, every seed entity's 1-hop facts are read by the LLM
    (:func:`reason_released`, one call per seed with facts of several relations); the sub-question's
    answers are the union over its seeds, less the seeds of the sub-question it depends on (the released
    code's only exclusion; the question's topic entity is not excluded as such). No templates, no chains,
    no response. The answers keep the order the LLM wrote them in, seed by seed (the released code
    returns a set, whose order is arbitrary). Seeds are resolved as in :func:`execute_plan`
    (:func:`resolve_seeds`); the first ``max_seeds`` of them are read (the released code reads all: a
    sub-question whose seeds are a hub's thousands of neighbours would make as many calls)."""
    kg = ctx.kg
    ordered = order_subquestions(subs)
    answers: dict[int, list[str]] = {}
    seeds_of: dict[int, list[str]] = {}
    topic = {v for t in q.topic_entities for v in link_seed(t, kg)}
    steps: list[Step] = []
    error = None
    for s in ordered:
        seeds, unlinked = resolve_seeds(s, answers, topic, kg)
        if unlinked:
            error = error or "seed_unlinked"
        seeds_of[s.id] = seeds
        exclude = set(seeds_of.get(s.dep[0], [])) if s.dep else set()
        groups: list[CandidateGroup] = []
        parts: list[Reasoning] = []
        for seed in seeds[:max(0, max_seeds)]:
            g, r = reason_released(s.question, seed, ctx, s.id, fmt, max_facts)
            groups.append(g)
            parts.append(r)
        found = list(dict.fromkeys(v for r in parts for v in r.answers if v not in exclude))
        labels = list(dict.fromkeys(lb for r in parts for lb in r.candidates))
        called = [r for r in parts if r.called]
        err = None if found or not called else ("select_unmatched" if any(r.unmatched for r in called) else "select_empty")
        if not any(g.tails for g in groups):
            err = "no_candidates"
        shown = fill_mask(_ANSWER_REF.sub(MASK, s.question), [_label(kg, v) for v in seeds])
        r = Reasoning(s.id, shown, [i for i, p in enumerate(parts) if p.answers], found,
                      "\n".join(p.text for p in called), bool(called), err, "released",
                      len({v for g in groups for v in g.tails}), labels[:MAX_TRACE],
                      list(dict.fromkeys(lb for p in parts for lb in p.selected)), sum(p.unmatched for p in parts),
                      any(p.over_bound for p in parts), len(called))
        if err in ("select_empty", "select_unmatched"):
            error = error or err
        answers[s.id] = found
        steps.append(Step(s, seeds, Match(s.id, masked_text(s), [], []), groups, r))
    return steps, error


def final_answers(steps: Sequence[Step], kg) -> list[str]:
    """The answers of the last sub-question, as labels (most supported first)."""
    if not steps:
        return []
    return list(dict.fromkeys(_label(kg, v) for v in steps[-1].reasoning.answers))


def execution_log(steps: Sequence[Step], kg, per_step: int = 5) -> str:
    lines = []
    for i, st in enumerate(steps, 1):
        names = [_label(kg, v) for v in st.reasoning.answers]
        more = f" (+{len(names) - per_step} more)" if len(names) > per_step else ""
        chain = " / ".join(st.groups[c].chain[0] if len(st.groups[c].chain) == 1 else "/".join(st.groups[c].chain)
                           for c in st.reasoning.chosen) or "nothing found"
        lines.append(f"Step {i}: {st.reasoning.question} [{chain}] → {', '.join(names[:per_step]) or 'no answer'}{more}")
    return "\n".join(lines)


def respond(question: str, steps: Sequence[Step], ctx: Context, max_tokens: int = 120) -> str:
    """The LLM turns the execution log into a short answer that shows the reasoning path."""
    prompt = load_prompt("keqing_respond")
    r = ctx.llm.chat(prompt.messages(question=question, log=execution_log(steps, ctx.kg)),
                     max_tokens=max_tokens, temperature=0.0, seed=ctx.seed)
    return clean_text(r.text)


# --------------------------------------------------------------------------------------------
# The ablation of Fig. 6: ask for the logical chain directly
# --------------------------------------------------------------------------------------------
def parse_chain(text: object, known: Sequence[str]) -> tuple[list[str], str | None]:
    """``^directed_by, in_language`` → the relations, keeping only known ones (never raises)."""
    t = clean_text(text)
    known_set = set(known)
    found = []
    for m in re.finditer(r"\^?\s*[a-z_]+", t.lower()):
        tok = m.group(0).replace(" ", "")
        if tok.lstrip("^") in known_set:
            found.append(tok)
    if not found:
        return [], "no_chain"
    return found, None


def generate_chain(q: Question, ctx: Context, exemplars: Sequence[tuple[Question, list[SubQuestion]]],
                   relations: Sequence[str], max_tokens: int = 40,
                   kg_name: str = "miniworld") -> tuple[list[str], str, str | None]:
    prompt = load_prompt("keqing_chain")
    system = domain_system(prompt, kg_name).replace("<<relations>>", ", ".join(relations))
    messages = [{"role": "system", "content": system}]
    for p, _ in exemplars:
        messages += [{"role": "user", "content": prompt.render(question=p.question)},
                     {"role": "assistant", "content": ", ".join(gold_chain(p))}]
    messages.append({"role": "user", "content": prompt.render(question=q.question)})
    r = ctx.llm.chat(messages, max_tokens=max_tokens, temperature=0.0, seed=ctx.seed)
    chain, err = parse_chain(r.text, relations)
    return chain, r.text, err


def execute_chain(q: Question, chain: Sequence[str], ctx: Context, kg_name: str, reasoning: str = "select",
                  fmt: str = "rules", max_candidates: int = 40) -> tuple[list[Step], str | None]:
    """Fig. 6's ablation after the chain is written: one step — the whole chain from the question's
    topic entities — whose candidates go through the same reasoning stage as a sub-question's."""
    kg = ctx.kg
    topic = {v for t in q.topic_entities for v in link_seed(t, kg)}
    groups = retrieve_candidates(kg, kg_name, sorted(topic), [tuple(chain)], topic) if chain else []
    sub = SubQuestion(0, q.question, [], list(q.topic_entities))
    if reasoning == "select":
        r = select_candidates(q.question, groups, ctx, 0, fmt, max_candidates)
    elif reasoning == "group":
        r = reason(q.question, groups, ctx, 0)
    else:
        r = keep_all(q.question, groups, 0)
    step = Step(sub, sorted(topic), Match(0, q.question, [], [tuple(chain)] if chain else []), groups, r)
    return [step], (r.error if r.error in ("bad_choice", "select_empty", "select_unmatched") else None)


# --------------------------------------------------------------------------------------------
# Reading the plan (compared with the gold by kgqa_lib.evaluate.diagnostics, after the method)
# --------------------------------------------------------------------------------------------
def predicted_chain(steps: Sequence[Step]) -> tuple[str, ...]:
    """The top-1 template chain of each sub-question, concatenated."""
    out: list[str] = []
    for st in steps:
        if st.match.chains:
            out += list(st.match.chains[0])
    return tuple(out)


@lru_cache(maxsize=4)
def bank_for(kg_name: str, phrasings: str = "all") -> TemplateBank:
    """The template bank of a KG's pool (the mini-world's with our phrasings of the relations it has)."""
    bank = build_template_bank(pool_for(kg_name), phrasings=phrasings, seeds=kg_name.startswith("miniworld"))
    usable = [t for t in bank.templates if any(relation_path(kg_name, c) is not None for c in t.chains)]
    return TemplateBank(usable, {c: t for c, t in bank.canonical.items() if relation_path(kg_name, c) is not None})


@dataclass(frozen=True)
class KeqingSettings(Settings):
    """``kgqa run --method keqing --help-settings``."""

    K: int = setting(1, "templates (candidate relation chains) kept per sub-question", min=1)
    exemplars: int = setting(4, "decomposition exemplars in the prompt", min=0)
    select: Literal["embedding", "fixed"] = setting("embedding", "exemplars: the most similar pool questions, or a "
                                                                 "fixed spread over hops")
    mode: Literal["decompose", "chain"] = setting("decompose", "decompose into sub-questions, or write the relation "
                                                               "chain directly (Fig. 6's ablation)")
    phrasings: Literal["all", "canonical"] = setting("all", "template phrasings: all of ours, or one per chain")
    respond: bool = setting(True, "summarise the reasoning with the LLM (false: the execution log)")
    reasoning: Literal["select", "group", "all"] = setting("select", "select: the paper's candidate selection; "
                                                                     "group: choose chain groups; all: no LLM")
    candidates: Literal["rules", "text"] = setting(
        "rules", "how candidate triples are shown (sec. 3.3): rules = tuples (s, r, o) whose format the instruction "
                 "explains (the paper: for training-free LLMs); text = sentences 's r o.' under Table 1's instruction "
                 "without the rules (the paper: for fine-tuned LLMs) — the instruction changes with the format")
    reason_max: int = setting(40, "candidate facts one selection call may show", min=1)
    reason_steps: Literal["every", "last"] = setting("every", "reason over the candidates of every sub-question (the "
                                                              "paper) or of the last only (earlier ones keep all)")
    decomposition_only: bool = setting(False, "the decomposition-only configuration (the first MetaQA benchmark): "
                                              "reasoning=group, no response — the four stages when false")
    topics: Literal["linked", "oracle"] = setting(
        "linked", "topic entities of a question whose dataset gives none at test time (GrailQA): linked = FuSIC's "
                  "entity linker on the question text; oracle = ORACLE, the dataset's gold-derived ones (GrailQA: the "
                  "gold s-expression's entity). Where the dataset gives them (MetaQA, the mini-world): those, either way")
    dense_supplement: int = setting(
        0, "sec. 3.2's supplement: up to this many dense-retrieved triples (the seeds' 1-hop triples ranked by "
           "sentence-embedding similarity with the sub-question, each reaching an entity the chains did not) added to "
           "the chains' candidates of every sub-question the LLM reasons over, within the room reason_max leaves "
           "(the paper: DPR's triples, 'if there remains additional token budget'; sec. 3.2 says it included them "
           f"'in practice'). Searched: the first {DENSE_MAX_SEEDS} seeds, {DENSE_PER_SEED} triples each in the store's "
           "order (DPR searches the whole KB); a one-candidate sub-question then makes a selection call; 0 = none "
           "(the default)", min=0)
    pipeline: Literal["paper", "released"] = setting(
        "paper", "paper: the method as the paper describes it; released: as its authors' code (NoviceStone/Keqing, "
                 "chat.py) runs it after the decomposition — every 1-hop fact of each seed instead of templates and "
                 "chains, one reasoning call per seed (none when its facts hold one relation), answers less the seeds "
                 "of the sub-question depended on, no response. The decomposition, its exemplars and the selection "
                 "prompt (candidates) are the default's: the released code's decomposer is a fine-tuned Llama-2 and "
                 "its reasoner ChatGPT with its own prompt (facts joined by ', ' in the system message). Unlike "
                 "chat.py: names matching no fact are dropped (chat.py keeps them), no human confirms each answer "
                 "(chat.py asks), a dependent sub-question's seeds are the names the model wrote, linked (chat.py: "
                 "the dependency's answers), and answers keep the model's order (chat.py: a set)")
    released_facts: int = setting(200, "pipeline=released: 1-hop facts of one seed one reasoning call may show, taken "
                                       "in turn from each relation (the released code has no bound)", min=1)
    released_seeds: int = setting(200, "pipeline=released: seeds of one sub-question whose facts are read, one call "
                                       "each, in the order they were reached (the released code has no bound)", min=1)


def settings_of(ctx: Context) -> dict[str, Any]:
    """The method's settings, defaults filled in (a dict, as the stages take them)."""
    from dataclasses import asdict

    return asdict(KeqingSettings.of(ctx))


def _kg_name(ctx: Context | Mapping[str, Any]) -> str:
    """The schema the template bank is built for (from a context or its settings); a SPARQL endpoint
    names it by its profile."""
    name = KeqingSettings.of(ctx).kg or "miniworld"
    if name.startswith("sparql+"):
        from ..kg.remote import parse_kg_url

        name = parse_kg_url(name)[1].get("profile", "wikidata")
    return {"miniworld:wikidata": "miniworld"}.get(name, name)


def check_run(dataset: str, settings: Mapping[str, Any]) -> None:
    """The run's KG has a question pool (:func:`pool_kg`), checked before any question is asked."""
    pool_kg(_kg_name(settings))


@register_method("keqing", prompts=("keqing_decompose", "keqing_reason", "keqing_respond", "keqing_chain",
                                    "keqing_select", "keqing_select_text"), settings=KeqingSettings,
                 needs=("kg", "embedder"), check=check_run)
def keqing(q: Question, ctx: Context) -> MethodResult:
    """Keqing. Settings (``--set``): ``K`` (templates per sub-question, 1), ``exemplars`` (4),
    ``select`` (embedding | fixed), ``mode`` (decompose | chain: Fig. 6's ablation),
    ``phrasings`` (all | canonical), ``respond`` (summarise with the LLM, true), ``reasoning``
    (select: the paper's candidate selection | group: choose chain groups, no call for one | all: no
    LLM), ``candidates`` (rules | text: how the candidate triples are shown), ``reason_max`` (40: facts
    one selection call may show), ``reason_steps`` (every | last: reason over every sub-question's
    candidates, as the paper, or the last one's only), ``decomposition_only`` (false: the paper's four
    stages; true: decomposition and retrieval only, i.e. ``reasoning=group respond=false``, the
    configuration of the first MetaQA benchmark), ``topics`` (linked | oracle: the topic entities of a
    question whose dataset gives none at test time, :func:`question_topics`; ``oracle`` reads gold),
    ``dense_supplement`` (0: the number of dense-retrieved triples added to the chains' candidates,
    :func:`dense_supplement`), ``pipeline`` (paper | released: the authors' released code after the
    decomposition, :func:`execute_released`; no response), ``released_facts`` (200: facts of one seed
    one released reasoning call may show), ``released_seeds`` (200: seeds of one sub-question it reads).

    The stages read the question's text, qid, kind and topics only (:func:`as_read`); a linked or oracle
    topic is recorded as the trace's ``topics`` stage (none where the dataset gives the topics)."""
    if ctx.kg is None or ctx.embedder is None:
        raise ValueError("keqing needs a KG and an embedder: run it on a dataset with a KG (keqing:miniworld, "
                         "keqing:metaqa:1hop)")
    s = settings_of(ctx)
    if s["decomposition_only"]:
        s.update(reasoning="group", respond=False)
    released = s["pipeline"] == "released"
    if released:
        if s["mode"] == "chain" or s["dense_supplement"] or s["decomposition_only"]:
            raise ValueError("pipeline=released runs the released code after the decomposition: it takes neither "
                             "mode=chain, dense_supplement nor decomposition_only")
        s.update(respond=False)
    elif s["mode"] == "chain" and s["dense_supplement"]:
        raise ValueError("dense_supplement adds to the sub-questions' candidates: it does not apply to mode=chain")
    elif s["pipeline"] != "paper":
        raise ValueError(f"unknown pipeline {s['pipeline']!r}; use 'paper' or 'released'")
    kg_name = _kg_name(ctx)
    tr = Tracer()
    t0 = time.perf_counter()
    topics = question_topics(q, ctx.kg, ctx.embedder, s["topics"])
    if topics.source != "given":
        tr.stages.append(Stage("topics", topics, time.perf_counter() - t0))
    q = as_read(q, topics)
    bank = bank_for(kg_name, s["phrasings"])
    pool = pool_for(kg_name)
    shots = tr.record("select_exemplars", select_exemplars, q, pool, bank, ctx.embedder, s["exemplars"], s["select"])
    tr.stages[-1].output = [p.question for p, _ in shots]
    if s["mode"] == "chain":
        # Fig. 6: only decomposition and retrieval are replaced (the paper: "the only modification is to
        # replace Question Decomposition and Knowledge Retrieval modules") — the written chain runs from
        # the topic entity as one step, then candidate reasoning and the response as in the default
        relations = sorted({c.lstrip("^") for chain in bank.canonical for c in chain})
        chain, text, chain_err = tr.record("generate_chain", generate_chain, q, ctx, shots, relations, kg_name=kg_name)
        steps, err = tr.record("execute_plan", execute_chain, q, chain, ctx, kg_name, s["reasoning"], s["candidates"],
                               s["reason_max"])
        error = chain_err
    else:
        dec = tr.record("decompose", decompose, q, ctx, shots, kg_name=kg_name)
        if released:
            steps, err = tr.record("execute_plan", execute_released, q, dec.subquestions, ctx, s["candidates"],
                                   s["released_facts"], s["released_seeds"])
        else:
            steps, err = tr.record("execute_plan", execute_plan, q, dec.subquestions, bank, ctx, kg_name, s["K"],
                                   s["reasoning"], s["candidates"], s["reason_max"], s["reason_steps"],
                                   s["dense_supplement"])
        error = dec.error if dec.error in ("fallback", "no_json") else None
    answers = final_answers(steps, ctx.kg)
    response = tr.record("respond", respond, q.question, steps, ctx) if s["respond"] else execution_log(steps, ctx.kg)
    return MethodResult(answers, response, tr.stages, error or err or (None if answers else "no_answer"))
