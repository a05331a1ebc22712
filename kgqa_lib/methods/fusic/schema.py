"""Schema profiles: how a KG's IRIs are written in prompts (IRIs ↔ prefixed names)."""

from __future__ import annotations

import re
from dataclasses import dataclass



RDFS = "http://www.w3.org/2000/01/rdf-schema#"
MW = "http://kgqa.local/miniworld/"


# ---------------------------------------------------------------------------------------------
# Schema profiles: how a KG's IRIs are written in prompts
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SchemaProfile:
    name: str
    prefixes: tuple[tuple[str, str], ...]  # (prefix, namespace), most specific first
    type_predicate: str | None = None

    @property
    def prefix_map(self) -> dict[str, str]:
        return dict(self.prefixes)

    def compact(self, iri: str) -> str:
        """``http://…/wd/entity/Q42`` → ``wd:Q42`` (or ``<iri>`` when no prefix fits cleanly)."""
        for p, ns in self.prefixes:
            if iri.startswith(ns):
                local = iri[len(ns):]
                if re.fullmatch(r"[A-Za-z0-9_%][A-Za-z0-9_%.\-]*", local) and not local.endswith("."):
                    return f"{p}:{local}"
        return f"<{iri}>"

    def expand(self, token: str) -> str:
        if token.startswith("<") and token.endswith(">"):
            return token[1:-1]
        p, _, local = token.partition(":")
        ns = self.prefix_map.get(p)
        return ns + local if ns is not None else token

    def declarations(self) -> str:
        return "".join(f"PREFIX {p}: <{ns}>\n" for p, ns in self.prefixes)


PROFILES = {
    "miniworld:wikidata": SchemaProfile("wikidata-like", (
        ("wdt", MW + "wd/prop/direct/"), ("ps", MW + "wd/prop/statement/"), ("pq", MW + "wd/prop/qualifier/"),
        ("p", MW + "wd/prop/"), ("wd", MW + "wd/entity/")), type_predicate="wdt:P31"),
    "miniworld:freebase": SchemaProfile("freebase-like", (("ns", MW + "fb/"),), type_predicate="ns:type.object.type"),
    "metaqa": SchemaProfile("metaqa", (("r", "http://kgqa.local/metaqa/relation/"),
                                       ("e", "http://kgqa.local/metaqa/entity/"))),
    "grailqa": SchemaProfile("freebase", (("ns", "http://rdf.freebase.com/ns/"),), type_predicate="ns:type.object.type"),
    "grailqa-fragment": SchemaProfile("freebase", (("ns", "http://rdf.freebase.com/ns/"),),
                                      type_predicate="ns:type.object.type"),
    "tiny": SchemaProfile("tiny", (("r", "http://kgqa.local/tiny/relation/"), ("e", "http://kgqa.local/tiny/entity/"))),
}


def profile_for(kg_name: str) -> SchemaProfile:
    if kg_name == "miniworld":
        kg_name = "miniworld:wikidata"
    if kg_name not in PROFILES:
        raise ValueError(f"No schema profile for KG {kg_name!r}; known: {', '.join(PROFILES)}")
    return PROFILES[kg_name]


def _type_iri(profile: SchemaProfile) -> str | None:
    return profile.expand(profile.type_predicate) if profile.type_predicate else None
