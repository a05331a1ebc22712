"""Stage 6 — execution and execution-guided feedback: the query runs read-only; a failure is told to
the LLM, which tries again (paper sec. 3, appendix A.1.4)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from ...errors import InfrastructureError
from ...kg.graph import MAX_QUERY_DEPTH, QueryRejected, QuerySyntaxError, QueryTimeout, check_read_only, nesting_depth
from ...kg.sexpr import SExprError, to_sparql as sexpr_to_sparql
from ..base import Context
from .generation import extract_query, generate_query
from .schema import RDFS, SchemaProfile
from .settings import FuSICSettings


# ---------------------------------------------------------------------------------------------
# 6. Execution (+ the feedback the LLM gets)
# ---------------------------------------------------------------------------------------------
@dataclass
class Execution:
    query: str  # as written by the LLM
    sparql: str  # as executed (prefixes added; converted from an s-expression)
    status: str  # ok | empty | no_query | parse_error | rejected | unknown_prefix | unknown_iri | unanchored | too_many | timeout
    answers: list[str] = field(default_factory=list)
    rows: int = 0
    message: str = ""  # what the LLM is told when status != ok

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self) -> dict[str, Any]:
        return {"query": self.query, "sparql": self.sparql, "status": self.status, "answers": self.answers[:20],
                "rows": self.rows, "message": self.message}


_PNAME = re.compile(r"(?<![\w<?$])([A-Za-z][\w-]*):([A-Za-z0-9_%][A-Za-z0-9_%.\-]*[A-Za-z0-9_%]|[A-Za-z0-9_%])")
_IRI = re.compile(r"<(https?://[^>\s]+)>")


def _with_prefixes(query: str, profile: SchemaProfile) -> str:
    """Our prefixed names written out as full IRIs (pyoxigraph 0.5 rejects a local name with two
    dots, ``ns:film.film.directed_by``), the LLM's own PREFIX lines for our prefixes dropped, and
    any other prefix it uses left to its declarations."""
    prefixes = profile.prefix_map
    query = re.sub(r"PREFIX\s+(\w+):\s*<[^>]*>\s*", lambda m: "" if m.group(1) in prefixes else m.group(0), query, flags=re.I)
    head, sep, body = query.partition("{")
    body = re.sub(r'("(?:[^"\\]|\\.)*")|' + _PNAME.pattern,
                  lambda m: m.group(1) or (f"<{prefixes[m.group(2)]}{m.group(3)}>" if m.group(2) in prefixes else m.group(0)),
                  body)
    head = re.sub(_PNAME.pattern, lambda m: f"<{prefixes[m.group(1)]}{m.group(2)}>" if m.group(1) in prefixes else m.group(0), head)
    return head + sep + body


_STANDARD = {"rdf", "rdfs", "xsd", "owl", "skos", "schema"}


def _unknown_terms(query: str, kg, profile: SchemaProfile) -> tuple[list[str], list[str]]:
    """(prefixes used but never declared, ids the KG has never seen). The query is the one
    about to run: our prefixed names are already written out as IRIs; a prefixed name left is
    the LLM's own (``foaf:name`` with its own PREFIX line, or ``wdt:P19`` copied from an exemplar
    of another KB)."""
    declared = {m.group(1): m.group(2) for m in re.finditer(r"PREFIX\s+(\w*):\s*<([^>]*)>", query, re.I)}
    body = re.sub(r"PREFIX\s+\S+\s*<[^>]*>", "", query, flags=re.I)
    body = re.sub(r'"(?:[^"\\]|\\.)*"', '""', body)
    undeclared, unknown = [], []
    for m in _PNAME.finditer(body):
        prefix = m.group(1)
        if prefix in declared:
            if prefix not in _STANDARD and not kg.has_term(declared[prefix] + m.group(2)) and m.group(0) not in unknown:
                unknown.append(m.group(0))
        elif prefix not in undeclared and prefix not in _STANDARD:
            undeclared.append(prefix)
    ours = tuple(ns for _, ns in profile.prefixes)
    for m in _IRI.finditer(body):
        iri = m.group(1)
        if iri.startswith(ours) and not iri.startswith(RDFS) and not kg.has_term(iri):
            shown = profile.compact(iri)
            if shown not in unknown:
                unknown.append(shown)
    return undeclared, unknown


_PATTERN_SPLIT = re.compile(r"\s\.\s|\s\.$|;")


def _exists(kg, s: str, p: str, o: str) -> bool:
    try:
        return bool(kg.sparql(f"ASK {{ {s} {p} {o} }}", timeout=5).boolean)
    except InfrastructureError:
        raise  # the endpoint is down: not a diagnosis, not an answer
    except Exception:  # noqa: BLE001 - a diagnosis is best effort
        return True


def diagnose_empty(sparql: str, kg, profile: SchemaProfile) -> str:
    """Why did a query return nothing? Each triple pattern with a fixed entity is tried alone;
    one that matches nothing — but would the other way round — is named, with the fix. (The
    small model's most frequent mistake here is walking a relation backwards.)"""
    body = sparql[sparql.find("{") + 1: sparql.rfind("}")] if "{" in sparql else ""
    body = re.sub(r"FILTER\s*\((?:[^()]|\([^()]*\))*\)", " ", body, flags=re.I)
    body = re.sub(r"VALUES\s+\?\w+\s*\{[^}]*\}", " ", body, flags=re.I)
    for part in _PATTERN_SPLIT.split(body.replace("{", " ").replace("}", " ")):
        toks = part.split()
        if len(toks) != 3 or not toks[1].startswith("<"):
            continue
        subj, rel, obj = toks
        s_fixed, o_fixed = subj.startswith("<"), obj.startswith("<")
        if s_fixed == o_fixed:
            continue
        if not _exists(kg, subj if s_fixed else "?s", rel, obj if o_fixed else "?o"):
            shown = " ".join(profile.compact(t[1:-1]) if t.startswith("<") else t for t in toks)
            if _exists(kg, obj if o_fixed else "?s", rel, subj if s_fixed else "?o"):
                fixed = " ".join(profile.compact(t[1:-1]) if t.startswith("<") else t for t in (obj, rel, subj))
                return f" The pattern `{shown}` matches nothing; the KB has it the other way round: `{fixed}`."
            return f" The pattern `{shown}` matches nothing in the KB."
    return " Each pattern matches something on its own, but not together: check how the variables join."




def execute_query(query: str, kg, profile: SchemaProfile, *, language: str = "sparql", max_answers: int = 100,
                  timeout: float = 10.0, exclude: Sequence[str] = (), anchors: Sequence[str] = ()) -> Execution:
    """Run the LLM's query read-only with a timeout and a row cap; map IRIs to labels.
    ``exclude``: the question's own entities, dropped from the answers when others remain (a
    path that walks back to its start, "which other films by the director of X" — the rule
    MetaQA's gold answers follow). ``anchors``: the linked entities; a query that uses none of
    them answers some other question (status ``unanchored``). Every failure becomes a status and
    a message for the feedback round, never an exception."""
    if not query.strip():
        return Execution(query, "", "no_query", message="No query was found in your answer.")
    sparql = query
    if language == "sexpr":
        try:
            sparql = sexpr_to_sparql(query, type_predicate=profile.type_predicate)
        except SExprError as exc:
            return Execution(query, "", "parse_error", message=f"The s-expression is malformed: {exc}.")
    depth = nesting_depth(sparql)
    if depth > MAX_QUERY_DEPTH:  # pyoxigraph's parser overflows the C stack (segfault) at ~3000 levels
        return Execution(query, sparql, "parse_error",
                         message=f"The query nests brackets {depth} levels deep; write a flat query.")
    try:
        form = check_read_only(sparql)
    except QuerySyntaxError:
        form = None  # reported by the KG below (status parse_error, in the engine's words), as it always was
    except QueryRejected as exc:
        return Execution(query, sparql, "rejected", message=f"Only a read-only SELECT query is allowed ({exc}).")
    except Exception as exc:  # noqa: BLE001
        return Execution(query, sparql, "parse_error", message=f"The query does not parse: {str(exc)[:200]}")
    sparql = _with_prefixes(sparql, profile)
    undeclared, unknown = _unknown_terms(sparql, kg, profile)
    if undeclared:
        ours = ", ".join(f"{p}:" for p, _ in profile.prefixes)
        return Execution(query, sparql, "unknown_prefix",
                         message=f"This KB has no prefix {', '.join(p + ':' for p in undeclared)} — its ids are written with "
                                 f"{ours} as in the context (the examples may come from another KB).")
    if unknown:
        return Execution(query, sparql, "unknown_iri",
                         message=f"These names do not exist in the KB: {', '.join(unknown[:5])}. Use only ids from the context.")
    if anchors and not any(f"<{a}>" in sparql for a in anchors):
        named = "; ".join(f"{profile.compact(a)} ({kg.label(a)})" for a in anchors[:3])
        return Execution(query, sparql, "unanchored",
                         message=f"The query does not use the question's entity: {named}. Start the query from it.")
    try:
        res = kg.sparql(sparql, timeout=timeout, max_rows=max_answers + 1)
    except QueryTimeout:
        return Execution(query, sparql, "timeout", message=f"The query ran longer than {timeout:.0f} s; make it more specific.")
    except (QueryRejected, SyntaxError, ValueError) as exc:
        return Execution(query, sparql, "parse_error", message=f"The query does not parse: {str(exc)[:200]}")
    except InfrastructureError:
        raise  # the endpoint is down: the question is not answered (see kgqa_lib.errors)
    except Exception as exc:  # noqa: BLE001 - the store's own errors
        return Execution(query, sparql, "parse_error", message=f"The query failed: {type(exc).__name__}: {str(exc)[:160]}")
    if form == "ASK":
        return Execution(query, sparql, "ok", ["yes" if res.boolean else "no"], 1)
    if not res.rows or not res.vars:
        return Execution(query, sparql, "empty", message="The query returned no results." + diagnose_empty(sparql, kg, profile))
    var = res.vars[0]
    values = [row[var] for row in res.rows if var in row]
    if any(v not in exclude for v in values):
        values = [v for v in values if v not in exclude]
    if not values:
        return Execution(query, sparql, "empty", message=f"The query returned no value for ?{var}.")
    if len(values) > max_answers:
        return Execution(query, sparql, "too_many", rows=len(values),
                         message=f"The query returned more than {max_answers} results: it is not anchored to the question's entity.")
    answers = []
    for v in values:
        lab = kg.label(v) if "://" in v else v
        if lab not in answers:
            answers.append(lab)
    return Execution(query, sparql, "ok", answers, len(values))


@dataclass
class Attempt:
    round: int
    response: str
    execution: Execution
    seconds: float = 0.0  # the LLM call and the execution of this round

    def as_dict(self) -> dict[str, Any]:
        return {"round": self.round, "response": self.response, **self.execution.as_dict(),
                "seconds": round(self.seconds, 4)}


def feedback_message(execution: Execution, language: str) -> str:
    what = "SPARQL query" if language == "sparql" else "s-expression"
    return f"{execution.message}\nWrite a corrected {what} for the same question, using only the ids in the context."


def paper_feedback_message(language: str) -> str:
    """Appendix A.1.4's feedback, word for word but for the KB's name (the paper's: "freebase KG") and,
    with ``language="sexpr"``, the logical form's (the paper's prompt is for SPARQL)."""
    what = "SPARQL" if language == "sparql" else "s-expression"
    return (f"The generated {what} gives an empty answer when executed on the KG, Please generate again a different "
            f"executable {what} using the same context and constraints.")


def egf_loop(messages: list[dict[str, str]], kg, profile: SchemaProfile, ctx: Context, language: str,
             rounds: int = 4, exclude: Sequence[str] = ()) -> list[Attempt]:
    """Generate, execute; while the execution failed and rounds remain, show the LLM what happened
    (its earlier answers stay in the dialogue) and ask again. Round 0 is the generation call, each
    later round one feedback call (the paper's "0 to 4 additional API calls", Limitations). The setting
    ``feedback`` chooses what a failure is and what the LLM is told (:func:`feedback_turn`); with
    ``paper`` a query need not use the question's entity."""
    st = FuSICSettings.of(ctx)
    attempts: list[Attempt] = []
    dialogue = list(messages)
    for rnd in range(rounds + 1):
        t0 = time.perf_counter()
        text = generate_query(dialogue, ctx)
        query, _ = extract_query(text, language)
        ex = execute_query(query, kg, profile, language=language, max_answers=st.max_answers, exclude=exclude,
                           anchors=() if st.feedback == "paper" else exclude)
        attempts.append(Attempt(rnd, text, ex, time.perf_counter() - t0))
        if ex.ok:
            break
        dialogue += [{"role": "assistant", "content": text},
                     {"role": "user", "content": feedback_turn(attempts, language, st.feedback)}]
    return attempts


def feedback_turn(attempts: Sequence[Attempt], language: str, style: str = "diagnostic") -> str:
    """The feedback the LLM is sent after the last of ``attempts`` failed. ``diagnostic`` (ours): what
    went wrong, then "write a corrected query", prefixed by a note when it repeats an earlier query.
    ``paper``: appendix A.1.4's fixed message, whatever the failure (in the paper a failed query is
    one that "gives an empty answer")."""
    if style == "paper":
        return paper_feedback_message(language)
    ex = attempts[-1].execution
    repeated = any(a.execution.query.strip() == ex.query.strip() for a in attempts[:-1]) and ex.query.strip()
    return ("You wrote the same query as before. " if repeated else "") + feedback_message(ex, language)
