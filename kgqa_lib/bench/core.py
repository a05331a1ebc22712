"""The benchmark tables as data, and the machinery every table shares.

A :class:`Table` names the cells that make it (one ``kgqa run`` each: dataset, method, the exact
arguments, the planned number of questions), the folder of its saved records, one per model
(``results/bench/runs/<records>/<model>/<cell>.jsonl.gz``; the model is an axis of every table: a
cell's command names the default model, ``kgqa bench run TABLE --llm MODEL`` runs the same cells with
another, :func:`swap_llm`), how a record is stripped before it is saved
(external benchmarks: no question text, no entity names), and the function that turns the saved
records into its report (``results/bench/<output>``). Adding a table is one :func:`register` call
plus a report function; the paper modules (:mod:`.pgakv`, :mod:`.keqing`) are the examples.

``kgqa bench run`` starts one ``kgqa run`` per cell; a cell's process ends with it (:mod:`kgqa_lib.procs`),
and a SIGTERM or Ctrl-C stops the cells' processes and saves what they answered before it exits
(:func:`run`), so the saved records are what the run files hold.

Reports are computed from the *saved* records only, so a committed report is a function of the
committed records (``make test`` checks it byte for byte, :func:`check`). A cell's completeness is
the number of distinct questions (qids) in its records against the planned number — never a config
hash compared with today's code: records made by an older commit stay complete and count (the
table's ``provenance`` says which commit and command made them). Only saved records count: answers
still only in a live run file are listed as not saved yet (``kgqa bench run TABLE --yes`` saves them).

A complete cell is re-run from scratch only when asked (``kgqa bench run TABLE --again``, :func:`again_plan`):
the new records go to a live file of their own (``<cell>.again.jsonl``) and are saved beside the cell's
records (``<cell>.again.jsonl.gz``, which no report reads) until every planned question is answered; then
they replace the cell's records in one ``os.replace``.

Files under ``results/bench/`` (reports, JSON) are replaced whole (:func:`write_text`): a write stopped
midway leaves the old file."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import UsageError, UserError
from ..paths import results_dir
from ..procs import child_env


def bench_dir() -> Path:
    return results_dir() / "bench"


def runs_dir() -> Path:
    """Where ``kgqa run`` writes live run files (not committed)."""
    return results_dir() / "runs"


#: The model every table's cells name in their commands, and whose records a report's main body reads.
DEFAULT_LLM = "local"


def model_key(llm: str | None = None) -> str:
    """The folder name of a model's records: the slug of the model id the LLM name resolves to
    (``local`` → ``qwen2.5-coder-1.5b-instruct-q4_k_m``, ``local:qwen2.5-0.5b`` → ``qwen2.5-0.5b-instruct-q4``,
    ``openai:m@http://h:8000/v1`` → ``openai_m_http___h_8000_v1``). An unknown name is a UsageError."""
    from ..llm.chat import llm_model_id, model_slug

    return model_slug(llm_model_id(llm or DEFAULT_LLM))


def default_key() -> str:
    return model_key(DEFAULT_LLM)


def swap_llm(old: str, new: str) -> str:
    """The ``--llm`` value of a cell run with another model: ``new``, carrying the cell's engine options
    (``local?prefix_cache=8`` → ``local:qwen2.5-0.5b?prefix_cache=8``) when ``new`` is of the same kind
    (``local``) and names no options of its own; options of another kind are dropped (an endpoint has
    no prefix cache of ours)."""
    if "?" in new:
        return new
    base, sep, opts = old.partition("?")
    same_kind = base.partition(":")[0] == new.partition(":")[0]
    return f"{new}?{opts}" if sep and same_kind else new


def with_llm(args: tuple[str, ...], llm: str | None) -> tuple[str, ...]:
    """A cell's ``kgqa run`` arguments with its ``--llm`` swapped for ``llm`` (None: as recorded)."""
    if llm is None:
        return args
    out = list(args)
    if "--llm" in out:
        i = out.index("--llm")
        out[i + 1] = swap_llm(out[i + 1], llm)
    else:
        out += ["--llm", llm]
    return tuple(out)


@dataclass(frozen=True)
class Cell:
    """One run of a table: its records are ``<name>.jsonl`` (live) / ``<name>.jsonl.gz`` (saved). Its run is
    declared as ``kgqa run`` arguments (``args``); :meth:`spec` is that run as a value, without a model
    until the table is run with one (``kgqa bench run TABLE --llm MODEL``). Every registered cell's spec is
    built when its table registers (:func:`register`): a cell that does not parse, or whose settings do
    not coerce, is an error at import."""

    name: str
    method: str
    dataset: str
    planned: int  # questions the table needs from this run
    args: tuple[str, ...] = ()  # further `kgqa run` arguments (--sample, --llm, --set …), --out excluded
    optional: str = ""  # why the table does not need the cell ("" = needed): listed and estimated apart
    config: str = ""  # the configuration it runs, shared by the cells that run it on other datasets ("" = its own)

    def run_args(self, llm: str | None = None, workers: int | None = None) -> list[str]:
        """The cell's ``kgqa run`` arguments as declared, without a run file, with another model (``llm``,
        :func:`with_llm`) and concurrent questions (``workers``) when given."""
        return ["--method", self.method, "--dataset", self.dataset, *with_llm(self.args, llm),
                *(["--workers", str(workers)] if workers and workers > 1 else [])]

    def argv(self, out: str | Path, llm: str | None = None, workers: int | None = None) -> list[str]:
        """The ``kgqa run`` arguments of this cell, writing to ``out`` (:meth:`run_args`)."""
        return [*self.run_args(llm, workers), "--out", str(out)]

    def spec(self, llm: str | None = None, workers: int | None = None):
        """The cell's run as a :class:`~kgqa_lib.evaluate.spec.RunSpec`, run with the model ``llm`` (None: the
        one its arguments name, the default model) and ``workers`` questions at once; a model of the same
        kind keeps the cell's engine options (:func:`swap_llm`)."""
        from ..evaluate.spec import RunSpec

        return RunSpec.from_argv(self.run_args(llm, workers))

    def command(self, llm: str | None = None, workers: int | None = None, out: str | None = None) -> str:
        """The command as a shell reads it (``fusic:a>b`` quoted)."""
        import shlex

        return "kgqa run " + " ".join(shlex.quote(a) for a in self.argv(out or f"results/runs/{self.name}.jsonl",
                                                                           llm, workers))


class Records:
    """The saved records of a table and one model (default: :data:`DEFAULT_LLM`'s), by cell name (read
    once each; ``[]`` for a cell not run). ``folder`` is the table's records folder (its extra files,
    shared by every model), ``cells_dir`` the model's folder in it."""

    def __init__(self, table: "Table", model: str | None = None) -> None:
        self.table = table
        self.model = model or default_key()
        self.folder = table.records_root
        self.cells_dir = table.model_dir(self.model)
        self._cache: dict[str, list[dict[str, Any]]] = {}

    def __call__(self, cell: str) -> list[dict[str, Any]]:
        if cell not in self._cache:
            from ..evaluate.runner import read_records

            self._cache[cell] = read_records(self.cells_dir / f"{cell}.jsonl.gz")
        return self._cache[cell]


@dataclass(frozen=True)
class Effect:
    """A difference a paper reports between two runs, checked for every model with records (the model
    axis): ``a`` − ``b`` on the table's metric over the questions both answered, each a ``(table, cell)``
    (the cells may be another table's: Keqing's rows beside KB-BINDER's). ``sign`` is the paper's
    direction (+1: ``a`` above ``b``)."""

    claim: str  # the effect in words, e.g. "few-shot above zero-shot, MetaQA 1-hop"
    paper: str  # where the paper reports it, with its values
    a: tuple[str, str]
    b: tuple[str, str]
    sign: int = 1


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

    metric: str = "hits@1"  # the headline metric of the models section (:func:`models_section`)
    effects: tuple[Effect, ...] = field(default=())  # the papers' effects, checked per model (:func:`effects_rows`)
    # a label for a record its method left without an error label but whose answer is a known failure
    # (e.g. a reply that only repeats the prompt's exemplar answers), counted with the error labels
    label: Callable[[dict[str, Any]], str | None] | None = None
    # how a cell's name reads in the generic sections (e.g. with the note that it runs on a gold-fact fragment)
    row_label: Callable[[str], str] | None = None

    def cell_name(self, name: str) -> str:
        """A cell's name as the generic sections print it (:attr:`row_label`)."""
        return self.row_label(name) if self.row_label else name

    @property
    def records_root(self) -> Path:
        """The table's records folder: one sub-folder per model, and the extra files."""
        return bench_dir() / "runs" / (self.records or self.name)

    @property
    def records_dir(self) -> Path:
        """The default model's records (the ones a report's main body reads)."""
        return self.model_dir()

    def model_dir(self, model: str | None = None) -> Path:
        """The folder of one model's records (``model``: a :func:`model_key`; default: the default model)."""
        return self.records_root / (model or default_key())

    def models(self) -> list[str]:
        """The models with saved records, the default model first, then by name."""
        root = self.records_root
        found = sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.jsonl.gz"))) \
            if root.is_dir() else []
        d = default_key()
        return ([d] if d in found else []) + [m for m in found if m != d]

    @property
    def output_path(self) -> Path:
        return bench_dir() / self.output

    def cell(self, name: str) -> Cell:
        for c in self.cells:
            if c.name == name:
                return c
        raise UserError(f"table {self.name} has no cell {name!r}; its cells: {', '.join(c.name for c in self.cells)}")

    def saved(self, cell: Cell, model: str | None = None) -> Path:
        return self.model_dir(model) / f"{cell.name}.jsonl.gz"

    def again_file(self, cell: Cell, model: str | None = None) -> Path:
        """Where a re-run of a complete cell (``--again``) saves its records until it is complete: beside
        the cell's records, read by no report (:func:`again_plan`)."""
        return self.model_dir(model) / f"{cell.name}{AGAIN}.jsonl.gz"


#: What every row on GrailQA's fragment says: its KB holds the questions' own gold facts, not all of Freebase
FRAGMENT = "gold-fact fragment: retrieval far easier than full Freebase"

#: The infix of a re-run's files: ``<cell>.again.jsonl`` (live) and ``<cell>.again.jsonl.gz`` (saved).
AGAIN = ".again"


def live_file(cell: Cell, runs: Path | None = None, model: str | None = None, again: bool = False) -> Path:
    """A cell's live run file (``again``: the one of its re-run, :func:`again_plan`)."""
    return live_dir(runs, model) / f"{cell.name}{AGAIN if again else ''}.jsonl"


def live_dir(runs: Path | None = None, model: str | None = None) -> Path:
    """Where ``kgqa bench run`` keeps a model's live run files: ``results/runs/`` for the default model
    (as the cells' commands say), ``results/runs/<model>/`` for any other."""
    runs = Path(runs) if runs is not None else runs_dir()
    return runs if model in (None, default_key()) else runs / model


TABLES: dict[str, Table] = {}


def check_cells(table: Table) -> None:
    """Every cell's declared arguments are a run (:meth:`Cell.spec`): they parse as ``kgqa run`` parses
    them, name the cell's method and dataset, and leave the run file and output options to the table;
    their settings coerce to the method's types, and the method's own check of the run passes. A cell
    that fails is a ValueError naming the table and the cell."""
    from ..evaluate.spec import RunOptions, parse_run_argv

    for c in table.cells:
        try:
            spec, options = parse_run_argv(c.run_args())
            if options != RunOptions():
                raise ValueError("its arguments name the run file or output options (--out, --overwrite, --quiet), "
                                 "which are the table's")
            if (spec.method, spec.dataset) != (c.method, c.dataset):
                raise ValueError(f"its arguments name {spec.method} on {spec.dataset}, the cell {c.method} on "
                                 f"{c.dataset}")
        except (UserError, ValueError) as exc:
            raise ValueError(f"benchmark table {table.name}, cell {c.name}: {exc}") from None


def register(table: Table) -> Table:
    """Add a table to the registry (its name and report output must be new, its cells runs: :func:`check_cells`)."""
    check_cells(table)
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


def cell_status(table: Table, cell: Cell, runs: Path | None = None, model: str | None = None) -> dict[str, Any]:
    """Questions in the saved records of ``model`` (default: the default model) against the planned
    number: ``complete`` when the saved records hold them all. ``present`` also counts the questions of a
    live run file (when ``runs`` is given) — answered, so not to be run again, but not saved yet
    (``unsaved``). Per-question costs from the records themselves (``s/q`` wall time, ``model s/q``
    without the cache's hits, :func:`_model_seconds`; ``tokens/q`` prompt + generated). ``again``: the
    questions a re-run of the cell has answered (None: none under way; ``again saved``: of them, those saved
    beside the records), which no other count includes."""
    from ..evaluate.runner import read_records

    saved = read_records(table.saved(cell, model))
    live = read_records(live_file(cell, runs, model)) if runs is not None else []
    side_path, again_path = table.again_file(cell, model), live_file(cell, runs, model, again=True)
    side = read_records(side_path)
    again_live = read_records(again_path) if runs is not None else []
    under_way = side_path.exists() or (runs is not None and again_path.exists())
    qids = _qids(saved) | _qids(live)
    recs = live if len(_qids(live)) >= len(_qids(saved)) and live else saved
    n = len(recs)
    return {"cell": cell.name, "present": len(qids), "saved": len(_qids(saved)), "live": len(_qids(live)),
            "unsaved": len(qids - _qids(saved)), "saveable": bool(live) and _qids(saved) <= _qids(live),
            "planned": cell.planned,
            "complete": len(_qids(saved)) >= cell.planned,
            "again": len(_qids(side) | _qids(again_live)) if under_way else None, "again saved": len(_qids(side)),
            "calls/q": sum(r["llm"]["calls"] for r in recs) / n if n else None,
            "tokens/q": sum(r["llm"].get("prompt_tokens", 0) + r["llm"].get("completion_tokens", 0)
                            for r in recs) / n if n else None,
            "s/q": sum(r["seconds"] for r in recs) / n if n else None,
            "model s/q": sum(_model_seconds(r) for r in recs) / n if n else None}


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


def _names(rows: list[dict[str, Any]], what: str) -> str:
    return ", ".join(r["cell"] for r in rows) if len(rows) <= 3 else f"{len(rows)} {what} cells"


def estimate(table: Table, runs: Path | None = None, model: str | None = None) -> list[dict[str, Any]]:
    """Per incomplete cell: questions missing, and the LLM calls and hours they should take without
    the LLM cache, from the cell's own records (per-question means of ``model s/q``). A cell with none
    is estimated from peers (``basis`` says which; None when nothing was recorded):

    - when cells of its ``config`` ran on other datasets: their calls per question (a configuration's
      call count: 1 for a no-retrieval baseline, 5–6 with two retrievers), at the seconds per call of the
      cells of its method on its own dataset when there are any (prompt sizes are a dataset's), else at
      their own seconds;
    - else the table's cells of its method on its dataset, else of its method, else other tables' cells
      of its method.

    For a model other than the default (``model``, a :func:`model_key`), a cell without records of its
    own takes the default model's records of the same cell: its calls and tokens per question (what a
    method asks does not depend much on the model) and its seconds (``at_default_rate``: how long the
    default model took here; another model's time depends on its speed, its server and ``--workers``)."""
    other = model not in (None, default_key())
    rows = [dict(cell_status(table, c, runs, model), method=c.method, dataset=c.dataset, config=c.config,
                 optional=bool(c.optional)) for c in table.cells]
    base_rows = {c.name: cell_status(table, c) for c in table.cells} if other else {}
    out = []
    for row in rows:
        missing = max(0, row["planned"] - row["present"])
        if not missing:
            continue
        basis, calls, secs, tokens = row["cell"], row["calls/q"], row["model s/q"], row["tokens/q"]
        at_default = False
        if calls is None and other and base_rows[row["cell"]]["calls/q"] is not None:
            b = base_rows[row["cell"]]
            basis, calls, secs, tokens, at_default = f"{row['cell']} of {default_key()}", b["calls/q"], b["model s/q"], \
                b["tokens/q"], True
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
                    "tokens": None if tokens is None else tokens * missing,
                    "hours": None if secs is None else secs * missing / 3600, "at_default_rate": at_default})
    return out


