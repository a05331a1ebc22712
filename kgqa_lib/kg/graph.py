"""Knowledge graphs: a small protocol and the embedded backend (the rdflib API over Oxigraph).

``EmbeddedKG.graph`` is an ``rdflib.Graph`` backed by ``oxrdflib`` (measured 10-50x faster than
plain rdflib); the hot paths (neighbourhoods, path walks) go straight to the underlying
``pyoxigraph.Store``. SPARQL strings are handed to Oxigraph natively — values are bound inline
(escaped) or with VALUES, never with rdflib ``initBindings`` (measured up to 950x slower).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
import unicodedata
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Protocol, Sequence
from urllib.parse import quote, unquote

import pyoxigraph as ox

from ..errors import InfrastructureError, UserError

# The read-only guard for queries the LLM writes (rdflib's parser + a tokenizer); its names are
# re-exported here, where callers have always found them.
from .sparql_guard import (MAX_QUERY_DEPTH, QueryRejected, QuerySyntaxError, check_read_only, guard_query,  # noqa: F401
                           nesting_depth)

RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SKOS_ALT = "http://www.w3.org/2004/02/skos/core#altLabel"
SCHEMA_DESC = "http://schema.org/description"
GRAPH_IRI = "http://kgqa.local/graph"
_LABEL_PREDICATES = {RDFS_LABEL, SKOS_ALT, SCHEMA_DESC}


# --------------------------------------------------------------------------------------------
# Small records
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Term:
    iri: str  # an IRI, or the lexical value of a literal
    label: str
    literal: bool = False

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True)
class Triple:
    s: Term
    r: Term
    o: Term

    def __str__(self) -> str:
        return f"<{self.s.label}> <{self.r.label}> <{self.o.label}>"

    def as_dict(self) -> dict[str, str]:
        return {"s": self.s.label, "r": self.r.label, "o": self.o.label, "s_iri": self.s.iri,
                "r_iri": self.r.iri, "o_iri": self.o.iri}


@dataclass
class QueryResult:
    vars: list[str]
    rows: list[dict[str, str]]
    truncated: bool = False
    seconds: float = 0.0
    boolean: bool | None = None  # for ASK

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


class QueryTimeout(TimeoutError):
    """The query ran past its timeout; it was stopped (the embedded backend kills its worker
    process, see :mod:`kgqa_lib.kg.query_worker`; an endpoint is sent its own timeout parameter)."""


def humanise_relation(name: str) -> str:
    """``directed_by`` / ``film.film.directed_by`` / ``countryOfCitizenship`` → words."""
    local = re.split(r"[/#]", name)[-1]
    local = local.split(".")[-1] if "." in local else local
    local = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", local)
    return local.replace("_", " ").strip()


def normalise_label(s: str) -> str:
    s = unicodedata.normalize("NFKD", s)
    s = "".join(ch for ch in s if not unicodedata.combining(ch)).casefold()
    s = re.sub(r"[^\w\s]", " ", s)
    s = re.sub(r"\b(the|a|an)\b", " ", s)
    return " ".join(s.split())


# --------------------------------------------------------------------------------------------
# The protocol
# --------------------------------------------------------------------------------------------
class KnowledgeGraph(Protocol):
    def label(self, entity: str) -> str: ...
    def labels(self, entity: str) -> list[str]: ...
    def description(self, entity: str) -> str: ...
    def triples_around(self, entity: str, direction: str = "both", limit: int | None = None) -> list[Triple]: ...
    def lookup(self, label: str, fuzzy: bool = True, limit: int = 5) -> list[tuple[str, float, str]]: ...
    def follow_path(self, seed: str, relations: Sequence[str], exclude_seed: bool = True) -> list[str]: ...
    def sparql(self, query: str, timeout: float = 10.0, max_rows: int = 10000) -> QueryResult: ...
    def verbalise(self, triple: Triple, style: str = "tag") -> str: ...


# --------------------------------------------------------------------------------------------
# The embedded backend
# --------------------------------------------------------------------------------------------
# The read-only guard for queries the LLM writes is kgqa_lib.kg.sparql_guard (imported above).


def _ox_value(term) -> str:
    return term.value if term is not None else ""


class KGBase:
    """What every backend shares: naming (entity/relation IRIs), labels with their fallbacks, the
    label index for lookup, and verbalisation. A backend supplies ``_objects(s, p)``,
    ``_label_pairs(predicate)`` (all (subject, value) pairs of a naming predicate) and
    ``_exact_subjects(label)``."""

    name: str
    entity_ns: str
    relation_ns: str
    label_predicate: str
    alias_predicate: str
    description_predicate: str

    def _init_names(self) -> None:
        self._naming = {self.label_predicate, self.alias_predicate, self.description_predicate} | _LABEL_PREDICATES
        self._label_cache: dict[str, str] = {}
        self._index: dict[str, list[str]] | None = None
        self._index_keys: list[str] = []
        self._lock = threading.Lock()

    def _objects(self, s: str, p: str) -> list[str]:
        raise NotImplementedError

    def _label_pairs(self, predicate: str) -> Iterable[tuple[str, str]]:
        raise NotImplementedError

    def _exact_subjects(self, label: str) -> list[str]:
        raise NotImplementedError

    # ---- names ---------------------------------------------------------------------------
    def entity_iri(self, name: str) -> str:
        return self.entity_ns + quote(name, safe="")

    def relation_iri(self, rel: str) -> str:
        return rel if "://" in rel else self.relation_ns + rel

    def objects(self, subject: str, predicate: str) -> list[str]:
        """Values of ``predicate`` on ``subject`` (IRIs or literal values)."""
        return self._objects(subject, predicate)

    def _fallback_label(self, entity: str) -> str:
        if entity.startswith(self.relation_ns) or "/relation/" in entity:
            return humanise_relation(entity)
        return unquote(re.split(r"[/#]", entity)[-1])

    def label(self, entity: str) -> str:
        if "://" not in entity:
            return entity  # a literal value
        hit = self._label_cache.get(entity)
        if hit is None:
            labels = self._objects(entity, self.label_predicate)
            hit = sorted(labels)[0] if labels else self._fallback_label(entity)
            self._label_cache[entity] = hit
        return hit

    def labels(self, entity: str) -> list[str]:
        main = sorted(self._objects(entity, self.label_predicate))
        return main + sorted(set(self._objects(entity, self.alias_predicate)) - set(main))

    def description(self, entity: str) -> str:
        d = self._objects(entity, self.description_predicate)
        return d[0] if d else ""

    # ---- lookup --------------------------------------------------------------------------
    def _build_index(self) -> dict[str, list[str]]:
        with self._lock:
            if self._index is None:
                idx: dict[str, list[str]] = {}
                for pred in (self.label_predicate, self.alias_predicate):
                    for subject, value in self._label_pairs(pred):
                        bucket = idx.setdefault(normalise_label(value), [])
                        if subject not in bucket:
                            bucket.append(subject)
                self._index = idx
                self._index_keys = list(idx)
        return self._index

    def lookup(self, label: str, fuzzy: bool = True, limit: int = 5) -> list[tuple[str, float, str]]:
        """Entities whose label matches: exact (score 1.0), normalised (0.99), then fuzzy
        (rapidfuzz WRatio/100). Entities sharing one label are all returned."""
        exact = self._exact_subjects(label)
        if exact:
            return [(e, 1.0, label) for e in sorted(exact)][:max(limit, len(exact))]
        index = self._build_index()
        key = normalise_label(label)
        if key in index:
            return [(e, 0.99, self.label(e)) for e in sorted(index[key])]
        if not fuzzy or not key:
            return []
        from rapidfuzz import fuzz, process

        out, seen = [], set()
        for cand, sc, _ in process.extract(key, self._index_keys, scorer=fuzz.WRatio, limit=limit * 3):
            for e in sorted(index[cand]):
                if e not in seen:  # an entity matched by its label and an alias is listed once, best score first
                    seen.add(e)
                    out.append((e, round(sc / 100.0 * 0.98, 4), self.label(e)))
        return out[:limit]

    # ---- text ----------------------------------------------------------------------------
    def verbalise(self, triple: Triple, style: str = "tag") -> str:
        """``tag``: ``<Inception> <directed by> <Christopher Nolan>``; ``sentence``:
        ``Inception directed by Christopher Nolan.``"""
        if style == "tag":
            return str(triple)
        if style == "sentence":
            return f"{triple.s.label} {humanise_relation(triple.r.label)} {triple.o.label}."
        raise ValueError("style must be 'tag' or 'sentence'")


class EmbeddedKG(KGBase):
    """An in-process KG: ``rdflib.Graph`` over an Oxigraph store (in memory, or on disk)."""

    def __init__(self, store_dir: str | Path | None = None, namespace: str = "http://kgqa.local/kg/",
                 name: str = "kg", *, entity_ns: str | None = None, relation_ns: str | None = None,
                 label_predicate: str = RDFS_LABEL, alias_predicate: str = SKOS_ALT,
                 description_predicate: str = SCHEMA_DESC) -> None:
        """``label_predicate`` & co. select the schema's naming properties (``rdfs:label`` for
        Wikidata-style graphs, ``type.object.name`` for Freebase-style ones)."""
        from rdflib import Graph, URIRef

        self.name = name
        self.namespace = namespace
        self.entity_ns = entity_ns or namespace + "entity/"
        self.relation_ns = relation_ns or namespace + "relation/"
        self.label_predicate, self.alias_predicate = label_predicate, alias_predicate
        self.description_predicate = description_predicate
        self._init_names()
        self.store_dir = Path(store_dir) if store_dir else None
        if self.store_dir:
            self.store_dir.parent.mkdir(parents=True, exist_ok=True)
        store = _open_store(self.store_dir) if self.store_dir else ox.Store()
        from oxrdflib import OxigraphStore

        self.graph = Graph(store=OxigraphStore(store=store), identifier=URIRef(GRAPH_IRI))
        self.store: ox.Store = store
        self._g = ox.NamedNode(GRAPH_IRI)
        self._label_pred = ox.NamedNode(label_predicate)
        self._generation = 0  # bumped by every load: query workers opened before it are stale
        self._workers = None  # kgqa_lib.kg.query_worker.WorkerPool, started by the first sparql()

    # ---- loading -------------------------------------------------------------------------
    def load_ntriples(self, data: bytes | str | Path, fmt: ox.RdfFormat = ox.RdfFormat.N_TRIPLES) -> None:
        """Bulk-load N-Triples/Turtle from bytes or a file into the KG's graph."""
        if isinstance(data, Path):
            self.store.bulk_load(path=str(data), format=fmt, to_graph=self._g)
        else:
            self.store.bulk_load(input=data.encode() if isinstance(data, str) else data, format=fmt, to_graph=self._g)
        self.store.optimize() if self.store_dir else None
        self._generation += 1
        self._index = None
        self._label_cache.clear()

    # ---- names ---------------------------------------------------------------------------
    def _objects(self, s: str, p: str) -> list[str]:
        return [_ox_value(q.object) for q in self.store.quads_for_pattern(ox.NamedNode(s), ox.NamedNode(p), None, self._g)]

    def _label_pairs(self, predicate: str) -> Iterable[tuple[str, str]]:
        for q in self.store.quads_for_pattern(None, ox.NamedNode(predicate), None, self._g):
            yield q.subject.value, q.object.value

    def _exact_subjects(self, label: str) -> list[str]:
        """Subjects labelled exactly ``label`` (a plain literal, or tagged ``@en`` as in Wikidata/Freebase slices)."""
        out = [q.subject.value for q in self.store.quads_for_pattern(None, self._label_pred, ox.Literal(label), self._g)]
        return out or [q.subject.value for q in
                       self.store.quads_for_pattern(None, self._label_pred, ox.Literal(label, language="en"), self._g)]

    def has_term(self, iri: str) -> bool:
        """Whether the IRI occurs in the KG at all (as subject, relation or object)."""
        node = ox.NamedNode(iri)
        for pattern in ((node, None, None), (None, node, None), (None, None, node)):
            for _ in self.store.quads_for_pattern(*pattern, self._g):
                return True
        return False

    def _term(self, t) -> Term:
        if isinstance(t, ox.Literal):
            return Term(t.value, t.value, literal=True)
        return Term(t.value, self.label(t.value))

    # ---- neighbourhoods and paths ---------------------------------------------------------
    def triples_around(self, entity: str, direction: str = "both", limit: int | None = None) -> list[Triple]:
        """Triples with ``entity`` as subject (``out``), object (``in``) or either (``both``),
        label/description triples excluded."""
        node = ox.NamedNode(entity)
        out: list[Triple] = []
        patterns = []
        if direction in ("out", "both"):
            patterns.append((node, None, None))
        if direction in ("in", "both"):
            patterns.append((None, None, node))
        for s, p, o in patterns:
            for q in self.store.quads_for_pattern(s, p, o, self._g):
                if q.predicate.value in self._naming:
                    continue
                out.append(Triple(self._term(q.subject), Term(q.predicate.value, self.label(q.predicate.value)), self._term(q.object)))
                if limit is not None and len(out) >= limit:
                    return out
        return out

    def all_triples(self) -> list[Triple]:
        """Every triple of the KG, label/description triples excluded, in the store's order (PG&AKV's
        semantic querying over the whole KG: ``search_scope=kg``)."""
        return [Triple(self._term(q.subject), Term(q.predicate.value, self.label(q.predicate.value)), self._term(q.object))
                for q in self.store.quads_for_pattern(None, None, None, self._g) if q.predicate.value not in self._naming]

    def follow_path(self, seed: str, relations: Sequence[str], exclude_seed: bool = True) -> list[str]:
        """Walk a relation path from ``seed``; ``^rel`` is an inverse hop (object → subject).

        With ``exclude_seed`` the seed is never part of a hop's result (MetaQA's convention:
        gold answers exclude the topic entity)."""
        frontier = [seed]
        for rel in relations:
            inverse = rel.startswith("^")
            p = ox.NamedNode(self.relation_iri(rel.lstrip("^")))
            nxt: dict[str, None] = {}
            for node in frontier:
                if "://" not in node:
                    continue  # a literal has no outgoing edges
                n = ox.NamedNode(node)
                quads = self.store.quads_for_pattern(None, p, n, self._g) if inverse else self.store.quads_for_pattern(n, p, None, self._g)
                for q in quads:
                    target = q.subject if inverse else q.object
                    v = target.value
                    if exclude_seed and v == seed:
                        continue
                    nxt[v] = None
            frontier = list(nxt)
        return frontier

    def relations(self) -> list[str]:
        res = self.store.query(f"SELECT DISTINCT ?p WHERE {{ GRAPH <{GRAPH_IRI}> {{ ?s ?p ?o }} }}")  # ours: in process
        return sorted(p for p in (_ox_value(sol["p"]) for sol in res) if p not in self._naming)

    def entities(self) -> Iterator[str]:
        seen = set()
        for q in self.store.quads_for_pattern(None, self._label_pred, None, self._g):
            if q.subject.value not in seen:
                seen.add(q.subject.value)
                yield q.subject.value

    def __len__(self) -> int:
        return sum(1 for _ in self.store.quads_for_pattern(None, None, None, self._g))

    def stats(self) -> dict[str, int]:
        n_label = sum(1 for _ in self.store.quads_for_pattern(None, self._label_pred, None, self._g))
        return {"triples": len(self), "label_triples": n_label, "relations": len(self.relations()),
                "entities": sum(1 for _ in self.entities())}

    # ---- SPARQL --------------------------------------------------------------------------
    def sparql(self, query: str, timeout: float = 10.0, max_rows: int = 10000) -> QueryResult:
        """Run a read-only SELECT/ASK with a timeout and a row cap. The KG's triples are the
        default graph. Values come back as strings (IRIs or literal values).

        The query is checked by :func:`kgqa_lib.kg.sparql_guard.guard_query` and run in a worker
        process (:mod:`kgqa_lib.kg.query_worker`) that cannot open a network socket and is killed
        when the timeout passes, so a timed-out query stops using the CPU at once."""
        from .query_worker import WorkerDied, WorkerPool, WorkerTimeout

        with self._lock:
            if self._workers is None:
                self._workers = WorkerPool(self._worker_source)
        try:
            guarded = guard_query(query)
        except QuerySyntaxError as exc:
            raise QueryRejected(self._syntax_message(query, exc)) from None
        started = time.perf_counter()
        try:
            out = self._workers.run(guarded.text, GRAPH_IRI, max_rows, timeout, self._generation)
        except WorkerTimeout:
            raise QueryTimeout(f"SPARQL query exceeded {timeout:.1f} s (stopped)") from None
        except WorkerDied as exc:
            raise QueryRejected(f"the query crashed the query engine ({exc}); write a simpler query") from None
        except OSError as exc:  # the worker could not open the store
            raise store_failure(exc, self.store_dir) or exc
        if out.get("error") == "syntax":
            raise QueryRejected(f"SPARQL does not parse: {out['message']}")
        if "error" in out:
            exc = OSError(f"the query failed in the store: {out['error']}: {out['message']}")
            raise store_failure(exc, self.store_dir) or exc
        seconds = time.perf_counter() - started
        if "boolean" in out:
            return QueryResult([], [], boolean=out["boolean"], seconds=seconds)
        return QueryResult(out["vars"], out["rows"], out["truncated"], seconds=seconds)

    def _syntax_message(self, query: str, exc: QuerySyntaxError) -> str:
        """For a query that does not parse, Oxigraph's own message (what this backend has always
        reported; FuSIC feeds it back to the LLM), from a parse in a worker on an empty store."""
        from .query_worker import WorkerDied, WorkerTimeout

        try:
            out = self._workers.run(query, GRAPH_IRI, 0, 5.0, self._generation, parse_only=True)
        except (WorkerTimeout, WorkerDied, OSError):
            return str(exc)
        if out.get("error") == "syntax":
            return f"SPARQL does not parse: {out['message']}"
        return f"{exc} (SPARQL 1.1 as rdflib reads it; engine-specific syntax is not run)"

    def _worker_source(self):
        """What a query worker opens: the on-disk store read-only, or a copy of the in-memory one."""
        from .query_worker import StoreSource

        if self.store_dir:
            try:
                self.store.flush()  # a store we write: its last writes reach the disk before the worker reads it
            except (OSError, RuntimeError) as exc:
                if "read-write" not in str(exc):  # opened read-only (another process holds it): nothing to flush
                    raise
            return StoreSource(path=str(self.store_dir.resolve()), generation=self._generation)
        return StoreSource(nquads=self.store.dump(format=ox.RdfFormat.N_QUADS), generation=self._generation)

    def close_workers(self) -> None:
        """Stop this KG's idle query workers (they also stop when the KG is garbage-collected)."""
        if self._workers is not None:
            self._workers.close()


