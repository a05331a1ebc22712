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

Every query the backend builds from data (a label to look up, a seed, a relation name, IRIs read
back from the server) writes its values with :func:`~kgqa_lib.kg.sparql_guard.iri_term` and
:func:`~kgqa_lib.kg.sparql_guard.literal_term` only — a value that cannot be written as the term
asked for is skipped, never spliced — and every query sent, these and the LLM's, passes the
read-only guard first (:meth:`SparqlKG._fetch`). A reply that is not SPARQL JSON is that query's
failure (:class:`MalformedReply`, the question's error), not an outage (:class:`EndpointError`).
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

from .. import __version__, _sqlite
from ..errors import InfrastructureError, UsageError
from .graph import RDFS_LABEL, SCHEMA_DESC, SKOS_ALT, KGBase, QueryRejected, QueryResult, QueryTimeout, Term, Triple
from .sparql_guard import UnsafeTerm, cap_limit, guard_query, iri_term, is_iri, literal_term

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


class MalformedReply(RuntimeError):
    """The endpoint answered one query, but not with a SPARQL JSON result (cut short, an HTML page,
    the wrong shape, a body that broke off). That query's failure: the question's error, recorded
    with its answer — not an outage, which would stop the run and stop it again on every resume
    when the cause is the query itself (a SERVICE that failed mid-answer did exactly that)."""


# Query-string parameters shown as they are: the SPARQL protocol's own (graphs, result format,
# timeout). Every other value is masked — API keys travel as ?key=, ?apikey=, ?api_key=, ?token=,
# ?access_token=, ?auth=, ?sig=…, and a name cannot tell which ones are secret.
_PLAIN_PARAMS = frozenset({"default-graph-uri", "named-graph-uri", "format", "output", "timeout"})


def _redact_param(param: str) -> str:
    name, eq, value = param.partition("=")
    if not eq:
        return "***" if name else name  # a bare ?TOKEN
    return param if not value or name.lower() in _PLAIN_PARAMS else f"{name}=***"


def redact_url(url: str) -> str:
    """The URL as it may be shown or stored (run records, messages, a KG's name): user:password
    becomes ``***@host`` and the query string's values ``name=***`` (but those of
    :data:`_PLAIN_PARAMS`); the path and the fragment's options stay. Works on a KG spec too
    (``sparql+https://…``, ``slices:sparql+https://…``). A URL with nothing to hide comes back
    unchanged, character for character (run records keep their settings)."""
    head, sep, rest = url.partition("://")
    if not sep:
        return url
    rest, hash_, fragment = rest.partition("#")
    rest, qmark, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rsplit("@", 1)[1]
    if query:
        query = "&".join(_redact_param(p) for p in query.split("&"))
    return head + sep + authority + slash + path + qmark + query + hash_ + fragment


def _url_secrets(url: str) -> list[str]:
    """The secrets :func:`redact_url` hides in ``url`` (password, masked query values), longest first,
    to scrub them from text a server or a library wrote (an echoed request, an exception)."""
    parts = urlsplit(url.partition("#")[0])
    found = [parts.password or "", parts.username or ""] if parts.password else []
    for param in parts.query.split("&"):
        name, eq, value = param.partition("=")
        if redact_url(f"x://h/?{param}") != f"x://h/?{param}":
            found.append(value if eq else name)
    return sorted({s for s in found if len(s) >= 3}, key=len, reverse=True)


def _without_userinfo(url: str) -> str:
    """The URL with user:password replaced by ``***`` (the form the query cache's keys and rows
    have always used; kept as it was so existing caches stay valid)."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts)


def _well_formed(data: Any) -> bool:
    """Whether a decoded answer has the shape of SPARQL 1.1 JSON results (an ASK's boolean, or
    bindings: a list of {variable: {"value": text, ...}})."""
    if not isinstance(data, dict) or not isinstance(data.get("head", {}), dict):
        return False
    if "boolean" in data:
        return isinstance(data["boolean"], bool)
    results = data.get("results")
    if not isinstance(results, dict) or not isinstance(results.get("bindings"), list):
        return False
    return all(isinstance(b, dict) and all(isinstance(v, dict) and isinstance(v.get("value"), str) for v in b.values())
               for b in results["bindings"])


def _values_batches(terms: Sequence[str], batch: int, max_chars: int = 40_000) -> Iterable[list[str]]:
    """``terms`` in runs of at most ``batch`` and ``max_chars`` characters: one VALUES block each."""
    run: list[str] = []
    size = 0
    for t in terms:
        if run and (len(run) >= batch or size + len(t) > max_chars):
            yield run
            run, size = [], 0
        run.append(t)
        size += len(t) + 1
    if run:
        yield run


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
    """The endpoint as it enters a cache key: user:password replaced by ``***``, so no password is
    hashed or stored; a URL without credentials is used as it is (the keys of caches written before
    stay valid)."""
    return _without_userinfo(url) if "@" in urlsplit(url).netloc else url


def _stored_endpoint(url: str) -> str:
    """The endpoint as stored beside a cached answer (for people reading the cache): no
    user:password, no query string (it may carry an API key), no fragment."""
    return urlunsplit(urlsplit(_without_userinfo(url))._replace(query="", fragment=""))


class QueryCache:
    """SQLite cache of endpoint answers keyed by sha256(endpoint, default graph, query); the endpoint
    without credentials, in the key and in the stored row (see :func:`_keyed_endpoint`). A file that
    cannot be used (disk full, locked, read-only, damaged) is a :class:`~kgqa_lib.errors.StorageError`
    naming it and the fix: not an answer, the run stops."""

    SCHEMA_VERSION = 1  # 1: no credentials in stored endpoints (older files are scrubbed once on open)

    def __init__(self, path: str | Path | None = None) -> None:
        from ..paths import user_cache_dir

        self.path = Path(path) if path else user_cache_dir() / "sparql_cache.sqlite"
        self._local = threading.local()
        self._guarded(self._open)

    def _guarded(self, fn, *args):
        return _sqlite.guarded(fn, args, f"the SPARQL cache {self.path}")

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
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
        row = self._guarded(lambda: self._conn().execute("SELECT body FROM answers WHERE key = ?", (key,)).fetchone())
        return row[0] if row else None

    def put(self, key: str, endpoint: str, query: str, body: str, seconds: float) -> None:
        def write() -> None:
            with self._conn() as c:
                c.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?)",
                          (key, _stored_endpoint(endpoint), query, body, seconds, time.time()))

        self._guarded(write)


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
        self._secrets = _url_secrets(endpoint)
        self.profile = profile_name if isinstance(profile_name, Profile) else profile(profile_name)
        self.name = name or f"sparql:{redact_url(endpoint)}"
        self.entity_ns, self.relation_ns = self.profile.entity_ns, self.profile.relation_ns
        self.label_predicate = self.profile.label_predicate
        self.alias_predicate = self.profile.alias_predicate
        self.description_predicate = self.profile.description_predicate
        self._init_names()
        self.default_graph = default_graph
        if engine is not None and engine not in ENGINES:
            raise UsageError(f"unknown SPARQL engine {engine!r}; use one of {', '.join(sorted(ENGINES))}")
        if not (timeout > 0 and timeout != float("inf")) or int(max_concurrency) < 1:  # 0 workers would wait forever
            raise UsageError(f"a SPARQL endpoint needs timeout > 0 seconds and at least 1 worker, got timeout={timeout} "
                             f"and workers={max_concurrency}")
        self.engine = engine or ("wikidata" if urlsplit(endpoint).hostname == "query.wikidata.org" else None)
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.max_fanout, self.index_limit = max_fanout, index_limit
        self.index_complete = True
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._http = requests.Session()
        self._http.headers["User-Agent"] = f"kgqa-notebooks/{__version__}"  # public endpoints ask a client to name itself
        self._http.mount("http://", HTTPAdapter(pool_maxsize=max_concurrency))
        self._http.mount("https://", HTTPAdapter(pool_maxsize=max_concurrency))
        self.cache = None if cache is False else QueryCache(None if cache is True else cache)
        self.stats = {"sent": 0, "cache_hits": 0, "retries": 0, "seconds": 0.0}
        self._stats_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SparqlKG({redact_url(self.endpoint)!r}, profile={self.profile.name!r})"

    # ---- transport ---------------------------------------------------------------------------
    def _hide(self, text: str) -> str:
        """``text`` (a server's body, an exception's message) without the endpoint URL's secrets."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

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
            except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError) as exc:
                raise MalformedReply(f"{where}: the answer broke off ({type(exc).__name__}); not SPARQL JSON") from None
            except requests.RequestException as exc:  # a URL requests cannot use, too many redirects...
                raise EndpointError(f"{where}: {type(exc).__name__}: {self._hide(str(exc))[:200]}",
                                    summary=f"{where} unusable ({type(exc).__name__})") from None
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
                    raise QueryRejected(f"the endpoint refused the query: HTTP {resp.status_code}: "
                                        f"{self._hide(body[:300])}")
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
        """The endpoint's SPARQL JSON answer, from the disk cache when this query was sent before.
        Every query passes the read-only guard first (the library's own as well as the LLM's:
        :class:`~kgqa_lib.kg.sparql_guard.QueryRejected` otherwise); an answer that is not SPARQL
        JSON raises :class:`MalformedReply` and is not cached."""
        query = guard_query(query).text
        key = QueryCache.key(self.endpoint, self.default_graph, query)
        body = self.cache.get(key) if self.cache else None
        if body is not None:
            data = self._decode(body)
            if data is not None:
                self._count("cache_hits")
                return data  # (a malformed cached body, from before answers were checked, is asked again)
        t = time.perf_counter()
        body = self._post(query, timeout or self.timeout)
        data = self._decode(body)
        if data is None:
            raise MalformedReply(f"SPARQL endpoint {redact_url(self.endpoint)} answered with something that is not "
                                 f"SPARQL JSON: {self._hide(body[:200])!r}")
        if self.cache:
            self.cache.put(key, self.endpoint, query, body, time.perf_counter() - t)
        return data

    @staticmethod
    def _decode(body: str) -> dict[str, Any] | None:
        try:
            data = json.loads(body)
        except ValueError:
            return None
        return data if _well_formed(data) else None

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
        lang = literal_term(self.profile.language)
        return f'FILTER(!isLiteral(?{var}) || lang(?{var}) = "" || langMatches(lang(?{var}), {lang}))'

    def _objects(self, s: str, p: str) -> list[str]:
        try:
            subject, predicate = iri_term(s), iri_term(p)
        except UnsafeTerm:
            return []  # not an IRI (a literal value, a name the LLM made up): no term of the KG, no values
        res = self._select(f"SELECT ?o WHERE {{ {subject} {predicate} ?o . {self._lang_filter('o')} }}")
        return [r["o"] for r in res.rows]

    def _label_pairs(self, predicate: str) -> Iterable[tuple[str, str]]:
        pred = iri_term(predicate)
        n = self._select(f"SELECT (COUNT(*) AS ?n) WHERE {{ ?s {pred} ?l }}").rows
        total = int(n[0].get("n", 0)) if n else 0
        if total > self.index_limit:  # a big endpoint: no local index, lookup searches the server
            self.index_complete = False
            return
        res = self._select(f"SELECT ?s ?l WHERE {{ ?s {pred} ?l . {self._lang_filter('l')} }}")
        for r in res.rows:
            yield r["s"], r["l"]

    def _exact_subjects(self, label: str) -> list[str]:
        """Subjects labelled exactly ``label`` (plain, or tagged with the profile's language). The
        label is always a literal, whatever it looks like (``http://…`` too)."""
        try:
            plain, tagged = literal_term(label), literal_term(label, self.profile.language)
        except UnsafeTerm:
            return []  # a label no query can hold as written (see literal_term): no exact match on the server
        res = self._select(f"SELECT DISTINCT ?s WHERE {{ VALUES ?l {{ {plain} {tagged} }} "
                           f"?s {iri_term(self.label_predicate)} ?l }}")
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
        try:
            word = literal_term(words[0])
        except UnsafeTerm:
            return []
        res = self._select(f"SELECT ?s ?l WHERE {{ ?s {iri_term(self.label_predicate)} ?l . {self._lang_filter('l')} "
                           f"FILTER(CONTAINS(LCASE(STR(?l)), {word})) }} LIMIT 200")
        scored = sorted(((round(fuzz.WRatio(normalise_label(label), normalise_label(r["l"])) / 100 * 0.98, 4), r["s"], r["l"])
                         for r in res.rows), key=lambda x: (-x[0], x[1]))
        out, seen = [], set()
        for sc, s, lab in scored:
            if s not in seen:
                seen.add(s)
                out.append((s, sc, lab))
        return out[:limit]

    def has_term(self, iri: str) -> bool:
        try:
            t = iri_term(iri)
        except UnsafeTerm:
            return False  # not an IRI: no KG holds it
        return bool(self._select(f"ASK {{ {{ {t} ?p ?o }} UNION {{ ?s {t} ?o }} UNION {{ ?s ?p {t} }} }}").boolean)

    def prefetch_labels(self, iris: Iterable[str], batch: int = 200) -> None:
        """Fill the label cache for many IRIs with a few VALUES queries instead of one each (a value
        that is not an IRI gets its fallback label without a query)."""
        todo = sorted({i for i in iris if "://" in i and i not in self._label_cache})
        for i in todo:
            if not is_iri(i):
                self._label_cache[i] = self._fallback_label(i)
        pred = iri_term(self.label_predicate)
        for chunk in _values_batches([i for i in todo if is_iri(i)], batch):
            values = " ".join(iri_term(i) for i in chunk)
            res = self._select(f"SELECT ?x ?l WHERE {{ VALUES ?x {{ {values} }} ?x {pred} ?l . "
                               f"{self._lang_filter('l')} }}")
            found: dict[str, list[str]] = {}
            for r in res.rows:
                found.setdefault(r["x"], []).append(r["l"])
            for i in chunk:
                self._label_cache[i] = sorted(found[i])[0] if i in found else self._fallback_label(i)

    def _naming_filter(self) -> str:
        return "FILTER(?p NOT IN (" + ", ".join(iri_term(p) for p in sorted(self._naming)) + "))"

    def triples_around(self, entity: str, direction: str = "both", limit: int | None = None) -> list[Triple]:
        """Like the embedded backend; each direction is capped at ``max_fanout`` rows (big hubs
        such as a country in Wikidata have millions of in-edges)."""
        cap = int(min(limit, self.max_fanout) if limit is not None else self.max_fanout)
        try:
            node = iri_term(entity)
        except UnsafeTerm:
            return []  # a literal or a made-up name has no neighbourhood
        rows: list[tuple[str, str, str, bool]] = []
        if direction in ("out", "both"):
            data = self._fetch(f"SELECT ?p ?o WHERE {{ {node} ?p ?o . {self._naming_filter()} }} LIMIT {cap}")
            try:
                rows += [(entity, b["p"]["value"], b["o"]["value"], b["o"].get("type") in ("literal", "typed-literal"))
                         for b in data.get("results", {}).get("bindings", [])]
            except KeyError as exc:  # a binding without ?p or ?o
                raise MalformedReply(f"SPARQL endpoint {redact_url(self.endpoint)} answered without {exc}") from None
        if direction in ("in", "both") and (limit is None or len(rows) < limit):
            res = self._select(f"SELECT ?s ?p WHERE {{ ?s ?p {node} . {self._naming_filter()} }} LIMIT {cap}")
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
            try:
                p = iri_term(self.relation_iri(rel.lstrip("^")))
            except UnsafeTerm:
                return []  # no relation of the KG is named so: the hop reaches nothing
            nodes = [n for n in frontier if "://" in n and is_iri(n)]  # a literal (or a non-IRI) has no edges
            by_source: dict[str, list[str]] = {}
            for chunk in _values_batches(nodes, batch):
                values = " ".join(iri_term(n) for n in chunk)
                pattern = f"?t {p} ?s" if inverse else f"?s {p} ?t"
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
        res = self._select(f"SELECT DISTINCT ?p WHERE {{ ?s ?p ?o }} LIMIT {int(limit)}")
        return sorted(r["p"] for r in res.rows if r["p"] not in self._naming)

    def __len__(self) -> int:
        rows = self._select("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }").rows
        return int(rows[0]["n"]) if rows else 0

    def ping(self, timeout: float = 5.0) -> float:
        """Seconds for an uncached ``ASK {}``; raises :class:`EndpointError` when unreachable or when
        the answer is not SPARQL JSON (the URL is not a SPARQL endpoint: no query could be answered)."""
        t = time.perf_counter()
        body = self._post("ASK {}", timeout)
        if self._decode(body) is None:
            raise EndpointError(f"{redact_url(self.endpoint)} answered ASK {{}} with something that is not SPARQL JSON "
                                f"({self._hide(body[:80])!r}); is it the SPARQL query endpoint?",
                                summary=f"{redact_url(self.endpoint)} is not a SPARQL endpoint")
        return time.perf_counter() - t


