"""The speed benchmarks: measurement tables (:mod:`..measure`) of this machine, one module each.

- :mod:`.embed` — the embedding cache and cosine top-10 over ~130k synthetic triples;
- :mod:`.foundation` — the MetaQA KB in the embedded KG (load, SPARQL, paths, lookup) and its embeddings;
- :mod:`.scaleout` — concurrent questions, SPARQL servers vs the embedded KG, the MetaQA KB on disk;
- :mod:`.distributed` — a sharded ``kgqa run`` on a Dask LocalCluster;
- :mod:`.hostile_queries` — hostile SPARQL on both backends (network calls, mutations, timeouts);
- :mod:`.hostile_parsers` — hostile LLM output thrown at every parser (crashes, error categories);
- :mod:`.faults` — ``kgqa run`` under a full disk, locked/read-only/damaged caches, bad replies, a kill.
- :mod:`.throughput` — samples of one prompt (SC, KB-BINDER) decoded together vs one request at a time;
- :mod:`.reuse` — every method's recorded requests: in-process one at a time, saved prefix states, the managed server.
- :mod:`.engines` — one engine with every core vs several engines (processes) splitting the questions.

``kgqa bench list`` shows them with their options; ``kgqa bench run NAME [--option VALUE …]``
measures (an estimate first, ``--yes`` to run), writes ``results/bench/NAME.json`` and the report
beside it; ``kgqa bench report --check`` regenerates each report from its committed JSON."""

from . import (distributed, embed, engines, faults, foundation, hostile_parsers, hostile_queries, reuse,  # noqa: F401
               scaleout, throughput)  # (register)
