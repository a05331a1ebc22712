"""Benchmarks as data: the tables of the papers, the runs that make them, their saved records and
reports (``kgqa bench list | report | run``). :mod:`.core` holds the machinery and the registry;
each paper module registers its tables when this package is imported.

The speed benchmarks (:mod:`.speed`) are the second kind of table, :mod:`.measure`: they measure
this machine, and their saved record is the committed JSON of measurements their report is
regenerated from."""

from .core import (DEFAULT_LLM, TABLES, Cell, Interrupted, Records, Table, cell_status, check, default_key, estimate,
                   format_estimate, get_table, model_key, models_frame, effects_frame, register, render, restore, run, runs_dir, save,
                   status_table, tables, unsaved, write_report)
from . import baselines, fusic, keqing, keqing_grailqa, pgakv, pgakv_metaqa  # noqa: E402,F401  (register their tables)
from . import fusic_paths, fusic_table1, measure, speed  # noqa: E402,F401  (the measurement tables)
from .measure import MEASUREMENTS, Measurement, lookup  # noqa: E402

__all__ = ["DEFAULT_LLM", "MEASUREMENTS", "TABLES", "Cell", "Interrupted", "unsaved", "default_key", "model_key", "models_frame", "effects_frame", "Measurement", "Records", "Table", "cell_status", "check", "estimate",
           "format_estimate", "get_table", "lookup", "measure", "register", "render", "restore", "run", "runs_dir",
           "save", "status_table", "tables", "write_report"]
