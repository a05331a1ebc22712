"""Methods never read gold — proved, not claimed.

Every registered method (the test enumerates :func:`kgqa_lib.methods.method_names`, so a new method is
covered, or fails here for want of a setup) runs on a few questions twice: as given, and with every
gold field replaced by garbage (:func:`kgqa_lib.data.datasets.without_gold`: answers, every gold-query
value, the gold-bearing metadata, and the topic annotations of a dataset that gives none at test time).
The LLM is a deterministic fake whose reply is picked by a hash of the whole request among replies
that fit the prompt's kind, so gold text reaching any prompt changes the replies that follow. Both runs
must send the same prompts and return the same predictions, responses, errors and traces (stage
timings aside). The declared oracles — FuSIC's ``oracle_linking`` and Keqing's ``topics=oracle`` — are
the only exceptions, by name; :func:`test_the_keqing_oracle_is_caught` shows that the test catches
Keqing's GrailQA topics read from gold (the behaviour before ``topics=linked``). FuSIC runs every setting
that a cell of its benchmark table (:mod:`kgqa_lib.bench.fusic`) uses, each cell's settings exactly
(:func:`test_every_fusic_setting_a_bench_cell_uses_is_run_with_the_gold_garbled`)."""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from kgqa_lib.data.datasets import GOLD_METADATA, OPEN_METADATA, TOPIC_METADATA, TOPICS_AT_TEST, Question, \
    question_source, topics_at_test, without_gold
from kgqa_lib.methods import get_method, method_names, method_settings


def library_methods() -> list[str]:
    """Every method the library registers (methods that other test modules register for their own
    checks, defined outside ``kgqa_lib``, are not the library's)."""
    return [m for m in method_names() if getattr(get_method(m), "__module__", "").startswith("kgqa_lib.")]

#: The declared oracles: (method, setting) — never set by a case below.
DECLARED_ORACLES = {("fusic", "oracle_linking"), ("keqing", "topics")}


# ---------------------------------------------------------------------------------------------
# A fake LLM: the reply is a function of the whole request
# ---------------------------------------------------------------------------------------------
_STOP = {"what", "which", "who", "whom", "where", "when", "how", "in", "is", "the", "a", "an", "tell", "name",
         "did", "does", "do", "was", "were", "are", "of", "compare", "list", "give"}
_CAP = re.compile(r"[A-Z0-9][\w'’.:-]*(?:\s+(?:of|the|and|de|la|von|[A-Z0-9][\w'’.:-]*))*")
_TRIPLE = re.compile(r"^\s*\(([^()|]+)\|([^()|]+)\|([^()]+)\)\s*$", re.M)
_TUPLE = re.compile(r"^\s*\(([^(),]+), ([^()]+), ([^(),]+)\)\s*$", re.M)


def _question_of(text: str) -> str:
    """The question of a prompt's last message (after its last ``Question:`` / ``Q:``), else the message."""
    m = list(re.finditer(r"(?:^|\n)\s*(?:Question|Q):\s*(.+)", text))
    return m[-1].group(1).strip() if m else text.strip().splitlines()[-1] if text.strip() else ""


def _names(question: str) -> list[str]:
    """Entity-like spans of a question: capitalised runs (first word not a question word), else its
    last two- and three-word n-grams (GrailQA's questions are lower case)."""
    found = []
    for m in _CAP.finditer(question):
        words = m.group(0).strip(" .:").split()
        while words and words[0].lower() in _STOP:
            words = words[1:]
        if words:
            found.append(" ".join(words))
    ws = re.findall(r"[\w'’.-]+", question.rstrip("?. "))
    grams = [" ".join(ws[i:i + k]) for k in (1, 2, 3) for i in range(max(0, len(ws) - k + 1))
             if ws[i].lower() not in _STOP]
    return list(dict.fromkeys(found)) or grams or ["nothing"]


def _objects(text: str) -> list[str]:
    """Subjects and objects of the ``(s | r | o)`` and ``(s, r, o)`` lines of a prompt."""
    out = []
    for m in list(_TRIPLE.finditer(text)) + list(_TUPLE.finditer(text)):
        out += [m.group(1).strip(), m.group(3).strip()]
    return list(dict.fromkeys(x for x in out if x))


