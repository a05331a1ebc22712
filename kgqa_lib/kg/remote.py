"""A knowledge graph behind a SPARQL endpoint (Oxigraph, Virtuoso, QLever, Wikidata's service…).

``SparqlKG`` implements the same protocol as :class:`kgqa_lib.kg.graph.EmbeddedKG` with SPARQL over HTTP:
form-encoded POST (Virtuoso hangs on a direct-body POST), a timeout per request, bounded retries
with backoff on connection errors, 429 and 5xx (``Retry-After`` honoured), a concurrency limit, and
an on-disk query cache so the same query is never sent twice. A *profile* names the schema's naming
predicates and namespaces: ``wikidata`` (``wdt:``, ``rdfs:label``), ``freebase`` (``ns:`` mids,
``type.object.name``), and the project's own ``miniworld:wikidata`` / ``miniworld:freebase`` /
``metaqa`` / ``tiny``.

``kgqa run --kg "sparql+http://127.0.0.1:7878/query#profile=miniworld:freebase"`` selects it; the
fragment (never sent to the server) carries ``profile``, ``graph`` (default graph IRI), ``timeout``,
``workers`` and ``engine`` (``virtuoso``/``qlever``/``oxigraph``/``wikidata``: which server-side
timeout parameter to send; guessed when absent).
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from .. import _sqlite
from ..errors import InfrastructureError
from .graph import RDFS_LABEL, SCHEMA_DESC, SKOS_ALT, KGBase, QueryRejected, QueryResult, QueryTimeout, Term, Triple
from .sparql_guard import cap_limit, guard_query

FB = "http://rdf.freebase.com/ns/"


@dataclass(frozen=True)
class Profile:
    """Where a schema keeps its names, and which namespaces its entities and relations live in."""

    name: str
    entity_ns: str
    relation_ns: str
    label_predicate: str = RDFS_LABEL
    alias_predicate: str = SKOS_ALT
    description_predicate: str = SCHEMA_DESC
    language: str = "en"


def _profiles() -> dict[str, Profile]:
    from ..data.miniworld import BASE, FB_ALIAS, FB_DESC, FB_NAME

    return {
        "wikidata": Profile("wikidata", "http://www.wikidata.org/entity/", "http://www.wikidata.org/prop/direct/"),
        "freebase": Profile("freebase", FB, FB, FB + "type.object.name", FB + "common.topic.alias",
                            FB + "common.topic.description"),
        "miniworld:wikidata": Profile("miniworld:wikidata", BASE + "wd/entity/", BASE + "wd/prop/direct/"),
        "miniworld:freebase": Profile("miniworld:freebase", BASE + "fb/", BASE + "fb/", FB_NAME, FB_ALIAS, FB_DESC),
        "metaqa": Profile("metaqa", "http://kgqa.local/metaqa/entity/", "http://kgqa.local/metaqa/relation/"),
        "tiny": Profile("tiny", "http://kgqa.local/tiny/entity/", "http://kgqa.local/tiny/relation/"),
    }


def profile(name: str) -> Profile:
    profiles = _profiles()
    key = {"miniworld": "miniworld:wikidata"}.get(name, name)
    if key not in profiles:
        raise ValueError(f"unknown KG profile {name!r}; use one of {', '.join(sorted(profiles))}")
    return profiles[key]


class EndpointError(InfrastructureError, RuntimeError):
    """The endpoint could not answer (down, refusing, or failing) after the allowed retries. Not an
    answer: the runner leaves the question unanswered (see :mod:`kgqa_lib.errors`)."""


def redact_url(url: str) -> str:
    """The URL without user:password (it goes into run records and logs)."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts)


def _term_sparql(value: str) -> str:
    if value.startswith(("http://", "https://", "urn:")):
        return f"<{value}>"
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# The server-side timeout parameter per engine: (form field, value for a timeout in seconds).
# Virtuoso: ``timeout`` in ms (an "anytime" query: a partial answer flagged X-SQL-State S1TAT);
# QLever: ``timeout`` as "<seconds>s". Oxigraph's server has only a server-wide ``--timeout-s``
# and Wikidata's (Blazegraph) a fixed 60 s: nothing to send.
ENGINES: dict[str, tuple[str, Any] | None] = {
    "virtuoso": ("timeout", lambda s: str(max(1, int(s * 1000)))),
    "qlever": ("timeout", lambda s: f"{max(1, int(s + 0.999))}s"),
    "oxigraph": None,
    "wikidata": None,
}
_SERVER_TIMEOUT = re.compile(r"time.?out|timed out|S1T00|SR171|deadline", re.I)


