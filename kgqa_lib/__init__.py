"""kgqa_lib: the thin library behind the kgqa notebooks.

One package per layer, and data flows one way — data → kg / llm / embed → methods → evaluate →
bench → the CLI and the notebooks; no module imports from a layer above its own (the layers are
named in ``tests/unit/test_layers.py``):

- base: :mod:`.paths`, :mod:`.errors`, :mod:`.text` (answer normalisation), ``_sqlite``,
  :mod:`.procs` (child processes that end with their parent);
- :mod:`.data` — question records, the dataset registry, the mini-world and benchmark loaders;
- :mod:`.kg` — knowledge graphs (embedded, SPARQL endpoints, the named KGs);
- :mod:`.llm` — chat with record/replay caching, models, prompts, output parsing;
- :mod:`.embed` — sentence embeddings and retrievers;
- :mod:`.methods` — one module (or package) per paper; a method never reads a question's gold;
- :mod:`.evaluate` — metrics, the runner, reports, gold-based diagnostics;
- :mod:`.bench` — the benchmark tables (the papers' tables, and the speed measurements);
- :mod:`.cli`, :mod:`.registry`, :mod:`.reproduce`, :mod:`.notebooks`, :mod:`.doctor`,
  :mod:`.distributed`, :mod:`.servers`, :mod:`.viz` — the commands and what notebooks use.
"""

__version__ = "0.1.0"