def _plausible(messages: list[tuple[str, str]], rng: random.Random) -> list[str]:
    """Replies that fit the kind of prompt (read from its system message and last user turn); the
    caller picks one with the request's hash. Each kind of every method's prompts has its own."""
    system, last = messages[0][1], messages[-1][1]
    question = _question_of(last)
    names = _names(question)
    name, other = rng.choice(names), rng.choice(names)
    objs = _objects(last) or names
    obj = rng.choice(objs)
    earlier = [c for r, c in messages[1:-1] if r == "assistant"]
    # ---- Keqing
    if system.startswith("You split a question"):
        out = ["I cannot split this question.",
               json.dumps([{"question": re.sub(re.escape(name), "[mask]", question, flags=re.I), "id": 0, "dep": [-1],
                            "seed_entities": [name]}])]
        for shot in ([json.loads(earlier[-1]), json.loads(rng.choice(earlier))] if earlier else []):
            shot[0]["seed_entities"] = [name]  # an exemplar's decomposition (the closest is the last one)
            out.append(json.dumps(shot))
        return out
    if "You answer a simple question from facts" in system or "Use the following pieces of context" in system:
        return ["[]", json.dumps(rng.sample(objs, min(len(objs), rng.randint(1, 3)))), f"The answer is {obj}."]
    if system.startswith("You answer a simple question by choosing"):
        groups = re.findall(r"^(\d+)\. ", last, re.M) or ["1"]
        return [rng.choice(groups), ", ".join(rng.sample(groups, min(2, len(groups)))), "none of them"]
    if system.startswith("You write the final answer"):
        found = re.findall(r"→ ([^\n(]+)", last) or ["nothing"]
        return [f"The knowledge graph says {rng.choice(found).strip()}.", "The knowledge graph does not say."]
    if system.startswith("You map a question"):
        rels = re.search(r"The relations are: (.*?)\. Write", system)
        rels = rels.group(1).split(", ") if rels else ["unknown"]
        return [", ".join(rng.sample(rels, min(2, len(rels)))), "^" + rng.choice(rels), "no chain"]
    # ---- Think-on-Graph
    if "Relations:" in last and "Choose" in last:
        rels = re.search(r"Relations: (.*)", last).group(1).split("; ")
        picked = rng.sample(rels, min(len(rels), rng.randint(1, 3)))
        return ["\n".join(f"{{{r} (Score: {rng.choice([0.2, 0.5, 0.8])})}}" for r in picked), "no idea"]
    if "Candidates:" in last:
        cands = re.search(r"Candidates: (.*)", last).group(1).split("; ")
        return ["\n".join(f"{{{c} (Score: {rng.choice([0.1, 0.4, 0.9])})}}" for c in cands), "{" + cands[0] + "}"]
    if "decide whether knowledge" in system:
        return [f"{{Yes}}. The triples answer it.\nAnswer: {{{obj}}}", "{No}. More is needed."]
    # ---- PG&AKV and QSM
    if system.startswith("You turn a question into a sketch"):
        rel = rng.choice(["capital", "place_of_birth", "directed_by", "country", "starred_actors", "population"])
        return [f"Plan: the {rel} of {name}.\n```cypher\nCREATE (a:Entity {{name: '{name}'}})-[:{rel}]->"
                f"(b:Entity {{name: '{other}'}})\n```", "Plan: nothing.\n```cypher\nCREATE (a\n```"]
    if system.startswith("You check a sketch"):
        lines = [m.group(0).strip() for m in _TRIPLE.finditer(last)]
        return ["\n".join(rng.sample(lines, min(len(lines), rng.randint(1, 4)))) if lines else "nothing", "no changes"]
    # ---- KB-BINDER
    if system.startswith("You translate a question into a logical form"):
        drafts = [re.sub(r'"[^"]*"', f'"{name}"', d, count=1) for d in earlier] or [f'(JOIN (R name) "{name}")']
        return [rng.choice(drafts), rng.choice(drafts), "I do not know."]
    # ---- FuSIC
    if "Reply with their numbers only" in last:
        nums = re.findall(r"^(\d+)\. ", last, re.M) or ["1"]
        return [", ".join(rng.sample(nums, min(len(nums), 3))), "none"]
    if system.startswith(("You translate questions into SPARQL", "You translate questions into logical forms")):
        asked = next((c for r, c in reversed(messages) if r == "user" and "Question:" in c), last)
        everything = asked[asked.rfind("Question:"):]  # the question's context, not the exemplars'
        queries = re.findall(r"SELECT[^\n#]*\}", everything) or ["SELECT ?x WHERE { ?x ?p ?o }"]
        lang = "lisp" if "logical forms" in system else "sparql"
        sexprs = re.findall(r"\(JOIN[^\n#]*\)", everything) or ["(JOIN (R name) x)"]
        body = rng.choice(sexprs) if lang == "lisp" else rng.choice(queries)
        return [f"```{lang}\n{body}\n```", f"```{lang}\n{rng.choice(sexprs if lang == 'lisp' else queries)}\n```"]
    # ---- LangChain's GraphSparqlQAChain (its own prompts)
    if "Identify the intent" in last:
        return ["SELECT", "SELECT", "UPDATE"]
    if "Generate a SPARQL" in last:
        q = _question_of(last.split("The question is:")[-1]) if "The question is:" in last else question
        label = rng.choice(_names(q))
        return [f'SELECT ?o WHERE {{ ?s <http://www.w3.org/2000/01/rdf-schema#label> "{label}" . ?s ?p ?o . }}',
                "SELECT ?s WHERE { ?s ?p ?o } LIMIT 3"]
    # ---- IO, CoT, SC, the answer prompts (factoid: braces; open: prose)
    if "Facts:" in system or "after \"Facts:\"" in system:
        return [f"Facts:\n- {name} is related to {obj}.\nAnswer: {name} is known for {obj}."]
    if "two or three plain sentences" in system:
        return [f"{name} is known for {obj}. Little else is known.", f"{obj} relates to {name}."]
    if "Think step by step" in system:
        return [f"{name} leads to {obj}.\nAnswer: {{{obj}}}", f"Not sure.\nAnswer: {{{name}}}, {{{other}}}"]
    return [f"{{{obj}}}", f"{{{name}}}, {{{other}}}", "I am not sure."]


