"""``hostile_queries``: hostile SPARQL against both backends — accepted or rejected, network calls,
mutations, wall time.

The target: the hostile-query set (the SERVICE-in-comment bypass, DEFINE, LOAD,
INSERT/DELETE, a 3000-deep nesting, a cross product that would run for minutes, ``LIMIT 50000000``)
gives 0 network calls, 0 mutations, and every query ends within its timeout + 1 s::

    kgqa bench run hostile_queries            # writes results/bench/hostile_queries.json and .md
    kgqa bench run hostile_queries --timeout 2 --no-remote

Backends: the embedded mini-world (Wikidata-like, ~10k triples; queries run in a killable worker
process) and, unless ``--no-remote``, the same KG behind the project's Oxigraph server on
127.0.0.1 (``kgqa_lib.servers``, given by the caller: the app layer). A TCP listener on 127.0.0.1
(``servers.Listener``) stands for "the network": a SERVICE query names it, and every connection it
receives is counted. On the server, hostile *names* (labels an LLM could write, closing the IRI or
the literal they are put in) also go through every caller of ``lookup`` and every KG method that
takes an IRI or a relation (:func:`label_callers`): 0 connections may reach the listener.
Mutations: the number of triples and a hash of the embedded store before/after; ``COUNT(*)`` on the
endpoint. ``cpu after`` is the CPU time this process used in the second after the query returned
(a leaked query thread shows up there)."""

from __future__ import annotations

import os
import time
from types import ModuleType, SimpleNamespace
from typing import Any, Callable

from ...paths import data_dir
from ..measure import Measurement, Option, register
from .timing import md_table


def hostile(port: int) -> list[tuple[str, str]]:
    """(label, query) of every hostile query; the SERVICE ones name the listener at ``port``."""
    svc = f"http://127.0.0.1:{port}/sparql"
    return [
        ("SERVICE hidden by a ''' comment (the bypass)",
         f"SELECT ?s ?o WHERE {{\n  ?s ?p ?o . # see '''\n  SERVICE <{svc}> {{ ?x ?y ?z }}\n  # '''\n}} LIMIT 5"),
        ("SERVICE in FILTER EXISTS", f"SELECT * WHERE {{ ?s ?p ?o FILTER EXISTS {{ SERVICE <{svc}> {{ ?s ?p ?o }} }} }}"),
        ("SERVICE after 1. (lexer trick)", f"SELECT * WHERE {{ ?s ?p 1.SERVICE <{svc}> {{ ?a ?b ?c }} }}"),
        ("SERVICE after a CR-ended comment", f"SELECT * WHERE {{ ?s ?p ?o # c\rSERVICE <{svc}> {{ ?a ?b ?c }} }}"),
        ("DEFINE pragma", "DEFINE input:inference 'urn:rules' SELECT * WHERE { ?s ?p ?o }"),
        ("DEFINE hidden by a ''' comment", "# '''\nDEFINE sql:log-enable 3\n# '''\nSELECT * WHERE { ?s ?p ?o }"),
        ("LOAD", f"LOAD <{svc}/data.ttl>"),
        ("INSERT DATA", "INSERT DATA { <http://a> <http://b> <http://c> }"),
        ("INSERT hidden by a ''' comment",
         "SELECT * WHERE { ?s ?p ?o } # '''\nINSERT DATA { <http://a> <http://b> <http://c> }\n# '''"),
        ("DELETE WHERE", "DELETE WHERE { ?s ?p ?o }"),
        ("DELETE/INSERT WHERE", "DELETE { ?s ?p ?o } INSERT { ?s ?p 1 } WHERE { ?s ?p ?o }"),
        ("CLEAR ALL", "CLEAR ALL"),
        ("3000-deep nesting", "SELECT * WHERE " + "{" * 3000 + "?s ?p ?o" + "}" * 3000),
        ("3000-deep nesting, unclosed", "SELECT * WHERE " + "{" * 3000),
        ("cross product (minutes)", "SELECT (COUNT(*) AS ?n) WHERE { ?a ?p ?b . ?c ?q ?d . ?e ?r ?f }"),
        ("LIMIT 50000000", "SELECT ?a ?c WHERE { ?a ?p ?b . ?c ?q ?d } LIMIT 50000000"),
        ("ORDER BY … LIMIT 50000000", "SELECT ?a ?c WHERE { ?a ?p ?b . ?c ?q ?d } ORDER BY ?a ?c LIMIT 50000000"),
    ]


