"""``hostile_parsers``: hostile LLM output thrown at every parser, and what happens.

Every function that reads LLM output is meant to be total: whatever the text, it returns a value
with an error category (``Parsed.error``, ``PseudoGraph.error``, ``Decomposition.error``, a status
string, ...) and never raises. ``kgqa bench run hostile_parsers [--n 2000] [--seed 0] [--only TEXT]``
feeds each one ``--n`` seeded inputs (random text, fragments of chat-template leaks, code fences,
broken JSON, Cypher/SPARQL that reads files or the network, deep nesting, very long lines, ...) and
counts crashes and error categories, with the slowest input's CPU seconds. Writes
``results/bench/hostile_parsers.json`` and ``.md``.

No hypothesis here (plain ``random.Random``), so the numbers are reproducible; the property
tests in ``tests/unit/test_hostile.py`` use the same fragments and parsers with hypothesis.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from types import SimpleNamespace
from typing import Any, Callable

from ..measure import Measurement, Option, register
from .timing import md_table, progress

# ---------------------------------------------------------------------------------------------
# Hostile text
# ---------------------------------------------------------------------------------------------
FRAGMENTS: list[str] = [
    # chat-template leaks and fences
    "<|im_end|>", "<|endoftext|>", "<|im_start|>assistant\n", "```", "```sparql\n", "```cypher\n", "```json\n",
    "```lisp\n", "```\n", "\n```",
    # unbalanced brackets and quotes
    "{", "}", "[", "]", "(", ")", "{{", "}}", "[[", "]]", "((", "))", '"', "'", "`", "\\", '\\"', "''", '"""',
    # answers
    "Answer: ", "Final answer: ", "answer is: ", "Answer: {Christopher Nolan}", "{Inception}, {Roma}", "{}", "{ }",
    "{...}", "{Name}", "{answer}", " and ", " | ", "; ",
    # JSON (nested, truncated, hostile numbers)
    '[{"question": "what films did [mask] direct", "id": 0, "dep": [-1], "seed_entities": ["Christopher Nolan"]}]',
    '{"question": "who wrote [mask]", "id": 1, "dep": [0], "seed_entities": ["<ANSWER>-0"]}',
    '{"question": "x", "id": "zero", "dep": "none", "seed_entities": null}',
    '{"question": {"nested": ["a", {"b": [1, 2]}]}, "id": [], "dep": {}}',
    '[{"question": ', '{"id": 1e400, "dep": [99999999999999999999999]}', '{"a": {"b": {"c": [1, {"d": ',
    "[1, 2, 3,]", "{'question': 'single quoted', 'id': None}", "NaN", "Infinity", "-Infinity", "null", "true",
    # numbers
    "-1", "0", "1", "3", "42", "1e309", "99999999999999999999999999999999", "0x1F", "١٢", "²", "1.5", "1, 3, 2",
    "1. 2. 3.", "#2",
    # Cypher
    "CREATE (a:Person {name: 'Christopher Nolan'})-[:DIRECTED]->(b:Film {name: 'Inception'});",
    "MERGE (n:Film {name: \"Roma\", year: 2018})", "CREATE (a)-[:R]->(b)", "-[:KNOWS]->", "(n {name:",
    "LOAD CSV FROM 'file:///etc/passwd' AS line CREATE (:Leak {v: line[0]})",
    "LOAD CSV WITH HEADERS FROM 'http://127.0.0.1:9/x.csv' AS row CREATE (:Leak {v: row.a})",
    "CALL apoc.load.json('file:///etc/passwd') YIELD value CREATE (:Leak {v: value})",
    "CALL db.labels() YIELD label", "CALL dbms.procedures()", "MATCH (n) DETACH DELETE n", "DELETE n", "SET n.x = 1",
    "UNWIND [1, 2, 3] AS i CREATE (:N {name: toString(i)})", "// comment\n", ";\n",
    # SPARQL and s-expressions
    "SELECT ?x WHERE { ?x wdt:P57 wd:Q1 . }", "PREFIX wd: <http://kgqa.local/miniworld/wd/entity/>\n",
    "ASK { wd:Q1 wdt:P31 ?c }", "INSERT DATA { <http://a> <http://b> <http://c> }", "DELETE WHERE { ?s ?p ?o }",
    "SERVICE <http://127.0.0.1:9/sparql> { ?s ?p ?o }", "LOAD <http://127.0.0.1:9/x.ttl>", "DROP ALL",
    "CLEAR GRAPH <http://x>", "ORDER BY DESC(?x) LIMIT 5", "FILTER(?x > 3)", "?x", "wd:Q1", "<http://x/y>",
    "(JOIN (R wdt:P57) wd:Q1)", "(COUNT (AND film (JOIN ns:film.film.directed_by ns:m.01)))", "(ARGMAX ",
    "(lt ns:year 1990)", "(OR wd:Q1 wd:Q2)", "()", "(JOIN)", "(R)", "(AND a)", '"quoted \\" string"',
    # chains, triples, choices
    "^directed_by, in_language", "written_by", "^", "(Christopher Nolan | directed | Inception)", "(a | b)",
    "| | |", "- (x | y | z)", "1) (s | r | o)",
    # prose, whitespace and odd characters
    "Here is the query:", "I hope this helps!", "Note: the answer may be wrong.", "Step 1:", "\n", "\r\n", "\t",
    " ", "\x00", "\u202e", "\ufeff", "\u2028", "é", "日本語", "🎬", "\udc80", "\x1b[31m",
]