class _BodyTimeout(Exception):
    pass


def _read_body(resp, deadline: float) -> str:
    """The whole response body, or :class:`_BodyTimeout` when it is not complete by ``deadline``."""
    chunks = []
    try:
        for chunk in resp.iter_content(chunk_size=65536):
            chunks.append(chunk)
            if time.perf_counter() > deadline:
                raise _BodyTimeout()
    finally:
        resp.close()
    raw = b"".join(chunks)
    return raw.decode(resp.encoding or "utf-8", errors="replace")


def _keyed_endpoint(url: str) -> str:
    """The endpoint as it enters a cache key: user:password replaced by ``***`` (:func:`redact_url`),
    so no credential is hashed or stored; a URL without credentials is used as it is (the keys of
    caches written before stay valid)."""
    return redact_url(url) if "@" in urlsplit(url).netloc else url


def _stored_endpoint(url: str) -> str:
    """The endpoint as stored beside a cached answer (for people reading the cache): no
    user:password, no query string (it may carry an API key), no fragment."""
    return urlunsplit(urlsplit(redact_url(url))._replace(query="", fragment=""))


class QueryCache:
    """SQLite cache of endpoint answers keyed by sha256(endpoint, default graph, query); the endpoint
    without credentials, in the key and in the stored row (see :func:`_keyed_endpoint`)."""

    SCHEMA_VERSION = 1  # 1: no credentials in stored endpoints (older files are scrubbed once on open)

    def __init__(self, path: str | Path | None = None) -> None:
        from ..paths import user_cache_dir

        self.path = Path(path) if path else user_cache_dir() / "sparql_cache.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as c:
            c.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, endpoint TEXT, query TEXT, "
                      "body TEXT, seconds REAL, created REAL)")
        if self._conn().execute("PRAGMA user_version").fetchone()[0] < self.SCHEMA_VERSION:
            self._scrub()

    def _scrub(self) -> None:
        """A cache written before credentials were kept out: drop the answers stored under a URL with
        user:password (their keys hashed it; they are never asked for again), strip query strings
        from stored endpoints, and overwrite the freed pages (``secure_delete``) so no copy is left."""
        c = self._conn()
        with c:
            rows = c.execute("SELECT key, endpoint FROM answers WHERE endpoint LIKE '%@%' OR endpoint LIKE '%?%' "
                             "OR endpoint LIKE '%#%'").fetchall()
            if rows:
                c.execute("PRAGMA secure_delete=ON")
            for key, endpoint in rows:
                if "@" in urlsplit(endpoint).netloc:
                    c.execute("DELETE FROM answers WHERE key = ?", (key,))
                else:
                    c.execute("UPDATE answers SET endpoint = ? WHERE key = ?", (_stored_endpoint(endpoint), key))
            c.execute(f"PRAGMA user_version={self.SCHEMA_VERSION}")
        if rows:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = _sqlite.connect(self.path, timeout=30)
            self._local.conn = conn
        return conn

    @staticmethod
    def key(endpoint: str, graph: str | None, query: str) -> str:
        return hashlib.sha256(json.dumps([_keyed_endpoint(endpoint), graph or "", query]).encode()).hexdigest()

    def get(self, key: str) -> str | None:
        row = self._conn().execute("SELECT body FROM answers WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, endpoint: str, query: str, body: str, seconds: float) -> None:
        with self._conn() as c:
            c.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?)",
                      (key, _stored_endpoint(endpoint), query, body, seconds, time.time()))


