"""The SPARQL-endpoint backend against real servers on 127.0.0.1: Oxigraph (always; the `oxigraph`
package's binary) and Virtuoso (Debian's virtuoso-opensource; `make virtuoso` installs it, the test
skips without it). Both are loaded with the mini-world in both schemas; answers must equal the
embedded backend's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kgqa_lib.data.datasets import Dataset, load_dataset
from kgqa_lib.evaluate.runner import run
from kgqa_lib.kg.graph import QueryRejected, QueryTimeout
from kgqa_lib.kg.sources import load_named  # noqa: E402
from kgqa_lib.llm.chat import make_llm
from kgqa_lib.methods import Context
from kgqa_lib.paths import data_dir
from kgqa_lib.kg.remote import EndpointError, SparqlKG, open_sparql_kg, parse_kg_url, redact_url
from kgqa_lib.servers import OxigraphServer, VirtuosoServer, virtuoso_binary

pytestmark = pytest.mark.server
SCHEMAS = ("wikidata", "freebase")


def _files(schema: str) -> list[Path]:
    return [data_dir() / "miniworld" / f"kg_{schema}.nt", data_dir() / "miniworld" / "ontology.nt"]


@pytest.fixture(scope="module", params=SCHEMAS)
def oxigraph(request):
    with OxigraphServer(_files(request.param)) as srv:
        yield request.param, srv


def _pairs(schema: str, srv, tmp_path) -> tuple:
    emb = load_named(f"miniworld:{schema}")
    remote = open_sparql_kg(srv.kg_url(f"miniworld:{schema}"), cache=tmp_path / "q.sqlite")
    return emb, remote


def test_protocol_answers_equal_embedded(oxigraph, tmp_path):
    schema, srv = oxigraph
    emb, remote = _pairs(schema, srv, tmp_path)
    entities = list(emb.entities())[::7][:120]
    assert len(entities) >= 100
    for e in entities:
        assert remote.triples_around(e) == emb.triples_around(e)
        assert remote.labels(e) == emb.labels(e) and remote.description(e) == emb.description(e)
    for e in entities[:40]:
        name = emb.label(e)
        assert remote.lookup(name) == emb.lookup(name)
        assert remote.lookup(name[:-1] + "q") == emb.lookup(name[:-1] + "q")  # the fuzzy path
    rels = [r.rsplit("/", 1)[-1] for r in emb.relations()]
    assert remote.relations() == emb.relations()
    for e in entities[:40]:
        for path in ([rels[0]], [rels[1], rels[2]], ["^" + rels[3]]):
            assert remote.follow_path(e, path) == emb.follow_path(e, path)
    q = "SELECT ?s ?o WHERE { ?s ?p ?o } ORDER BY ?s ?o LIMIT 50"
    assert remote.sparql(q).rows == emb.sparql(q).rows
    assert len(remote) == len(emb)


def test_query_cache_never_sends_a_query_twice(oxigraph, tmp_path):
    schema, srv = oxigraph
    emb, remote = _pairs(schema, srv, tmp_path)
    e = next(iter(emb.entities()))
    remote.triples_around(e)
    sent = remote.stats["sent"]
    assert sent >= 2
    remote._label_cache.clear()
    remote.triples_around(e)
    assert remote.stats["sent"] == sent and remote.stats["cache_hits"] >= 2
    again = open_sparql_kg(srv.kg_url(f"miniworld:{schema}"), cache=tmp_path / "q.sqlite")  # a new process, same disk cache
    assert again.triples_around(e) == emb.triples_around(e) and again.stats["sent"] == 0


def test_read_only_and_row_cap(oxigraph, tmp_path):
    schema, srv = oxigraph
    _, remote = _pairs(schema, srv, tmp_path)
    for bad in ("INSERT DATA { <x:a> <x:b> <x:c> }", "DELETE WHERE { ?s ?p ?o }", "LOAD <http://example.org/x>",
                "SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }"):
        with pytest.raises(QueryRejected):
            remote.sparql(bad)
    assert remote.stats["sent"] == 0  # rejected before anything was sent
    res = remote.sparql("SELECT ?s WHERE { ?s ?p ?o }", max_rows=10)
    assert len(res) == 10 and res.truncated
    sent = remote.stats["sent"]
    with pytest.raises(QueryRejected, match="does not parse"):
        remote.sparql("SELECT ?s WHERE { ?s ?p }")  # a syntax error: found by the guard, never sent (issue 18)
    assert remote.stats["sent"] == sent


def test_methods_give_identical_answers_embedded_vs_endpoint(oxigraph, tmp_path, monkeypatch):
    """PG&AKV, QSM and Keqing replayed from the committed transcripts: the same prompts must come
    out of both backends (a different prompt would be a ReplayMiss), hence the same answers."""
    schema, srv = oxigraph
    emb, _ = _pairs(schema, srv, tmp_path)
    monkeypatch.setenv("KGQA_CACHE_DIR", str(tmp_path / "cache"))
    llm = make_llm("local", "replay")
    from kgqa_lib.embed.embedder import Embedder
    from kgqa_lib.methods.keqing import keqing_dataset

    embedder = Embedder()
    kg_name = "miniworld" if schema == "wikidata" else "miniworld:freebase"
    ds = load_dataset("miniworld:multihop", sample=4, seed=0)
    test = keqing_dataset("miniworld").questions
    kq = Dataset("keqing:miniworld:2hop", [q for q in test if q.metadata["hops"] == 2], kg="miniworld").sample(3, 0)
    jobs = [("qsm", ds), ("pgakv", ds)] + ([("keqing", kq)] if schema == "wikidata" else [])
    for method, data in jobs:
        preds = {}
        for label, kg, name in (("emb", emb, kg_name), ("sparql", open_sparql_kg(srv.kg_url(f"miniworld:{schema}")),
                                                         srv.kg_url(f"miniworld:{schema}"))):
            ctx = Context(llm=llm, kg=kg, embedder=embedder, settings={"kg": name, "K": 1}, seed=0)
            recs = run(method, data, ctx, tmp_path / f"{method}.{label}.jsonl", progress=False)
            preds[label] = [(r["qid"], r["prediction"], r["error"]) for r in recs]
        assert preds["emb"] == preds["sparql"], method
        assert any(p for _, p, _ in preds["emb"])


def test_cli_run_against_endpoint(oxigraph, tmp_path):
    schema, srv = oxigraph
    if schema != "wikidata":
        pytest.skip("one schema through the CLI is enough; the other is covered in-process")
    outs = {}
    for label, kg in (("emb", "miniworld"), ("sparql", srv.kg_url("miniworld:wikidata"))):
        out = tmp_path / f"{label}.jsonl"
        r = subprocess.run([sys.executable, "-m", "kgqa_lib.cli", "run", "--method", "qsm", "--dataset",
                            "miniworld:multihop", "--sample", "4", "--kg", kg, "--llm-mode", "replay", "--quiet",
                            "--workers", "2", "--out", str(out)], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        outs[label] = sorted((json.loads(line)["qid"], json.loads(line)["prediction"]) for line in out.open())
    assert outs["emb"] == outs["sparql"] and len(outs["emb"]) == 4


def test_on_disk_store_served_read_only(tmp_path):
    """The other Oxigraph mode: `oxigraph load` into a store, `serve-read-only` (index order, so
    the same sets, not necessarily the same order)."""
    emb = load_named("miniworld")
    with OxigraphServer(_files("wikidata"), location=tmp_path / "store") as srv:
        remote = open_sparql_kg(srv.kg_url("miniworld:wikidata"), cache=False)
        for e in list(emb.entities())[:50]:
            assert set(remote.triples_around(e)) == set(emb.triples_around(e))
        assert srv.timings["load_s"] < 30 and srv.timings["start_s"] < 30


# ---- Virtuoso -------------------------------------------------------------------------------
@pytest.mark.skipif(virtuoso_binary() is None, reason="Virtuoso not installed (`make virtuoso`)")
def test_virtuoso_same_answers(tmp_path):
    emb = load_named("miniworld:freebase")
    with VirtuosoServer(_files("freebase")) as srv:
        remote = open_sparql_kg(srv.kg_url("miniworld:freebase"), cache=False)
        entities = list(emb.entities())[::9][:80]
        for e in entities:
            assert set(remote.triples_around(e)) == set(emb.triples_around(e))
            assert remote.labels(e) == emb.labels(e)
        for e in entities[:30]:
            assert remote.lookup(emb.label(e)) == emb.lookup(emb.label(e))
        rels = [r.rsplit("/", 1)[-1] for r in emb.relations()]
        for e in entities[:30]:
            assert sorted(remote.follow_path(e, [rels[0]])) == sorted(emb.follow_path(e, [rels[0]]))
        assert len(remote) == len(emb)


# ---- faults ---------------------------------------------------------------------------------
def test_endpoint_down_is_one_clear_error(tmp_path):
    from kgqa_lib.servers import free_port

    kg = SparqlKG(f"http://127.0.0.1:{free_port()}/query", "wikidata", retries=1, backoff=0.01, cache=False)
    with pytest.raises(EndpointError, match="did not answer.*2 attempts.*server is running"):
        kg.sparql("ASK {}")


def _flaky_server(statuses: list[int], delay: float = 0.0):
    """A real HTTP server that answers with the given statuses in turn, then with a SPARQL answer."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from kgqa_lib.servers import free_port

    seen = []

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(self.headers.get("Content-Type"))
            time.sleep(delay)
            status = statuses[len(seen) - 1] if len(seen) <= len(statuses) else 200
            body = b'{"head": {}, "boolean": true}' if status == 200 else b"overloaded"
            try:
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except BrokenPipeError:  # the client timed out and left: that is the point of the slow case
                pass

    srv = ThreadingHTTPServer(("127.0.0.1", free_port()), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, seen


@pytest.mark.parametrize("statuses,ok", [([500, 429], True), ([503, 503, 503], False)])
def test_retries_then_error(statuses, ok):
    srv, seen = _flaky_server(statuses)
    try:
        kg = SparqlKG(f"http://127.0.0.1:{srv.server_port}/q", "wikidata", retries=2, backoff=0.01, cache=False)
        if ok:
            assert kg.sparql("ASK {}").boolean is True and kg.stats["retries"] == 2
        else:
            with pytest.raises(EndpointError, match="HTTP 503 after 3 attempts"):
                kg.sparql("ASK {}")
        assert set(seen) == {"application/x-www-form-urlencoded"}  # form-encoded POST (Virtuoso-safe)
    finally:
        srv.shutdown()


def test_slow_endpoint_times_out():
    srv, seen = _flaky_server([200, 200], delay=1.0)
    try:
        kg = SparqlKG(f"http://127.0.0.1:{srv.server_port}/q", "wikidata", retries=1, backoff=0.01, cache=False)
        with pytest.raises(QueryTimeout, match="not retried"):  # a timed-out query is never sent twice (issue 18)
            kg.sparql("ASK {}", timeout=0.2)
        assert len(seen) == 1
    finally:
        srv.shutdown()


def test_urls_and_credentials():
    url, opts = parse_kg_url("sparql+https://user:secret@example.org/sparql#profile=freebase&graph=http://g")
    assert url == "https://user:secret@example.org/sparql" and opts == {"profile": "freebase", "graph": "http://g"}
    assert "secret" not in redact_url(url) and "example.org" in redact_url(url)
    assert "secret" not in repr(SparqlKG(url, "freebase", cache=False))
    with pytest.raises(ValueError, match="unknown option"):
        parse_kg_url("sparql+http://h/q#profil=x&x=1")
    with pytest.raises(ValueError, match="unknown KG profile"):
        SparqlKG("http://h/q", "dbpedia", cache=False)