WELL_FORMED: list[str] = [
    "Plan: Nolan directed Inception.\n```cypher\nCREATE (n:Person {name: 'Christopher Nolan'})"
    "-[:DIRECTED]->(f:Film {name: 'Inception', year: 2010});\n```",
    '[{"question": "what films did [mask] direct", "id": 0, "dep": [-1], "seed_entities": ["Christopher Nolan"]}, '
    '{"question": "what language is [mask] in", "id": 1, "dep": [0], "seed_entities": ["<ANSWER>-0"]}]',
    "Here is the query:\n```sparql\nPREFIX wd: <http://kgqa.local/miniworld/wd/entity/>\n"
    "SELECT ?x WHERE { wd:Q1 <http://kgqa.local/miniworld/wd/prop/direct/P57> ?x . } LIMIT 5\n```\nThat's it.",
    "```lisp\n(COUNT (AND film (JOIN (R ns:film.director.film) ns:m.01)))\n```",
    "Reasoning: Nolan directed it.\nAnswer: {Christopher Nolan}, {Jonathan Nolan}",
    "(Christopher Nolan | directed | Inception)\n(Inception | released in | 2010)",
    "^directed_by, in_language", "3, 1, 7",
]

_ALPHABET = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n\t{}[]()<>\"'`:;,.|-_^?!#/\\*"
             "\x00éß日本🎬\u202e\ufeff")


def hostile_text(rng: random.Random) -> str:
    """One hostile output, from one of six shapes (all seeded by ``rng``)."""
    shape = rng.randrange(6)
    if shape == 0:  # random characters
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(0, 200)))
    if shape == 1:  # fragments glued together
        return "".join(rng.choice(FRAGMENTS) + rng.choice(["", " ", "\n", ", "]) for _ in range(rng.randrange(1, 14)))
    if shape == 2:  # a well-formed output, truncated or with a fragment spliced in
        text = rng.choice(WELL_FORMED)
        cut = rng.randrange(len(text) + 1)
        return text[:cut] if rng.random() < 0.5 else text[:cut] + rng.choice(FRAGMENTS) + text[cut:]
    if shape == 3:  # deep nesting
        o, c = rng.choice(["()", "[]", "{}"])
        depth = rng.randrange(1, 5000)
        head = rng.choice(["", "JOIN r ", '{"question": ', "CREATE ", "SELECT ?x WHERE "])
        return (o + head) * depth + rng.choice(["", "x", FRAGMENTS[0]]) + (c * depth if rng.random() < 0.5 else "")
    if shape == 4:  # one very long line
        return rng.choice(FRAGMENTS) * rng.randrange(100, 3000)
    # prose around a hostile core, many lines
    core = "\n".join(rng.choice(FRAGMENTS + WELL_FORMED) for _ in range(rng.randrange(1, 30)))
    return rng.choice(["", "Sure! ", "```\n"]) + core + rng.choice(["", "\nHope this helps.", "<|im_end|>", "```"])


