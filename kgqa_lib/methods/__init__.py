"""Methods: one module per paper (``baselines``, ``pgakv``, ``fusic``, ``keqing``, ``tog``, ``kbbinder``).

Each method is a pipeline of named stages; :func:`get_method` resolves a name such as ``io``. A
method reads the question it answers — its text, qid, kind and the annotations its dataset gives at
test time — never its gold: gold answers, gold query, s-expression or chain, the gold-bearing metadata,
and the topic annotations of a dataset that gives none at test time (GrailQA); the list is
:mod:`kgqa_lib.data.datasets`' (``GOLD_METADATA``, ``TOPICS_AT_TEST``, ``without_gold``). Training-side
questions (pools, exemplars, retriever training data) may be read whole; checks against the gold are
:mod:`kgqa_lib.evaluate`'s, after the method returned. Proved, not claimed: ``tests/unit/test_no_gold.py``
runs every registered method on questions as given and with every gold field replaced by garbage, and
asserts the same prompts, predictions and traces. The exceptions are the declared oracles, named
settings off by default and labelled as oracles wherever reported: FuSIC's ``oracle_linking`` (the gold
topic entities instead of the linker's) and Keqing's ``topics=oracle`` (a GrailQA question's topic read
off its gold s-expression instead of linked from its text). Importing this package imports every
method, which registers it — and FuSIC's and Keqing's question sets in the data layer's dataset registry."""

from __future__ import annotations

from .base import (Context, MethodInfo, MethodResult, Settings, SettingsError, Stage, coerce_settings, get_method,
                   method_info, method_names, method_settings, register_method, setting)
from . import baselines  # noqa: F401  (registers io, cot)
from . import pgakv  # noqa: F401  (registers pgakv, sc, qsm)
from . import fusic  # noqa: F401  (registers fusic)
from . import keqing  # noqa: F401  (registers keqing)
from . import kbbinder  # noqa: F401  (registers kbbinder)
from . import tog  # noqa: F401  (registers tog)
from . import langchain_sparql  # noqa: F401  (registers langchain_sparql: LangChain's chain, a peer)

__all__ = ["Context", "MethodInfo", "MethodResult", "Settings", "SettingsError", "Stage", "coerce_settings", "get_method",
           "method_info", "method_names", "method_settings", "register_method", "setting"]
