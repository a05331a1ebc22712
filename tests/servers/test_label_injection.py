"""Names from data cannot inject SPARQL into the remote backend's own queries (issue 49, item 1).

A label an LLM writes (a pseudo-graph node, a KB-BINDER mention, a Keqing seed) or a dataset's
topic name reaches ``lookup`` and from there a query on the endpoint; seeds, relation names and IRIs
reach ``follow_path``, ``prefetch_labels``, ``has_term``, ``triples_around``. With a loopback
Oxigraph server and a TCP listener on 127.0.0.1 that every hostile name tries to reach through a
SERVICE clause, the listener must receive 0 connections, and no name may stop a run (an outage).
The names and the callers are those of the ``hostile_queries`` benchmark."""

from __future__ import annotations

import time

import pytest

from kgqa_lib.bench.speed.hostile_queries import hostile_labels, label_callers
from kgqa_lib.errors import InfrastructureError
from kgqa_lib.kg.remote import open_sparql_kg
from kgqa_lib.paths import data_dir
from kgqa_lib.servers import Listener, OxigraphServer

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def oxigraph():
    with OxigraphServer([data_dir() / "miniworld" / "kg_wikidata.nt"]) as srv:
        yield srv


@pytest.fixture
def listener():
    lst = Listener()
    yield lst
    lst.close()


def test_the_review_reproduction_sends_nothing(oxigraph, listener):
    """The probe report's command: one lookup of an IRI-looking name made the server POST to the listener."""
    kg = open_sparql_kg(oxigraph.kg_url("miniworld"), cache=False)
    label = f"http://x> }} SERVICE <http://127.0.0.1:{listener.port}/sparql> {{ ?s ?p ?o }} }} #"
    assert kg.lookup(label, fuzzy=False) == []
    time.sleep(0.5)
    assert listener.count == 0


def test_every_caller_with_every_hostile_name(oxigraph, listener):
    kg = open_sparql_kg(oxigraph.kg_url("miniworld"), cache=False)
    big = open_sparql_kg(oxigraph.kg_url("miniworld"), cache=False, index_limit=0)  # lookup searches the server
    callers = label_callers(kg, big)
    assert len(callers) == 14
    failures = []
    for name, value in hostile_labels(listener.port):
        for caller, call in callers:
            try:
                call(value)
            except InfrastructureError as exc:  # would stop the run, and again on every resume
                failures.append(f"{caller} / {name}: outage {type(exc).__name__}: {exc}")
            except Exception as exc:  # noqa: BLE001 - nothing is expected: an unsafe name is skipped
                failures.append(f"{caller} / {name}: {type(exc).__name__}: {exc}")
    time.sleep(0.5)
    assert listener.count == 0, f"{listener.count} connections reached the listener: {listener.connections[:2]}"
    assert failures == []
    assert kg.stats["sent"] > 0  # the callers did query the server (with the names as plain literals)


def test_a_hostile_name_is_still_found_when_it_is_a_real_label(oxigraph, tmp_path):
    """Escaping, not dropping: a KG whose label holds quotes, braces, a backslash, a newline and an
    IRI-like text finds it exactly (the same text round-trips through the query)."""
    odd = ['A "quoted" {label} \\ with # and <b>', "two\nlines\tand\rreturns", "http://not-an-iri> } #", "‘ünïcödé’ 🙂"]
    nt = tmp_path / "odd.nt"
    esc = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    nt.write_text("".join(f'<http://kgqa.local/tiny/entity/e{i}> <http://www.w3.org/2000/01/rdf-schema#label> '
                          f'"{"".join(esc.get(c, c) for c in s)}" .\n' for i, s in enumerate(odd)), encoding="utf-8")
    with OxigraphServer([nt]) as srv:
        kg = open_sparql_kg(srv.kg_url("tiny"), cache=False)
        for i, s in enumerate(odd):
            assert kg._exact_subjects(s) == [f"http://kgqa.local/tiny/entity/e{i}"], s
            assert kg.lookup(s, fuzzy=False)[0][:2] == (f"http://kgqa.local/tiny/entity/e{i}", 1.0)


def test_the_benchmark_rows_for_hostile_names(oxigraph, listener):
    """What ``kgqa bench run hostile_queries`` adds to its table (measured there, not here)."""
    from kgqa_lib.bench.speed import hostile_queries as hq

    kg = open_sparql_kg(oxigraph.kg_url("miniworld"), cache=False)
    big = open_sparql_kg(oxigraph.kg_url("miniworld"), cache=False, index_limit=0)
    rows = hq.probe_labels(kg, listener, big)
    assert len(rows) == 14 and all(r["ok"] and r["network_calls"] == 0 and r["outages"] == 0 for r in rows)
    d = {"timeout_s": 3.0, "max_rows": 100, "backends": {}, "label_injection": rows}
    md = hq.report(d)
    assert hq.all_ok(d) and "| Keqing link_seed (decomposition seeds) | 11 | 11 | 0 | 0 | 0 |" in md
