"""Every parser of LLM output is total: random and adversarial text (code fences, chat-template
leaks, unbalanced brackets, nested/truncated JSON, huge numbers, NUL bytes, very long lines, Cypher
and SPARQL that read files or the network, trailing prose) never raises, and a result with nothing
in it always carries an error category. The fragments and parser wrappers are shared with the
``hostile_parsers`` benchmark (:mod:`kgqa_lib.bench.speed.hostile_parsers`, which counts crashes and categories)."""

from __future__ import annotations

import sys
import time

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from kgqa_lib.kg.graph import EmbeddedKG
from kgqa_lib.methods.baselines import Generation
from kgqa_lib.methods.fusic import PROFILES, Execution, execute_query, extract_query, parse_choice
from kgqa_lib.methods.keqing import parse_chain, parse_decomposition
from kgqa_lib.methods.pgakv import cypher_to_triples, parse_pseudo_graph, parse_triples, split_plan_and_cypher
from kgqa_lib.llm.parse import extract_braced_answers
from kgqa_lib.kg.sexpr import SExprError, extract_sexpr, parse_sexpr, to_sparql
from kgqa_lib.bench.speed import hostile_parsers as H

FRAGMENT = st.sampled_from(H.FRAGMENTS)


def _splice(text: str, at: float, cut: bool, frag: str) -> str:
    i = int(at * len(text))
    return text[:i] if cut else text[:i] + frag + text[i:]


def _nest(brackets: str, depth: int, head: str, close: bool) -> str:
    o, c = brackets
    return (o + head) * depth + "x" + (c * depth if close else "")


HOSTILE = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(FRAGMENT, st.text(max_size=12)), max_size=16).map("".join),
    st.builds(_splice, st.sampled_from(H.WELL_FORMED), st.floats(0, 1), st.booleans(), FRAGMENT),
    st.builds(_nest, st.sampled_from(["()", "[]", "{}"]), st.integers(1, 3000),
              st.sampled_from(["", "JOIN r ", '{"question": ', "CREATE ", "SELECT ?x WHERE "]), st.booleans()),
    st.builds(lambda f, n: f * n, FRAGMENT, st.integers(50, 1500)),
    st.lists(st.sampled_from(H.FRAGMENTS + H.WELL_FORMED), min_size=1, max_size=25).map("\n".join),
)
FAST = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
SLOW = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))  # cypherast, SPARQL


# --------------------------------------------------------------------------------------------
# One property per parser
# --------------------------------------------------------------------------------------------
@FAST
@given(HOSTILE)
def test_braced_answers(text):
    p = extract_braced_answers(text)
    assert all(isinstance(x, str) and x for x in p.items)
    assert p.items or p.error in ("empty", "no_braces", "no_answer_marker")


@SLOW
@given(HOSTILE)
def test_pseudo_graph(text):
    plan, cypher = split_plan_and_cypher(text)
    assert isinstance(plan, str) and isinstance(cypher, str)
    pg = parse_pseudo_graph(Generation("", text, 0, 0, False))
    assert pg.error in (None, "no_cypher", "cypher_error", "empty_graph")
    assert pg.triples or pg.error
    assert all(len(t) == 3 and all(isinstance(x, str) for x in t) for t in pg.triples)


@SLOW
@given(HOSTILE)
def test_cypher_to_triples(text):
    pg = cypher_to_triples(text)
    assert pg.triples or pg.error in ("no_cypher", "cypher_error", "empty_graph")
    assert pg.failed_statements <= pg.statements


@FAST
@given(HOSTILE)
def test_parse_triples(text):
    triples, bad = parse_triples(text)
    assert all(len(t) == 3 and all(isinstance(x, str) and x for x in t) for t in triples)
    assert bad >= 0 and len(triples) + bad <= len([ln for ln in text.splitlines() if ln.strip()])


@FAST
@given(HOSTILE)
def test_parse_decomposition(text):
    dec = parse_decomposition(text)
    assert dec.subquestions  # never empty: the whole question is the fallback
    assert dec.error in (None, "no_json", "bad_json_repaired", "bad_item", "bad_ids", "fallback")
    for s in dec.subquestions:
        assert isinstance(s.id, int) and all(isinstance(d, int) for d in s.dep)
        assert all(isinstance(e, str) and e for e in s.seed_entities)
        assert s.question or dec.error == "fallback"


@FAST
@given(HOSTILE)
def test_parse_chain(text):
    known = ["directed_by", "written_by", "in_language"]
    chain, err = parse_chain(text, known)
    assert (err == "no_chain") == (not chain)
    assert all(c.lstrip("^") in known for c in chain)


@FAST
@given(HOSTILE, st.integers(1, 30), st.integers(1, 10))
def test_parse_choice(text, n, k):
    picked, err = parse_choice(text, n, k)
    assert len(picked) == len(set(picked)) <= k and all(1 <= x <= n for x in picked)
    assert bool(picked) != bool(err) and err in (None, "no_numbers", "out_of_range")


@FAST
@given(HOSTILE, st.sampled_from(["sparql", "sexpr"]))
def test_extract_query(text, language):
    q, err = extract_query(text, language)
    assert (q == "") == (err == "no_query")
    if q and language == "sexpr":
        assert q.startswith("(") and q.endswith(")")


