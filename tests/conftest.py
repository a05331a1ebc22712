"""Shared fixtures. Test tiers: unit (tests/unit), notebooks (nbval on notebooks/), papermill
smoke and live model (tests/notebooks, tests/live), real local servers (tests/servers)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """A throw-away KGQA_CACHE_DIR (SQLite caches, embeddings)."""
    d = tmp_path / "cache"
    d.mkdir()
    monkeypatch.setenv("KGQA_CACHE_DIR", str(d))
    return d


@pytest.fixture
def data_dir_or_skip():
    """The external benchmarks folder, or skip with the reason."""
    env = os.environ.get("KGQA_DATA_DIR")
    if not env or not Path(env).is_dir():
        pytest.skip("external benchmarks not available (set KGQA_DATA_DIR=../shared/datasets)")
    return Path(env)