class HashLLM:
    """A backend whose reply is picked by sha256 of the request's canonical JSON (every message, the
    sampling parameters, the sample index); it keeps every request."""

    def __init__(self) -> None:
        self.requests: list[str] = []

    def complete(self, request):
        key = request.canonical()
        self.requests.append(key)
        h = int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16)
        options = _plausible(list(request.messages), random.Random(h))
        text = options[h % len(options)]
        return {"text": text, "prompt_tokens": len(key) // 4, "completion_tokens": len(text) // 4,
                "finish_reason": "stop"}


# ---------------------------------------------------------------------------------------------
# The cases: for every registered method, questions it can run on
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    dataset: str  # a dataset spec
    pick: tuple[int, ...] = (0, 1)  # which of its questions (indices)
    kg: str | None = None  # the KG the context carries (load_named), None: none
    embedder: bool = False
    settings: dict[str, Any] = field(default_factory=dict)
    data: str = ""  # a folder under KGQA_DATA_DIR the case needs ("" = the project's own data)
    tag: str = ""  # told apart from the method's other cases on the same dataset (the test id)


MW = {"kg": "miniworld"}


def _cell_settings(cell) -> dict[str, Any]:
    """The settings a bench cell runs with: every ``--set`` of its ``kgqa run`` arguments, typed."""
    from kgqa_lib.methods import coerce_settings

    sets = [a for i, a in enumerate(cell.args) if i and cell.args[i - 1] == "--set"]
    return coerce_settings(dict(a.split("=", 1) for a in sets), cell.method)