def hostile_labels(port: int) -> list[tuple[str, str]]:
    """(label, value) of every hostile name: what an LLM's pseudo-graph node, draft mention or seed,
    or a dataset's topic name, could be. Each tries to close the IRI or the literal it is written
    into and add a SERVICE clause naming the listener at ``port``."""
    svc = f"http://127.0.0.1:{port}/sparql"
    tail = f" }} SERVICE <{svc}> {{ ?s ?p ?o }} }} #"
    return [
        ("http:// name closing the IRI", "http://x>" + tail),
        ("https:// name closing the IRI", "https://x>" + tail),
        ("urn: name closing the IRI", "urn:x>" + tail),
        ("name closing the literal", 'x"' + tail),
        ("name with an escaped quote", 'x\\"' + tail),
        ("name with a newline", "x\n" + tail + "\n"),
        ("name with a carriage return", "x\r" + tail + "\r"),
        ("name with a \\u0022 escape", "x\\u0022" + tail),
        ("IRI with a \\u003E escape", "http://x\\u003E" + tail),
        ("IRI with a space", f"http://x/a b> }} SERVICE <{svc}> {{ ?s ?p ?o }} #"),
        ("relation name closing the IRI", "directed_by> ?t" + tail),
    ]


def label_callers(kg, big=None) -> list[tuple[str, Callable[[str], Any]]]:
    """(name, call(value)) of every place where a name, mention, seed, relation or IRI taken from data
    is written into a query on ``kg``: the methods' callers of ``lookup``, then the KG's own methods
    that take an IRI or a relation. ``big``: the same endpoint opened as too big to index (its
    lookup searches labels on the server)."""
    from ...data.datasets import Question
    from ...methods import kbbinder, keqing, pgakv, tog
    from ...methods.fusic import linking

    def question(v: str) -> Question:
        return Question("hostile", v, [], topic_entities=[v])

    anchor = kg.entity_iri("x")
    calls = [
        ("PG&AKV link_entities (pseudo-graph node names)", lambda v: pgakv.link_entities([v], kg)),
        ("KB-BINDER bind_entities (draft mentions)", lambda v: kbbinder.bind_entities([v], kg)),
        ("Keqing link_seed (decomposition seeds)", lambda v: keqing.link_seed(v, kg)),
        ("FuSIC link_entities (topic names)", lambda v: linking.link_entities(question(v), kg, oracle=True)),
        ("FuSIC link_entities (question spans)", lambda v: linking.link_entities(question(v), kg)),
        ("ToG link_topic_entities (topic names)", lambda v: tog.link_topic_entities(question(v), kg)),
        ("lookup (exact, then fuzzy)", lambda v: kg.lookup(v)),
        ("follow_path (seed)", lambda v: kg.follow_path(v, ["x", "^x"])),
        ("follow_path (relation)", lambda v: kg.follow_path(anchor, [v, "^" + v])),
        ("prefetch_labels", lambda v: kg.prefetch_labels([v, anchor])),
        ("label / labels / description", lambda v: (kg.label(v), kg.labels(v), kg.description(v))),
        ("has_term", lambda v: kg.has_term(v)),
        ("triples_around", lambda v: kg.triples_around(v)),
    ]
    if big is not None:
        calls.append(("lookup on an endpoint too big to index (server-side search)", lambda v: big.lookup(v)))
    return calls


