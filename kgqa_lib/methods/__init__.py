"""Methods: one module per paper (``baselines``, ``pgakv``, ``fusic``, ``keqing``, ``tog``, ``kbbinder``).

Each method is a pipeline of named stages; :func:`get_method` resolves a name such as ``io``. A
method reads the question, never its gold answers, gold query or gold chain (checks against the
gold are :mod:`kgqa_lib.evaluate`'s, after the method returned; the one exception is labelled an
oracle: FuSIC's ``oracle_linking`` analysis setting, off by default). Importing this package imports
every method, which registers it — and FuSIC's and Keqing's question sets in the data layer's
dataset registry."""

from __future__ import annotations

from .base import (Context, MethodResult, Settings, SettingsError, Stage, coerce_settings, get_method, method_names,
                   method_settings, register_method, setting)
from . import baselines  # noqa: F401  (registers io, cot)
from . import pgakv  # noqa: F401  (registers pgakv, sc, qsm)
from . import fusic  # noqa: F401  (registers fusic)
from . import keqing  # noqa: F401  (registers keqing)
from . import kbbinder  # noqa: F401  (registers kbbinder)
from . import tog  # noqa: F401  (registers tog)
from . import langchain_sparql  # noqa: F401  (registers langchain_sparql: LangChain's chain, a peer)

__all__ = ["Context", "MethodResult", "Settings", "SettingsError", "Stage", "coerce_settings", "get_method",
           "method_names", "method_settings", "register_method", "setting"]
