"""A knowledge graph behind a SPARQL endpoint (Oxigraph, Virtuoso, QLever, Wikidata's service…).

``SparqlKG`` implements the same protocol as :class:`kgqa_lib.kg.EmbeddedKG` with SPARQL over HTTP:
form-encoded POST (Virtuoso hangs on a direct-body POST), a timeout per request, bounded retries
with backoff on connection errors, 429 and 5xx (``Retry-After`` honoured), a concurrency limit, and
an on-disk query cache so the same query is never sent twice. A *profile* names the schema's naming
predicates and namespaces: ``wikidata`` (``wdt:``, ``rdfs:label``), ``freebase`` (``ns:`` mids,
``type.object.name``), and the project's own ``miniworld:wikidata`` / ``miniworld:freebase`` /
``metaqa`` / ``tiny``.

``kgqa run --kg "sparql+http://127.0.0.1:7878/query#profile=miniworld:freebase"`` selects it; the
fragment (never sent to the server) carries ``profile``, ``graph`` (default graph IRI), ``timeout``
and ``workers``.
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

from . import _sqlite
from .kg import (RDFS_LABEL, SCHEMA_DESC, SKOS_ALT, KGBase, QueryRejected, QueryResult, QueryTimeout, Term,
                 Triple, check_read_only)

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
    from .miniworld import BASE, FB_ALIAS, FB_DESC, FB_NAME

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


class EndpointError(RuntimeError):
    """The endpoint could not answer (down, refusing, or failing) after the allowed retries."""


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


_HAS_LIMIT = re.compile(r"\bLIMIT\s+\d+\s*(OFFSET\s+\d+\s*)?\}?\s*$", re.I)


class QueryCache:
    """SQLite cache of endpoint answers keyed by sha256(endpoint, default graph, query)."""

    def __init__(self, path: str | Path | None = None) -> None:
        from .paths import user_cache_dir

        self.path = Path(path) if path else user_cache_dir() / "sparql_cache.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as c:
            c.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, endpoint TEXT, query TEXT, "
                      "body TEXT, seconds REAL, created REAL)")

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = _sqlite.connect(self.path, timeout=30)
            self._local.conn = conn
        return conn

    @staticmethod
    def key(endpoint: str, graph: str | None, query: str) -> str:
        return hashlib.sha256(json.dumps([endpoint, graph or "", query]).encode()).hexdigest()

    def get(self, key: str) -> str | None:
        row = self._conn().execute("SELECT body FROM answers WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, endpoint: str, query: str, body: str, seconds: float) -> None:
        with self._conn() as c:
            c.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?)",
                      (key, endpoint, query, body, seconds, time.time()))


class SparqlKG(KGBase):
    """The KG protocol over a SPARQL 1.1 endpoint (see the module docstring)."""

    def __init__(self, endpoint: str, profile_name: str | Profile = "wikidata", *, default_graph: str | None = None,
                 timeout: float = 30.0, retries: int = 2, backoff: float = 0.5, max_concurrency: int = 4,
                 cache: bool | str | Path = True, max_fanout: int = 500, index_limit: int = 200_000,
                 name: str | None = None) -> None:
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
        """One query over HTTP with bounded retries; returns the response body (SPARQL JSON)."""
        import requests

        data = {"query": query}
        if self.default_graph:
            data["default-graph-uri"] = self.default_graph
        headers = {"Accept": "application/sparql-results+json"}
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self._count("retries")
            wait = self.backoff * 2 ** attempt
            try:
                with self._slots:
                    t = time.perf_counter()
                    resp = self._http.post(self.endpoint, data=data, headers=headers, timeout=(min(5.0, timeout), timeout))
                    self._count("seconds", time.perf_counter() - t)
                    self._count("sent")
            except requests.Timeout:
                last = f"no answer within {timeout:.1f} s"
                if attempt == self.retries:
                    raise QueryTimeout(f"SPARQL endpoint {redact_url(self.endpoint)}: {last} "
                                       f"({attempt + 1} attempts)") from None
            except requests.ConnectionError as exc:
                last = f"connection failed ({type(exc).__name__})"
            else:
                if resp.status_code == 200:
                    return resp.text
                if resp.status_code == 429 or resp.status_code >= 500:
                    last = f"HTTP {resp.status_code}"
                    ra = resp.headers.get("Retry-After", "")
                    wait = min(float(ra), 10.0) if ra.replace(".", "", 1).isdigit() else wait
                else:  # 4xx: the query itself is at fault; retrying will not help
                    raise QueryRejected(f"the endpoint refused the query: HTTP {resp.status_code}: {resp.text[:300]}")
            if attempt < self.retries:
                time.sleep(wait)
        raise EndpointError(f"SPARQL endpoint {redact_url(self.endpoint)} did not answer: {last} after "
                            f"{self.retries + 1} attempts. Check that the server is running and the URL is right.")

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
        """A read-only SELECT/ASK (anything else is rejected before it is sent); a LIMIT of
        ``max_rows + 1`` is added when the query has none, so a huge answer is never transferred."""
        form = check_read_only(query)
        if form == "SELECT" and not _HAS_LIMIT.search(query):
            query = f"{query.rstrip()}\nLIMIT {max_rows + 1}"
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

        from .kg import normalise_label

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
    unknown = set(opts) - {"profile", "graph", "timeout", "workers", "fanout", "depth"}
    if unknown:
        raise ValueError(f"unknown option(s) {sorted(unknown)} in {spec!r}; use profile, graph, timeout, workers, "
                         "fanout, depth (slices)")
    return url, opts


def open_sparql_kg(spec: str, **kwargs: Any) -> SparqlKG:
    url, opts = parse_kg_url(spec)
    return SparqlKG(url, opts.get("profile", "wikidata"), default_graph=opts.get("graph"),
                    timeout=float(opts.get("timeout", 30)), max_concurrency=int(opts.get("workers", 4)),
                    max_fanout=int(opts.get("fanout", 500)), **kwargs)