@FAST
@given(HOSTILE)
@example("((0))")  # a nested list in operator position once raised TypeError (unhashable list)
@example("((JOIN r e) x)")
def test_sexpr_raises_only_its_own_error(text):
    for candidate in (text, extract_sexpr(text)):
        try:
            assert "SELECT" in to_sparql(candidate)
        except SExprError as exc:  # its documented error channel (execute_query reports parse_error)
            assert str(exc)


@pytest.fixture(scope="module")
def empty_kg():
    return EmbeddedKG()


STATUSES = {"ok", "empty", "no_query", "parse_error", "rejected", "unknown_prefix", "unknown_iri", "unanchored",
            "too_many", "timeout"}


@SLOW
@given(text=HOSTILE, language=st.sampled_from(["sparql", "sexpr"]))
def test_execute_query_is_total(empty_kg, text, language):
    query, _ = extract_query(text, language)
    for q in (query, text):
        ex = execute_query(q, empty_kg, PROFILES["miniworld:wikidata"], language=language, timeout=5)
        assert isinstance(ex, Execution) and ex.status in STATUSES
        assert ex.ok or ex.message


# --------------------------------------------------------------------------------------------
# The crashes these tests found, pinned
# --------------------------------------------------------------------------------------------
def test_deeply_nested_json_is_a_category_not_a_recursion_error():
    dec = parse_decomposition("[" * 5000 + "]" * 5000)
    assert dec.error == "fallback"
    assert parse_decomposition('[{"question": ' * 3000).error in ("fallback", "no_json")


def test_deeply_nested_sexpr_is_an_sexpr_error():
    for text in ("(JOIN r " * 3000 + "x" + ")" * 3000, "(" * 5000):
        with pytest.raises(SExprError):
            parse_sexpr(text)
        with pytest.raises(SExprError):
            to_sparql(text)
    deep = "ns:x"
    for _ in range(5000):
        deep = ["JOIN", "ns:r", deep]
    with pytest.raises(SExprError, match="levels deep"):
        to_sparql(deep)  # a tree handed in directly, not through parse_sexpr


def test_extract_sexpr_is_linear():
    t0 = time.perf_counter()
    assert extract_sexpr("(" * 200_000) == ""
    assert extract_sexpr("(" * 100_000 + "(COUNT x)") == "(COUNT x)"
    assert time.perf_counter() - t0 < 5  # was quadratic: ~10 s for 20,000 '('


def test_many_prefix_lines_do_not_stall_query_extraction():
    t0 = time.process_time()
    assert extract_query("PREFIX wd: <http://kgqa.local/miniworld/wd/entity/>\n" * 5000) == ("", "no_query")
    assert time.process_time() - t0 < 2  # the PREFIX regex is quadratic: ~3 s for 3,000 lines before the cap


def test_deeply_nested_sparql_is_refused_before_the_store_sees_it(empty_kg):
    """pyoxigraph's parser overflows the C stack (segfault, the whole process dies) at ~3000 nested
    groups; execute_query refuses deep nesting first."""
    q = "SELECT ?x WHERE " + "{" * 5000 + " ?x ?p ?o " + "}" * 5000
    ex = execute_query(q, empty_kg, PROFILES["miniworld:wikidata"])
    assert ex.status == "parse_error" and "levels deep" in ex.message
    ok = execute_query("SELECT ?x WHERE { { { ?x ?p ?o } } }", empty_kg, PROFILES["miniworld:wikidata"])
    assert ok.status == "empty"  # ordinary nesting still runs


@pytest.mark.parametrize("query", [
    "INSERT DATA { <http://a> <http://b> <http://c> }",
    "DELETE WHERE { ?s ?p ?o }",
    "SELECT * WHERE { SERVICE <http://127.0.0.1:9/sparql> { ?s ?p ?o } }",
    "LOAD <http://127.0.0.1:9/x.ttl>",
    "DROP ALL",
    "```sparql\nINSERT DATA { <http://a> <http://b> <http://c> }\n```\nDone!",
])
def test_writes_and_remote_calls_are_rejected(empty_kg, query):
    q, _ = extract_query(query)
    ex = execute_query(q, empty_kg, PROFILES["miniworld:wikidata"])
    assert ex.status == "rejected", ex


# --------------------------------------------------------------------------------------------
# Cypher safety: the pseudo-graph's Cypher runs in a throw-away in-memory graph (cypherast), and
# clauses that would read outside it are recorded as errors, never executed
# --------------------------------------------------------------------------------------------
_EVENTS: list[tuple[str, tuple]] = []
_WATCHING = False


def _audit(event: str, args: tuple) -> None:
    if _WATCHING and (event in ("open", "os.listdir", "os.scandir", "subprocess.Popen", "os.system")
                      or event.startswith(("socket.", "urllib.", "http.client."))):
        _EVENTS.append((event, args))


sys.addaudithook(_audit)  # inert unless _WATCHING (audit hooks cannot be removed)