def probe_labels(kg, listener: Any, big=None) -> list[dict[str, Any]]:
    """Every hostile name through every caller: one row per caller (returned, question errors,
    outages, connections the listener received)."""
    from ...errors import InfrastructureError

    rows = []
    labels = hostile_labels(listener.port)
    for caller, call in label_callers(kg, big):
        before = listener.count
        returned = errors = outages = 0
        t = time.perf_counter()
        for _, value in labels:
            try:
                call(value)
                returned += 1
            except InfrastructureError:  # an outage: the run would stop and retry the question for ever
                outages += 1
            except Exception:  # noqa: BLE001 - a question's error: recorded, the run goes on
                errors += 1
        wall = time.perf_counter() - t
        time.sleep(0.2)
        row = {"caller": caller, "names": len(labels), "returned": returned, "question_errors": errors,
               "outages": outages, "network_calls": listener.count - before, "wall_s": round(wall, 3)}
        row["ok"] = row["network_calls"] == 0 and outages == 0
        rows.append(row)
        print(f"  label injection: {caller}: {returned} returned, {errors} errors, {outages} outages, "
              f"{row['network_calls']} calls, {'ok' if row['ok'] else 'NOT OK'}", flush=True)
    return rows


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def fingerprint_embedded(kg) -> tuple[int, int]:
    quads = sorted(str(q) for q in kg.store)
    return len(quads), hash(tuple(quads))


def run_one(kg, query: str, timeout: float, max_rows: int) -> tuple[str, float, float, str]:
    """(verdict, wall seconds, CPU seconds of the second after, detail) of one query."""
    from ...kg.graph import QueryRejected, QueryTimeout

    t = time.perf_counter()
    try:
        res = kg.sparql(query, timeout=timeout, max_rows=max_rows)
        outcome, detail = "accepted", f"{len(res.rows)} rows" + (" (capped)" if res.truncated else "")
    except QueryTimeout:
        outcome, detail = "accepted", "timeout: stopped"
    except QueryRejected as exc:
        outcome, detail = "rejected", str(exc)[:70]
    wall = time.perf_counter() - t
    c0 = _cpu()
    time.sleep(1.0)
    return outcome, wall, _cpu() - c0, detail


def probe(kg, backend: str, listener: Any, timeout: float, max_rows: int, mutations: Callable[[], Any],
          sent: Callable[[], int] | None = None) -> list[dict[str, Any]]:
    """Every hostile query once on ``kg``: one row of measurements each."""
    rows = []
    kg.sparql("ASK { ?s ?p ?o }")  # warm: the worker / the HTTP session
    for label, query in hostile(listener.port):
        before_net, before_mut = listener.count, mutations()
        before_sent = sent() if sent else 0
        outcome, wall, cpu_after, detail = run_one(kg, query, timeout, max_rows)
        time.sleep(0.2)
        row = {"query": label, "verdict": outcome, "network_calls": listener.count - before_net}
        if sent:  # before the mutation check sends its own query
            row["requests_sent"] = sent() - before_sent
        row.update(mutated=mutations() != before_mut, wall_s=round(wall, 3), cpu_after_s=round(cpu_after, 3),
                   detail=detail)
        row["ok"] = wall <= timeout + 1.0 and row["network_calls"] == 0 and not row["mutated"]
        rows.append(row)
        print(f"  {backend}: {label}: {outcome}, {wall:.2f} s, {'ok' if row['ok'] else 'NOT OK'}", flush=True)
    return rows


def measure(opts: SimpleNamespace, previous: dict[str, Any], servers: ModuleType) -> dict[str, Any]:
    """Both backends (the server unless ``--no-remote``); ``servers`` is :mod:`kgqa_lib.servers`."""
    from ...kg.sources import load_named

    listener = servers.Listener()
    kg = load_named("miniworld:wikidata")
    out: dict[str, Any] = {"timeout_s": opts.timeout, "max_rows": opts.max_rows, "backends": {}}
    try:
        out["backends"]["embedded"] = probe(kg, "embedded", listener, opts.timeout, opts.max_rows,
                                            lambda: fingerprint_embedded(kg))
        if not opts.no_remote:
            from ...kg.remote import open_sparql_kg

            files = [data_dir() / "miniworld" / "kg_wikidata.nt", data_dir() / "miniworld" / "ontology.nt"]
            with servers.OxigraphServer(files) as srv:
                remote = open_sparql_kg(srv.kg_url("miniworld:wikidata"), cache=False)
                remote.retries = 2

                def count() -> str:
                    return remote._select("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }").rows[0]["n"]

                out["backends"]["oxigraph server"] = probe(remote, "oxigraph server", listener, opts.timeout,
                                                           opts.max_rows, count, sent=lambda: remote.stats["sent"])
                big = open_sparql_kg(srv.kg_url("miniworld:wikidata"), cache=False, index_limit=0)
                out["label_injection"] = probe_labels(remote, listener, big)
    finally:
        listener.close()
    return out


