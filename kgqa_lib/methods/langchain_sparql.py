"""LangChain's ``GraphSparqlQAChain`` as a peer baseline: the chain as LangChain ships it,
with its default prompts, on our KG and our LLM.

What is ours is only the plumbing, so that the chain runs offline, read-only and recorded:

- ``chain_llm`` — a LangChain LLM whose calls go through :class:`kgqa_lib.llm.chat.LLM` (each prompt
  as one user turn of the chat model, as LangChain sends a string prompt to a chat model; record and
  replay like every other call; an outage raises, it is never an answer);
- ``ReadOnlyRdfGraph`` — LangChain's ``RdfGraph`` over our KG instead of a file or an endpoint: its
  own schema queries (the ``rdf`` standard: every class with an instance, every relation), the chain's
  query run read-only with a timeout and a row cap; an UPDATE is refused and counted, the KG is never
  changed (LangChain would write it back to the source file).

The chain's stages are LangChain's: intent (SELECT or UPDATE) → SPARQL generation from the schema →
execution → a prose answer from the rows. No entity linking, no exemplars, no code-fence stripping,
no feedback. The predictions scored are the entities the executed query returned (its first
variable, labels); the chain's prose answer stays in the trace. Each question's outcome is one
status (:data:`STATUSES`) with what the generated query looked like (fenced, its prefixes)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from ..data.datasets import Question
from ..errors import InfrastructureError, SetupError
from ..kg.graph import QueryRejected, QuerySyntaxError, QueryTimeout, check_read_only
from .base import Context, MethodResult, Settings, Tracer, register_method, setting

#: a question's outcome, in the order the chain reaches them
STATUSES = ("no_intent", "update_refused", "parse_error", "rejected", "timeout", "empty", "ok")
LANGCHAIN_PIN = "langchain-community==0.4.2"


def _langchain():
    try:
        from langchain_community.chains.graph_qa.sparql import GraphSparqlQAChain
        from langchain_community.graphs.rdf_graph import RdfGraph
        from langchain_core.language_models.llms import LLM as LangChainLLM
    except ImportError as exc:  # an optional peer: the project's setup installs it (requirements.txt)
        raise SetupError(f"the langchain peer needs LangChain: pip install {LANGCHAIN_PIN} "
                         f"(make setup installs it) — {exc}") from exc
    return GraphSparqlQAChain, RdfGraph, LangChainLLM


@dataclass(frozen=True)
class LangChainSettings(Settings):
    task: str = setting("", "a FuSIC transfer task (source>target): its target KG answers the questions; '' = the "
                            "dataset's KG")
    max_tokens: int = setting(256, "tokens per LLM call (LangChain's LlamaCpp default)", min=1)
    max_rows: int = setting(100, "rows of the executed query kept (and shown to the chain's answer prompt)", min=1)
    timeout: float = setting(10.0, "seconds a query may run", min=0.1)


@dataclass
class ChainRun:
    """What one question's chain did: its LLM calls (prompt kind, text), the query and its outcome."""

    calls: list[dict[str, str]] = field(default_factory=list)
    intent: str = ""
    query: str = ""
    status: str = ""
    rows: int = 0
    answer_text: str = ""
    message: str = ""
    values: list[str] = field(default_factory=list)  # the executed query's first-variable values

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "intent": self.intent, "query": self.query, "status": self.status,
                "rows": self.rows, "values": len(self.values), "answer_text": self.answer_text,
                "message": self.message, **query_shape(self.query)}


def query_shape(text: str) -> dict[str, Any]:
    """What a generated query looks like, without its text: fenced in backticks, the prefixes it
    declares, an update keyword (INSERT / DELETE)."""
    return {"fenced": "```" in text,
            "prefixes": sorted(set(re.findall(r"(?i)\bPREFIX\s+([\w-]*):", text))),
            "update_keyword": bool(re.search(r"(?i)\b(INSERT|DELETE)\b", text))}


