"""The embedding layer: sentence encoders and the retrievers built on them. Imports the base only.

- :mod:`.embedder` — the cached sentence encoder and a small vector index.
- :mod:`.retrieval` — BM25 and dense retrievers, and training a dense one.
"""
