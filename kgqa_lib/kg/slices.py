"""Per-question KG slices: the 1–2 hop neighbourhood of a question's topic entities, cut from a
SPARQL endpoint with caps on fan-out, written as N-Triples and cached on disk keyed by endpoint +
entity + depth + fan-out. Once built, a benchmark runs against the cached slices offline::

    kgqa slices build --dataset qald10:tog --kg "sparql+https://query.wikidata.org/sparql#profile=wikidata"
    kgqa run --method pgakv --dataset qald10:tog --kg "slices:sparql+https://query.wikidata.org/sparql#profile=wikidata"

A slice holds every edge of each node it reaches (up to ``fanout`` out and ``fanout`` in per node,
naming predicates excluded) plus the label/alias/description of every node and relation in it.
Lines are sorted, so the same endpoint content gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from .remote import SparqlKG, _values_batches, open_sparql_kg, parse_kg_url, profile, redact_url
from .sparql_guard import UnsafeTerm, iri_term, is_iri


@dataclass
class SliceInfo:
    entity: str
    path: str
    triples: int
    nodes: int
    capped_nodes: int  # nodes whose edges hit the fan-out cap
    seconds: float
    cached: bool


def slices_dir() -> Path:
    from ..paths import user_cache_dir

    return user_cache_dir() / "slices"


def entity_iri(entity: str, profile_name: str) -> str:
    """``Q42`` / ``m.0abc`` / a full IRI → the IRI under the profile's entity namespace."""
    return entity if "://" in entity else profile(profile_name).entity_ns + entity


def slice_path(spec: str, entity: str, depth: int, fanout: int) -> Path:
    url, opts = parse_kg_url(spec)
    prof = opts.get("profile", "wikidata")
    key = hashlib.sha256(json.dumps([url, opts.get("graph", ""), prof, entity_iri(entity, prof), depth, fanout]).encode())
    host = re.sub(r"[^\w.-]+", "_", redact_url(url).split("://", 1)[-1]).strip("_")[:60]
    local = re.sub(r"[^\w.-]+", "_", entity.rsplit("/", 1)[-1])[:60]
    return slices_dir() / host / f"{local}-d{depth}-f{fanout}-{key.hexdigest()[:12]}.nt"


def _nt_term(b: dict[str, str]) -> str | None:
    t, v = b.get("type"), b.get("value", "")
    if t == "uri":
        return iri_term(v) if is_iri(v) else None
    if t in ("literal", "typed-literal"):
        lit = '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'
        if b.get("xml:lang"):
            return f"{lit}@{b['xml:lang']}"
        if b.get("datatype") and b["datatype"] != "http://www.w3.org/2001/XMLSchema#string":
            return f"{lit}^^<{b['datatype']}>"
        return lit
    return None  # blank nodes are left out (they cannot be joined across slices)


def _bindings(kg: SparqlKG, query: str) -> list[dict[str, Any]]:
    return kg._fetch(query).get("results", {}).get("bindings", [])


def cut_slice(kg: SparqlKG, entity: str, depth: int = 1, fanout: int = 100) -> tuple[list[str], int, int]:
    """The slice's N-Triples lines (sorted), its node count and how many nodes were capped."""
    start = entity_iri(entity, kg.profile.name)
    lines: set[str] = set()
    seen, frontier, capped = {start}, [start], 0
    naming = kg._naming_filter()
    for _ in range(depth):
        nxt: list[str] = []
        for node in frontier:
            try:
                term = iri_term(node)
            except UnsafeTerm:
                continue  # a topic id that is no IRI: nothing to cut
            out = _bindings(kg, f"SELECT ?p ?o WHERE {{ {term} ?p ?o . {naming} }} LIMIT {int(fanout)}")
            inc = _bindings(kg, f"SELECT ?s ?p WHERE {{ ?s ?p {term} . {naming} }} LIMIT {int(fanout)}")
            capped += int(len(out) >= fanout or len(inc) >= fanout)
            for s, p, o in [({"type": "uri", "value": node}, b["p"], b["o"]) for b in out] + \
                           [(b["s"], b["p"], {"type": "uri", "value": node}) for b in inc]:
                terms = (_nt_term(s), _nt_term(p), _nt_term(o))
                if None in terms:
                    continue
                lines.add(" ".join(terms) + " .")
                for t in (s, o):
                    if t.get("type") == "uri" and t["value"] not in seen:
                        seen.add(t["value"])
                        nxt.append(t["value"])
        frontier = nxt
    iris = sorted({m for line in lines for m in re.findall(r"<([^>]+)>", line)})
    names = " ".join(iri_term(p) for p in (kg.label_predicate, kg.alias_predicate, kg.description_predicate))
    for chunk in _values_batches(iris, 200):
        values = " ".join(iri_term(i) for i in chunk)
        for b in _bindings(kg, f"SELECT ?x ?p ?l WHERE {{ VALUES ?x {{ {values} }} VALUES ?p {{ {names} }} "
                               f"?x ?p ?l . {kg._lang_filter('l')} }}"):
            terms = (_nt_term(b["x"]), _nt_term(b["p"]), _nt_term(b["l"]))
            if None not in terms:
                lines.add(" ".join(terms) + " .")
    return sorted(lines), len(seen), capped


