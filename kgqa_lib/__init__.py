"""kgqa_lib: the thin library behind the kgqa notebooks.

One module per idea (see DESIGN.md): ``llm`` (chat + record/replay cache), ``kg`` (knowledge
graphs), ``embed`` (sentence embeddings), ``datasets`` (question records and the registry),
``evaluate`` (metrics, runner, reports), ``methods`` (one module per paper), ``viz`` (figures).
"""

__version__ = "0.1.0"