HOSTILE_CYPHER = {
    "load_csv_file": "LOAD CSV FROM 'file:///etc/passwd' AS line CREATE (:Leak {name: line[0]})",
    "load_csv_http": "LOAD CSV WITH HEADERS FROM 'http://127.0.0.1:9/x.csv' AS row CREATE (:Leak {name: row.a})",
    "apoc_load_json": "CALL apoc.load.json('file:///etc/passwd') YIELD value CREATE (:Leak {name: value})",
    "db_procedure": "CALL db.labels() YIELD label CREATE (:Leak {name: label})",
    "dbms_procedure": "CALL dbms.security.createUser('x', 'y', false)",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_CYPHER))
def test_cypher_reading_outside_the_graph_is_recorded_not_run(name):
    global _WATCHING
    cypher_to_triples("CREATE (a {name: 'warm'})-[:R]->(b {name: 'up'})")  # lazy imports happen here
    cypher = "CREATE (a:Film {name: 'Inception'})-[:DIRECTED_BY]->(b:Person {name: 'Nolan'});\n" + HOSTILE_CYPHER[name]
    _EVENTS.clear()
    _WATCHING = True
    try:
        pg = cypher_to_triples(cypher)
    finally:
        _WATCHING = False
    assert _EVENTS == []  # no file opened, no socket, no subprocess
    assert pg.triples == [("Inception", "directed by", "Nolan")]  # the good statement still counts
    assert not any(t[0] == "Leak" or "root" in t[2] for t in pg.triples)
    assert any(e.startswith("not executed: ") for e in pg.errors), pg.errors
    assert pg.error is None  # a pseudo-graph came out; the refused statement is in pg.errors


def test_detach_delete_only_touches_the_throwaway_graph():
    """DELETE runs, but only inside the in-memory graph built for this one response: it can empty
    the pseudo-graph (→ ``empty_graph``), nothing else."""
    global _WATCHING
    _EVENTS.clear()
    _WATCHING = True
    try:
        pg = cypher_to_triples("CREATE (a {name: 'A'})-[:R]->(b {name: 'B'});\nMATCH (n) DETACH DELETE n;")
        again = cypher_to_triples("CREATE (a {name: 'A'})-[:R]->(b {name: 'B'});")
    finally:
        _WATCHING = False
    assert _EVENTS == []
    assert pg.triples == [] and pg.error == "empty_graph"
    assert again.triples == [("A", "r", "B")]  # graphs are not shared between calls


def test_cypher_work_is_bounded():
    """Row multipliers and growing values are refused before they run, MATCH cross products stop
    at the work budget, the line-by-line repair stops at its budget, and only the first
    MAX_CYPHER_CHARS characters are read (each was a hang or a memory blow-up; the sizes here
    stay survivable should a guard regress)."""
    from kgqa_lib.methods.pgakv import MAX_CYPHER_CHARS

    seed = "CREATE (a:Film {name: 'Inception'})-[:DIRECTED_BY]->(b:Person {name: 'Nolan'});\n"
    pg = cypher_to_triples(seed + "UNWIND [1, 2, 3] AS i " * 12 + "CREATE (:N {name: 'x'})")
    assert pg.triples == [("Inception", "directed by", "Nolan")] and "not executed: UNWIND" in pg.errors[-1]
    for clause in ("FOREACH (i IN [1, 2] | CREATE (:N))", "CREATE (n {v: [x IN [1, 2] | x]})",
                   "CREATE (n {v: range(1, 100000)})", "CALL { CREATE (:N) }", "CREATE (n {v: 10^100})",
                   "CREATE (n {v: 'a' + 'b'})", "CREATE (n {v: replace('aa', 'a', 'aa')})",
                   "WITH 'ab' AS s CREATE (n {v: s})", "CREATE (n {v: CASE WHEN true THEN range(1, 3) END})"):
        assert cypher_to_triples(clause).errors[-1].startswith("not executed: "), clause
    nodes = ", ".join(f"(n{i} {{name: 'x{i}'}})" for i in range(28))
    t0 = time.process_time()
    pg = cypher_to_triples(seed + f"CREATE {nodes};\nMATCH (a), (b), (c), (d) CREATE (a)-[:R]->(b);")  # 30^4 rows
    assert pg.triples == [("Inception", "directed by", "Nolan")] and "work budget exceeded" in pg.errors[-1]
    pg = cypher_to_triples('CREATE (a)-[:R]->(b {name: "x"})\n' * 600 + "CREATE (oops\n")
    assert "repair budget spent" in pg.errors[-1]
    pg = cypher_to_triples(seed + "CREATE (n {name: 'y'});\n" * 2000)
    assert pg.errors[0].startswith(f"Cypher cut to its first {MAX_CYPHER_CHARS:,}") and pg.error is None
    assert time.process_time() - t0 < 20


def test_the_counting_harness_runs():
    rows = H.run(n=8, seed=0, parsers={k: v for k, v in H.PARSERS.items() if "execute" not in k})
    assert {r["parser"] for r in rows} and all(r["inputs"] == 8 and r["crashes"] == 0 for r in rows)
    table = H.markdown(rows)
    assert table.startswith("| parser | inputs | crashes | error categories (counts)")