def all_ok(d: dict[str, Any]) -> bool:
    return all(r["ok"] for rows in d["backends"].values() for r in rows) and all(r["ok"] for r in d.get("label_injection", []))


def report(d: dict[str, Any]) -> str:
    timeout = d["timeout_s"]
    lines = [
        "# Hostile SPARQL queries",
        "",
        "Written by `kgqa bench run hostile_queries` (timeout "
        f"{timeout:.0f} s, row cap {d['max_rows']}). Network calls: connections to a listener on 127.0.0.1 "
        "that the SERVICE queries name. Mutations: triples + hash of the embedded store, `COUNT(*)` on the endpoint. "
        "`cpu after`: CPU this process used in the second after the query returned. On the endpoint, a "
        "timed-out query is not retried and its LIMIT is capped at the row cap + 1; Oxigraph's server takes "
        "no per-query timeout parameter (only `--timeout-s` at start), so it may still finish a timed-out "
        "query server-side.",
    ]
    for backend, rows in d["backends"].items():
        sent = bool(rows) and "requests_sent" in rows[0]
        lines += ["", md_table(["backend", "query", "verdict", "network calls", "mutations",
                                *(["requests sent"] if sent else []), "wall s / timeout", "cpu after (s)",
                                "within timeout + 1 s, 0 calls, 0 mutations", "detail"],
                               [[backend, r["query"], r["verdict"], r["network_calls"], "CHANGED" if r["mutated"] else "0",
                                 *([r["requests_sent"]] if sent else []), f"{r['wall_s']:.2f} / {timeout:.0f}",
                                 f"{r['cpu_after_s']:.2f}", "yes" if r["ok"] else "**NO**", r["detail"].replace("|", "/")]
                                for r in rows])]
    if "label_injection" in d:
        rows = d["label_injection"]
        n = rows[0]["names"] if rows else 0
        lines += ["", f"Hostile names on the Oxigraph server: {n} names (labels closing the IRI or the literal they are "
                  "written into, and adding a SERVICE clause that names the listener) through every caller of `lookup` "
                  "and every KG method that takes an IRI or a relation. A question error is recorded as that question's "
                  "answer; an outage would stop the run.",
                  "", md_table(["caller", "names", "returned", "question errors", "outages", "network calls", "wall s",
                                "0 calls, 0 outages"],
                               [[r["caller"], r["names"], r["returned"], r["question_errors"], r["outages"],
                                 r["network_calls"], f"{r['wall_s']:.2f}", "yes" if r["ok"] else "**NO**"] for r in rows])]
    lines += ["", f"All within timeout + 1 s with 0 network calls and 0 mutations: **{'yes' if all_ok(d) else 'NO'}**", ""]
    return "\n".join(lines)


def estimate(opts: SimpleNamespace, previous: dict[str, Any]) -> str:
    n, backends = len(hostile(0)), 1 if opts.no_remote else 2
    names = "" if opts.no_remote else f", then {len(hostile_labels(0))} hostile names through every caller of lookup (~1 min)"
    return (f"{n} hostile queries on {backends} backend{'s' if backends > 1 else ''}, each ≤ {opts.timeout:g} s + "
            f"1.2 s of watching: ≤ {n * backends * (opts.timeout + 1.2) / 60:.1f} min (most are rejected at once){names}")


TABLE = register(Measurement(
    name="hostile_queries", title="hostile SPARQL (SERVICE, DEFINE, updates, deep nesting, huge joins) on both backends",
    data="hostile_queries.json", output="hostile_queries.md", report=report, measure=measure, estimate=estimate,
    options=(Option("--timeout", 3.0, "seconds per query", low=0.1),
             Option("--max-rows", 100, "row cap", low=1),
             Option("--no-remote", False, "only the embedded backend (no Oxigraph server)")),
    target="every query within its timeout + 1 s, 0 network calls, 0 mutations", verdict=all_ok,
    needs=("servers",), requires="the `oxigraph` binary (PyPI package) unless --no-remote"))