@functools.lru_cache(maxsize=None)
def _llm_class():
    _, _, LangChainLLM = _langchain()

    class RecordedLLM(LangChainLLM):
        """A LangChain LLM over :class:`kgqa_lib.llm.chat.LLM` (greedy, recorded)."""

        backend: Any = None
        seed: int = 0
        max_tokens: int = 256
        run: Any = None

        @property
        def _llm_type(self) -> str:
            return "kgqa-recorded"

        def _call(self, prompt: str, stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any) -> str:
            r = self.backend.chat([{"role": "user", "content": prompt}], max_tokens=self.max_tokens,
                                  temperature=0.0, seed=self.seed)
            text = r.text
            for s in stop or ():
                text = text.split(s, 1)[0]
            kind = ("intent" if "Identify the intent" in prompt else "sparql" if "Generate a SPARQL" in prompt
                    else "answer" if "natural language response" in prompt else "other")
            if self.run is not None:
                self.run.calls.append({"kind": kind, "text": text})
            return text

    return RecordedLLM


def chain_llm(llm: Any, seed: int = 0, max_tokens: int = 256, run: ChainRun | None = None) -> Any:
    """A LangChain LLM whose calls go through our ``llm`` (record/replay, usage, outages)."""
    return _llm_class()(backend=llm, seed=seed, max_tokens=max_tokens, run=run)


def _rows(res: Any) -> list[Any]:
    """Our query result as rdflib ``ResultRow`` objects, as LangChain's ``RdfGraph.query`` returns them."""
    from rdflib import Literal, URIRef, Variable
    from rdflib.query import ResultRow

    labels = [Variable(v) for v in res.vars]
    out = []
    for row in res.rows:
        values = {Variable(k): (URIRef(v) if "://" in v else Literal(v)) for k, v in row.items()}
        out.append(ResultRow(values, labels))
    return out


@functools.lru_cache(maxsize=None)
def _graph_class():
    _, RdfGraph, _ = _langchain()

    class ReadOnlyRdfGraph(RdfGraph):
        """LangChain's ``RdfGraph`` on our KG: read-only, time-limited, row-capped."""

        def __init__(self, kg: Any, schema: str | None = None, timeout: float = 10.0, max_rows: int = 100,
                     run: ChainRun | None = None) -> None:  # no super().__init__: no file, no endpoint
            self.kg, self.timeout, self.max_rows, self.run = kg, timeout, max_rows, run
            self.source_file = self.query_endpoint = self.update_endpoint = self.local_copy = None
            self.standard, self.mode, self.serialization = "rdf", "store", None
            self.schema = ""
            if schema is None:
                self.load_schema()  # LangChain's own schema queries, through query() below
            else:
                self.schema = schema

        def query(self, query: str) -> list[Any]:
            run = self.run
            if run is not None:
                run.query = query
            try:
                check_read_only(query)
                res = self.kg.sparql(query, timeout=self.timeout, max_rows=self.max_rows)
            except InfrastructureError:
                raise  # the KG is down: not an answer
            except QueryTimeout as exc:
                return self._failed("timeout", exc)
            except QuerySyntaxError as exc:
                return self._failed("parse_error", exc)
            except QueryRejected as exc:
                return self._failed("rejected", exc)
            except Exception as exc:  # noqa: BLE001 - the store's own parse and evaluation errors
                return self._failed("parse_error", exc)
            rows = _rows(res)
            if run is not None:
                run.status, run.rows = ("ok" if rows else "empty"), len(rows)
                first = res.vars[0] if res.vars else None
                run.values = [row[first] for row in res.rows if first in row]
            return rows

        def _failed(self, status: str, exc: Exception) -> list[Any]:
            if self.run is not None:
                self.run.status, self.run.message = status, str(exc)[:300]
            raise ValueError(f"Generated SPARQL statement is invalid\n{exc}")  # as LangChain's RdfGraph.query

        def update(self, query: str) -> None:
            if self.run is not None:
                self.run.query, self.run.status = query, "update_refused"
            raise ValueError("updates are refused: the KG is read-only")

    return ReadOnlyRdfGraph