# ---------------------------------------------------------------------------------------------
# The parsers, each wrapped to return its error category (None = well formed)
# ---------------------------------------------------------------------------------------------
_RELATIONS = ["directed_by", "written_by", "starred_actors", "in_language", "release_year", "has_genre"]
_KG = None


def _kg():
    global _KG
    if _KG is None:
        from kgqa_lib.kg.graph import EmbeddedKG

        _KG = EmbeddedKG()
    return _KG


def _braced(text: str):
    from kgqa_lib.llm.parse import extract_braced_answers

    return extract_braced_answers(text).error


def _pseudo_graph(text: str):
    from kgqa_lib.methods.baselines import Generation
    from kgqa_lib.methods.pgakv import parse_pseudo_graph

    return parse_pseudo_graph(Generation("", text, 0, 0, False)).error


def _cypher(text: str):
    from kgqa_lib.methods.pgakv import cypher_to_triples

    return cypher_to_triples(text).error


def _triples(text: str):
    from kgqa_lib.methods.pgakv import parse_triples

    triples, bad = parse_triples(text)
    return "no_triples" if not triples else ("unparsed_lines" if bad else None)


def _decomposition(text: str):
    from kgqa_lib.methods.keqing import parse_decomposition

    return parse_decomposition(text).error


def _chain(text: str):
    from kgqa_lib.methods.keqing import parse_chain

    return parse_chain(text, _RELATIONS)[1]


def _choice(text: str):
    from kgqa_lib.methods.fusic import parse_choice

    return parse_choice(text, 10, 3)[1]


def _query_sparql(text: str):
    from kgqa_lib.methods.fusic import extract_query

    return extract_query(text, "sparql")[1]


def _query_sexpr(text: str):
    from kgqa_lib.methods.fusic import extract_query

    return extract_query(text, "sexpr")[1]


def _sexpr_to_sparql(text: str):
    from kgqa_lib.kg.sexpr import SExprError, to_sparql

    try:
        to_sparql(text)
    except SExprError:  # its documented error channel (execute_query turns it into parse_error)
        return "SExprError"
    return None


def _execute(text: str):
    from kgqa_lib.methods.fusic import PROFILES, execute_query, extract_query

    query, _ = extract_query(text, "sparql")
    ex = execute_query(query or text, _kg(), PROFILES["miniworld:wikidata"], timeout=5)
    return None if ex.status == "ok" else ex.status


PARSERS: dict[str, Callable[[str], str | None]] = {
    "parse.extract_braced_answers": _braced,
    "pgakv.parse_pseudo_graph (split + Cypher)": _pseudo_graph,
    "pgakv.cypher_to_triples (raw Cypher)": _cypher,
    "pgakv.parse_triples": _triples,
    "keqing.parse_decomposition": _decomposition,
    "keqing.parse_chain": _chain,
    "fusic.parse_choice": _choice,
    "fusic.extract_query (sparql)": _query_sparql,
    "fusic.extract_query (sexpr)": _query_sexpr,
    "sexpr.to_sparql": _sexpr_to_sparql,
    "fusic.execute_query (empty KG)": _execute,
}


