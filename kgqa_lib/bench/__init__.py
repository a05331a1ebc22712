"""Benchmarks as data: the tables of the papers, the runs that make them, their saved records and
reports (``kgqa bench list | report | run``). :mod:`.core` holds the machinery and the registry;
each paper module registers its tables when this package is imported.

The speed micro-benchmarks (``scripts/bench_embed.py``, ``bench_foundation.py``, ``bench_scaleout.py``,
``bench_hostile_queries.py``) measure this machine rather than compute a table from saved records,
so they stay scripts."""

from .core import (TABLES, Cell, Records, Table, cell_status, check, estimate, format_estimate, get_table, register,
                   render, restore, run, runs_dir, save, status_table, tables, write_report)
from . import baselines, fusic, keqing, keqing_grailqa, pgakv  # noqa: E402,F401  (register their tables)

__all__ = ["TABLES", "Cell", "Records", "Table", "cell_status", "check", "estimate", "format_estimate", "get_table",
           "register", "render", "restore", "run", "runs_dir", "save", "status_table", "tables", "write_report"]