def format_estimate(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "nothing to run: every cell has its planned questions"
    lines = []
    for r in rows:
        cost = (f"≈ {r['llm_calls']:.0f} LLM calls, ≈ {r['hours']:.1f} h without cache hits (per-question costs: {r['basis']})"
                if r["basis"] else "cost unknown (no records of this method yet)")
        what = (f"re-run: {r['missing']} questions ({r['reason']})" + (f", {r['done']} re-run already" if r.get("done") else "")
                if r.get("reason") else f"{r['missing']} questions missing")
        lines.append(f"  {r['cell']}: {what}, {cost}" + (" (optional)" if r.get("optional") else ""))
    known = [r for r in rows if r["basis"]]
    total = f"total: {sum(r['missing'] for r in rows)} questions"
    if known:
        total += (f", ≈ {sum(r['llm_calls'] for r in known):.0f} LLM calls, ≈ {sum(r['hours'] for r in known):.1f} h"
                  + (" + the cells of unknown cost" if len(known) < len(rows) else ""))
    else:
        total += ", cost unknown (no records to estimate from)"
    toks = [r["tokens"] for r in known if r.get("tokens") is not None]
    if toks:
        total += f", ≈ {sum(toks) / 1e6:.2f} M tokens (prompt + generated)"
    lines.append(total)
    if any(r.get("at_default_rate") for r in rows):
        lines.append(f"  hours are the default model's ({default_key()}) on this machine, one question at a time; "
                     "another model's time depends on its speed, where it is served and --workers "
                     "(calls and tokens per question carry over)")
    opt = [r for r in rows if r.get("optional")]
    if opt:
        need = [r for r in known if not r.get("optional")]
        lines.append(f"  of which the cells the table needs: {sum(r['missing'] for r in rows if not r.get('optional'))} "
                     f"questions, ≈ {sum(r['hours'] for r in need):.1f} h; the {len(opt)} optional cells (deviations "
                     f"beyond what the table needs): {sum(r['missing'] for r in opt)} questions, "
                     f"≈ {sum(r['hours'] for r in opt if r['basis']):.1f} h")
    return "\n".join(lines)


# ---------------------------------------------------------------- reports
def render(table: Table) -> str:
    """The table's report, computed from its saved records only: the table's own report of the default
    model's records, then, when other models have records, :func:`models_section`."""
    text = table.report(Records(table))
    title, _, rest = text.partition("\n")
    text = f"{title}\n\n{header_line(table)}\n{rest}" if title.startswith("# ") else text
    others = [m for m in table.models() if m != default_key() and any(table.saved(c, m).exists() for c in table.cells)]
    return (text + models_section(table, others) if others else text) + predictions_section(table, others)


def predictions_section(table: Table, others: list[str]) -> str:
    """The cells whose saved records keep no predictions (saved by code that dropped them), per model, with how
    many of their records: their scores stand, but their answers cannot be shown or re-scored until re-run.
    Empty when every record keeps its prediction."""
    from .inspect import prediction_kept

    d = default_key()
    cells = []
    for m in (d, *others):
        recs = Records(table, None if m == d else m)
        for c in table.cells:
            rs = recs(c.name)
            lost = sum("prediction" in r and not prediction_kept(r) for r in rs)  # older code's placeholder
            if lost:
                cells.append(f"`{c.name}`" + (f" ({table.cell_name(c.name)[len(c.name):].strip(' ()')})"
                                                     if table.cell_name(c.name) != c.name else "")
                             + f" ({lost} of {len(rs)}" + (f", {m})" if m != d else ")"))
    if not cells:
        return ""
    return ("\n## Records without predictions\n\n"
            "These cells' saved records were made before records kept the method's predictions: their scores "
            "stand, but `kgqa bench show` cannot show those answers and `kgqa bench rescore` cannot re-score them "
            f"until `kgqa bench run {table.name} --again --yes` re-runs the cells (records of the default model; "
            "another model's with `--llm`): " + ", ".join(cells) + ".\n")


def _engine(records: list[dict[str, Any]]) -> str:
    """How a model was served, from its records (``engine``): each engine, with how many records it made when
    more than one engine (or records without one) are in the list; "not recorded" for records made before
    records named their engine."""
    counts = Counter(str(r.get("engine") or "") for r in records)
    old = counts.pop("", 0)
    if not counts:
        return "not recorded"
    if len(counts) == 1 and not old:
        return next(iter(counts))
    parts = [f"{e} ({n} records)" for e, n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))]
    return "; ".join(parts + ([f"not recorded ({old} records)"] if old else []))