#: FuSIC's benchmark cells whose settings the cases below run exactly, one question each: together with the two
#: hand-written cases they use every setting value any FuSIC cell uses (the test that says so:
#: test_every_fusic_setting_a_bench_cell_uses_is_run_with_the_gold_garbled) — gf-LLM (s-expressions, the
#: dense retriever's own top k, BM25-chosen exemplars, one call), the number of exemplars, the zero-shot
#: ablations, the deviations, the shots reserve, two retrievers, the naive baseline, and the MetaQA target.
FUSIC_CELLS = ("gtech.fs_gfllm", "metaqa2.zs_gfllm", "metaqa1.fs_dense_ex0", "gtech.fs_dense_ex1",
               "metaqa3.fs_dense_ex3", "metaqa3.zs_dense_noegf", "metaqa1.zs_dense_norr", "metaqa2.zs_dense_sexpr",
               "metaqa3.fs_dense_paths3", "metaqa2.fs_dense_values", "gtech.fs_dense_paperfb",
               "metaqa1.fs_dense_rrsexpr", "gtech.fs_dense_dsex", "metaqa1.fs_dense_shots25",
               "metaqa2.fs_dense_shots100", "cinema2geo.fs_both", "metaqa1.fs_naive")


def _cell_case(name: str) -> Case:
    """A case that runs the FuSIC bench cell ``name`` as the benchmark does (its dataset, its settings, an
    embedder), on its first question; the data it needs from its task's target."""
    from kgqa_lib.bench import fusic as BF

    cell = BF.CELL_OF[name]
    settings = _cell_settings(cell)
    data = next((d for d in ("metaqa", "grailqa") if d in settings["task"]), "")
    return Case(cell.dataset, (0,), None, True, settings, data, tag=name)


CASES: dict[str, list[Case]] = {
    "io": [Case("miniworld:simple"), Case("miniworld:open", (0,))],
    "cot": [Case("miniworld:multihop", (0, 72)), Case("miniworld:open", (1,))],
    "sc": [Case("miniworld:simple", (2, 139))],
    "qsm": [Case("miniworld:multihop", (0, 48), "miniworld", True, MW)],
    "pgakv": [Case("miniworld:simple", (0, 139), "miniworld", True, MW),
              Case("miniworld:multihop", (3, 51), "miniworld", True, MW),
              Case("miniworld:open", (0,), "miniworld", True, MW)],
    "tog": [Case("miniworld:multihop", (0, 7), "miniworld", False, MW),
            Case("miniworld:open", (2,), "miniworld", False, MW),
            Case("keqing:metaqa:2hop", (0,), "metaqa", False, {"kg": "metaqa"}, "metaqa"),
            Case("keqing:metaqa:3hop", (0,), "metaqa", False, {"kg": "metaqa", "min_depth": 3}, "metaqa")],
    "kbbinder": [Case("tiny:films", (0, 5), "tiny", True, {"kg": "tiny", "samples": 3}),
                 Case("keqing:metaqa:2hop", (0,), "metaqa", True, {"kg": "metaqa", "samples": 2}, "metaqa")],
    "keqing": [Case("keqing:miniworld", (0, 25, 38), "miniworld", True, MW),
               Case("keqing:metaqa:2hop", (0, 1), "metaqa", True, {"kg": "metaqa"}, "metaqa"),
               Case("keqing:grailqa", (0, 1, 2, 3), "grailqa-fragment", True, {"kg": "grailqa-fragment"}, "grailqa"),
               # the settings that add what the default pipeline does not read: the dense supplement, the
               # candidates as text, the released code's pipeline
               Case("keqing:miniworld", (0, 25, 38), "miniworld", True, {**MW, "dense_supplement": 5}, tag="dense"),
               Case("keqing:miniworld", (25, 38), "miniworld", True, {**MW, "candidates": "text"}, tag="text"),
               Case("keqing:miniworld", (0, 25, 38), "miniworld", True, {**MW, "pipeline": "released"}, tag="released"),
               Case("keqing:metaqa:2hop", (0, 1), "metaqa", True, {"kg": "metaqa", "dense_supplement": 5}, "metaqa",
                    tag="dense"),
               Case("keqing:metaqa:2hop", (0, 1), "metaqa", True, {"kg": "metaqa", "pipeline": "released"}, "metaqa",
                    tag="released"),
               Case("keqing:grailqa", (0, 1, 2, 3), "grailqa-fragment", True,
                    {"kg": "grailqa-fragment", "dense_supplement": 5}, "grailqa", tag="dense")],
    "fusic": [Case("fusic:geo-wd>cinema-fb:test", (0, 3), None, False,
                   {"task": "geo-wd>cinema-fb", "shots": 0, "retrievers": "bm25", "egf_rounds": 1}),
              Case("fusic:grailqa>grailqa-tech:test", (0, 1), None, False,
                   {"task": "grailqa>grailqa-tech", "shots": 5, "retrievers": "bm25", "egf_rounds": 1}, "grailqa"),
              *map(_cell_case, FUSIC_CELLS)],
    "langchain_sparql": [Case("tiny:films", (0, 7), "tiny")],
}


