"""The embedded KG's query worker has a memory bound (RLIMIT_AS above its size with the store open,
``KGQA_QUERY_MEMORY_MB``): a query that needs more — a cross product sorted by ORDER BY, which grows
by ~200 MB a second with no bound — fails at once as that query's own error (a rejected query), long
before its timeout, and the next query runs in a fresh worker."""

from __future__ import annotations

import sys
import time

import pytest

from kgqa_lib.errors import SetupError
from kgqa_lib.kg.graph import QueryRejected, from_triples

CROSS = "SELECT ?a ?b ?c ?d WHERE { ?a ?b ?c . ?d ?e ?f } ORDER BY ?a ?d"


@pytest.fixture(scope="module")
def kg():
    kg = from_triples([(f"e{i}", f"r{i % 7}", f"e{(i * 13) % 997}") for i in range(3000)], name="membound")
    yield kg
    kg.close_workers()


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is applied on Linux")
def test_a_query_past_the_memory_bound_is_its_own_error_and_the_worker_restarts(kg, monkeypatch):
    monkeypatch.setenv("KGQA_QUERY_MEMORY_MB", "300")
    monkeypatch.setenv("RUST_BACKTRACE", "0")
    assert kg.sparql("SELECT ?s WHERE { ?s ?p ?o } LIMIT 2").rows  # a worker, with the bound
    started = kg._workers.started
    t = time.monotonic()
    with pytest.raises(QueryRejected, match="more memory than a query may use .300 MB; KGQA_QUERY_MEMORY_MB"):
        kg.sparql(CROSS, timeout=8)
    assert time.monotonic() - t < 7  # stopped by the bound, not by the timeout
    assert len(kg.sparql("SELECT ?s WHERE { ?s ?p ?o } LIMIT 5").rows) == 5  # answered by a fresh worker
    assert kg._workers.started == started + 1


def test_the_bound_is_read_from_the_environment(monkeypatch):
    from kgqa_lib.kg.query_worker import memory_limit_mb

    monkeypatch.delenv("KGQA_QUERY_MEMORY_MB", raising=False)
    assert memory_limit_mb() == 1024
    monkeypatch.setenv("KGQA_QUERY_MEMORY_MB", "0")
    assert memory_limit_mb() == 0  # no bound
    monkeypatch.setenv("KGQA_QUERY_MEMORY_MB", "lots")
    with pytest.raises(SetupError, match="whole number of megabytes"):
        memory_limit_mb()