class SparqlKG(KGBase):
    """The KG protocol over a SPARQL 1.1 endpoint (see the module docstring)."""

    def __init__(self, endpoint: str, profile_name: str | Profile = "wikidata", *, default_graph: str | None = None,
                 timeout: float = 30.0, retries: int = 2, backoff: float = 0.5, max_concurrency: int = 4,
                 cache: bool | str | Path = True, max_fanout: int = 500, index_limit: int = 200_000,
                 name: str | None = None, engine: str | None = None) -> None:
        """``engine`` (``virtuoso``, ``qlever``, ``oxigraph``, ``wikidata`` or ``None``) says which
        server-side timeout parameter each query carries (see :data:`ENGINES`); ``None`` guesses
        from the URL (query.wikidata.org) and then from the first answer's ``Server`` header."""
        import requests
        from requests.adapters import HTTPAdapter

        self.endpoint = endpoint
        self.profile = profile_name if isinstance(profile_name, Profile) else profile(profile_name)
        self.name = name or f"sparql:{redact_url(endpoint)}"
        self.entity_ns, self.relation_ns = self.profile.entity_ns, self.profile.relation_ns
        self.label_predicate = self.profile.label_predicate
        self.alias_predicate = self.profile.alias_predicate
        self.description_predicate = self.profile.description_predicate
        self._init_names()
        self.default_graph = default_graph
        if engine is not None and engine not in ENGINES:
            raise ValueError(f"unknown SPARQL engine {engine!r}; use one of {', '.join(sorted(ENGINES))}")
        self.engine = engine or ("wikidata" if urlsplit(endpoint).hostname == "query.wikidata.org" else None)
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.max_fanout, self.index_limit = max_fanout, index_limit
        self.index_complete = True
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._http = requests.Session()
        self._http.mount("http://", HTTPAdapter(pool_maxsize=max_concurrency))
        self._http.mount("https://", HTTPAdapter(pool_maxsize=max_concurrency))
        self.cache = None if cache is False else QueryCache(None if cache is True else cache)
        self.stats = {"sent": 0, "cache_hits": 0, "retries": 0, "seconds": 0.0}
        self._stats_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SparqlKG({redact_url(self.endpoint)!r}, profile={self.profile.name!r})"

    # ---- transport ---------------------------------------------------------------------------
    def _count(self, key: str, amount: float = 1) -> None:
        with self._stats_lock:
            self.stats[key] += amount

    def _post(self, query: str, timeout: float) -> str:
        """One query over HTTP; returns the response body (SPARQL JSON). Connection errors, 429 and
        5xx are retried with backoff; a query that timed out is **never** sent again (it would
        only load the server once more): a read timeout, a server-side timeout (HTTP error whose
        body says so) or a partial "anytime" answer (Virtuoso's ``X-SQL-State: S1TAT``) raise
        :class:`QueryTimeout` at once. The server is sent its own timeout parameter when the
        engine is known (:data:`ENGINES`), and the whole answer must arrive within ``timeout``
        (a server trickling bytes cannot stretch it)."""
        import requests

        data = {"query": query}
        if self.default_graph:
            data["default-graph-uri"] = self.default_graph
        param = ENGINES.get(self.engine or "")
        if param:
            data[param[0]] = param[1](timeout)
        headers = {"Accept": "application/sparql-results+json"}
        where = f"SPARQL endpoint {redact_url(self.endpoint)}"
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self._count("retries")
            wait = self.backoff * 2 ** attempt
            try:
                with self._slots:
                    t = time.perf_counter()
                    try:
                        resp = self._http.post(self.endpoint, data=data, headers=headers, stream=True,
                                               timeout=(min(5.0, timeout), timeout))
                        body = _read_body(resp, t + timeout)
                    finally:
                        self._count("seconds", time.perf_counter() - t)
                        self._count("sent")
            except (requests.ReadTimeout, _BodyTimeout):
                raise QueryTimeout(f"{where}: no answer within {timeout:.1f} s (not retried)") from None
            except (requests.ConnectionError, requests.Timeout) as exc:  # incl. ConnectTimeout: never reached the server
                last = f"connection failed ({type(exc).__name__})"
            else:
                self._learn_engine(resp.headers.get("Server", ""))
                if resp.headers.get("X-SQL-State", "").upper() == "S1TAT":
                    raise QueryTimeout(f"{where}: the query hit the server's {timeout:.1f} s timeout "
                                       "(partial answer discarded, not retried)")
                if resp.status_code == 200:
                    return body
                if (resp.status_code >= 500 or resp.status_code == 429) and _SERVER_TIMEOUT.search(body[:2000]):
                    raise QueryTimeout(f"{where}: the server stopped the query at its timeout "
                                       f"(HTTP {resp.status_code}, not retried)")
                if resp.status_code == 429 or resp.status_code >= 500:
                    last = f"HTTP {resp.status_code}"
                    ra = resp.headers.get("Retry-After", "")
                    wait = min(float(ra), 10.0) if ra.replace(".", "", 1).isdigit() else wait
                else:  # 4xx: the query itself is at fault; retrying will not help
                    raise QueryRejected(f"the endpoint refused the query: HTTP {resp.status_code}: {body[:300]}")
            if attempt < self.retries:
                time.sleep(wait)
        raise EndpointError(f"SPARQL endpoint {redact_url(self.endpoint)} did not answer: {last} after "
                            f"{self.retries + 1} attempts. Check that the server is running and the URL is right.",
                            summary=f"SPARQL endpoint {redact_url(self.endpoint)} unreachable ({last})")

    def _learn_engine(self, server: str) -> None:
        """Recognise the engine from the ``Server`` header, so later queries carry its timeout parameter."""
        if self.engine is None:
            low = server.lower()
            self.engine = "virtuoso" if low.startswith("virtuoso") else "oxigraph" if low.startswith("oxigraph") else None

    def _fetch(self, query: str, timeout: float | None = None) -> dict[str, Any]:
        """The endpoint's SPARQL JSON answer, from the disk cache when this query was sent before."""
        key = QueryCache.key(self.endpoint, self.default_graph, query)
        body = self.cache.get(key) if self.cache else None
        if body is not None:
            self._count("cache_hits")
            return json.loads(body)
        t = time.perf_counter()
        body = self._post(query, timeout or self.timeout)
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise EndpointError(f"the endpoint answered with something that is not SPARQL JSON: {body[:200]!r}") from exc
        if self.cache:
            self.cache.put(key, self.endpoint, query, body, time.perf_counter() - t)
        return data

    def _select(self, query: str, timeout: float | None = None, max_rows: int | None = None) -> QueryResult:
        started = time.perf_counter()
        data = self._fetch(query, timeout)
        if "boolean" in data:
            return QueryResult([], [], boolean=bool(data["boolean"]), seconds=time.perf_counter() - started)
        names = list(data.get("head", {}).get("vars", []))
        bindings = data.get("results", {}).get("bindings", [])
        truncated = max_rows is not None and len(bindings) > max_rows
        rows = [{n: v["value"] for n, v in b.items()} for b in bindings[:max_rows]]
        return QueryResult(names, rows, truncated, seconds=time.perf_counter() - started)

    # ---- the protocol ----------------------------------------------------------------------
    def sparql(self, query: str, timeout: float = 10.0, max_rows: int = 10000) -> QueryResult:
        """A read-only SELECT/ASK (anything else is rejected before it is sent, see
        :func:`kgqa_lib.kg.sparql_guard.guard_query`); the query's own LIMIT is capped at
        ``max_rows + 1`` (added when missing, lowered when larger), so a huge answer is never
        computed in full nor transferred."""
        guarded = guard_query(query)
        query = cap_limit(guarded.text, max_rows + 1) if guarded.form == "SELECT" else guarded.text
        return self._select(query, timeout, max_rows)

    def _lang_filter(self, var: str) -> str:
        lang = self.profile.language
        return f'FILTER(!isLiteral(?{var}) || lang(?{var}) = "" || langMatches(lang(?{var}), "{lang}"))'

    def _objects(self, s: str, p: str) -> list[str]:
        res = self._select(f"SELECT ?o WHERE {{ <{s}> <{p}> ?o . {self._lang_filter('o')} }}")
        return [r["o"] for r in res.rows]

    def _label_pairs(self, predicate: str) -> Iterable[tuple[str, str]]:
        n = self._select(f"SELECT (COUNT(*) AS ?n) WHERE {{ ?s <{predicate}> ?l }}").rows
        total = int(n[0].get("n", 0)) if n else 0
        if total > self.index_limit:  # a big endpoint: no local index, lookup searches the server
            self.index_complete = False
            return
        res = self._select(f"SELECT ?s ?l WHERE {{ ?s <{predicate}> ?l . {self._lang_filter('l')} }}")
        for r in res.rows:
            yield r["s"], r["l"]

    def _exact_subjects(self, label: str) -> list[str]:
        lit = _term_sparql(label)
        res = self._select(f"SELECT DISTINCT ?s WHERE {{ VALUES ?l {{ {lit} {lit}@{self.profile.language} }} "
                           f"?s <{self.label_predicate}> ?l }}")
        return [r["s"] for r in res.rows]

    def lookup(self, label: str, fuzzy: bool = True, limit: int = 5) -> list[tuple[str, float, str]]:
        hits = super().lookup(label, fuzzy, limit)
        if hits or self.index_complete or not fuzzy:
            return hits
        return self._search(label, limit)

    def _search(self, label: str, limit: int) -> list[tuple[str, float, str]]:
        """Server-side candidates for a label on an endpoint too big to index: labels containing
        the query's longest word, scored here like the embedded fuzzy lookup."""
        from rapidfuzz import fuzz

        from .graph import normalise_label

        words = sorted(normalise_label(label).split(), key=len, reverse=True)
        if not words:
            return []
        res = self._select(f"SELECT ?s ?l WHERE {{ ?s <{self.label_predicate}> ?l . {self._lang_filter('l')} "
                           f"FILTER(CONTAINS(LCASE(STR(?l)), {_term_sparql(words[0])})) }} LIMIT 200")
        scored = sorted(((round(fuzz.WRatio(normalise_label(label), normalise_label(r["l"])) / 100 * 0.98, 4), r["s"], r["l"])
                         for r in res.rows), key=lambda x: (-x[0], x[1]))
        out, seen = [], set()
        for sc, s, lab in scored:
            if s not in seen:
                seen.add(s)
                out.append((s, sc, lab))
        return out[:limit]

    def has_term(self, iri: str) -> bool:
        return bool(self._select(f"ASK {{ {{ <{iri}> ?p ?o }} UNION {{ ?s <{iri}> ?o }} UNION {{ ?s ?p <{iri}> }} }}").boolean)

    def prefetch_labels(self, iris: Iterable[str], batch: int = 200) -> None:
        """Fill the label cache for many IRIs with a few VALUES queries instead of one each."""
        todo = sorted({i for i in iris if "://" in i and i not in self._label_cache})
        for k in range(0, len(todo), batch):
            chunk = todo[k:k + batch]
            values = " ".join(f"<{i}>" for i in chunk)
            res = self._select(f"SELECT ?x ?l WHERE {{ VALUES ?x {{ {values} }} ?x <{self.label_predicate}> ?l . "
                               f"{self._lang_filter('l')} }}")
            found: dict[str, list[str]] = {}
            for r in res.rows:
                found.setdefault(r["x"], []).append(r["l"])
            for i in chunk:
                self._label_cache[i] = sorted(found[i])[0] if i in found else self._fallback_label(i)

    def _naming_filter(self) -> str:
        return "FILTER(?p NOT IN (" + ", ".join(f"<{p}>" for p in sorted(self._naming)) + "))"

    def triples_around(self, entity: str, direction: str = "both", limit: int | None = None) -> list[Triple]:
        """Like the embedded backend; each direction is capped at ``max_fanout`` rows (big hubs
        such as a country in Wikidata have millions of in-edges)."""
        cap = min(limit, self.max_fanout) if limit is not None else self.max_fanout
        rows: list[tuple[str, str, str, bool]] = []
        if direction in ("out", "both"):
            data = self._fetch(f"SELECT ?p ?o WHERE {{ <{entity}> ?p ?o . {self._naming_filter()} }} LIMIT {cap}")
            rows += [(entity, b["p"]["value"], b["o"]["value"], b["o"].get("type") in ("literal", "typed-literal"))
                     for b in data.get("results", {}).get("bindings", [])]
        if direction in ("in", "both") and (limit is None or len(rows) < limit):
            res = self._select(f"SELECT ?s ?p WHERE {{ ?s ?p <{entity}> . {self._naming_filter()} }} LIMIT {cap}")
            rows += [(r["s"], r["p"], entity, False) for r in res.rows]
        if limit is not None:
            rows = rows[:limit]
        self.prefetch_labels([x for s, p, o, lit in rows for x in ((s, p) if lit else (s, p, o))])
        return [Triple(Term(s, self.label(s)), Term(p, self.label(p)),
                       Term(o, o, literal=True) if lit else Term(o, self.label(o))) for s, p, o, lit in rows]

    def follow_path(self, seed: str, relations: Sequence[str], exclude_seed: bool = True,
                    batch: int = 100) -> list[str]:
        """Walk a relation path (``^rel`` inverse) with one VALUES query per hop and batch of
        frontier nodes; results keep the embedded backend's order (frontier order, then the server's)."""
        frontier = [seed]
        for rel in relations:
            inverse = rel.startswith("^")
            p = self.relation_iri(rel.lstrip("^"))
            nodes = [n for n in frontier if "://" in n]
            by_source: dict[str, list[str]] = {}
            for k in range(0, len(nodes), batch):
                values = " ".join(f"<{n}>" for n in nodes[k:k + batch])
                pattern = f"?t <{p}> ?s" if inverse else f"?s <{p}> ?t"
                res = self._select(f"SELECT ?s ?t WHERE {{ VALUES ?s {{ {values} }} {pattern} }}")
                for r in res.rows:
                    by_source.setdefault(r["s"], []).append(r["t"])
            nxt: dict[str, None] = {}
            for n in nodes:
                for v in by_source.get(n, []):
                    if not (exclude_seed and v == seed):
                        nxt[v] = None
            frontier = list(nxt)
        return frontier

    def relations(self, limit: int = 10000) -> list[str]:
        res = self._select(f"SELECT DISTINCT ?p WHERE {{ ?s ?p ?o }} LIMIT {limit}")
        return sorted(r["p"] for r in res.rows if r["p"] not in self._naming)

    def __len__(self) -> int:
        rows = self._select("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }").rows
        return int(rows[0]["n"]) if rows else 0

    def ping(self, timeout: float = 5.0) -> float:
        """Seconds for an uncached ``ASK {}``; raises :class:`EndpointError` when unreachable."""
        t = time.perf_counter()
        self._post("ASK {}", timeout)
        return time.perf_counter() - t