def headline(records: list[dict[str, Any]], metric: str) -> str:
    """The metric a cell reports: ``metric`` when its records carry it, else ROUGE-L (open questions)."""
    if any(metric in (r.get("metrics") or {}) for r in records):
        return metric
    return "rouge_l" if any("rouge_l" in (r.get("metrics") or {}) for r in records) else metric


def same_answers(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> tuple[int, int] | None:
    """Of the questions both record lists answered with their predictions kept, how many got the same answer
    (the prediction as a set of normalised answers), and how many there are; None when no question of both
    keeps its prediction (records saved by code that dropped them)."""
    from ..text import normalize_answer
    from .inspect import prediction_kept

    def answers(r: dict[str, Any]) -> frozenset[str]:
        return frozenset(normalize_answer(x) for x in r.get("prediction") or [])

    kept = {r["qid"]: answers(r) for r in b if "prediction" in r and prediction_kept(r)}
    both = [(answers(r), kept[r["qid"]]) for r in a if r.get("qid") in kept and "prediction" in r
            and prediction_kept(r)]
    return (sum(x == y for x, y in both), len(both)) if both else None


def error_counts(records: list[dict[str, Any]], top: int = 3,
                 label: Callable[[dict[str, Any]], str | None] | None = None) -> str:
    """The records' error labels, most frequent first (``query_empty 37, parse_error 2``; at most ``top``, then
    how many more), "none", or "—" without records: where a model cannot follow a method's output format, the
    count says so. ``label`` (a table's :attr:`Table.label`) names records the method left unlabelled."""
    if not records:
        return "—"
    counts = Counter(str(r["error"]) if r.get("error") else label(r) for r in records
                     if r.get("error") or (label is not None and label(r)))
    if not counts:
        return "none"
    ranked = sorted(counts.items(), key=lambda x: (-x[1], x[0]))
    rest = sum(n for _, n in ranked[top:])
    return ", ".join(f"{e} {n}" for e, n in ranked[:top]) + (f", other {rest}" if rest else "")


def partial(records: list[dict[str, Any]], cell: Cell) -> str | None:
    """``partial k/N`` when ``records`` hold some but not all of the cell's planned questions (a run still
    going): its score is over other questions than a complete cell's, so a table prints this instead of a
    number beside one; None when complete or empty."""
    n = len(_qids(records))
    return f"partial {n}/{cell.planned}" if 0 < n < cell.planned else None


def models_rows(table: Table, others: list[str]) -> list[dict[str, Any]]:
    """The model axis of a table as data: per cell that any of ``others`` has run, the headline metric of
    the default model and of each other model (``mean [lo, hi] (n=…)`` in points, ``partial k/N`` for a
    cell still running (:func:`partial`), or "not run yet") and each other model's paired difference from
    the default model on the questions both answered (partial cells too: paired, so on the same questions)."""
    from ..evaluate.report import ci_cell, format_gain, paired_gain

    d = default_key()
    base, recs = Records(table), {m: Records(table, m) for m in others}
    rows = []
    for c in table.cells:
        if not any(recs[m](c.name) for m in others):
            continue
        metric = headline(base(c.name) or next(recs[m](c.name) for m in others if recs[m](c.name)), table.metric)
        row: dict[str, Any] = {"table": table.name, "cell": table.cell_name(c.name), "metric": metric}
        for m, rs in ((d, base(c.name)), *((m, recs[m](c.name)) for m in others)):
            row[m] = partial(rs, c) or ci_cell(rs, metric, empty="not run yet")
        for m in others:
            a, b = recs[m](c.name), base(c.name)
            g = paired_gain(a, b, metric) if a and b else None
            row[f"{m} − {d} (paired)"] = f"{format_gain(g)} (n={g[3]})" if g and g[3] else "—"
        for m in others:
            a, b = recs[m](c.name), base(c.name)
            same = same_answers(a, b) if a and b and metric != "rouge_l" else None
            row[f"{m}: same answer as {d}"] = ("— (free-text answers)" if a and b and metric == "rouge_l" else
                                              f"{same[0]} of {same[1]}" if same else
                                              "— (predictions not kept)" if a and b else "—")
        for m in others:
            row[f"{m}: errors"] = error_counts(recs[m](c.name), label=table.label)
        rows.append(row)
    return rows


def models_coverage(table: Table, others: list[str]) -> list[str]:
    """One line per other model: how many of the table's cells its records complete, how many are partial,
    and which are not run yet (named when few), so a cell a model has not run is never silently absent."""
    lines = []
    for m in others:
        recs = Records(table, m)
        done = [c for c in table.cells if len(_qids(recs(c.name))) >= c.planned]
        part = [c for c in table.cells if partial(recs(c.name), c)]
        missing = [table.cell_name(c.name) for c in table.cells if not recs(c.name)]
        names = ", ".join(f"`{n}`" for n in missing) if len(missing) <= 12 else f"{len(missing)} cells"
        lines.append(f"- {m}: {len(done)} of {len(table.cells)} cells complete, {len(part)} partial"
                     + (f"; not run yet: {names}" if missing else "") + ".")
    return lines


def models_tables(table: Table, others: list[str]):
    """The model axis of a table as two :class:`~kgqa_lib.bench.result_table.ResultTable` values: how each model
    with records was served, and its cells beside the default model's (:func:`models_rows`)."""
    from .result_table import table as result_table

    d = default_key()
    served = [(m, _engine([r for c in table.cells for r in Records(table, None if m == d else m)(c.name)]))
              for m in (d, *others)]
    cols = ["cell", "metric", d, *others, *(f"{m} − {d} (paired)" for m in others),
            *(f"{m}: same answer as {d}" for m in others), *(f"{m}: errors" for m in others)]
    return (result_table("served_by", "How each model was served", ["model", "served by"], served),
            result_table("models", f"{table.name}: every model with records, cell by cell", cols,
                         [[r[k] for k in cols] for r in models_rows(table, others)]))


def effect_verdict(gain: tuple[float, float, float, int] | None, sign: int) -> str:
    """``holds`` when the paired 95% CI lies on the paper's side of 0, ``reversed`` when on the other side,
    ``unclear`` when it spans 0, ``no difference`` when every question scored the same in both runs (an interval
    of [0, 0]); ``not run`` without questions both runs answered."""
    if gain is None or not gain[3]:
        return "not run"
    if gain[0] == gain[1] == gain[2] == 0:
        return "no difference"
    lo, hi = sign * gain[1], sign * gain[2]
    return "holds" if min(lo, hi) > 0 else "reversed" if max(lo, hi) < 0 else "unclear"


def effect_difference(e: Effect, model: str, base: str, metric: str, seed: int = 0) -> tuple[float, float, float, int] | None:
    """How much an :class:`Effect` changes from model ``base`` to ``model``: per question that all four runs
    answered, ``(a − b at model) − (a − b at base)``, with a percentile-bootstrap 95% CI of the mean (points
    as fractions, like :func:`~kgqa_lib.evaluate.report.paired_gain`); None when no question is shared."""
    from ..evaluate.metrics import bootstrap_ci

    def per_q(m: str) -> dict[str, float]:
        a, b = Records(get_table(e.a[0]), m)(e.a[1]), Records(get_table(e.b[0]), m)(e.b[1])
        bv = {r["qid"]: (r.get("metrics") or {}).get(metric) for r in b}
        return {r["qid"]: r["metrics"][metric] - bv[r["qid"]] for r in a
                if bv.get(r["qid"]) is not None and (r.get("metrics") or {}).get(metric) is not None}

    x, y = per_q(model), per_q(base)
    diffs = [x[q] - y[q] for q in sorted(x.keys() & y.keys())]
    if not diffs:
        return None
    mean, lo, hi = bootstrap_ci(diffs, seed=seed)
    return mean, lo, hi, len(diffs)


def across_models(verdicts: dict[str, str]) -> str:
    """What an effect's verdicts say together: ``flips`` when it holds at one model and is reversed at
    another, else the shared verdict or the verdicts by model."""
    seen = sorted(set(verdicts.values()))
    if not seen:
        return "not run"
    if len(verdicts) == 1:
        return f"{seen[0]} ({next(iter(verdicts))} only)"
    by = "; ".join(f"{v}: {', '.join(m for m in verdicts if verdicts[m] == v)}" for v in seen)
    if {"holds", "reversed"} <= set(seen):
        return f"flips ({by})"
    return f"{seen[0]} with every model" if len(seen) == 1 else by


def effects_rows(table: Table, models: list[str]) -> list[dict[str, Any]]:
    """The table's :class:`Effect` values as data, per model of ``models`` (model keys): ``a − b`` in points,
    paired on the questions both answered, with its 95% CI, n and :func:`effect_verdict`; in ``across`` what
    the verdicts say together (:func:`across_models`); and, per model after the first, how the effect changes
    from the first model (:func:`effect_difference`, on the questions all four runs answered)."""
    from ..evaluate.report import format_gain, paired_gain

    rows = []
    for e in table.effects:
        row: dict[str, Any] = {"effect": e.claim, "paper": e.paper,
                               "cells": f"{get_table(e.a[0]).cell_name(e.a[1])} − {get_table(e.b[0]).cell_name(e.b[1])}"}
        verdicts = {}
        metric = table.metric
        for m in models:
            a, b = Records(get_table(e.a[0]), m)(e.a[1]), Records(get_table(e.b[0]), m)(e.b[1])
            if a or b:
                metric = headline(a or b, table.metric)
            g = paired_gain(a, b, headline(a or b, table.metric)) if a and b else None
            v = effect_verdict(g, e.sign)
            running = [x for x in (partial(a, get_table(e.a[0]).cell(e.a[1])), partial(b, get_table(e.b[0]).cell(e.b[1])))
                       if x]
            row[m] = (f"{format_gain(g)} (n={g[3]}): {v}" if v != "not run" else v) + (
                f" ({', '.join(running)}: not counted across models yet)" if running and v != "not run" else "")
            if v != "not run" and not running:
                verdicts[m] = v
        row["across"] = across_models(verdicts)
        for m in models[1:]:
            g = effect_difference(e, m, models[0], metric)
            row[f"{m} − {models[0]}"] = f"{format_gain(g)} (n={g[3]})" if g else "—"
        rows.append(row)
    return rows


def effects_table(table: Table, models: list[str]):
    """:func:`effects_rows` as a :class:`~kgqa_lib.bench.result_table.ResultTable` (None: no effects)."""
    from .result_table import table as result_table

    if not table.effects:
        return None
    cols = ["effect", "paper", "cells", *models, "across", *(f"{m} − {models[0]}" for m in models[1:])]
    return result_table("effects", f"{table.name}: the papers' effects per model", cols,
                        [[r[k] for k in cols] for r in effects_rows(table, models)])


def models_section(table: Table, others: list[str]) -> str:
    """Every model with records beside the default one, cell by cell (:func:`models_tables`), with how each
    model was served, as the Markdown section every report ends with when another model has records."""
    d = default_key()
    served, models = models_tables(table, others)
    lines = ["", "## Models", "",
             f"The tables above are the default model's ({d}). Each other model with saved records, cell by cell: "
             "the row's metric (column `metric`) in points with a 95% bootstrap CI — or `partial k/N` while a cell "
             f"is still running, its score being over other questions — and its paired difference from {d} on the "
             "questions both answered (95% paired bootstrap CI). Answers of two models, or of one model served "
             "by two engines, differ for reasons beyond the method; read a difference as the pair's, not the "
             "method's alone. The last columns count the questions whose answer (the prediction as a set of "
             "normalised answers; not for free-text answers scored by ROUGE-L) is the same as the default model's, "
             "of those both answered with their predictions kept, and the other model's error labels (a reply it "
             "could not give in the method's format is counted there, never fatal).", "", served.markdown(), "",
             models.markdown(), "", "Cells per model:", "", *models_coverage(table, others)]
    effects = effects_table(table, [d, *others])
    if effects is not None:
        lines += ["", "### The papers' effects at each model", "",
                  "Each effect the paper reports, as a paired difference between two cells (points, 95% paired "
                  "bootstrap CI, on the questions both answered), for every model: *holds* when the interval lies on "
                  "the paper's side of 0, *reversed* when it lies on the other side, *unclear* when it spans 0 (*no "
                  "difference* when every question scored the same in both cells); "
                  "*flips* when it holds at one model and is reversed at another. The last column is how much the "
                  f"effect changes from {d} to the other model, on the questions all four runs answered (95% "
                  "bootstrap CI): an interval that excludes 0 means the model changes the effect.", "",
                  effects.markdown()]
    return "\n".join(lines) + "\n"


def header_line(table: Table) -> str:
    """The line under a report's title: the model its tables show, how it was served, and the other models
    with records (their section), so the model is never left for the reader to guess."""
    d = default_key()
    served = _engine([r for c in table.cells for r in Records(table)(c.name)])
    others = [m for m in table.models() if m != d and any(table.saved(c, m).exists() for c in table.cells)]
    return (f"Model: `{d}` (served by: {served})"
            + (f"; other models with records: {', '.join(f'`{m}`' for m in others)} (section *Models*)." if others
               else "; no other model has records here."))


def model_label(key: str) -> str:
    """A model key as a reader names the model: an embedded model's short name (``qwen2.5-coder-1.5b-instruct-q4_k_m``
    → ``qwen2.5-coder-1.5b``); any other key unchanged."""
    from ..llm.chat import model_slug
    from ..llm.models import LOCAL_MODELS

    return next((spec.name for spec in LOCAL_MODELS.values() if model_slug(spec.model_id) == key), key)


def labelled(frame):
    """``frame`` with every embedded model's key, in column names and cells, replaced by :func:`model_label`
    (notebook tables; the reports keep the keys, which name the records' folders)."""
    from ..llm.chat import model_slug
    from ..llm.models import LOCAL_MODELS

    keys = sorted((model_slug(s.model_id) for s in LOCAL_MODELS.values()), key=len, reverse=True)

    def short(text):
        if not isinstance(text, str):
            return text
        for k in keys:
            text = text.replace(k, model_label(k))
        return text

    return frame.rename(columns=short).apply(lambda col: col.map(short)) if len(frame) else frame.rename(columns=short)


def models_frame(names: list[str] | None = None, models: list[str] | None = None, answers: bool = False,
                 only: bool = False, short: bool = True):
    """The model axis of several tables as one DataFrame (for notebooks): a row per cell that a model
    other than the default has records for, a column per model (``models``: model keys or LLM names
    shown even without records, reading "not run"; with ``only``, those models alone beside the default,
    else every model with records too), and the paired differences; with ``answers``, also the
    same-answer counts and error labels of the reports' *Models* section; with ``short`` (the default) the
    embedded models by their short names (:func:`labelled`)."""
    import pandas as pd

    chosen = [model_key(m) if (":" in m or m == DEFAULT_LLM) else m for m in (models or [])]
    rows = []
    for t in tables(names):
        others = [m for m in dict.fromkeys([*([] if only else t.models()), *chosen]) if m != default_key()]
        rows += models_rows(t, others) if others else []
        for m in chosen:
            if m != default_key() and not any(t.saved(c, m).exists() for c in t.cells):
                rows.append({"table": t.name, "cell": "(every cell)", "metric": t.metric, m: "not run"})
    frame = pd.DataFrame(rows)
    if not answers:
        frame = frame[[c for c in frame.columns if not (": same answer as " in c or c.endswith(": errors"))]]
    frame = frame.fillna("") if not frame.empty else pd.DataFrame(columns=["table", "cell", "metric", default_key()])
    return labelled(frame) if short else frame


def effects_frame(names: list[str] | None = None, models: list[str] | None = None, brief: bool = False,
                  short: bool = True):
    """The papers' effects at each model (:func:`effects_rows`) of several tables as one DataFrame (for
    notebooks): a row per effect, a column per model (the default model, then ``models`` — model keys or LLM
    names, "not run" without records — or every model with records), the verdicts together (``across``)
    and how much each other model changes the effect; ``brief`` leaves out the paper's values and the cells (the
    reports' *Models* sections have them); with ``short`` (the default) the embedded models by their short names."""
    import pandas as pd

    d = default_key()
    chosen = [model_key(m) if (":" in m or m == DEFAULT_LLM) else m for m in (models or [])]
    rows, seen = [], set()
    for t in tables(names):
        if not t.effects:
            continue
        others = [m for m in dict.fromkeys(chosen or t.models()) if m != d]
        rows += [{"table": t.name, **r} for e, r in zip(t.effects, effects_rows(t, [d, *others]))
                 if (e.a, e.b) not in seen]  # an effect two tables declare (Keqing − KB-BINDER) once
        seen |= {(e.a, e.b) for e in t.effects}
    frame = pd.DataFrame(rows).fillna("") if rows else pd.DataFrame(columns=["table", "effect", d])
    frame = frame.drop(columns=[c for c in ("paper", "cells") if c in frame.columns]) if brief else frame
    return labelled(frame) if short else frame


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` whole (``<name>.tmp-<pid>`` + ``os.replace``): a write stopped by a kill
    or a full disk leaves the old file, never a truncated one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_report(table: Table) -> Path:
    path = table.output_path
    write_text(path, render(table))
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
MAX_KEPT_ANSWERS = 200  # answers of one prediction kept in a stripped record
MAX_KEPT_CHARS = 400  # characters of one kept answer or query line


def kept_prediction(r: dict[str, Any]) -> list[str]:
    """What a stripped record keeps of a prediction: the answers the method returned (its own output,
    not benchmark text), at most :data:`MAX_KEPT_ANSWERS` of at most :data:`MAX_KEPT_CHARS` characters
    each (a record counts what was cut: ``prediction_cut``), so a reviewer can read a wrong answer
    and re-score it under another metric (``kgqa bench rescore``)."""
    return [str(p)[:MAX_KEPT_CHARS] for p in (r.get("prediction") or [])[:MAX_KEPT_ANSWERS]]


def kept_text(value: Any, question: str | None = None) -> str | None:
    """A piece of a method's own output kept in a stripped record (a query, a draft, a Cypher sketch): at most
    :data:`MAX_KEPT_CHARS` characters, and None when it repeats the question's text (a small model may echo its
    prompt; the question's text is never saved)."""
    if value is None:
        return None
    from ..text import normalize_answer

    text = str(value)
    q = normalize_answer(question or "")
    if q and len(q) > 8 and q in normalize_answer(text):
        return None
    return text[:MAX_KEPT_CHARS]


def prediction_cut(r: dict[str, Any]) -> int:
    """Answers or characters :func:`kept_prediction` left out (0 for almost every record)."""
    pred = r.get("prediction") or []
    return max(0, len(pred) - MAX_KEPT_ANSWERS) + sum(len(str(p)) > MAX_KEPT_CHARS for p in pred[:MAX_KEPT_ANSWERS])


def keep_prediction(out: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
    """``out`` (a stripped record) with the prediction of ``r`` kept (:func:`kept_prediction`)."""
    out["prediction"] = kept_prediction(r)
    cut = prediction_cut(r)
    if cut:
        out["prediction_cut"] = cut
    return out


def save(table: Table, runs: Path | None = None, cells: list[Cell] | None = None,
         model: str | None = None, again: bool = False) -> dict[str, int]:
    """Keep the live run files of ``cells`` (default: all) of ``model`` as saved records, stripped by the
    table's strip function; returns records saved per file. Cells without a live run file are left alone.
    ``again``: the live files of their re-runs, saved beside the records (:meth:`Table.again_file`)."""
    from ..evaluate.runner import save_runs

    paths = [live_file(c, runs, model, again) for c in (cells or table.cells)]
    strip = table.strip
    # records restored from the saved copies (a resumed run on another machine) are stripped already:
    # stripping them again would drop what only the full record could give
    transform = None if strip is None else (lambda r: r if r.get("stripped") else strip(r))
    return save_runs([p for p in paths if p.exists()], table.model_dir(model), transform)


def restore(table: Table, runs: Path | None = None, model: str | None = None) -> dict[str, str]:
    """Unpack the saved records of ``model`` into its live folder (an existing run file is kept: it is
    newer), so a run of the same command skips the questions already done."""
    runs = live_dir(runs, model)
    runs.mkdir(parents=True, exist_ok=True)
    out = {}
    for c in table.cells:
        g, target = table.saved(c, model), runs / f"{c.name}.jsonl"
        if not g.exists():
            continue
        if target.exists():
            out[target.name] = "kept (exists)"
        else:
            target.write_bytes(gzip.decompress(g.read_bytes()))
            out[target.name] = "restored"
    return out


def unsaved(table: Table, runs: Path | None = None, model: str | None = None,
            cells: list[str] | None = None) -> list[str]:
    """Cells (of ``cells``, default all) whose live run file holds answers their saved records do not,
    and holds every saved one (so saving it loses nothing): what :func:`run` saves before anything else."""
    out = []
    for c in table.cells:
        if cells is None or c.name in cells:
            st = cell_status(table, c, runs if runs is not None else runs_dir(), model)
            if st["unsaved"] and st["saveable"]:
                out.append(c.name)
    return out


# ---------------------------------------------------------------- re-running complete cells (--again)
def lacks_predictions(records: list[dict[str, Any]]) -> bool:
    """Whether saved records were stripped by code that dropped the method's predictions (a record without
    ``prediction``, or with the placeholder older code left, :func:`kgqa_lib.bench.inspect.prediction_kept`)."""
    from .inspect import prediction_kept

    return any("prediction" not in r or not prediction_kept(r) for r in records)


def again_reason(table: Table, cell: Cell, model: str | None = None) -> str:
    """Why a complete cell is re-run, from its saved records: they lack predictions, or they were made with
    prompts that have changed since, or by the earlier code the table's provenance names."""
    from ..llm.prompting import load_prompt

    recs = Records(table, model)(cell.name)
    if lacks_predictions(recs):
        return "its records lack predictions"
    used: dict[str, str] = {}
    for r in recs:
        used.update((r.get("config") or {}).get("prompts") or {})
    changed = []
    for name, sha in sorted(used.items()):
        try:
            if load_prompt(name).sha != sha:
                changed.append(name)
        except Exception:  # a prompt file that is gone: changed too
            changed.append(name)
    if changed:
        return f"made by an earlier version of its prompts: {', '.join(changed)}"
    if table.provenance:
        return "made by an earlier version of the code, as the table's provenance says"
    return "as asked: its records keep predictions and were made with today's prompts"


def again_plan(table: Table, runs: Path | None = None, model: str | None = None,
               cells: list[str] | None = None) -> list[dict[str, Any]]:
    """The complete cells ``kgqa bench run TABLE --again`` re-runs from scratch with today's code, for
    ``model``: the named ``cells``, else every complete cell whose saved records lack predictions
    (:func:`lacks_predictions`). Per cell, as :func:`estimate` gives it, the questions still to re-run
    (``missing``; ``done``: already re-run, in its live or side file), ``reason`` (:func:`again_reason`) and
    the cost at the per-question means of its own saved records. A named cell that is not complete is a
    :class:`~kgqa_lib.errors.UsageError` (it is run without ``--again``).

    The re-run writes its own live file (:func:`live_file`, ``again``), saved beside the records
    (:meth:`Table.again_file`) by :func:`run`, which reports keep reading the records until every planned
    question is answered (:func:`finish_again`); the same command resumes it, on another machine too."""
    chosen = [table.cell(n) for n in cells] if cells else list(table.cells)
    status = {c.name: cell_status(table, c, runs, model) for c in chosen}
    if cells:
        bad = [c for c in chosen if not status[c.name]["complete"]]
        if bad:
            names = " ".join(c.name for c in bad)
            counts = ", ".join(f"{c.name} {status[c.name]['saved']}/{c.planned}" for c in bad)
            raise UsageError(f"--again re-runs complete cells only, and {counts} {'is' if len(bad) == 1 else 'are'} "
                             f"not complete: run {'it' if len(bad) == 1 else 'them'} without --again "
                             f"(`kgqa bench run {table.name} --cells {names} --yes`)")
    else:
        chosen = [c for c in chosen if status[c.name]["complete"] and lacks_predictions(Records(table, model)(c.name))]
    out = []
    for c in chosen:
        st, done = cell_status(table, c, None, model), status[c.name]["again"] or 0  # costs: the saved records'
        missing = max(0, c.planned - done)
        out.append({"cell": c.name, "missing": missing, "done": done, "reason": again_reason(table, c, model),
                    "basis": c.name if st["calls/q"] is not None else None, "optional": bool(c.optional),
                    "llm_calls": None if st["calls/q"] is None else st["calls/q"] * missing,
                    "tokens": None if st["tokens/q"] is None else st["tokens/q"] * missing,
                    "hours": None if st["model s/q"] is None else st["model s/q"] * missing / 3600,
                    "at_default_rate": False})
    return out


def restore_again(table: Table, cells: list[Cell], runs: Path | None = None, model: str | None = None) -> list[str]:
    """Unpack the side files of ``cells``' re-runs (a re-run begun on another machine) into their live
    files, where those do not exist yet (an existing one is newer); the names of the cells restored."""
    out = []
    for c in cells:
        side, target = table.again_file(c, model), live_file(c, runs, model, again=True)
        if side.exists() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(gzip.decompress(side.read_bytes()))
            out.append(c.name)
    return out


def finish_again(table: Table, cell: Cell, runs: Path | None = None, model: str | None = None) -> int | None:
    """When a cell's re-run has answered every planned question: save it, put its side file in place of the
    cell's records (``os.replace``: a reader sees the old records or the new, never a mix) and its live file in
    place of the cell's live file (whose records are the replaced ones), and rewrite the report; returns the
    questions of the new records. None (nothing changed but the side file) while questions remain."""
    from ..evaluate.runner import read_records

    again = live_file(cell, runs, model, again=True)
    if again.exists():
        save(table, runs, [cell], model, again=True)
    side = table.again_file(cell, model)
    n = len(_qids(read_records(side)))
    if not side.exists() or n < cell.planned:
        return None
    os.replace(side, table.saved(cell, model))
    if again.exists():
        os.replace(again, live_file(cell, runs, model))
    write_report(table)
    return n


class Interrupted(KeyboardInterrupt):
    """:func:`run` was stopped by a signal (``signum``: SIGTERM or SIGINT) after saving what its cells
    answered. A KeyboardInterrupt, as Ctrl-C is."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    """While inside: SIGTERM, and SIGINT where Python's own handler has it, raise :class:`Interrupted`
    (in the main thread only; elsewhere signals stay as they are)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    old = {}
    for sig, usual in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
        if signal.getsignal(sig) is usual:  # a signal ignored by whoever started us stays ignored
            old[sig] = signal.signal(sig, stop)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


@contextmanager
def _signals_held() -> Iterator[None]:
    """SIGTERM and SIGINT ignored while inside (main thread): stopping the cells and saving what they
    answered is not cut short by a second signal."""
    import threading

    held = {}
    if threading.current_thread() is threading.main_thread():
        held = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)


def _stop(procs: list[subprocess.Popen], grace: float = 30.0) -> None:
    """End the cells' ``kgqa run`` processes (SIGTERM: each loses at most its question in flight; SIGKILL
    after ``grace`` seconds) and wait for them."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as fh:
            return sum(1 for _ in fh)
    except FileNotFoundError:
        return 0


def run(table: Table, runs: Path | None = None, batch: int = 10, poll: float = 15.0,
        echo: Callable[[str], None] = print, cells: list[str] | None = None, procs: int = 1,
        llm: str | None = None, workers: int | None = None, again: bool = False) -> int:
    """Run the missing questions of every incomplete cell with its recorded command (resuming from
    the restored records), saving the stripped records and rewriting the report after every
    ``batch`` new records and at the end. Returns 0, or the first failing run's exit code (no new
    cell starts after a failure; cells already running finish).

    ``procs`` > 1 runs that many cells at once, each ``kgqa run`` with ``cores // procs`` threads for
    the embedded model (``KGQA_LLM_THREADS``): on a CPU, one-thread decoding in two processes gives
    more tokens per second in all than two threads in one (the README's measurement), and cells are
    independent run files, so results do not depend on it.

    ``llm`` runs the cells with another model (:func:`with_llm`; its records and live files are its own,
    :func:`live_dir`), ``workers`` > 1 runs that many questions of a cell at once (an endpoint's
    concurrency; ``kgqa run --workers``).

    Answers of live run files not saved yet (a run stopped before it could save) are saved first
    (:func:`unsaved`). Each cell's process ends with this one (:func:`kgqa_lib.procs.child_env`). On
    SIGTERM or Ctrl-C (and any other exception), the running cells are stopped, what they answered is
    saved and the report rewritten, then :class:`Interrupted` (the exception) is raised: the same call
    resumes.

    ``again`` re-runs complete cells instead (:func:`again_plan`: the named ``cells``, else those whose
    records lack predictions) into live files of their own, saved beside the records every ``batch`` and
    put in their place once complete (:func:`finish_again`)."""
    model = model_key(llm) if llm else None
    if model == default_key():
        model = None
    base = Path(runs) if runs is not None else runs_dir()
    if again:
        queue = []
        for row in again_plan(table, base, model, cells):
            c = table.cell(row["cell"])
            if restore_again(table, [c], base, model):
                echo(f"{c.name}: its re-run restored from beside the records ({row['done']} questions)")
            n = finish_again(table, c, base, model)  # (a re-run that answered everything before it was stopped)
            if n is None:
                queue.append(c)
            else:
                echo(f"{c.name}: re-run complete ({n} questions); its records are replaced and the report rewritten")
    else:
        for name, what in restore(table, base, model).items():
            if what == "restored":
                echo(f"{name}: restored from {table.model_dir(model).relative_to(results_dir().parent)}")
        behind = unsaved(table, base, model, cells)
        if behind:
            counts = save(table, base, [table.cell(n) for n in behind], model)
            write_report(table)
            done = ", ".join(f"{n} ({counts[n + '.jsonl']} records)" for n in behind)
            echo(f"saved the answers of {done}, which were not saved yet")
        queue = [c for c in table.cells
                 if (cells is None or c.name in cells) and not cell_status(table, c, base, model)["complete"]]
    env = child_env()  # each cell's `kgqa run` ends when this process ends, however it ends
    if procs > 1:
        from ..llm.chat import default_threads

        env["KGQA_LLM_THREADS"] = str(max(1, default_threads() // procs))
    active: dict[str, list[Any]] = {}  # cell name -> [cell, process, run file, lines when last saved]
    failed = 0
    with _signals_interrupt():
        try:
            failed = _run_cells(table, base, model, queue, active, batch, poll, echo, procs, llm, workers, env, again)
        except BaseException as exc:
            with _signals_held():
                _stop([proc for _, proc, _, _ in active.values()])
                if active:
                    save(table, base, [c for c, _, _, _ in active.values()], model, again)
                write_report(table)
            if isinstance(exc, Interrupted):
                echo(f"{table.name}: stopped by {signal.Signals(exc.signum).name}; the answers so far are saved "
                     f"({', '.join(active) or 'no cell was running'}"
                     f"{', beside the records: the records stay as they were' if again else ''}); "
                     "the same command resumes")
            raise
    return failed


def _run_cells(table: Table, base: Path, model: str | None, queue: list[Cell], active: dict[str, list[Any]],
               batch: int, poll: float, echo: Callable[[str], None], procs: int, llm: str | None,
               workers: int | None, env: dict[str, str], again: bool = False) -> int:
    """:func:`run`'s loop: start the queued cells (``procs`` at once), save every ``batch`` new records
    and when a cell ends; ``active`` holds the running ones (for :func:`run` to stop and save). ``again``:
    the cells are re-runs (:func:`again_plan`), saved beside the records and put in their place when
    complete (:func:`finish_again`)."""
    failed = 0
    while queue or active:
        while queue and len(active) < max(1, procs) and not failed:
            c = queue.pop(0)
            out = live_file(c, base, model, again)
            spec = c.spec(llm, workers)
            argv = [sys.executable, "-m", "kgqa_lib.cli", "run", *spec.to_argv(out)]
            echo(f"$ {spec.command(str(out) if model else f'results/runs/{out.name}')}")
            proc = subprocess.Popen(argv, env=env)
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
                save(table, base, [c], model, again)
                write_report(table)
                active[name][3] = lines
            if code is not None:
                del active[name]
                if code:
                    echo(f"{c.name}: `kgqa run` stopped with exit code {code}; the records so far are saved"
                         + (" beside the records, which stay as they were" if again else ""))
                    failed = failed or code
                elif again:
                    n = finish_again(table, c, base, model)
                    echo(f"{c.name}: re-run complete ({n} questions); its records are replaced and the report rewritten"
                         if n is not None else f"{c.name}: its re-run ended with fewer than its {c.planned} planned "
                         "questions; saved beside the records, which stay as they were (the same command resumes)")
    return failed


def completeness(table: Table, runs: Path | None = None, model: str | None = None) -> dict[str, Any]:
    """How far a table is for one model (default: the default model): its cells (``rows``: :func:`cell_status`
    each), the complete ones, the questions saved of those planned, and the same for the cells the table
    needs (``Cell.optional`` ones out)."""
    rows = [cell_status(table, c, runs, model) for c in table.cells]
    needed = [r for r, c in zip(rows, table.cells) if not c.optional]
    return {"rows": rows, "cells": len(rows), "complete": sum(r["complete"] for r in rows),
            "questions": sum(min(r["saved"], r["planned"]) for r in rows), "planned": sum(r["planned"] for r in rows),
            "needed": len(needed), "needed complete": sum(r["complete"] for r in needed)}


def completeness_line(table: Table, runs: Path | None = None, k: dict[str, Any] | None = None) -> str:
    """``55/90 cells complete, 6134/9597 questions (cells the table needs: 52/78 complete)``
    (``k``: the table's :func:`completeness`, when the caller has it)."""
    k = k or completeness(table, runs)
    return (f"{k['complete']}/{k['cells']} cells complete, {k['questions']}/{k['planned']} questions"
            + (f" (cells the table needs: {k['needed complete']}/{k['needed']} complete)" if k["needed"] < k["cells"] else ""))


def status_table(table: Table, runs: Path | None = None, models: list[str] | None = None) -> list[str]:
    """Lines of ``kgqa bench list`` for one table: per model with records (or named in ``models``), its
    completeness; the cells of the default model always, of another model those it has begun."""
    d = default_key()
    shown = [d] + [m for m in dict.fromkeys([*table.models(), *(models or [])]) if m != d]
    lines = [f"{table.name}: {table.title} → results/bench/{table.output}"
             + (f"; {table.source}" if table.source else "")]
    if table.provenance:
        lines.append(f"  records of {d}: {table.provenance}")
    w = max(len(c.name) for c in table.cells)
    for m in shown:
        k = completeness(table, runs, m)
        lines.append(f"  model {m}: {completeness_line(table, k=k)}")
        where = "results/runs/" if m == d else f"results/runs/{m}/"
        for r, c in zip(k["rows"], table.cells):
            if m != d and not r["present"]:
                continue
            mark = "✓" if r["complete"] else " "
            cost = "" if r["s/q"] is None else f"  {r['calls/q']:.2f} calls/q, {r['s/q']:.1f} s/q"
            live = ""
            if r["unsaved"]:
                live = f"  ({r['unsaved']} more answered in {where}, not saved yet" + (
                    f": `kgqa bench run {table.name}{'' if m == d else ' --llm …'} --yes` saves them)"
                    if r["saveable"] else ")")
            if r["again"] is not None:
                more = r["again"] - r["again saved"]
                live += (f"  (re-running: {r['again saved']}/{r['planned']}, saved beside the records"
                         + (f"; {more} more answered in {where}" if more else "") + ")")
            opt = f"  optional: {c.optional}" if c.optional else ""
            lines.append(f"    {mark} {r['cell']:<{w}}  {r['saved']:>4}/{r['planned']:<4}{cost}{live}{opt}")
    return lines


def read_json(path: Path, remedy: str = "") -> dict[str, Any]:
    """A JSON file under ``results/bench/`` ({} when missing); one that does not parse (cut short, edited)
    is a :class:`~kgqa_lib.errors.UserError` naming it and what to do (``remedy``: how to write it again)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        text = None
    try:
        if text is None:
            raise ValueError("not UTF-8 text")
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
    except ValueError as exc:
        where = f"line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise UserError(f"{path} is not a valid JSON file ({where}; cut short or edited): restore it from git "
                        f"(`git checkout -- {path}`){' or ' + remedy if remedy else ''}") from None
    return data


def write_json(path: Path, data: dict[str, Any]) -> None:
    write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")

