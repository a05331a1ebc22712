"""The data layer: question records and where they come from. Imports nothing above it.

- :mod:`.datasets` — :class:`~.datasets.Question`, :class:`~.datasets.Dataset`, MetaQA and our own
  JSON-lines sets, the dev/test splits, and the registry :func:`~.datasets.load_dataset` resolves
  ``name:part:split`` specs with: a plain table that the modules providing a set add to
  (:func:`~.datasets.register`) — GrailQA and the Freebase/Wikidata benchmarks here, the GrailQA
  fragment in the KG layer, FuSIC's and Keqing's task sets in their method modules; and what of a
  question is gold, which no method reads of the question it answers (``GOLD_METADATA``,
  ``TOPICS_AT_TEST``, :func:`~.datasets.without_gold`).
- :mod:`.miniworld` — the mini-world: its source tables, the two schemas' triples, logical forms.
- :mod:`.grailqa` — GrailQA's questions and each question's gold facts (as N-Triples text).
- :mod:`.benchmarks` — QALD-10, SimpleQuestions, WebQSP (through ``$KGQA_DATA_DIR``).
"""

from . import benchmarks, grailqa  # noqa: F401  (register their loaders in datasets' table)
