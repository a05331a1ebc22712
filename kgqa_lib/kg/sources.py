"""The named KGs a dataset is asked against (``Dataset.kg``, ``kgqa run --kg``): one table,
:data:`KGS`, from a name to its loader, read by :func:`load_named`; a ``sparql+http://…`` name
opens a SPARQL endpoint (:mod:`kgqa_lib.kg.remote`).

The loaders build graphs from the data layer's files: the quickstart's ``tiny`` KB, MetaQA's KB
(``KGQA_DATA_DIR``), the mini-world in its two schemas, GrailQA's answer-bearing per-question
slices (the oracle setting) and the one shared GrailQA fragment (:mod:`kgqa_lib.kg.grailqa_fragment`).
A higher layer adds a KG with :func:`register_kg`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Callable

from ..data import grailqa, miniworld
from ..data.datasets import metaqa_kb_path
from ..errors import UsageError
from ..paths import data_dir, user_cache_dir
from .graph import EmbeddedKG, KGBase, load_metaqa_kb, load_rdf


# --------------------------------------------------------------------------------------------
# The mini-world
# --------------------------------------------------------------------------------------------
def load_miniworld_kg(schema: str = "wikidata", path: Path | None = None) -> EmbeddedKG:
    """The mini-world KG in one schema (``wikidata`` or ``freebase``), with its ontology."""
    if schema not in ("wikidata", "freebase"):
        raise ValueError("schema must be 'wikidata' or 'freebase'")
    out, base = miniworld.out_dir(), miniworld.BASE
    paths = [path] if path else [out / f"kg_{schema}.nt", out / "ontology.nt"]
    if schema == "wikidata":
        return load_rdf(paths, namespace=base + "wd/", name="miniworld-wikidata",
                        entity_ns=base + "wd/entity/", relation_ns=base + "wd/prop/direct/")
    return load_rdf(paths, namespace=base + "fb/", name="miniworld-freebase", entity_ns=base + "fb/",
                    relation_ns=base + "fb/", label_predicate=miniworld.FB_NAME, alias_predicate=miniworld.FB_ALIAS,
                    description_predicate=miniworld.FB_DESC)


# --------------------------------------------------------------------------------------------
# GrailQA's answer-bearing slices (the facts: kgqa_lib.data.grailqa.question_ntriples)
# --------------------------------------------------------------------------------------------
def _grailqa_kg(name: str) -> EmbeddedKG:
    fb, name_pred = grailqa.FB, grailqa.NAME
    return EmbeddedKG(namespace=fb, name=name, entity_ns=fb, relation_ns=fb, label_predicate=name_pred,
                      alias_predicate=fb + "common.topic.alias", description_predicate=fb + "common.topic.description")


@lru_cache(maxsize=4096)
def grailqa_slice_kg(qid: str, distractors: int = 3, seed: int = 0) -> EmbeddedKG:
    """The KG one GrailQA question is asked against: its own slice (in memory, a few ms)."""
    q = next(x for x in grailqa.load_grailqa() if x.qid == qid)
    kg = _grailqa_kg(f"grailqa:{qid}")
    kg.load_ntriples(grailqa.question_ntriples(q, distractors, seed))
    return kg


@lru_cache(maxsize=1)
def load_grailqa_kg() -> EmbeddedKG:
    """All slices merged (for browsing: facts of different questions meet at shared entities, so
    a question's gold query may return more than its gold answers here; runs use :func:`grailqa_slice_kg`)."""
    kg = _grailqa_kg("grailqa")
    kg.load_ntriples("".join(grailqa.question_ntriples(q) for q in grailqa.load_grailqa()))
    return kg


def _fragment_kg() -> KGBase:
    from .grailqa_fragment import load_fragment_kg

    return load_fragment_kg()


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------
#: KG name → loader (called with the ``store_dir`` given to :func:`load_named`, or None).
KGS: dict[str, Callable[[str | Path | None], KGBase]] = {
    "tiny": lambda store_dir: load_metaqa_kb(data_dir() / "tiny" / "kb.txt", name="tiny"),
    "metaqa": lambda store_dir: load_metaqa_kb(metaqa_kb_path(), store_dir=store_dir or user_cache_dir() / "kg" / "metaqa"),
    # oracle: answer-bearing per-question Freebase slices of the GrailQA sample (KGQA_DATA_DIR)
    "grailqa": lambda store_dir: load_grailqa_kg(),
    # ONE graph of every GrailQA (+ WebQSP parse) question's gold facts, cached on disk
    "grailqa-fragment": lambda store_dir: _fragment_kg(),
    "miniworld": lambda store_dir: load_miniworld_kg("wikidata"),
    "miniworld:wikidata": lambda store_dir: load_miniworld_kg("wikidata"),
    "miniworld:freebase": lambda store_dir: load_miniworld_kg("freebase"),
}


def register_kg(name: str, loader: Callable[[str | Path | None], KGBase]) -> None:
    """Add a named KG: ``loader(store_dir)`` returns it."""
    KGS[name] = loader


def load_named(name: str, store_dir: str | Path | None = None) -> KGBase:
    """The KG a dataset is asked against: ``tiny`` and ``miniworld`` (ours), ``metaqa`` (KGQA_DATA_DIR),
    or a SPARQL endpoint, whose URL and options are checked before anything is asked
    (:func:`~kgqa_lib.kg.remote.parse_kg_url`). A name that is none of these, or a bad URL, is a
    :class:`~kgqa_lib.errors.UsageError`."""
    if name in KGS:
        return KGS[name](store_dir)
    if name.startswith("sparql+"):  # a SPARQL endpoint: sparql+http://host:port/path#profile=…
        from .remote import open_sparql_kg

        return open_sparql_kg(name)
    raise UsageError(f"Unknown KG {name!r}: use 'tiny', 'miniworld[:wikidata|:freebase]', 'metaqa', 'grailqa-fragment', "
                     "'grailqa' (oracle per-question slices) "
                     "or a SPARQL endpoint 'sparql+http://HOST:PORT/PATH#profile=wikidata|freebase|miniworld:…'")
