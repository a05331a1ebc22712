"""Every registry filled. The registries are plain tables owned by the lower layers — datasets
(:func:`kgqa_lib.data.datasets.load_dataset`), KGs (:func:`kgqa_lib.kg.sources.load_named`),
methods (:func:`kgqa_lib.methods.get_method`) — and the modules of higher layers add to them when
imported: GrailQA's fragment sets (:mod:`kgqa_lib.kg.grailqa_fragment`), FuSIC's transfer tasks
and Keqing's sets (their method modules). Importing this module imports every such provider, so a
name resolves whatever was imported before; the CLI resolves the names it is given through here.
(A notebook that imports :mod:`kgqa_lib.methods` — every one does — has them all as well.)
"""

from __future__ import annotations

from . import methods  # noqa: F401  (every method, and FuSIC's and Keqing's dataset loaders)
from .data.datasets import load_dataset
from .kg import grailqa_fragment  # noqa: F401  (grailqa:fragment, :fragment-tech, :fragment-nontech)
from .kg.sources import load_named
from .methods import get_method

__all__ = ["get_method", "load_dataset", "load_named"]
