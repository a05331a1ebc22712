"""The benchmark tables as data, and the machinery every table shares.

A :class:`Table` names the cells that make it (one ``kgqa run`` each: dataset, method, the exact
arguments, the planned number of questions), the folder of its saved records
(``results/bench/runs/<records>/<cell>.jsonl.gz``), how a record is stripped before it is saved
(external benchmarks: no question text, no entity names), and the function that turns the saved
records into its report (``results/bench/<output>``). Adding a table is one :func:`register` call
plus a report function; the paper modules (:mod:`.pgakv`, :mod:`.keqing`) are the examples.

Reports are computed from the *saved* records only, so a committed report is a function of the
committed records (``make test`` checks it byte for byte, :func:`check`). A cell's completeness is
the number of distinct questions (qids) in its records against the planned number — never a config
hash compared with today's code: records made by an older commit stay complete and count (the
table's ``provenance`` says which commit and command made them)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import UserError
from ..paths import results_dir


def bench_dir() -> Path:
    return results_dir() / "bench"


def runs_dir() -> Path:
    """Where ``kgqa run`` writes live run files (not committed)."""
    return results_dir() / "runs"


@dataclass(frozen=True)
class Cell:
    """One ``kgqa run`` of a table: its records are ``<name>.jsonl`` (live) / ``<name>.jsonl.gz`` (saved)."""

    name: str
    method: str
    dataset: str
    planned: int  # questions the table needs from this run
    args: tuple[str, ...] = ()  # further `kgqa run` arguments (--sample, --llm, --set …), --out excluded
    optional: str = ""  # why the cell is not needed for the table's acceptance ("" = needed): listed and estimated apart
    config: str = ""  # the configuration it runs, shared by the cells that run it on other datasets ("" = its own)

    def argv(self, out: str | Path) -> list[str]:
        """The ``kgqa run`` arguments of this cell, writing to ``out``."""
        return ["--method", self.method, "--dataset", self.dataset, *self.args, "--out", str(out)]

    def command(self) -> str:
        """The command as a shell reads it (``fusic:a>b`` quoted)."""
        import shlex

        return "kgqa run " + " ".join(shlex.quote(a) for a in self.argv(f"results/runs/{self.name}.jsonl"))


class Records:
    """The saved records of a table, by cell name (read once each; ``[]`` for a cell not run)."""

    def __init__(self, table: "Table") -> None:
        self.table = table
        self.folder = table.records_dir
        self._cache: dict[str, list[dict[str, Any]]] = {}

    def __call__(self, cell: str) -> list[dict[str, Any]]:
        if cell not in self._cache:
            from ..evaluate.runner import read_records

            self._cache[cell] = read_records(self.folder / f"{cell}.jsonl.gz")
        return self._cache[cell]


@dataclass(frozen=True)
class Table:
    """A benchmark table: its cells, saved records, strip function and report."""

    name: str
    title: str
    cells: tuple[Cell, ...]
    report: Callable[[Records], str]  # saved records → the report's text (Markdown)
    output: str  # report file under results/bench/
    strip: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # None: records are saved whole
    records: str = ""  # folder under results/bench/runs/ (default: the table's name)
    source: str = ""  # what it reproduces (paper, table)
    provenance: str = ""  # which commit/commands made the saved records, when not today's
    extra_files: tuple[str, ...] = field(default=())  # other committed files in the records folder (e.g. ceiling.json)

    @property
    def records_dir(self) -> Path:
        return bench_dir() / "runs" / (self.records or self.name)

    @property
    def output_path(self) -> Path:
        return bench_dir() / self.output

    def cell(self, name: str) -> Cell:
        for c in self.cells:
            if c.name == name:
                return c
        raise UserError(f"table {self.name} has no cell {name!r}; its cells: {', '.join(c.name for c in self.cells)}")

    def saved(self, cell: Cell) -> Path:
        return self.records_dir / f"{cell.name}.jsonl.gz"


TABLES: dict[str, Table] = {}


def register(table: Table) -> Table:
    """Add a table to the registry (its name and report output must be new)."""
    old = TABLES.get(table.name)
    if old is not None and old.report.__module__ != table.report.__module__:  # (a module reloaded may re-register)
        raise ValueError(f"benchmark table {table.name!r} is registered twice")
    if any(t.output == table.output and t.name != table.name for t in TABLES.values()):
        raise ValueError(f"benchmark table {table.name!r} writes {table.output}, which another table writes")
    TABLES[table.name] = table
    return table


def get_table(name: str) -> Table:
    if name not in TABLES:
        raise UserError(f"unknown benchmark table {name!r}; known: {', '.join(TABLES)} (see `kgqa bench list`)")
    return TABLES[name]


def tables(names: list[str] | None = None) -> list[Table]:
    return [get_table(n) for n in names] if names else list(TABLES.values())


# ---------------------------------------------------------------- completeness and cost
def _qids(records: list[dict[str, Any]]) -> set[str]:
    return {r["qid"] for r in records if "qid" in r}


def _model_seconds(r: dict[str, Any]) -> float:
    """What a question costs without the LLM cache: its wall time with each cache hit counted at the
    time the response took when it was recorded (a resumed or replayed cell is not free next time)."""
    llm = r.get("llm") or {}
    return r["seconds"] - llm.get("seconds", 0.0) + llm.get("recorded_seconds", llm.get("seconds", 0.0))


def cell_status(table: Table, cell: Cell, runs: Path | None = None) -> dict[str, Any]:
    """Questions present in the saved records (and in a live run file, when ``runs`` is given),
    against the planned number; per-question costs from the records themselves (``s/q`` wall time,
    ``model s/q`` without the cache's hits, :func:`_model_seconds`)."""
    from ..evaluate.runner import read_records

    saved = read_records(table.saved(cell))
    live = read_records(Path(runs) / f"{cell.name}.jsonl") if runs is not None else []
    qids = _qids(saved) | _qids(live)
    recs = live if len(_qids(live)) >= len(_qids(saved)) and live else saved
    n = len(recs)
    return {"cell": cell.name, "present": len(qids), "saved": len(_qids(saved)), "live": len(_qids(live)),
            "planned": cell.planned,
            "complete": len(qids) >= cell.planned,
            "calls/q": sum(r["llm"]["calls"] for r in recs) / n if n else None,
            "s/q": sum(r["seconds"] for r in recs) / n if n else None,
            "model s/q": sum(_model_seconds(r) for r in recs) / n if n else None}


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


def _names(rows: list[dict[str, Any]], what: str) -> str:
    return ", ".join(r["cell"] for r in rows) if len(rows) <= 3 else f"{len(rows)} {what} cells"


def estimate(table: Table, runs: Path | None = None) -> list[dict[str, Any]]:
    """Per incomplete cell: questions missing, and the LLM calls and hours they should take without
    the LLM cache, from the cell's own records (per-question means of ``model s/q``). A cell with none
    is estimated from peers (``basis`` says which; None when nothing was recorded):

    - when cells of its ``config`` ran on other datasets: their calls per question (a configuration's
      call count: 1 for a no-retrieval baseline, 5–6 with two retrievers), at the seconds per call of the
      cells of its method on its own dataset when there are any (prompt sizes are a dataset's), else at
      their own seconds;
    - else the table's cells of its method on its dataset, else of its method, else other tables' cells
      of its method."""
    rows = [dict(cell_status(table, c, runs), method=c.method, dataset=c.dataset, config=c.config,
                 optional=bool(c.optional)) for c in table.cells]
    out = []
    for row in rows:
        missing = max(0, row["planned"] - row["present"])
        if not missing:
            continue
        basis, calls, secs = row["cell"], row["calls/q"], row["model s/q"]
        if calls is None:
            peers = [r for r in rows if r["method"] == row["method"] and r["calls/q"] is not None]
            same = [r for r in peers if r["dataset"] == row["dataset"]]
            config = [r for r in rows if row["config"] and r["config"] == row["config"] and r["calls/q"] is not None]
            if config and same and _mean(same, "calls/q") > 0:
                calls = _mean(config, "calls/q")
                secs = calls * _mean(same, "model s/q") / _mean(same, "calls/q")
                basis = (f"calls/q of {_names(config, row['config'])} × s/call of "
                         f"{_names(same, row['method'] + ' ' + row['dataset'])}")
            elif config:
                calls, secs = _mean(config, "calls/q"), _mean(config, "model s/q")
                basis = "mean of " + _names(config, row["config"])
            else:
                peers = same or peers
                if not peers:  # no cell of this method in the table has run: the other tables' cells of the method
                    peers = [dict(cell_status(t, c), method=c.method) for t in TABLES.values() if t is not table
                             for c in t.cells if c.method == row["method"]]
                    peers = [r for r in peers if r["calls/q"] is not None]
                if peers:
                    basis = "mean of " + _names(peers, row["method"])
                    calls, secs = _mean(peers, "calls/q"), _mean(peers, "model s/q")
                else:
                    basis = None
        out.append({"cell": row["cell"], "missing": missing, "basis": basis, "optional": row["optional"],
                    "llm_calls": None if calls is None else calls * missing,
                    "hours": None if secs is None else secs * missing / 3600})
    return out


def format_estimate(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "nothing to run: every cell has its planned questions"
    lines = []
    for r in rows:
        cost = (f"≈ {r['llm_calls']:.0f} LLM calls, ≈ {r['hours']:.1f} h without cache hits (per-question costs: {r['basis']})"
                if r["basis"] else "cost unknown (no records of this method yet)")
        lines.append(f"  {r['cell']}: {r['missing']} questions missing, {cost}" + (" (optional)" if r.get("optional") else ""))
    known = [r for r in rows if r["basis"]]
    total = f"total: {sum(r['missing'] for r in rows)} questions"
    if known:
        total += (f", ≈ {sum(r['llm_calls'] for r in known):.0f} LLM calls, ≈ {sum(r['hours'] for r in known):.1f} h"
                  + (" + the cells of unknown cost" if len(known) < len(rows) else ""))
    else:
        total += ", cost unknown (no records to estimate from)"
    lines.append(total)
    opt = [r for r in rows if r.get("optional")]
    if opt:
        need = [r for r in known if not r.get("optional")]
        lines.append(f"  of which the cells the table needs: {sum(r['missing'] for r in rows if not r.get('optional'))} "
                     f"questions, ≈ {sum(r['hours'] for r in need):.1f} h; the {len(opt)} optional cells (deviations "
                     f"beyond the table's acceptance): {sum(r['missing'] for r in opt)} questions, "
                     f"≈ {sum(r['hours'] for r in opt if r['basis']):.1f} h")
    return "\n".join(lines)


# ---------------------------------------------------------------- reports
def render(table: Table) -> str:
    """The table's report, computed from its saved records only."""
    return table.report(Records(table))


def write_report(table: Table) -> Path:
    path = table.output_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(table), encoding="utf-8")
    return path


def check(table: Table) -> str | None:
    """None when the committed report is what its saved records give; else what differs, in one line."""
    path = table.output_path
    return compare(path, render(table) if path.exists() else "", table.name, "its records give")


def compare(path: Path, text: str, name: str, source: str) -> str | None:
    """None when the file at ``path`` holds ``text``; else, in one line, from which line it differs
    from what ``source`` (e.g. "its records give") or that it is missing, and the command that rewrites it."""
    if not path.exists():
        return f"{path.name} is missing (write it with `kgqa bench report {name}`)"
    old = path.read_text(encoding="utf-8")
    if text == old:
        return None
    new_lines, old_lines = text.splitlines(), old.splitlines()
    first = next((i for i, (a, b) in enumerate(zip(new_lines, old_lines)) if a != b), min(len(new_lines), len(old_lines)))
    return f"{path.name} differs from what {source}, from line {first + 1} (`kgqa bench report {name}` rewrites it)"


# ---------------------------------------------------------------- saving and restoring records
def save(table: Table, runs: Path | None = None, cells: list[Cell] | None = None) -> dict[str, int]:
    """Keep the live run files of ``cells`` (default: all) as saved records, stripped by the table's
    strip function; returns records saved per file. Cells without a live run file are left alone."""
    from ..evaluate.runner import save_runs

    runs = Path(runs) if runs is not None else runs_dir()
    paths = [runs / f"{c.name}.jsonl" for c in (cells or table.cells)]
    strip = table.strip
    # records restored from the saved copies (a resumed run on another machine) are stripped already:
    # stripping them again would drop what only the full record could give
    transform = None if strip is None else (lambda r: r if r.get("stripped") else strip(r))
    return save_runs([p for p in paths if p.exists()], table.records_dir, transform)


def restore(table: Table, runs: Path | None = None) -> dict[str, str]:
    """Unpack the saved records into ``runs`` (an existing run file is kept: it is newer), so a run
    of the same command skips the questions already done."""
    runs = Path(runs) if runs is not None else runs_dir()
    runs.mkdir(parents=True, exist_ok=True)
    out = {}
    for c in table.cells:
        g, target = table.saved(c), runs / f"{c.name}.jsonl"
        if not g.exists():
            continue
        if target.exists():
            out[target.name] = "kept (exists)"
        else:
            target.write_bytes(gzip.decompress(g.read_bytes()))
            out[target.name] = "restored"
    return out


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as fh:
            return sum(1 for _ in fh)
    except FileNotFoundError:
        return 0


def run(table: Table, runs: Path | None = None, batch: int = 10, poll: float = 15.0,
        echo: Callable[[str], None] = print, cells: list[str] | None = None, procs: int = 1) -> int:
    """Run the missing questions of every incomplete cell with its recorded command (resuming from
    the restored records), saving the stripped records and rewriting the report after every
    ``batch`` new records and at the end. Returns 0, or the first failing run's exit code (no new
    cell starts after a failure; cells already running finish).

    ``procs`` > 1 runs that many cells at once, each ``kgqa run`` with ``cores // procs`` threads for
    the embedded model (``KGQA_LLM_THREADS``): on a CPU, one-thread decoding in two processes gives
    more tokens per second in all than two threads in one (the README's measurement), and cells are
    independent run files, so results do not depend on it."""
    runs = Path(runs) if runs is not None else runs_dir()
    for name, what in restore(table, runs).items():
        if what == "restored":
            echo(f"{name}: restored from {table.records_dir.relative_to(results_dir().parent)}")
    queue = [c for c in table.cells if (cells is None or c.name in cells) and not cell_status(table, c, runs)["complete"]]
    env = None
    if procs > 1:
        from ..llm.chat import default_threads

        env = {**os.environ, "KGQA_LLM_THREADS": str(max(1, default_threads() // procs))}
    active: dict[str, list[Any]] = {}  # cell name -> [cell, process, run file, lines when last saved]
    failed = 0
    try:
        while queue or active:
            while queue and len(active) < max(1, procs) and not failed:
                c = queue.pop(0)
                out = runs / f"{c.name}.jsonl"
                argv = [sys.executable, "-m", "kgqa_lib.cli", "run", *c.argv(out)]
                echo(f"$ {c.command()}")
                proc = subprocess.Popen(argv) if env is None else subprocess.Popen(argv, env=env)
                active[c.name] = [c, proc, out, _count_lines(out)]
            if not active:
                break
            for name, (c, proc, out, saved_at) in list(active.items()):
                try:
                    code = proc.wait(timeout=poll / len(active))
                except subprocess.TimeoutExpired:
                    code = None
                lines = _count_lines(out)
                if code is not None or lines - saved_at >= batch:
                    save(table, runs, [c])
                    write_report(table)
                    active[name][3] = lines
                if code is not None:
                    del active[name]
                    if code:
                        echo(f"{c.name}: `kgqa run` stopped with exit code {code}; the records so far are saved")
                        failed = failed or code
    except KeyboardInterrupt:
        for c, proc, _, _ in active.values():
            proc.terminate()
            proc.wait()
            save(table, runs, [c])
        write_report(table)
        raise
    return failed


def completeness(table: Table, runs: Path | None = None) -> dict[str, Any]:
    """How far a table is: its cells (``rows``: :func:`cell_status` each), the complete ones, the questions
    present of those planned, and the same for the cells its acceptance needs (``Cell.optional`` ones out)."""
    rows = [cell_status(table, c, runs) for c in table.cells]
    needed = [r for r, c in zip(rows, table.cells) if not c.optional]
    return {"rows": rows, "cells": len(rows), "complete": sum(r["complete"] for r in rows),
            "questions": sum(min(r["present"], r["planned"]) for r in rows), "planned": sum(r["planned"] for r in rows),
            "needed": len(needed), "needed complete": sum(r["complete"] for r in needed)}


def completeness_line(table: Table, runs: Path | None = None, k: dict[str, Any] | None = None) -> str:
    """``55/90 cells complete, 6134/9597 questions (cells the table needs: 52/78 complete)``
    (``k``: the table's :func:`completeness`, when the caller has it)."""
    k = k or completeness(table, runs)
    return (f"{k['complete']}/{k['cells']} cells complete, {k['questions']}/{k['planned']} questions"
            + (f" (cells the table needs: {k['needed complete']}/{k['needed']} complete)" if k["needed"] < k["cells"] else ""))


def status_table(table: Table, runs: Path | None = None) -> list[str]:
    """Lines of ``kgqa bench list`` for one table."""
    k = completeness(table, runs)
    rows = k["rows"]
    lines = [f"{table.name}: {table.title} → results/bench/{table.output}",
             f"  {completeness_line(table, k=k)}" + (f"; {table.source}" if table.source else "")]
    if table.provenance:
        lines.append(f"  records: {table.provenance}")
    w = max(len(r["cell"]) for r in rows)
    for r, c in zip(rows, table.cells):
        mark = "✓" if r["complete"] else " "
        cost = "" if r["s/q"] is None else f"  {r['calls/q']:.2f} calls/q, {r['s/q']:.1f} s/q"
        live = f"  ({r['present'] - r['saved']} more in results/runs/, not saved yet)" if r["present"] > r["saved"] else ""
        opt = f"  optional: {c.optional}" if c.optional else ""
        lines.append(f"  {mark} {r['cell']:<{w}}  {r['present']:>4}/{r['planned']:<4}{cost}{live}{opt}")
    return lines


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")