# --------------------------------------------------------------------------------------------
# Loaders
# --------------------------------------------------------------------------------------------
def _nt_literal(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'


def _file_hash(paths: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        st = p.stat()
        h.update(f"{p.resolve()}|{st.st_size}|{int(st.st_mtime)}".encode())
    return h.hexdigest()[:16]


_OPEN: dict[str, EmbeddedKG] = {}  # an on-disk store can be opened once per process


def _open_store(store_dir: Path) -> ox.Store:
    """An on-disk store; when another process holds it (RocksDB's lock: a benchmark run, another
    notebook), a built store is opened read-only instead, which is all question answering needs."""
    try:
        return ox.Store(str(store_dir))
    except OSError as exc:
        if "lock" not in str(exc).lower():
            raise
        if not (store_dir / ".kgqa-source").exists():
            raise OSError(f"{exc} — another process is building the KG store at {store_dir}; wait for it "
                          "to finish (or set KGQA_CACHE_DIR to use a separate cache)") from exc
    try:
        return ox.Store.read_only(str(store_dir))
    except (OSError, RuntimeError) as exc:
        if store_failure(exc) is None:
            raise
        first = str(exc).strip().splitlines()[0][:200]
        raise KGStoreError(f"the KG store at {store_dir} does not open ({first}) and another process holds it: stop "
                           "that process and run again (the store is then rebuilt)") from exc


def _reuse(store_dir: Path, sources: Sequence[Path]) -> bool:
    """Whether ``store_dir`` holds a store built from ``sources`` as they are now; if not, the
    folder is emptied (only a folder we made) and claimed for a new build."""
    marker = store_dir / ".kgqa-source"
    if marker.exists() and marker.read_text().strip() == _file_hash(sources):
        return True
    _reset(store_dir)
    return False


def _reset(store_dir: Path) -> None:
    """Empty ``store_dir`` and claim it for a build. Only a folder we made may be emptied:
    ``.kgqa-source`` (a built store) or ``.kgqa-store`` (claimed before building, so an interrupted
    build can be rebuilt too). Anything else is the user's."""
    marker = store_dir / ".kgqa-source"
    ours = marker.exists() or (store_dir / _STORE_CLAIM).exists()
    if store_dir.exists() and not ours and (not store_dir.is_dir() or any(store_dir.iterdir())):
        raise StoreDirNotOurs(
            f"store_dir {store_dir} is not empty and is not a kgqa KG store (no .kgqa-source marker); refusing to "
            "delete it: pass an empty or new folder as store_dir, or move its files away")
    _OPEN.pop(str(store_dir.resolve()), None)
    if store_dir.exists():
        import shutil

        shutil.rmtree(store_dir)
    store_dir.mkdir(parents=True)
    (store_dir / _STORE_CLAIM).write_text("a kgqa KG store (kgqa_lib.kg); rebuilt when its source changes\n")


@contextmanager
def _build_lock(store_dir: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``.<store>.build-lock`` beside the store, held while a process
    checks, (re)builds and opens it: a second process started at the same moment (two benchmark
    lanes, a notebook beside a run) waits, then reuses the built store, instead of emptying the
    folder under the first one's build. The lock file stays (removing it would race)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        yield
        return
    store_dir.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(store_dir.parent / f".{store_dir.name}.build-lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _load_cached(store_dir: str | Path | None, sources: Sequence[Path], make: Callable[[Path | None], "EmbeddedKG"],
                 fill: Callable[["EmbeddedKG"], None]) -> "EmbeddedKG":
    """The KG from ``sources``: in memory without ``store_dir``; with it, built on disk once and
    reused (one handle per process) while the sources are unchanged. A built store that no longer
    opens (RocksDB reports corruption: a crash mid-write, a disk fault) is rebuilt, unless another
    process holds it (then :class:`KGStoreError` says to stop that process first)."""
    if store_dir is None:
        kg = make(None)
        fill(kg)
        return kg
    store_dir = Path(store_dir)
    key = str(store_dir.resolve())
    with _build_lock(store_dir):
        reuse = _reuse(store_dir, sources)
        if reuse and key in _OPEN:
            return _OPEN[key]
        try:
            kg = make(store_dir)
        except KGStoreError:
            raise  # read-only beside another process: not ours to rebuild now
        except (OSError, RuntimeError) as exc:
            if not reuse or not _STORE_CORRUPT.search(str(exc)):
                raise  # (a lock held by another process is RocksDB's "IO error" too: never rebuilt)
            import warnings

            warnings.warn(f"the KG store at {store_dir} does not open ({str(exc).splitlines()[0][:160]}); rebuilding it",
                          stacklevel=3)
            _reset(store_dir)
            reuse = False
            kg = make(store_dir)
        if not reuse:
            fill(kg)
            (store_dir / ".kgqa-source").write_text(_file_hash(sources))
        _OPEN[key] = kg
        return kg


#: RocksDB's status prefixes for a store that cannot serve reads (pyoxigraph passes them on in the
#: exception's text): the store failed, not the query.
_STORE_FAILURE = re.compile(r"(?:^|: )(?:Corruption|IO error|Shutdown in progress|Operation aborted): ")
_STORE_CORRUPT = re.compile(r"(?:^|: )Corruption: ")


class KGStoreError(InfrastructureError, RuntimeError):
    """The embedded KG's on-disk store failed (RocksDB corruption, an I/O error): not an answer.
    The runner leaves the question unanswered and stops after a few in a row."""


def store_failure(exc: BaseException, store_dir: Path | None = None) -> KGStoreError | None:
    """``exc`` (or an exception it was raised from) as a :class:`KGStoreError` when its text is a
    RocksDB store failure; None for anything else (a query's own error stays the query's)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, KGStoreError):
            return cur
        text = str(cur).strip()
        if isinstance(cur, (OSError, RuntimeError)) and _STORE_FAILURE.search(text):
            where = f"the KG store at {store_dir}" if store_dir else "the embedded KG store"
            first = text.splitlines()[0][:200]
            fix = (f"stop the processes using it, delete {store_dir} and run again (it is rebuilt)" if store_dir
                   else "stop the processes using it, delete its folder under the kgqa cache (kg/<name>) and run again")
            out = KGStoreError(f"{where} failed: {first} — {fix}", summary=f"{where} failed ({first[:80]})")
            out.__cause__ = exc
            return out
        cur = cur.__cause__ or cur.__context__
    return None


_STORE_CLAIM = ".kgqa-store"


class StoreDirNotOurs(UserError, FileExistsError):
    """``store_dir`` holds files that are not a kgqa KG store: refused, never deleted."""


def triples_to_ntriples(rows: Iterable[tuple[str, str, str]], entity_ns: str, relation_ns: str) -> bytes:
    """(head name, relation, tail name) rows → N-Triples with one IRI + rdfs:label per name."""
    lines, labelled = [], set()
    for h, r, t in rows:
        for name in (h, t):
            if name not in labelled:
                labelled.add(name)
                lines.append(f"<{entity_ns}{quote(name, safe='')}> <{RDFS_LABEL}> {_nt_literal(name)} .")
        lines.append(f"<{entity_ns}{quote(h, safe='')}> <{relation_ns}{quote(r, safe='')}> <{entity_ns}{quote(t, safe='')}> .")
    return ("\n".join(lines) + "\n").encode("utf-8")


def read_metaqa_rows(path: str | Path) -> list[tuple[str, str, str]]:
    """``head|relation|tail`` lines; a name containing ``|`` is kept whole (split on the
    relation, which never contains one)."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        parts = line.split("|")
        if len(parts) < 3:
            continue
        if len(parts) == 3:
            rows.append((parts[0].strip(), parts[1].strip(), parts[2].strip()))
        else:  # find the relation token: the one that looks like a relation name
            for i in range(1, len(parts) - 1):
                if re.fullmatch(r"[a-z_]+", parts[i]):
                    rows.append(("|".join(parts[:i]).strip(), parts[i], "|".join(parts[i + 1:]).strip()))
                    break
    return rows


def load_metaqa_kb(path: str | Path, store_dir: str | Path | None = None, name: str = "metaqa") -> EmbeddedKG:
    """Load a MetaQA-format KB (``head|relation|tail``). Names become IRIs under
    ``http://kgqa.local/<name>/entity/`` with an rdfs:label; the same string is the same node.
    With ``store_dir`` the on-disk store is built once and reused while the file is unchanged."""
    path = Path(path)
    name_ns = f"http://kgqa.local/{name}/"

    def fill(kg: EmbeddedKG) -> None:
        kg.load_ntriples(triples_to_ntriples(read_metaqa_rows(path), kg.entity_ns, kg.relation_ns))

    return _load_cached(store_dir, [path], lambda d: EmbeddedKG(d, namespace=name_ns, name=name), fill)


def load_rdf(paths: str | Path | Sequence[str | Path], store_dir: str | Path | None = None,
             namespace: str = "http://kgqa.local/kg/", name: str = "kg", **kg_options) -> EmbeddedKG:
    """Load N-Triples (``.nt``) or Turtle (``.ttl``) files; ``kg_options`` go to :class:`EmbeddedKG`
    (naming predicates, entity/relation namespaces)."""
    paths = [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]

    def fill(kg: EmbeddedKG) -> None:
        for p in paths:
            fmt = ox.RdfFormat.TURTLE if p.suffix in (".ttl", ".turtle") else ox.RdfFormat.N_TRIPLES
            kg.load_ntriples(p, fmt)

    return _load_cached(store_dir, paths, lambda d: EmbeddedKG(d, namespace=namespace, name=name, **kg_options), fill)


def from_triples(rows: Iterable[tuple[str, str, str]], name: str = "kg") -> EmbeddedKG:
    """A small in-memory KG from (head name, relation, tail name) rows (tests, notebooks)."""
    kg = EmbeddedKG(namespace=f"http://kgqa.local/{name}/", name=name)
    kg.load_ntriples(triples_to_ntriples(list(rows), kg.entity_ns, kg.relation_ns))
    return kg