def build_slice(spec: str, entity: str, depth: int = 1, fanout: int = 100, *, kg: SparqlKG | None = None,
                refresh: bool = False) -> SliceInfo:
    """Cut one slice (or find it in the cache) and return where it is."""
    path = slice_path(spec, entity, depth, fanout)
    if path.exists() and not refresh:
        text = path.read_text(encoding="utf-8")
        meta = json.loads(path.with_suffix(".json").read_text()) if path.with_suffix(".json").exists() else {}
        return SliceInfo(entity, str(path), text.count("\n"), meta.get("nodes", 0), meta.get("capped_nodes", 0), 0.0, True)
    kg = kg or open_sparql_kg(spec, cache=not refresh)  # a refresh asks the server again
    t = time.perf_counter()
    lines, nodes, capped = cut_slice(kg, entity, depth, fanout)
    seconds = time.perf_counter() - t
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, path)  # a killed build never leaves a half slice behind
    path.with_suffix(".json").write_text(json.dumps({"endpoint": redact_url(parse_kg_url(spec)[0]), "entity": entity,
                                                     "depth": depth, "fanout": fanout, "nodes": nodes,
                                                     "capped_nodes": capped, "seconds": round(seconds, 3)}))
    return SliceInfo(entity, str(path), len(lines), nodes, capped, seconds, False)


def build_slices(questions: Iterable, spec: str, depth: int = 1, fanout: int = 100, *, progress: bool = True,
                 refresh: bool = False) -> list[SliceInfo]:
    """Slices for every topic entity of the questions (each entity once)."""
    from ..data.benchmarks import topic_ids

    entities = list(dict.fromkeys(e for q in questions for e in topic_ids(q)))
    kg = open_sparql_kg(spec, cache=not refresh)
    out = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(entities), desc="slices", unit="entity")
    for e in entities:
        out.append(build_slice(spec, e, depth, fanout, kg=kg, refresh=refresh))
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    return out


class SliceMissing(FileNotFoundError):
    """Slices needed for offline use have not been built."""


def load_slices(paths: Sequence[str | Path], profile_name: str, name: str = "slices"):
    """An embedded KG holding the given slice files, with the profile's naming predicates."""
    from .graph import load_rdf

    prof = profile(profile_name)
    return load_rdf([Path(p) for p in paths], namespace=prof.entity_ns, name=name, entity_ns=prof.entity_ns,
                    relation_ns=prof.relation_ns, label_predicate=prof.label_predicate,
                    alias_predicate=prof.alias_predicate, description_predicate=prof.description_predicate)


def slice_kg(questions: Iterable, spec: str, depth: int = 1, fanout: int = 100, *, build: bool = True):
    """One embedded KG of the questions' cached slices. Missing slices are cut from the endpoint
    when ``build``; offline (``build=False``) they are an error naming the command that builds them."""
    from ..data.benchmarks import topic_ids

    questions = list(questions)
    entities = list(dict.fromkeys(e for q in questions for e in topic_ids(q)))
    missing = [e for e in entities if not slice_path(spec, e, depth, fanout).exists()]
    if missing and not build:
        raise SliceMissing(f"{len(missing)} of {len(entities)} slices are not built (e.g. {missing[:3]}); with the "
                           f"endpoint reachable run: kgqa slices build --dataset <the dataset> --kg '{redact_url(spec)}' "
                           f"--depth {depth} --fanout {fanout}")
    if missing:
        build_slices([q for q in questions if set(topic_ids(q)) & set(missing)], spec, depth, fanout, progress=True)
    paths = [slice_path(spec, e, depth, fanout) for e in entities]
    return load_slices(paths, parse_kg_url(spec)[1].get("profile", "wikidata"))


def summary(infos: Sequence[SliceInfo]) -> dict[str, Any]:
    built = [i for i in infos if not i.cached]
    return {"entities": len(infos), "built": len(built), "cached": len(infos) - len(built),
            "triples": sum(i.triples for i in infos), "capped_nodes": sum(i.capped_nodes for i in infos),
            "seconds": round(sum(i.seconds for i in built), 2),
            "median_triples": sorted(i.triples for i in infos)[len(infos) // 2] if infos else 0}


def as_records(infos: Sequence[SliceInfo]) -> list[dict[str, Any]]:
    return [asdict(i) for i in infos]


def kg_for_run(questions: Iterable, spec: str):
    """``slices:sparql+http://…#profile=…&depth=1&fanout=100`` → :func:`slice_kg` (``kgqa run --kg``)."""
    inner = spec[len("slices:"):] if spec.startswith("slices:") else spec
    url, opts = parse_kg_url(inner)
    depth, fanout = int(opts.pop("depth", 1)), int(opts.pop("fanout", 100))
    from urllib.parse import urlencode

    endpoint = f"sparql+{url}" + (f"#{urlencode(opts)}" if opts else "")
    return slice_kg(questions, endpoint, depth, fanout)
