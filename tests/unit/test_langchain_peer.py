"""LangChain's GraphSparqlQAChain as a peer (kgqa_lib.methods.langchain_sparql): the chain's own prompts
reach our LLM (recorded), its query runs on our KG read-only, every way it fails is one counted
status, an UPDATE never changes the KG, an outage is not an answer; its records strip to counts."""

from __future__ import annotations

import json

import pytest

from kgqa_lib.bench import fusic as B
from kgqa_lib.data.datasets import load_dataset
from kgqa_lib.errors import InfrastructureError
from kgqa_lib.methods import langchain_sparql as L

GOOD = ("SELECT ?d WHERE { ?f <http://www.w3.org/2000/01/rdf-schema#label> \"Inception\" . "
        "?f <http://kgqa.local/tiny/relation/directed_by> ?d . }")


class Chain:
    """Answers LangChain's three prompts: the intent, the query, the prose answer."""

    def __init__(self, intent="SELECT", query=GOOD, down=False):
        self.intent, self.query, self.down, self.prompts = intent, query, down, []

    def complete(self, request):
        if self.down:
            raise InfrastructureError("LLM endpoint down")
        prompt = request.messages[-1][1]
        self.prompts.append(prompt)
        text = (self.intent if "Identify the intent" in prompt else self.query if "Generate a SPARQL" in prompt
                else "Christopher Nolan directed it.")
        return {"text": text, "prompt_tokens": 10, "completion_tokens": 10, "finish_reason": "stop"}


@pytest.fixture(scope="module")
def tiny():
    from kgqa_lib.kg.sources import load_named

    return load_named("tiny")


def _run(backend, kg, tmp_path):
    from kgqa_lib.llm.chat import LLM, LLMCache
    from kgqa_lib.methods import Context

    llm = LLM(backend, "scripted", LLMCache(tmp_path / "llm.sqlite", transcripts=None))
    q = load_dataset("tiny:films").questions[0]  # who directed Inception
    res = L.langchain_sparql(q, Context(llm=llm, kg=kg))
    return q, res, next(s.output for s in res.trace if s.name == "langchain_chain")


def test_a_clean_query_is_answered_with_langchains_prompts(tiny, tmp_path):
    backend = Chain()
    q, res, run = _run(backend, tiny, tmp_path)
    assert res.answers == q.answers == ["Christopher Nolan"] and res.error is None
    assert run.status == "ok" and run.rows == 1 and [c["kind"] for c in run.calls] == ["intent", "sparql", "answer"]
    assert run.answer_text == "Christopher Nolan directed it."
    # LangChain's default prompts, the KG's schema as its RdfGraph reads it, the rows in the answer prompt
    assert "Do not include any text except the SPARQL query generated." in backend.prompts[1]
    assert "<http://kgqa.local/tiny/relation/directed_by> (directed_by, None)" in backend.prompts[1]
    assert "Christopher_Nolan" in backend.prompts[2] or "Christopher%20Nolan" in backend.prompts[2]


@pytest.mark.parametrize("intent, query, status, calls", [
    ("SELECT", f"```\nPREFIX foaf: <http://xmlns.com/foaf/0.1/>\n{GOOD}\n```", "parse_error", 2),  # fenced, as sent
    ("SELECT", "SELECT ?d WHERE { ?f <http://kgqa.local/tiny/relation/directed_by> \"Nobody\" . }", "empty", 3),  # the chain still writes a prose answer
    ("SELECT", "INSERT DATA { <http://x.org/a> <http://x.org/b> <http://x.org/c> . }", "rejected", 2),
    ("UPDATE", "INSERT DATA { <http://x.org/a> <http://x.org/b> <http://x.org/c> . }", "update_refused", 2),
    ("I think it is a question.", GOOD, "no_intent", 1),
])
def test_every_failure_is_a_counted_status_and_the_kg_is_never_changed(tiny, tmp_path, intent, query, status, calls):
    before = tiny.stats()["triples"]
    _, res, run = _run(Chain(intent, query), tiny, tmp_path)
    assert res.answers == [] and res.error == status and run.status == status and len(run.calls) == calls
    assert tiny.stats()["triples"] == before
    shape = run.as_dict()
    assert shape["fenced"] == ("```" in query) and shape["update_keyword"] == ("INSERT" in query and calls > 1)
    assert shape["prefixes"] == (["foaf"] if "foaf" in query else [])


def test_an_outage_is_not_an_answer(tiny, tmp_path):
    with pytest.raises(InfrastructureError):
        _run(Chain(down=True), tiny, tmp_path)

    class Down:
        def __init__(self, kg):
            self._inner = kg

        def __getattr__(self, name):
            return getattr(self._inner, name)

        def sparql(self, query, **kw):
            if "Inception" in query:  # the schema queries pass, the chain's query meets a dead endpoint
                raise InfrastructureError("SPARQL endpoint down")
            return self._inner.sparql(query, **kw)

    with pytest.raises(InfrastructureError):
        _run(Chain(), Down(tiny), tmp_path)


def test_records_strip_to_counts_and_the_report_counts_outcomes(tiny, tmp_path, monkeypatch):
    import dataclasses

    # two made-up records stand for the whole cell here (a running cell's `partial k/N`: test_fusic_report_labels)
    monkeypatch.setattr(B, "CELL_OF", {n: dataclasses.replace(c, planned=1) for n, c in B.CELL_OF.items()})
    _, res, run = _run(Chain(query=f"```\n{GOOD}\n```"), tiny, tmp_path)
    whole = {"method": "langchain_sparql", "qid": "q1", "question": "who directed Inception", "gold": ["Christopher Nolan"],
             "prediction": res.answers, "metrics": {"f1": 0.0, "hits@1": 0.0}, "error": res.error, "seconds": 1.0,
             "llm": {"calls": 2, "prompt_tokens": 20, "completion_tokens": 20, "recorded_seconds": 1.0, "seconds": 1.0,
                     "cache_hits": 0},
             "trace": [{"name": s.name, "output": s.output.as_dict(), "seconds": 0.1} for s in res.trace
                       if hasattr(s.output, "as_dict")]}
    s = B.strip(whole)
    text = json.dumps(s)
    assert "Inception" not in text and "Nolan" not in text and "SELECT" not in text.replace('"SELECT"', "")
    assert s["summary"]["langchain"] == {"intent": "SELECT", "status": "parse_error", "rows": 0, "values": 0,
                                         "fenced": True, "prefixes": [], "update_keyword": False, "calls": 2}
    ok = dict(s, qid="q2", metrics={"f1": 1.0, "hits@1": 1.0},
              summary={"langchain": dict(s["summary"]["langchain"], status="ok", fenced=False)})
    report = B.report(lambda c: [s, ok] if c == "metaqa1.langchain" else [])
    assert "| metaqa1.langchain | 2 | 50.0 [0.0, 100.0] | 50.0 | parse_error 1, ok 1 | 1 | 0 | 0 |" in report
    assert "| metaqa2.langchain | not run yet |" in report
