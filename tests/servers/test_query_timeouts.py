"""Issue 18, item 8 (remote): a timed-out query is never sent twice, the engine's own timeout
parameter goes with every query, a partial "anytime" answer is not an answer, and the LIMIT of an
LLM-written query is capped. Against a scripted HTTP server on 127.0.0.1 that counts requests."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest

from kgqa_lib.kg.graph import QueryRejected, QueryTimeout
from kgqa_lib.kg.remote import SparqlKG, open_sparql_kg
from kgqa_lib.servers import free_port

pytestmark = pytest.mark.server
EMPTY = json.dumps({"head": {"vars": ["s"]}, "results": {"bindings": []}}).encode()


def _server(delay: float = 0.0, status: int = 200, body: bytes = EMPTY, headers: dict | None = None,
            trickle: float = 0.0):
    """Requests are recorded as their form fields; the answer is scripted."""
    seen: list[dict[str, list[str]]] = []

    headers = dict(headers or {})

    class H(BaseHTTPRequestHandler):
        server_version = headers.pop("Server", "BaseHTTP/0.6")  # the Server header the client sees
        sys_version = ""

        def log_message(self, *a):
            pass

        def do_POST(self):  # noqa: N802
            n = int(self.headers.get("Content-Length", 0))
            seen.append(parse_qs(self.rfile.read(n).decode()))
            time.sleep(delay)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/sparql-results+json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if trickle:
                    for b in body:
                        self.wfile.write(bytes([b]))
                        self.wfile.flush()
                        time.sleep(trickle)
                else:
                    self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

    srv = ThreadingHTTPServer(("127.0.0.1", free_port()), H)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, seen


def _kg(srv, **kw) -> SparqlKG:
    return SparqlKG(f"http://127.0.0.1:{srv.server_port}/sparql", "wikidata", retries=2, backoff=0.01, cache=False, **kw)


def test_a_timed_out_query_is_not_retried():
    srv, seen = _server(delay=1.5)
    try:
        with pytest.raises(QueryTimeout, match="not retried"):
            _kg(srv).sparql("SELECT ?s WHERE { ?s ?p ?o }", timeout=0.3)
        time.sleep(1.5)
        assert len(seen) == 1
    finally:
        srv.shutdown()


def test_a_trickling_answer_cannot_stretch_the_timeout():
    srv, seen = _server(trickle=0.05)  # ~60 bytes at 20 bytes/s: each read is quick, the whole is not
    try:
        with pytest.raises(QueryTimeout):
            _kg(srv).sparql("SELECT ?s WHERE { ?s ?p ?o }", timeout=0.5)
        assert len(seen) == 1
    finally:
        srv.shutdown()


@pytest.mark.parametrize("status,body", [(500, b"Virtuoso S1T00 Error SR171: Transaction timed out"),
                                         (503, b'{"exception": "Timeout: query exceeded its time budget"}')])
def test_a_server_side_timeout_is_not_retried(status, body):
    srv, seen = _server(status=status, body=body)
    try:
        with pytest.raises(QueryTimeout, match="server stopped the query"):
            _kg(srv).sparql("SELECT ?s WHERE { ?s ?p ?o }", timeout=2)
        assert len(seen) == 1
    finally:
        srv.shutdown()


def test_other_5xx_are_still_retried():
    srv, seen = _server(status=503, body=b"busy")
    try:
        with pytest.raises(Exception, match="3 attempts"):
            _kg(srv).sparql("ASK {}", timeout=2)
        assert len(seen) == 3
    finally:
        srv.shutdown()


def test_a_partial_anytime_answer_is_a_timeout_and_not_cached(tmp_path):
    body = json.dumps({"head": {"vars": ["s"]}, "results": {"bindings": [{"s": {"type": "uri", "value": "http://x"}}]}}).encode()
    srv, seen = _server(body=body, headers={"X-SQL-State": "S1TAT", "Server": "Virtuoso/07.20.3240"})
    try:
        kg = SparqlKG(f"http://127.0.0.1:{srv.server_port}/sparql", "wikidata", retries=2, cache=tmp_path / "q.sqlite")
        for _ in range(2):
            with pytest.raises(QueryTimeout, match="partial answer"):
                kg.sparql("SELECT ?s WHERE { ?s ?p ?o }", timeout=2)
        assert len(seen) == 2  # not served from the cache the second time
    finally:
        srv.shutdown()


@pytest.mark.parametrize("engine,expected", [("virtuoso", ["2500"]), ("qlever", ["3s"]), ("oxigraph", None), (None, None)])
def test_the_engines_timeout_parameter_is_sent(engine, expected):
    srv, seen = _server()
    try:
        spec = f"sparql+http://127.0.0.1:{srv.server_port}/sparql#profile=wikidata" + (f"&engine={engine}" if engine else "")
        open_sparql_kg(spec, cache=False).sparql("SELECT ?s WHERE { ?s ?p ?o }", timeout=2.5)
        assert seen[0].get("timeout") == expected
    finally:
        srv.shutdown()


def test_the_engine_is_learned_from_the_server_header():
    srv, seen = _server(headers={"Server": "Virtuoso/07.20.3240 (Linux) x86_64-pc-linux-gnu"})
    try:
        kg = _kg(srv)
        kg.sparql("SELECT ?s WHERE { ?s ?p ?o }", timeout=2)
        kg.sparql("SELECT ?o WHERE { ?s ?p ?o }", timeout=2)
        assert "timeout" not in seen[0] and seen[1]["timeout"] == ["2000"]
    finally:
        srv.shutdown()


@pytest.mark.parametrize("query,sent_limit", [
    ("SELECT ?s WHERE { ?s ?p ?o } LIMIT 50000000", "LIMIT 11"),
    ("SELECT ?s WHERE { ?s ?p ?o }", "LIMIT 11"),
    ("SELECT ?s WHERE { ?s ?p ?o } LIMIT 3", "LIMIT 3"),
])
def test_the_limit_of_an_llm_query_is_capped(query, sent_limit):
    srv, seen = _server()
    try:
        _kg(srv).sparql(query, max_rows=10)
        assert seen[0]["query"][0].rstrip().endswith(sent_limit)
    finally:
        srv.shutdown()


def test_rejected_queries_are_never_sent():
    srv, seen = _server()
    try:
        kg = _kg(srv)
        for q in ("SELECT * WHERE { ?s ?p ?o # '''\n SERVICE <http://127.0.0.1:9/> { ?a ?b ?c } # '''\n}",
                  "DEFINE input:inference 'r' SELECT * WHERE { ?s ?p ?o }", "LOAD <http://x>",
                  "SELECT ?s WHERE { ?s ?p " + "{" * 3000):
            with pytest.raises(QueryRejected):
                kg.sparql(q)
        assert seen == [] and kg.stats["sent"] == 0
    finally:
        srv.shutdown()


def test_unknown_engine_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown engine"):
        open_sparql_kg("sparql+http://127.0.0.1:9/q#engine=blazegraphx", cache=False)