def _params():
    out = []
    for m in library_methods():
        if m not in CASES:  # fails in the test: a method without a setup is never skipped silently
            out.append(pytest.param(m, None, id=f"{m}-NO_SETUP"))
        for c in CASES.get(m, []):
            out.append(pytest.param(m, c, id=f"{m}-{c.dataset}" + (f"-{c.tag}" if c.tag else "")))
    return out


_KGS: dict[str, Any] = {}
_EMBEDDER: list[Any] = []
_PRIVATE: list[Any] = []  # FuSIC's embedder and its untrained dense retriever, on a throw-away embedding cache


def _kg(name):
    from kgqa_lib.kg.sources import load_named

    if name and name not in _KGS:
        _KGS[name] = load_named(name)
    return _KGS.get(name) if name else None


def _embedder():
    from kgqa_lib.embed.embedder import Embedder

    if not _EMBEDDER:
        _EMBEDDER.append(Embedder())
    return _EMBEDDER[0]


def _private_embedder():
    """An embedder whose cache is a throw-away file (FuSIC's cases: the linker and the dense retriever)."""
    import tempfile
    from pathlib import Path

    from kgqa_lib.embed.embedder import Embedder

    if not _PRIVATE:
        _PRIVATE.append(Embedder(cache_path=Path(tempfile.mkdtemp(prefix="no-gold-")) / "embeddings.sqlite"))
    return _PRIVATE[0]


def _untrained_dense(monkeypatch, tmp_path) -> None:
    """FuSIC's dense retriever without its minutes of fine-tuning: the pipeline's own path (``make_retrievers``
    → ``trained_retriever`` → :class:`RecordedDense` → ``DenseRetriever.rank``) with the untrained MiniLM. What
    it is trained on (source questions and target shots, never a reported question: test_fusic_splits.py)
    is not what this test is about; what it is asked at question time is. Nothing is recorded."""
    from kgqa_lib.embed.retrieval import DenseRetriever
    from kgqa_lib.methods.fusic import retrieval as FR

    def untrained():
        r = DenseRetriever(None, label="dense")
        r.embedder, r.training = _private_embedder(), []
        return r

    monkeypatch.setattr(FR, "record_path", lambda: tmp_path / "fusic_dense.jsonl")  # (never the committed record)
    monkeypatch.setattr(FR, "_RECORD", {})
    monkeypatch.setattr(FR, "trained_retriever",
                        lambda task, shots=0, seed=0, **kw: FR.RecordedDense(f"untrained:{task}:{shots}", untrained))


def _needs(spec: str, data: str) -> None:
    """Skip, saying why, when ``data`` (a folder under KGQA_DATA_DIR) is not there."""
    import os
    from pathlib import Path

    root = os.environ.get("KGQA_DATA_DIR")
    if data and (not root or not (Path(root) / data).is_dir()):
        pytest.skip(f"{spec} needs {data}/ under KGQA_DATA_DIR (set KGQA_DATA_DIR=../shared/datasets)")


def _questions(case: Case) -> list[Question]:
    import kgqa_lib.registry  # noqa: F401  (every dataset registered)
    from kgqa_lib.data.datasets import load_dataset

    _needs(case.dataset, case.data)
    ds = load_dataset(case.dataset)
    return [ds.questions[i] for i in case.pick]


