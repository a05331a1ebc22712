"""The KG layer: knowledge graphs to look things up in, walk and query. Imports the data layer and
the base only (never the LLM or embedding layers, its peers).

- :mod:`.graph` — the KG protocol and the embedded Oxigraph backend (``EmbeddedKG``, ``load_rdf``).
- :mod:`.sources` — the named KGs (``tiny``, ``metaqa``, ``miniworld``, ``grailqa``,
  ``grailqa-fragment``, ``sparql+http://…``): :func:`~.sources.load_named`.
- :mod:`.remote` — SPARQL endpoints behind the same protocol; :mod:`.slices` — per-question slices
  cut from an endpoint; :mod:`.grailqa_fragment` — one graph of every GrailQA question's gold facts
  (and the ``grailqa:fragment`` question sets answered on it).
- :mod:`.sparql_guard` — the read-only guard for queries an LLM writes; :mod:`.query_worker` — the
  sandboxed process they run in; :mod:`.sexpr` — GrailQA's s-expressions as SPARQL.
"""
