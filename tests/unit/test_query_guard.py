"""Issue 18, items 7 and 8: the read-only guard for SPARQL the LLM writes, and embedded queries
that really stop at their timeout.

- a table of hostile queries (each must be rejected, with a one-line reason) and of valid ones
  that the old regex guard refused (``?add``, ``?with``, ``ex:Create``);
- every query the project itself builds (mini-world gold, FuSIC gold SPARQL and s-expressions,
  the remote backend's own label/neighbourhood/path queries, the LLM queries in the committed
  transcripts) passes;
- a loopback listener on 127.0.0.1 counts connections: 0, even for a SERVICE query handed to the
  query worker with the guard bypassed (the worker cannot open an inet socket);
- the store is unchanged after the hostile set; a timed-out query's worker process is gone.
Wall times are measured by ``kgqa bench run hostile_queries``, not asserted here.
"""

from __future__ import annotations

import glob
import json
import os
import threading
import time

import pytest

from kgqa_lib.kg.graph import GRAPH_IRI, QueryRejected, QueryTimeout, from_triples
from kgqa_lib.kg.sources import load_named
from kgqa_lib.paths import data_dir
from kgqa_lib.kg.sparql_guard import QuerySyntaxError, cap_limit, check_read_only, guard_query, nesting_depth
from kgqa_lib.servers import Listener


@pytest.fixture
def listener():
    lst = Listener()
    yield lst
    lst.close()


def _hostile(port: int) -> list[tuple[str, str, str]]:
    """(name, query, expected reason fragment). The first is the issue's bypass: a comment holding
    ''' made the old guard skip the next lines, which the engine runs."""
    svc = f"http://127.0.0.1:{port}/sparql"
    return [
        ("service-in-comment bypass", f"SELECT ?s ?o WHERE {{\n  ?s ?p ?o . # see '''\n  SERVICE <{svc}> {{ ?x ?y ?z }}\n"
                                      f"  # '''\n}}", "SERVICE"),
        ("service plain", f"SELECT * WHERE {{ SERVICE <{svc}> {{ ?s ?p ?o }} }}", "SERVICE"),
        ("service silent in OPTIONAL", f"SELECT * WHERE {{ ?s ?p ?o OPTIONAL {{ SERVICE SILENT <{svc}> {{ ?s ?q ?r }} }} }}",
         "SERVICE"),
        ("service in UNION", f"SELECT * WHERE {{ {{ ?s ?p ?o }} UNION {{ SERVICE <{svc}> {{ ?s ?p ?o }} }} }}", "SERVICE"),
        ("service in subquery", f"SELECT * WHERE {{ {{ SELECT ?s WHERE {{ SERVICE <{svc}> {{ ?s ?p ?o }} }} }} }}", "SERVICE"),
        ("service in FILTER EXISTS", f"SELECT * WHERE {{ ?s ?p ?o FILTER EXISTS {{ SERVICE <{svc}> {{ ?s ?p ?o }} }} }}",
         "SERVICE"),
        ("service via variable", f"SELECT * WHERE {{ VALUES ?e {{ <{svc}> }} SERVICE ?e {{ ?s ?p ?o }} }}", "SERVICE"),
        ("service after a number (1.SERVICE)", f"SELECT * WHERE {{ ?s ?p 1.SERVICE <{svc}> {{ ?a ?b ?c }} }}", "SERVICE"),
        ("service after a CR-ended comment", f"SELECT * WHERE {{ ?s ?p ?o # c\rSERVICE <{svc}> {{ ?a ?b ?c }} }}", "SERVICE"),
        ("unicode-escaped brace", "SELECT * WHERE \\u007B ?s ?p ?o }", "escape"),
        ("DEFINE pragma", "DEFINE input:inference 'urn:rules' SELECT * WHERE { ?s ?p ?o }", "DEFINE"),
        ("DEFINE hidden by a comment", "# '''\nDEFINE sql:log-enable 3\n# '''\nSELECT * WHERE { ?s ?p ?o }", "DEFINE"),
        ("LOAD", f"LOAD <{svc}/data.ttl>", "LOAD"),
        ("INSERT DATA", "INSERT DATA { <http://a> <http://b> <http://c> }", "INSERT"),
        ("INSERT hidden by a comment", "SELECT * WHERE { ?s ?p ?o } # '''\nINSERT DATA { <http://a> <http://b> <http://c> }\n# '''",
         "INSERT"),
        ("DELETE WHERE", "DELETE WHERE { ?s ?p ?o }", "DELETE"),
        ("DELETE/INSERT", "DELETE { ?s ?p ?o } INSERT { ?s ?p 1 } WHERE { ?s ?p ?o }", "DELETE"),
        ("WITH … DELETE", "WITH <http://kgqa.local/graph> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }", "WITH"),
        ("CLEAR ALL", "PREFIX x: <http://x/> CLEAR ALL", "CLEAR"),
        ("DROP GRAPH", "DROP GRAPH <http://kgqa.local/graph>", "DROP"),
        ("CREATE GRAPH", "CREATE GRAPH <http://x/g>", "CREATE"),
        ("ADD/COPY/MOVE", "ADD DEFAULT TO <http://x/g>", "ADD"),
        ("CONSTRUCT", "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }", "CONSTRUCT"),
        ("DESCRIBE", "DESCRIBE <http://x>", "DESCRIBE"),
        ("Virtuoso bif:", "SELECT * WHERE { ?s ?p ?o FILTER(bif:contains(?o, '\"x\"')) }", "bif"),
        ("Virtuoso IRI function", "SELECT (<http://www.openlinksw.com/schemas/bif#http_get>('http://x') AS ?x) {}", "Virtuoso"),
        ("3000-deep braces", "SELECT * WHERE " + "{" * 3000 + "?s ?p ?o" + "}" * 3000, "nests"),
        ("3000-deep parentheses", "SELECT * WHERE { ?s ?p ?o FILTER(" + "(" * 3000 + "1" + ")" * 3000 + ") }", "nests"),
        ("3000-deep, unclosed", "SELECT ?x WHERE " + "{" * 3000, "nests"),
        ("syntax error", "SELECT ?s WHERE { ?s ?p ", "parse"),
        ("unterminated string", "SELECT ?s WHERE { ?s ?p 'oops }", "unterminated"),
        ("empty", "   ", "empty"),
    ]