def run(n: int = 2000, seed: int = 0, parsers: dict[str, Callable] | None = None, bar: bool = False) -> list[dict]:
    """For each parser: inputs tried, crashes (with the first few), error categories, slowest input
    (CPU seconds: the machine may be busy); ``bar``: a progress bar over all inputs."""
    parsers = parsers or PARSERS
    ticks = progress(range(n * len(parsers)), "hostile inputs", unit="input") if bar else None
    rows = []
    for name, fn in parsers.items():
        rng = random.Random(f"{seed}:{name}")
        cats: Counter = Counter()
        crashes: list[tuple[str, str]] = []
        slowest = 0.0
        for _ in range(n):
            text = hostile_text(rng)
            t0 = time.process_time()  # CPU: the machine may be busy
            try:
                cats[fn(text) or "ok"] += 1
            except Exception as exc:  # noqa: BLE001 - counting crashes is the point
                cats["CRASH"] += 1
                if len(crashes) < 3:
                    crashes.append((f"{type(exc).__name__}: {str(exc)[:80]}", text[:80]))
            slowest = max(slowest, time.process_time() - t0)
            if ticks is not None:
                ticks.update()
        rows.append({"parser": name, "inputs": n, "crashes": cats.pop("CRASH", 0), "categories": dict(cats.most_common()),
                     "examples": crashes, "slowest_s": slowest})
    if ticks is not None:
        ticks.close()
    return rows


def markdown(rows: list[dict]) -> str:
    out = [md_table(["parser", "inputs", "crashes", "error categories (counts)", "slowest input (CPU s)"],
                    [[r["parser"], r["inputs"], r["crashes"], ", ".join(f"{k} {v}" for k, v in r["categories"].items()),
                      f"{r['slowest_s']:.2f}"] for r in rows])]
    for r in rows:
        for err, text in r["examples"]:
            out.append(f"\ncrash in {r['parser']}: {err} on {text!r}")
    return "\n".join(out)


def measure(opts: SimpleNamespace, previous: dict[str, Any]) -> dict[str, Any]:
    """:func:`run` over the parsers whose name contains ``--only``, under a memory cap."""
    if opts.max_memory_gb:
        try:  # a runaway parser becomes a counted MemoryError, not a swapping machine
            import resource

            cap = int(opts.max_memory_gb * (1 << 30))
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        except (ImportError, ValueError, OSError):
            pass
    chosen = {k: v for k, v in PARSERS.items() if opts.only in k}
    return {"n": opts.n, "seed": opts.seed, "only": opts.only, "rows": run(opts.n, opts.seed, chosen, bar=True)}


def report(d: dict[str, Any]) -> str:
    only = f", parsers whose name contains {d['only']!r}" if d["only"] else ""
    return "\n".join([
        "# Hostile LLM output against every parser", "",
        f"`kgqa bench run hostile_parsers`: {d['n']} seeded inputs per parser (seed {d['seed']}{only}): random text, "
        "fragments of chat-template leaks, code fences, broken JSON, Cypher/SPARQL that reads files or the network, "
        "deep nesting, very long lines. A crash is an exception out of the parser (each should return an error "
        "category instead); the slowest input is in CPU seconds. Raw numbers: `hostile_parsers.json`.", "",
        markdown(d["rows"]), "",
        f"Crashes: **{sum(r['crashes'] for r in d['rows'])}**.", ""])


def estimate(opts: SimpleNamespace, previous: dict[str, Any]) -> str:
    chosen = [k for k in PARSERS if opts.only in k]
    return (f"{opts.n:,} seeded inputs × {len(chosen)} parsers = {opts.n * len(chosen):,} parser calls "
            "(CPU-bound, one core; no recorded run to time it)")


TABLE = register(Measurement(
    name="hostile_parsers", title="hostile LLM output thrown at every parser: crashes, error categories, slowest input",
    data="hostile_parsers.json", output="hostile_parsers.md", report=report, measure=measure, estimate=estimate,
    options=(Option("--n", 2000, "inputs per parser", low=1),
             Option("--seed", 0, "seed of the inputs"),
             Option("--only", "", "only parsers whose name contains this"),
             Option("--max-memory-gb", 4.0, "cap the process's address space (0: no cap)", low=0)),
    target="no parser raises (0 crashes)", verdict=lambda d: not any(r["crashes"] for r in d["rows"])))
