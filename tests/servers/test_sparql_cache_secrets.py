"""SPARQL endpoint credentials never reach the on-disk query cache (issue 18, item 13a): a query
against a loopback Oxigraph server through ``http://user:password@127.0.0.1:PORT/query`` leaves no
trace of the password in the SQLite file (nor its WAL), and the cache still answers a repeated
query without sending it again."""

from __future__ import annotations

import sqlite3

import pytest

from kgqa_lib.paths import data_dir
from kgqa_lib.kg.remote import QueryCache, SparqlKG, open_sparql_kg
from kgqa_lib.servers import OxigraphServer

pytestmark = pytest.mark.server

PASSWORD = "pw-7Hq2-never-stored"
TOKEN = "tok-Zk93-never-stored"


@pytest.fixture(scope="module")
def oxigraph():
    with OxigraphServer([data_dir() / "miniworld" / "kg_wikidata.nt"]) as srv:
        yield srv


def _cache_bytes(path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def test_credentials_are_not_stored_and_a_query_is_sent_once(oxigraph, tmp_path):
    cache = tmp_path / "sparql_cache.sqlite"
    url = f"http://kgqa:{PASSWORD}@127.0.0.1:{oxigraph.port}/query"
    kg = open_sparql_kg(f"sparql+{url}#profile=miniworld:wikidata", cache=cache)
    q = "SELECT ?s WHERE { ?s ?p ?o } LIMIT 3"
    first = kg.sparql(q)
    assert len(first.rows) == 3 and kg.stats["sent"] == 1
    assert kg.sparql(q).rows == first.rows and (kg.stats["sent"], kg.stats["cache_hits"]) == (1, 1)
    # a new process with the same credentials: answered from disk, nothing sent
    again = open_sparql_kg(f"sparql+{url}#profile=miniworld:wikidata", cache=cache)
    assert again.sparql(q).rows == first.rows and again.stats["sent"] == 0
    assert PASSWORD.encode() not in _cache_bytes(cache)
    (endpoint,), = sqlite3.connect(cache).execute("SELECT DISTINCT endpoint FROM answers").fetchall()
    assert endpoint == f"http://***@127.0.0.1:{oxigraph.port}/query"


def test_a_query_string_token_is_not_stored_in_plaintext(oxigraph, tmp_path):
    cache = tmp_path / "q.sqlite"
    kg = SparqlKG(f"http://127.0.0.1:{oxigraph.port}/query?access_token={TOKEN}", "miniworld:wikidata", cache=cache)
    kg.sparql("ASK { ?s ?p ?o }")
    assert TOKEN.encode() not in _cache_bytes(cache)


def test_an_old_cache_with_credentials_is_scrubbed_on_open(tmp_path):
    """A cache written before this fix (the endpoint stored as given, user_version 0): its credentialed
    rows are dropped, with the freed pages overwritten; the other rows keep answering."""
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, endpoint TEXT, query TEXT, body TEXT, seconds REAL, "
                "created REAL)")
    plain = QueryCache.key("http://h/q", None, "ASK {}")
    con.execute("INSERT INTO answers VALUES ('k1', ?, 'ASK {}', '{\"boolean\": true}', 0, 0)",
                (f"http://u:{PASSWORD}@h/q",))
    con.execute("INSERT INTO answers VALUES (?, ?, 'ASK {}', '{\"boolean\": false}', 0, 0)",
                (plain, f"http://h/q?key={TOKEN}"))
    con.commit()
    con.close()
    qc = QueryCache(path)
    assert qc.get(plain) == '{"boolean": false}' and qc.get("k1") is None
    qc._conn().close()
    data = _cache_bytes(path)
    assert PASSWORD.encode() not in data and TOKEN.encode() not in data