VALID = [
    "SELECT ?add ?with WHERE { ?add ex:Create ?with }",
    "PREFIX ex: <http://x/> SELECT ?create WHERE { ?create ex:Insert ?delete . ?delete ex:load ?service }",
    'SELECT ?s WHERE { ?s ?p "please INSERT coin" } # DELETE in a comment',
    "SELECT ?s WHERE { ?s <http://x/#SERVICE> ?o . ?s ?p 'SERVICE <http://evil> { }' }",
    "SELECT ?s WHERE { ?s ?p '''it''s a \"quoted\" '' thing''' }",
    'SELECT ?s WHERE { ?s ?p """multi\nline { ( [ """ }',
    "ASK { ?s ?p ?o }",
    "SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE { ?x ?p ?o } GROUP BY ?p HAVING (COUNT(?x) > 1)",
    "SELECT ?x WHERE { { SELECT ?x WHERE { ?x ?p ?o } LIMIT 5 } FILTER NOT EXISTS { ?x ?q ?x } MINUS { ?x ?r 3 } }",
    "SELECT ?x WHERE { VALUES ?x { <http://a> <http://b> } ?x (<http://p>/^<http://q>)* ?y } ORDER BY DESC(?y) LIMIT 3",
    "SELECT ?x WHERE { ?x ?p ?o . FILTER(?o<3&&?o>1) }",
    "SELECT ?x WHERE { ?x ?p ?o } VALUES ?o { 1 2 }",
    "SELECT ?x WHERE { ?x ?p ?o }\r\nLIMIT 3",
]


@pytest.fixture(scope="module")
def kg():
    return from_triples([(f"n{i}", "next", f"n{j}") for i in range(150) for j in range(0, 150, 7)], name="guard")


def _fingerprint(kg) -> tuple[int, int]:
    quads = sorted(str(q) for q in kg.store)
    return len(quads), hash(tuple(quads))