def parse_kg_url(spec: str) -> tuple[str, dict[str, str]]:
    """``sparql+http://host:port/path#profile=freebase&graph=…`` → (``http://host:port/path``, options)."""
    if not spec.startswith("sparql+"):
        raise ValueError(f"not a SPARQL KG URL: {spec!r} (expected sparql+http://… or sparql+https://…)")
    url, _, frag = spec[len("sparql+"):].partition("#")
    opts = dict(parse_qsl(frag)) if "=" in frag else ({"profile": frag} if frag else {})
    unknown = set(opts) - {"profile", "graph", "timeout", "workers", "fanout", "depth", "engine"}
    if unknown:
        raise ValueError(f"unknown option(s) {sorted(unknown)} in {spec!r}; use profile, graph, timeout, workers, "
                         "fanout, engine, depth (slices)")
    if opts.get("engine") and opts["engine"] not in ENGINES:
        raise ValueError(f"unknown engine {opts['engine']!r} in {spec!r}; use one of {', '.join(sorted(ENGINES))}")
    return url, opts


def open_sparql_kg(spec: str, **kwargs: Any) -> SparqlKG:
    url, opts = parse_kg_url(spec)
    return SparqlKG(url, opts.get("profile", "wikidata"), default_graph=opts.get("graph"),
                    timeout=float(opts.get("timeout", 30)), max_concurrency=int(opts.get("workers", 4)),
                    max_fanout=int(opts.get("fanout", 500)), engine=opts.get("engine") or None, **kwargs)