#: A KG URL's options that are numbers: (type, least value).
_NUMBER_OPTIONS = {"timeout": (float, 0.0), "workers": (int, 1), "fanout": (int, 1), "depth": (int, 1)}


def parse_kg_url(spec: str) -> tuple[str, dict[str, str]]:
    """``sparql+http://host:port/path#profile=freebase&graph=…`` → (``http://host:port/path``, options,
    as written). Everything is checked here, before any question is asked: the scheme (http or https),
    the host and port, the option names, ``profile`` and ``engine`` among the known ones, ``timeout`` a
    number of seconds > 0, ``workers``/``fanout``/``depth`` whole numbers ≥ 1; anything else is a
    :class:`~kgqa_lib.errors.UsageError` (one line, ``kgqa`` exit 2)."""
    shown = redact_url(spec)
    if not spec.startswith("sparql+"):
        raise UsageError(f"not a SPARQL KG URL: {shown!r} (expected sparql+http://… or sparql+https://…)")
    url, _, frag = spec[len("sparql+"):].partition("#")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError as exc:
        raise UsageError(f"the KG URL {shown!r} is not a URL ({exc}); write sparql+http://HOST:PORT/PATH#profile=…") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"the KG URL {shown!r} needs an http(s) endpoint with a host: write "
                         "sparql+http://HOST:PORT/PATH or sparql+https://HOST/PATH, then #profile=…")
    opts = dict(parse_qsl(frag)) if "=" in frag else ({"profile": frag} if frag else {})
    unknown = set(opts) - {"profile", "graph", "timeout", "workers", "fanout", "depth", "engine"}
    if unknown:
        raise UsageError(f"unknown option(s) {sorted(unknown)} in {shown!r}; use profile, graph, timeout, workers, "
                         "fanout, engine, depth (slices)")
    if opts.get("engine") and opts["engine"] not in ENGINES:
        raise UsageError(f"unknown engine {opts['engine']!r} in {shown!r}; use one of {', '.join(sorted(ENGINES))}")
    if "profile" in opts:
        try:
            profile(opts["profile"])
        except ValueError as exc:
            raise UsageError(f"{exc} (in {shown!r})") from None
    for name, (kind, low) in _NUMBER_OPTIONS.items():
        if name in opts:
            try:
                value = kind(opts[name])
            except ValueError:
                value = None
            if value is None or value != value or value in (float("inf"), float("-inf")) or not (
                    value > low if kind is float else value >= low):
                what = "a number of seconds > 0" if kind is float else f"a whole number ≥ {low}"
                raise UsageError(f"the option {name}={opts[name]!r} in {shown!r} expects {what}")
    return url, opts


def open_sparql_kg(spec: str, **kwargs: Any) -> SparqlKG:
    url, opts = parse_kg_url(spec)
    return SparqlKG(url, opts.get("profile", "wikidata"), default_graph=opts.get("graph"),
                    timeout=float(opts.get("timeout", 30)), max_concurrency=int(opts.get("workers", 4)),
                    max_fanout=int(opts.get("fanout", 500)), engine=opts.get("engine") or None, **kwargs)