# --------------------------------------------------------------------------------------------
# The guard alone
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,query,reason", _hostile(9), ids=[h[0] for h in _hostile(9)])
def test_hostile_queries_are_rejected_with_a_reason(name, query, reason):
    with pytest.raises(QueryRejected) as exc:
        guard_query(query)
    msg = str(exc.value)
    assert reason.lower() in msg.lower() and "\n" not in msg and len(msg) < 300


@pytest.mark.parametrize("query", VALID)
def test_valid_queries_pass(query):
    assert check_read_only(query) in ("SELECT", "ASK")


def test_the_checked_text_is_the_executed_text():
    g = guard_query("SELECT ?x WHERE { ?x ?p ?o } # a comment\rLIMIT 3")
    assert "\r" not in g.text and g.text.endswith("\nLIMIT 3")


def test_syntax_errors_are_a_distinct_kind():
    with pytest.raises(QuerySyntaxError):
        guard_query("SELECT ?s WHERE { ?s ?p ")
    with pytest.raises(QueryRejected) as exc:
        guard_query("INSERT DATA { <http://a> <http://b> <http://c> }")
    assert not isinstance(exc.value, QuerySyntaxError)


def test_nesting_depth_ignores_strings_comments_and_iris():
    assert nesting_depth("SELECT * WHERE { ?s ?p '((((' # {{{{\n FILTER(?o != <http://x/(a)>) }") == 2
    assert nesting_depth("{" * 3000) == 3000
    assert nesting_depth("SELECT ?x WHERE { ?x ?p 'unterminated {{{{") == 5  # unreadable: counted bracket by bracket


@pytest.mark.parametrize("query,cap,expected", [
    ("SELECT ?x WHERE { ?x ?p ?o } LIMIT 50000000", 101, "SELECT ?x WHERE { ?x ?p ?o } LIMIT 101"),
    ("SELECT ?x WHERE { ?x ?p ?o } LIMIT 7", 101, "SELECT ?x WHERE { ?x ?p ?o } LIMIT 7"),
    ("SELECT ?x WHERE { ?x ?p ?o } ORDER BY ?x LIMIT 500 OFFSET 2", 101, "SELECT ?x WHERE { ?x ?p ?o } ORDER BY ?x LIMIT 101 OFFSET 2"),
    ("SELECT ?x WHERE { ?x ?p ?o } OFFSET 2 LIMIT 500", 101, "SELECT ?x WHERE { ?x ?p ?o } OFFSET 2 LIMIT 101"),
    ("SELECT ?x WHERE { { SELECT ?x WHERE { ?x ?p ?o } LIMIT 500 } }", 101,
     "SELECT ?x WHERE { { SELECT ?x WHERE { ?x ?p ?o } LIMIT 500 } }\nLIMIT 101"),
    ("SELECT ?x WHERE { ?x ?p 'LIMIT 5' } # LIMIT 5", 101, "SELECT ?x WHERE { ?x ?p 'LIMIT 5' } # LIMIT 5\nLIMIT 101"),
    ("SELECT ?x WHERE { ?x ?p ?o } VALUES ?x { <http://a> }", 101, "SELECT ?x WHERE { ?x ?p ?o } \nLIMIT 101\nVALUES ?x { <http://a> }"),
])
def test_cap_limit(query, cap, expected):
    out = cap_limit(query, cap)
    assert out == expected
    check_read_only(out)  # still a valid query


# --------------------------------------------------------------------------------------------
# Every query the project builds passes
# --------------------------------------------------------------------------------------------
def _transcript_queries() -> list[str]:
    from kgqa_lib.methods.fusic import extract_query

    out = []
    for f in sorted(glob.glob(str(data_dir() / "llm_cache" / "*.jsonl"))):
        for line in open(f, encoding="utf-8"):
            rec = json.loads(line)
            text = rec["response"]["text"]
            if "SELECT" in text.upper() or "ASK" in text:
                q, _ = extract_query(text, "sparql")
                if q.strip():
                    out.append(q)
    return out


def test_llm_queries_in_the_committed_transcripts_keep_their_verdict():
    """Every LLM query of the committed transcripts passes, except those that do not parse at all
    (a truncated answer), which are syntax errors — reported by the KG as before (parse_error)."""
    queries = _transcript_queries()
    assert len(queries) > 100
    for q in queries:
        try:
            check_read_only(q)
        except QuerySyntaxError:
            continue