@functools.lru_cache(maxsize=8)
def _schema_of(kg: Any, timeout: float) -> str:
    """LangChain's schema text for ``kg`` (computed once per KG; its schema queries are not row-capped)."""
    return _graph_class()(kg, timeout=timeout, max_rows=100000).get_schema


def graph_for(kg: Any, timeout: float = 10.0, max_rows: int = 100, run: ChainRun | None = None) -> Any:
    """A read-only LangChain ``RdfGraph`` over ``kg`` (its schema computed once per KG)."""
    return _graph_class()(kg, _schema_of(kg, timeout), timeout, max_rows, run)


def run_chain(question: str, kg: Any, ctx: Context, s: LangChainSettings) -> ChainRun:
    """One question through ``GraphSparqlQAChain`` (default prompts); its failure is a status, never
    an exception — but an outage of the LLM or the KG propagates."""
    GraphSparqlQAChain, _, _ = _langchain()
    run = ChainRun()
    graph = graph_for(kg, s.timeout, s.max_rows, run)
    chain = GraphSparqlQAChain.from_llm(chain_llm(ctx.llm, ctx.seed, s.max_tokens, run), graph=graph,
                                        allow_dangerous_requests=True, return_sparql_query=True)
    try:
        out = chain.invoke({"query": question})
        run.answer_text = str(out.get("result", ""))
    except InfrastructureError:
        raise
    except ValueError as exc:
        if not run.status:  # the chain's own refusal: an intent that is neither SELECT nor UPDATE
            run.status, run.message = "no_intent", str(exc)[:300]
    intents = [c["text"] for c in run.calls if c["kind"] == "intent"]
    run.intent = intents[0].strip()[:40] if intents else ""
    if not run.query:
        run.query = next((c["text"] for c in run.calls if c["kind"] == "sparql"), "")
    return run


def answers_of(run: ChainRun, kg: Any) -> list[str]:
    """The executed query's first-variable values, as labels (deduplicated, in order)."""
    out: list[str] = []
    for v in run.values:
        lab = kg.label(v) if "://" in v else v
        if lab and lab not in out:
            out.append(lab)
    return out


def check_run(dataset: str, settings: Any) -> None:
    """A KG to ask: a given transfer task (the dataset's, for a ``fusic:TASK:…`` one) or one named with ``--kg``."""
    from ..errors import UsageError
    from .fusic import check_task

    s = LangChainSettings.of(settings)
    check_task(dataset, s.task, "langchain_sparql")
    if not s.task and not s.kg:
        raise UsageError("langchain_sparql needs a KG: name one with --kg (e.g. --kg miniworld) or a FuSIC transfer "
                         "task with --set task=SOURCE>TARGET")


@register_method("langchain_sparql", settings=LangChainSettings, uses=("kg",), check=check_run)
def langchain_sparql(q: Question, ctx: Context) -> MethodResult:
    """LangChain's GraphSparqlQAChain with its default prompts (see the module). Settings: ``task``
    (a FuSIC transfer task whose target KG to use), ``max_tokens``, ``max_rows``, ``timeout``."""
    s = LangChainSettings.of(ctx)
    if s.task:
        from .fusic import get_task

        kg = get_task(s.task, ctx.seed).target.kg_for(q)
    elif ctx.kg is not None:
        kg = ctx.kg
    else:
        raise ValueError("langchain_sparql needs a KG: run it on a dataset with a KG or name a FuSIC transfer task "
                         "with --set task=SOURCE>TARGET")
    tr = Tracer()
    run = tr.record("langchain_chain", run_chain, q.question, kg, ctx, s)
    answers = tr.record("answers", answers_of, run, kg) if run.status == "ok" else []
    error = None if answers else run.status or "no_answer"
    return MethodResult(answers, run.answer_text or run.query, tr.stages, error)