def _clean(x: Any) -> Any:
    """A trace as JSON without its timings (the only part two identical runs may differ in)."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items() if not str(k).endswith("seconds")}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x


def answer(method: str, q: Question, case: Case, tmp_path, tag: str, **settings) -> dict[str, Any]:
    """What ``method`` does for ``q``: the requests its LLM got, its answers, response, error and trace
    (or the exception it raised)."""
    from kgqa_lib.evaluate.runner import _jsonable
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context, get_method

    backend = HashLLM()
    llm = LLM(backend, "hash", LLMCache(tmp_path / f"{tag}.sqlite", transcripts=None))
    embedder = (_private_embedder() if method == "fusic" else _embedder()) if case.embedder else None
    ctx = Context(llm=llm, kg=_kg(case.kg), embedder=embedder,
                  settings={**case.settings, **settings})
    try:
        res = get_method(method)(q, ctx)
        out: dict[str, Any] = {"answers": res.answers, "response": res.response, "error": res.error,
                               "trace": _clean(_jsonable(res.trace))}
    except Exception as exc:  # noqa: BLE001 - a run that fails only without the gold is a finding
        out = {"raised": f"{type(exc).__name__}: {exc}"}
    out["requests"] = backend.requests
    return out


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out = [k for k in ("raised", "answers", "response", "error") if a.get(k) != b.get(k)]
    if a.get("requests") != b.get("requests"):
        i = next((i for i, (x, y) in enumerate(zip(a["requests"], b["requests"])) if x != y),
                 min(len(a["requests"]), len(b["requests"])))
        out.append(f"LLM request {i} (of {len(a['requests'])} / {len(b['requests'])})")
    ta, tb = a.get("trace") or [], b.get("trace") or []
    if ta != tb:
        i = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))
        out.append(f"trace stage {i} ({(ta[i] if i < len(ta) else tb[i])['name']})")
    return out


# ---------------------------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------------------------
def test_every_registered_method_has_a_case_and_no_case_sets_an_oracle():
    assert set(CASES) == set(library_methods()), (set(library_methods()) - set(CASES),
                                                  set(CASES) - set(library_methods()))
    for m, cases in CASES.items():
        for c in cases:
            assert not {(m, k) for k in c.settings} & DECLARED_ORACLES, (m, c.dataset)
    # a setting that names an oracle is a declared one (a new oracle must be declared, and labelled)
    named = {(m, name) for m in library_methods() for name, _, _, helptext in method_settings(m).describe()
             if "oracle" in name.lower() or "oracle" in helptext.lower()}
    assert named == DECLARED_ORACLES, named


@pytest.mark.parametrize("method, case", _params())
def test_a_method_answers_the_same_without_the_gold(method, case, tmp_path, monkeypatch):
    if case is None:
        pytest.fail(f"method {method!r} has no gold-garbling setup: add its cases to CASES in {__file__}")
    monkeypatch.setenv("KGQA_LLM_MODE", "auto")
    if method == "fusic":
        _untrained_dense(monkeypatch, tmp_path)
    for i, q in enumerate(_questions(case)):
        bad = without_gold(q)
        assert bad.answers != q.answers and bad.qid == q.qid and bad.question == q.question
        garbled = answer(method, bad, case, tmp_path, f"garbled{i}")  # (first: a cache it filled could not help)
        given = answer(method, q, case, tmp_path, f"given{i}")
        assert "raised" not in given, (method, q.qid, given["raised"])
        assert given["requests"], (method, q.qid, "no LLM call: nothing was tested")
        assert not _differences(given, garbled), (method, case.dataset, q.qid, _differences(given, garbled))


def test_every_fusic_setting_a_bench_cell_uses_is_run_with_the_gold_garbled():
    """Every (setting, value) of every FuSIC cell of the benchmark table — its task included — is in a FuSIC case
    above, so each is run once as given and once with the gold garbled; the cases named after a cell run its
    settings exactly."""
    from kgqa_lib.bench import fusic as BF
    from kgqa_lib.methods import coerce_settings

    used = {(k, v) for c in BF.CELLS if c.method == "fusic" for k, v in _cell_settings(c).items()}
    cased = {(k, v) for c in CASES["fusic"] for k, v in coerce_settings(c.settings, "fusic").items()}
    assert used <= cased, f"FuSIC settings of bench cells no case runs: {sorted(used - cased)}"
    for c in CASES["fusic"]:
        if c.tag:
            assert c.settings == _cell_settings(BF.CELL_OF[c.tag]) and c.dataset == BF.CELL_OF[c.tag].dataset, c.tag


def test_the_keqing_oracle_is_caught(tmp_path, monkeypatch):
    """The harness detects a leak: Keqing with ``topics=oracle`` (before ``topics=linked``, its only behaviour
    on GrailQA: topic and bracketed mention from the gold s-expression) answers garbled questions otherwise;
    the linked default does not (the case above)."""
    case = next(c for c in CASES["keqing"] if c.dataset == "keqing:grailqa")
    monkeypatch.setenv("KGQA_LLM_MODE", "auto")
    caught = 0
    for i, q in enumerate(_questions(case)):
        garbled = answer("keqing", without_gold(q), case, tmp_path, f"og{i}", topics="oracle")
        given = answer("keqing", q, case, tmp_path, f"gi{i}", topics="oracle")
        assert "raised" not in given and "raised" not in garbled
        diff = _differences(given, garbled)
        caught += any(d.startswith("LLM request") for d in diff)  # the gold reached a prompt
        assert diff, q.qid
    assert caught == len(case.pick)


def test_linked_topics_read_the_text_only(tmp_path):
    """Keqing's linked topics on GrailQA come from FuSIC's linker over the question text: the gold
    annotations never enter (a question with nothing but its qid and text links the same)."""
    from kgqa_lib.methods import keqing as K

    case = next(c for c in CASES["keqing"] if c.dataset == "keqing:grailqa")
    questions = _questions(case)  # (skips without the data)
    kg = _kg(case.kg)
    for q in questions:
        t = K.question_topics(q, kg, _embedder())
        bare = K.question_topics(Question(q.qid, q.question, []), kg, _embedder())
        assert t.source == "linked" and t == bare
        assert t.raw is None or t.raw.replace("[", "").replace("]", "") == q.question
        assert K.question_topics(q, kg, _embedder(), "oracle").names == q.topic_entities  # the declared oracle


# ---------------------------------------------------------------------------------------------
# The data layer's list of gold fields
# ---------------------------------------------------------------------------------------------
OWN = ["miniworld:simple", "miniworld:multihop", "miniworld:open", "miniworld:templated", "tiny:films",
       "keqing:miniworld", "keqing:miniworld:pool", "fusic:geo-wd>cinema-fb:test", "miniworld:spare"]
EXTERNAL = [("metaqa:1hop:dev", "metaqa"), ("grailqa:fragment", "grailqa"), ("keqing:grailqa", "grailqa"),
            ("grailqa:dev", "grailqa")]


@pytest.mark.parametrize("spec, data", [(s, "") for s in OWN] + EXTERNAL)
def test_every_metadata_key_is_classified_and_garbled_as_declared(spec, data):
    _needs(spec, data)
    import kgqa_lib.registry  # noqa: F401
    from kgqa_lib.data.datasets import load_dataset

    known = set(GOLD_METADATA) | set(TOPIC_METADATA) | set(OPEN_METADATA)
    for q in load_dataset(spec).questions[:300]:
        assert set(q.metadata) <= known, (spec, set(q.metadata) - known)
        assert question_source(q) in TOPICS_AT_TEST, q.qid
        bad = without_gold(q)
        assert (bad.qid, bad.question, bad.kind) == (q.qid, q.question, q.kind)
        assert bad.answers != q.answers and not set(bad.answers) & set(q.answers)
        assert set(bad.gold_query) == set(q.gold_query) and all(bad.gold_query[k] != v for k, v in q.gold_query.items())
        for k, v in q.metadata.items():
            gold = k in GOLD_METADATA or (k in TOPIC_METADATA and not topics_at_test(q))
            assert (bad.metadata[k] != v) == gold, (spec, k)
        assert (bad.topic_entities != q.topic_entities) == (not topics_at_test(q)), spec


def test_topics_at_test_by_dataset():
    assert topics_at_test(Question("metaqa-1hop-dev-00001", "who directed Heat", []))
    assert topics_at_test(Question("mw-simple-000", "What is the capital of Denmark?", []))
    assert not topics_at_test(Question("grailqa-2101960008000", "which play is staged by the globe players", []))
    assert topics_at_test(Question("my-own-1", "a user's file", []))  # a user's annotations are the user's input