def test_project_generated_queries_pass():
    queries = []
    for f in sorted((data_dir() / "miniworld" / "questions").glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            gold = json.loads(line).get("gold_query") or {}
            queries += [v for k, v in gold.items() if k.startswith("sparql") and v]
    from kgqa_lib.methods.fusic import _with_prefixes, get_task, sexpr_to_sparql

    for name in ("geo-wd>cinema-fb", "cinema-fb>geo-wd"):
        task = get_task(name)
        for q in task.test[:60] + task.pool:
            gold = task.target.gold(q)
            if gold is None:
                continue
            prof = task.target.profile
            queries += [gold.sparql(prof), _with_prefixes(gold.sparql(prof), prof)]
            if gold.sexpr(prof):
                queries.append(sexpr_to_sparql(gold.sexpr(prof), type_predicate=prof.type_predicate))
    assert len(queries) > 300
    for q in queries:
        assert check_read_only(q) in ("SELECT", "ASK"), q


def test_remote_backend_queries_pass(monkeypatch):
    """The SPARQL backend's own queries (labels, VALUES batches, neighbourhoods, paths, search)."""
    from kgqa_lib.kg.graph import QueryResult
    from kgqa_lib.kg.remote import SparqlKG

    sent: list[str] = []
    kg = SparqlKG("http://127.0.0.1:9/sparql", "freebase", cache=False, index_limit=0)
    monkeypatch.setattr(kg, "_fetch", lambda q, timeout=None: sent.append(q) or {"head": {"vars": []}, "results": {"bindings": []}})
    monkeypatch.setattr(kg, "_select", lambda q, timeout=None, max_rows=None: sent.append(q) or QueryResult([], []))
    e = "http://rdf.freebase.com/ns/m.01"
    kg.triples_around(e)
    kg.prefetch_labels([e, e + "x"])
    kg.follow_path(e, ["film.film.directed_by", "^film.film.starring"])
    kg.has_term(e)
    kg.lookup("Christopher 'Nolan' \"x\"")
    kg._exact_subjects('A "quoted" label')
    kg.relations()
    len(kg)
    kg.label(e)
    assert len(sent) >= 8
    for q in sent:
        assert check_read_only(q) in ("SELECT", "ASK"), q


# --------------------------------------------------------------------------------------------
# The embedded store: no network, no mutation, timeouts that stop the query
# --------------------------------------------------------------------------------------------
def test_hostile_set_on_the_embedded_store(kg, listener):
    before = _fingerprint(kg)
    for name, query, _ in _hostile(listener.port) + [("huge limit", "SELECT ?s WHERE { ?s ?p ?o } LIMIT 50000000", "")]:
        try:
            kg.sparql(query, timeout=2, max_rows=10)
        except (QueryRejected, QueryTimeout):
            pass
    time.sleep(0.3)
    assert listener.connections == []
    assert _fingerprint(kg) == before


def test_the_worker_cannot_reach_the_network_even_past_the_guard(kg, listener):
    """Defence in depth: Oxigraph sends an HTTP request for SERVICE (measured: it does, in-process);
    the query worker runs under a seccomp filter that refuses inet sockets."""
    kg.sparql("ASK { ?s ?p ?o }")  # start a worker
    out = kg._workers.run(f"SELECT * WHERE {{ SERVICE <http://127.0.0.1:{listener.port}/sparql> {{ ?s ?p ?o }} }}",
                          GRAPH_IRI, 10, 5.0, kg._generation)
    time.sleep(0.3)
    assert "error" in out and listener.connections == []


def test_updates_cannot_reach_the_store_through_the_worker(kg):
    before = _fingerprint(kg)
    out = kg._workers.run("INSERT DATA { <http://a> <http://b> <http://c> }", GRAPH_IRI, 10, 5.0, kg._generation)
    assert out.get("error") == "syntax" and _fingerprint(kg) == before


def test_a_timeout_stops_the_query(kg):
    threads = threading.active_count()
    kg.sparql("ASK { ?s ?p ?o }")
    pool = kg._workers
    killed = pool.killed
    with pytest.raises(QueryTimeout):
        kg.sparql("SELECT (COUNT(*) AS ?c) WHERE { ?a ?p ?b . ?b ?q ?c . ?c ?r ?d . ?d ?s ?e . ?e ?t ?f }", timeout=0.3)
    assert pool.killed == killed + 1
    assert all(w.alive() for w in pool._idle)  # the killed worker is not kept
    assert threading.active_count() <= threads  # no thread left behind
    assert kg.sparql("ASK { ?s ?p ?o }").boolean is True  # the next query gets a fresh worker


def test_killed_worker_process_is_gone(kg):
    from kgqa_lib.kg.query_worker import StoreSource, Worker, WorkerTimeout

    w = Worker(StoreSource(nquads=kg.store.dump(format=__import__("pyoxigraph").RdfFormat.N_QUADS)))
    pid = w.pid
    with pytest.raises(WorkerTimeout):
        w.query("SELECT (COUNT(*) AS ?c) WHERE { ?a ?p ?b . ?b ?q ?c . ?c ?r ?d . ?d ?s ?e . ?e ?t ?f }", GRAPH_IRI, 1, 0.3)
    w.kill()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_syntax_errors_keep_the_engines_message(kg):
    """FuSIC feeds this message back to the LLM: it stays Oxigraph's own, as before the guard parsed."""
    with pytest.raises(QueryRejected, match=r"^SPARQL does not parse: error at 1:"):
        kg.sparql("SELECT ?s WHERE { ?s ?p ")


def test_fusic_statuses_for_guarded_queries():
    from kgqa_lib.methods.fusic import PROFILES, execute_query

    mw = load_named("miniworld:wikidata")
    prof = PROFILES["miniworld:wikidata"]
    assert execute_query("SELECT ?x WHERE { ?x ?p ", mw, prof).status == "parse_error"
    assert execute_query("SELECT * WHERE { SERVICE <http://127.0.0.1:9/> { ?s ?p ?o } }", mw, prof).status == "rejected"
    assert execute_query("DEFINE input:inference 'x' SELECT ?x WHERE { ?x ?p ?o }", mw, prof).status == "rejected"


def test_on_disk_store_is_queried_read_only(tmp_path):
    from kgqa_lib.kg.graph import load_metaqa_kb

    kb = tmp_path / "kb.txt"
    kb.write_text("Heat|directed_by|Michael Mann\n")
    kg = load_metaqa_kb(kb, store_dir=tmp_path / "store")
    q = "SELECT ?o WHERE { ?s <http://kgqa.local/metaqa/relation/directed_by> ?o }"
    assert [r["o"] for r in kg.sparql(q).rows] == [kg.entity_iri("Michael Mann")]
    kg.load_ntriples(b"<http://x/a> <http://kgqa.local/metaqa/relation/directed_by> <http://x/c> .\n")
    assert len(kg.sparql(q).rows) == 2  # a load makes the workers reopen the store
    kg.close_workers()


def test_the_hostile_query_benchmark_is_a_table():
    from kgqa_lib.bench import measure

    assert "hostile_queries" in measure.MEASUREMENTS


def test_idle_query_workers_are_bounded_across_kgs():
    """A run over many per-question slice KGs keeps at most MAX_IDLE_TOTAL idle worker processes
    (before: two per KG, ~1000 processes and 'filedescriptor out of range in select()' after ~500 slices)."""
    from kgqa_lib.kg import query_worker as qw

    pools = [qw.WorkerPool(lambda: qw.StoreSource(nquads=b"")) for _ in range(qw.MAX_IDLE_TOTAL + 4)]
    try:
        for p in pools:
            out = p.run("ASK { ?s ?p ?o }", GRAPH_IRI, 10, 10.0, 0)
            assert "error" not in out
        idle = [w for p in pools for w in p._idle]
        assert len(idle) == len(qw._IDLE_ORDER) <= qw.MAX_IDLE_TOTAL
        assert all(w.alive() for w in idle)
        assert not any(w for p in pools[:4] for w in p._idle)  # the oldest were ended
    finally:
        for p in pools:
            p.close()
    assert not qw._IDLE_ORDER
