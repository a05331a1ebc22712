"""The ``kgqa`` command: run methods, report, reproduce the notebooks, inspect caches."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from .errors import InfrastructureError, UsageError, UserError
from .evaluate.spec import (ArgvParser, add_run_arguments, no_file_above as _no_file_above, out_file as _out_file,
                            positive_int as _positive_int)


# Argument checks are argparse types: a bad value is one line on stderr, exit code 2. Those of
# `kgqa run` live with the run's value (kgqa_lib.evaluate.spec): one parser for the CLI, the benchmark
# cells and the sharded runs.
def _out_folder(text: str) -> str:
    """``--out FOLDER``: a folder, or a path where one can be created."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder: give a folder (created when missing)")
    _no_file_above(path, text)
    return text


def _metric_list(text: str) -> list[str]:
    """``--metrics hits@1,f1`` → ["hits@1", "f1"]: the metrics run records hold."""
    from .evaluate.metrics import FACTOID_KEYS, OPEN_KEYS

    names = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in names if m not in FACTOID_KEYS + OPEN_KEYS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown metric {(unknown or [text])[0]!r}; known: "
                                         f"{', '.join(FACTOID_KEYS)} (factoid questions), {', '.join(OPEN_KEYS)} "
                                         "(open questions)")
    return names


def _existing_file(text: str) -> str:
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"no run file {text!r}" + (" (a folder)" if Path(text).is_dir() else "")
                                         + ": give the path of a .jsonl or .jsonl.gz run file")
    return text


def _parse_set(items: list) -> dict:
    """Notebook parameters (``kgqa reproduce --set``): values are Python literals, else strings."""
    from .reproduce import parse_set

    return parse_set(items)


def cmd_run(args: argparse.Namespace) -> int:
    """``kgqa run``: its arguments → a :class:`~kgqa_lib.evaluate.spec.RunSpec` (checked) → the one context
    builder (:func:`~kgqa_lib.evaluate.spec.build_context`) → the runner. Everything the command names is
    checked before any cache or run file is opened (errors: see main())."""
    from .evaluate.report import format_table, summarize
    from .evaluate.runner import RunIncomplete
    from .evaluate.spec import RunSpec, build_context

    if args.help_settings:
        print(settings_help(args.method))
        return 0
    built = build_context(RunSpec.from_args(args))
    out = args.out or built.default_out()
    try:
        records = built.run(out, overwrite=args.overwrite, progress=not args.quiet)
    except RunIncomplete as exc:  # endpoint down / replay miss: those questions have no record (exit 3, not
        print(f"error: {exc} (run file: {out})", file=sys.stderr)  # 2: the command was right, the server was not)
        return 3
    import pandas as pd

    llm = built.ctx.llm
    if records.rescored:
        print(f"note: {records.rescored} record(s) re-scored from their stored prediction: their question or "
              "gold answers changed since they were run", file=sys.stderr)
    if getattr(llm.backend, "prefix_cache", 0) and llm.backend.stats["calls"]:  # local?prefix_cache=N: what it saved
        st = llm.backend.prefix_stats()
        print(f"note: prefix cache ({st['prefix_cache']} states): {st['calls']} live call(s), {st['prompt_tokens']} "
              f"prompt tokens, {st['evaluated']} evaluated, {st['reused']} reused, of which {st['reused_from_states']} "
              f"from {st['state_loads']} loaded state(s) ({st['state_seconds']} s saving/loading)", file=sys.stderr)
    if getattr(llm.backend, "batches", False) and llm.backend.stats["calls"]:  # local?batch=N: what went together
        st = llm.backend.prefix_stats()
        print(f"note: samples decoded together (batch {llm.backend.batch}): {st['together']} of {st['calls']} live "
              f"call(s), in {st['decode_calls']} decode call(s) of {st['decode_rows']} rows after their prompts; "
              f"{st['evaluated']} of {st['prompt_tokens']} prompt tokens evaluated", file=sys.stderr)
    print(format_table(pd.DataFrame([summarize(records)])))
    return 0


def settings_help(method: str) -> str:
    """``kgqa run --method X --help-settings``: every setting with its type, default and help."""
    from .methods import method_settings

    cls = method_settings(method)
    rows = cls.describe()
    w_name, w_type = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    w_def = max(len(repr(r[2])) for r in rows)
    lines = [f"settings of {method} (kgqa run --method {method} --set KEY=VALUE; bools: true/false/yes/no/1/0):"]
    lines += [f"  {n:<{w_name}}  {t:<{w_type}}  {d!r:<{w_def}}  {h}" for n, t, d, h in rows]
    return "\n".join(lines)


def cmd_report(args: argparse.Namespace) -> int:
    from .evaluate.report import print_report
    from .paths import results_dir

    paths = args.runs or sorted((results_dir() / "runs").glob("*.jsonl"))
    if not paths:
        print("no run files given and none under results/runs/", file=sys.stderr)
        return 2
    print_report(paths, args.metrics, args.out)
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from .llm.chat import LLMCache, read_merge_sources

    if args.action == "merge":
        missing = [p for p in args.sources if not Path(p).is_file()]
        if missing:
            raise UsageError(f"no cache file {missing[0]!r}: give shard caches (llm_cache.sqlite) or transcripts (.jsonl)")
        if args.into is not None:  # a path typed by the user is never moved aside and rebuilt, as our own cache is
            into = Path(args.into)
            if into.is_dir():
                raise UsageError(f"--into {args.into!r} is a folder: give the path of an llm_cache.sqlite (created "
                                 "when missing)")
            if into.is_file() and into.stat().st_size:
                with open(into, "rb") as fh:
                    if fh.read(16) != b"SQLite format 3\x00":
                        raise UsageError(f"--into {args.into!r} is not an SQLite file: give an llm_cache.sqlite, or a "
                                         "path where one is created (the file was left as it is)")
        if args.transcripts and Path(args.transcripts).exists() and not Path(args.transcripts).is_dir():
            raise UsageError(f"--transcripts {args.transcripts!r} is not a folder: give the folder of the .jsonl "
                             "transcripts (created when missing)")
        checked = read_merge_sources(args.sources, own=args.into)  # every source checked before a file is written
        counts = LLMCache(args.into, transcripts=args.transcripts or True, defer=False,
                          recover=args.into is None).merge(checked)
        print(f"merged {counts['sources']} cache file(s): {counts['added']} response(s) new to this cache, "
              f"{counts['transcribed']} appended to {args.transcripts or 'data/llm_cache/'}, "
              f"{counts['already']} already transcribed"
              + (f"; {counts['rejected']} {'entry' if counts['rejected'] == 1 else 'entries'} left out (not keyed "
                 "by their request, or with fields missing)" if counts.get("rejected") else ""))
        return 0
    if args.sources:
        raise UsageError("kgqa cache stats takes no files (did you mean `kgqa cache merge FILES…`?)")
    print(json.dumps(LLMCache().stats(), indent=2))
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    from .llm import models

    path = models.model_path(args.name)
    print(path)
    if args.action == "verify":
        ok = models.verify(args.name)
        print("sha256 ok" if ok else "sha256 MISMATCH")
        return 0 if ok else 1
    return 0


def cmd_notebooks(args: argparse.Namespace) -> int:
    from .notebooks import normalize_file, notebook_paths, read_notebook, relative

    paths = [Path(p) for p in args.paths] or notebook_paths()
    for p in paths:  # a file that is not a notebook is an error before any file is rewritten
        read_notebook(p)
    changed = [p for p in paths if normalize_file(p, check=args.action == "check")]
    for p in changed:
        print(("not normalised: " if args.action == "check" else "normalised: ") + relative(p))
    if args.action == "check" and changed:
        print("run `kgqa notebooks normalize` and commit the result", file=sys.stderr)
        return 1
    return 0


def cmd_slices(args: argparse.Namespace) -> int:
    from .registry import load_dataset
    from .kg.slices import build_slices, summary

    ds = load_dataset(args.dataset, limit=args.limit, sample=args.sample, seed=args.seed)
    infos = build_slices(ds, args.kg, args.depth, args.fanout, refresh=args.refresh)
    print(json.dumps(summary(infos)))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import format_checks, run_checks

    checks = run_checks(kg=args.kg, llm=args.llm, model=not args.no_model)
    print(format_checks(checks))
    failed = [c for c in checks if c.required and not c.ok]
    print(f"\n{len(checks) - len(failed)}/{len(checks)} checks passed" + ("" if not failed else
          f"; fix: {', '.join(c.name for c in failed)}"))
    return 1 if failed else 0


def cmd_workshop(args: argparse.Namespace) -> int:
    from .doctor import make_workshop
    from .notebooks import relative

    ws = make_workshop(args.out, force=args.force)
    where = relative(ws.copies[0].parent) if ws.copies else args.out
    print(f"{len(ws.written)} notebooks without outputs in {where}; "
          "open them with `.venv/bin/jupyter lab` (check the setup with `kgqa doctor`)")
    if ws.kept:
        print(f"kept {len(ws.kept)} edited copies (not overwritten): {', '.join(p.name for p in ws.kept)}; "
              "`kgqa workshop --force` replaces them with fresh copies")
    return 0


def cmd_site(args: argparse.Namespace) -> int:
    from .site import build

    site = build(args.out)
    counts = {k: sum(p.kind == k for p in site.pages) for k in ("notebook", "report", "figure")}
    if site.unlinked:
        print(f"note: {len(site.unlinked)} link(s) to files of the repository that the site does not hold were left as "
              f"text, e.g. {site.unlinked[0][1]} in {site.unlinked[0][0]}", file=sys.stderr)
    print(f"{counts['notebook']} notebooks, {counts['report']} reports, {counts['figure']} figures; open {site.index}")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from .reproduce import reproduce

    return reproduce(only=args.only, params=_parse_set(args.set), grid=_parse_grid(args.grid), llm=args.llm,
                     llm_mode=args.llm_mode, out=args.out, resume=args.resume, list_only=args.list,
                     index=args.index)


def cmd_bench(args: argparse.Namespace) -> int:
    """``kgqa bench list | report [TABLE…] [--check] | run TABLE [--cells CELL…] [--again] [--yes] [table options]``
    (see :mod:`kgqa_lib.bench`): paper tables (saved records) and measurement tables (a saved JSON)."""
    from . import bench
    from .bench import measure

    items = measure.lookup(args.tables)
    llm = getattr(args, "llm", None)
    model = bench.model_key(llm) if llm else None  # an unknown model name is one line, exit 2
    if args.action == "list":
        for i, t in enumerate(items):
            lines = measure.status_lines(t) if isinstance(t, measure.Measurement) else \
                bench.status_table(t, bench.runs_dir(), [model] if model else None)
            print(("\n" if i else "") + "\n".join(lines))
        return 0
    if args.action == "report":
        failed = 0
        for t in items:
            kind = measure if isinstance(t, measure.Measurement) else bench
            source = "its JSON" if kind is measure else "its records"
            try:
                if kind is measure and not t.data_path.exists() and not t.output_path.exists():
                    print(f"{t.name}: not measured yet (`kgqa bench run {t.name}`)")
                elif args.check:
                    problem = kind.check(t)
                    print(f"{t.name}: " + (problem or f"{t.output} matches {source}"))
                    failed += problem is not None
                elif kind.write_report(t):
                    print(f"{t.name}: wrote results/bench/{t.output}")
            except UserError as exc:  # one table's damaged file: said, and the other tables go on
                print(f"{t.name}: error: {_one_line(exc)}")
                failed += 1
        return 1 if failed else 0
    # run
    if len(items) > 1:  # a queue of paper tables, one after the other (e.g. a second model's cells)
        if any(isinstance(t, measure.Measurement) for t in items) or args.table_options:
            raise UsageError("kgqa bench run takes several tables only of the papers' tables (a measurement table "
                             "runs alone, with its own options)")
        valid = {c.name for t in items for c in t.cells}
        unknown = [c for c in args.cells or [] if c not in valid]
        if unknown:
            raise UsageError(f"none of these tables has a cell {unknown[0]!r}: see `kgqa bench list "
                             f"{' '.join(t.name for t in items)}`")
        if args.again:  # a cell that is not complete is refused before any table runs
            for t in items:
                if not args.cells or any(c.name in args.cells for c in t.cells):
                    bench.core.again_plan(t, bench.runs_dir(), None if model == bench.default_key() else model,
                                          [c.name for c in t.cells if c.name in args.cells] if args.cells else None)
        code = 0
        for t in items:
            if args.cells and not any(c.name in args.cells for c in t.cells):
                continue
            sub = argparse.Namespace(**{**vars(args), "tables": [t.name],
                                        "cells": [c.name for c in t.cells if c.name in args.cells] if args.cells else None})
            code = cmd_bench(sub)
            if code:
                return code
        return code
    [table] = items
    if isinstance(table, measure.Measurement):
        if args.workers is not None:  # the measurement's own option of that name
            args.table_options = ["--workers", args.workers, *args.table_options]
            args.workers = None
        if args.cells or args.procs != 1 or llm or args.again:
            raise UsageError(f"{table.name} is a measurement table: it has no cells (--cells, --procs, --llm and --again "
                             f"are for the papers' tables; its own options: `kgqa bench list {table.name}`)")
        return _run_measurement(table, args)
    if args.table_options:
        if not any(a.startswith("-") for a in args.table_options):  # `run A --yes B`: B meant as a table
            names = " ".join(args.table_options)
            raise UsageError(f"{names}: name the tables before the options (`kgqa bench run {table.name} {names} --yes`)")
        raise UsageError(f"table {table.name} takes no options of its own (the model is --llm, questions at once "
                         f"--workers, cells --cells), got {' '.join(args.table_options)}")
    if args.workers is not None:
        try:
            args.workers = _positive_int(args.workers)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"argument --workers: {exc}") from None
    cells = _bench_cells(table, args.cells)
    if model == bench.default_key():
        model = None
    if args.again:
        return _bench_again(table, args, cells, model, llm)
    missing = [m for m in bench.estimate(table, bench.runs_dir(), model) if cells is None or m["cell"] in cells]
    print(f"{table.name} with {model or bench.default_key()}: what is missing, with costs from the records' "
          "per-question means")
    print(bench.format_estimate(missing))
    behind = bench.unsaved(table, bench.runs_dir(), model, cells)
    if behind:
        print(f"answered but not saved yet: {', '.join(behind)}")
    if not missing and not behind:
        return 0
    if not args.yes:
        only = f" --cells {' '.join(cells)}" if cells else ""
        with_llm = f" --llm {llm}" if llm else ""
        print(f"nothing was run: add --yes to {'run' if missing else 'save'} these "
              f"(`kgqa bench run {table.name}{with_llm}{only} --yes`)")
        return 0
    try:
        return bench.run(table, batch=args.batch, cells=cells, procs=args.procs, llm=llm, workers=args.workers)
    except bench.Interrupted as exc:  # the cells were stopped and their answers saved (said by run)
        return 128 + exc.signum


def queue_lines(path: str) -> list[tuple[int, list[str]]]:
    """The `kgqa bench run` lines of a queue file: (line number, arguments), blank lines and ``#`` comments
    skipped, a leading ``kgqa bench run`` allowed (a line copied from the README). Refused in one line: a file
    that cannot be read, a line that does not parse, a line with ``--yes`` (the queue's own ``--yes`` decides)."""
    import shlex

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the queue file {path!r} ({exc.__class__.__name__}): give a text file with "
                         "one `kgqa bench run` line each") from None
    lines = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            argv = shlex.split(line, comments=True)
        except ValueError as exc:
            raise UsageError(f"{path}:{n}: {exc} (a line holds the arguments of one `kgqa bench run`)") from None
        if argv[:3] == ["kgqa", "bench", "run"]:
            argv = argv[3:]
        if not argv:
            continue
        if "--yes" in argv:
            raise UsageError(f"{path}:{n}: leave --yes out of the lines: `kgqa bench queue {path} --yes` runs them all")
        lines.append((n, argv))
    if not lines:
        raise UsageError(f"the queue file {path!r} names no run: write one `kgqa bench run` line each, e.g. "
                         "`keqing_full --llm local:qwen2.5-0.5b`")
    return lines


def cmd_bench_queue(args: argparse.Namespace) -> int:
    """``kgqa bench queue FILE [--yes]``: the `kgqa bench run` lines of FILE, one after the other. Every line is
    checked first (its estimate; a line refused stops the queue before anything runs, naming the line); with
    ``--yes`` they then run in order. The file is read again before each line, so lines added, removed or moved
    while the queue runs take effect at the next line (a line is run once per time it stands in the file; a new
    line is checked before it runs, and one refused is said and left out). A line that fails is said and the
    next one runs; a stop (Ctrl-C, SIGTERM) ends the queue, and the same command resumes it: complete cells are
    not run again (a line ``--again --cells C`` re-runs C each time; ``--again`` alone re-runs only the cells
    whose records lack predictions)."""
    import contextlib
    import io

    def refused(argv: list[str], show: bool) -> str | None:
        """The line's error when `kgqa bench run` refuses it (its estimate printed when ``show``), else None."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(sys.stdout if show else out), contextlib.redirect_stderr(err):
            try:
                code = main(["bench", "run", *argv])
            except SystemExit as exc:  # argparse: the line's arguments do not parse
                code = exc.code if isinstance(exc.code, int) else 2
        if not code:
            return None
        said = [x for x in err.getvalue().splitlines() if "error:" in x] or [f"exit code {code}"]
        return said[-1].split("error:", 1)[-1].strip()

    lines = queue_lines(args.file)
    for n, argv in lines:
        why = refused(argv, show=not args.yes)
        if why:
            raise UsageError(f"{args.file}:{n}: {why} (nothing was run)")
        if not args.yes:
            print()
    if not args.yes:
        print(f"nothing was run: add --yes to run these {len(lines)} line(s) in order (`kgqa bench queue "
              f"{args.file} --yes`)")
        return 0
    checked = {tuple(argv) for _, argv in lines}
    ran: Counter[tuple[str, ...]] = Counter()  # each line's arguments, as often as it ran (or was left out)
    failed, done = [], 0
    while True:
        try:  # read again: lines added, removed or moved while the queue runs take effect now
            lines = queue_lines(args.file)
        except UsageError as exc:
            print(f"the queue file cannot be read now ({exc}); the queue goes on with the lines it had")
        seen: Counter[tuple[str, ...]] = Counter()
        pending = []
        for n, argv in lines:
            seen[tuple(argv)] += 1
            if seen[tuple(argv)] > ran[tuple(argv)]:
                pending.append((n, argv))
        if not pending:
            break
        n, argv = pending[0]
        ran[tuple(argv)] += 1
        if tuple(argv) not in checked:  # a line added while the queue ran: checked before it runs
            checked.add(tuple(argv))
            why = refused(argv, show=False)
            if why:
                print(f"line {n} was added and is refused: {why}; the queue goes on without it")
                failed.append((n, 2))
                continue
        done += 1
        print(f"[{done}/{done + len(pending) - 1}] kgqa bench run {' '.join(argv)} --yes", flush=True)
        code = main(["bench", "run", *argv, "--yes"])
        if code >= 128:  # stopped: the queue stops with it (its answers are saved; the same command resumes)
            print(f"queue stopped at line {n}; `kgqa bench queue {args.file} --yes` resumes it")
            return code
        if code:
            print(f"line {n} ended with exit code {code}; the queue goes on")
            failed.append((n, code))
    total = sum(ran.values())
    print(f"queue done: {total - len(failed)} of {total} line(s) ended well"
          + (f"; failed: {', '.join(f'line {n} (exit {c})' for n, c in failed)}" if failed else ""))
    return failed[0][1] if failed else 0


def cmd_bench_show(args: argparse.Namespace) -> int:
    """``kgqa bench show TABLE CELL [QID…] [--wrong] [--limit N] [--llm MODEL]``: saved records of one cell,
    each with its question and gold answers from the dataset files (:func:`kgqa_lib.bench.inspect.show`)."""
    from .bench import inspect

    # QIDs after an option (`show T C --llm M QID`) are what argparse could not place (main: table_options)
    late = list(getattr(args, "table_options", None) or [])
    if any(a.startswith("-") for a in late):
        raise UsageError(f"unrecognized arguments: {' '.join(late)} (see `kgqa bench show --help`)")
    d = inspect.show(args.table, args.cell, [*args.qids, *late], llm=args.llm, wrong=args.wrong, limit=args.limit)
    print(f"{d['table']} / {d['cell']}: {d['method']} on {d['dataset']}, model {d['model']}; {d['selected']}")
    print(f"command: {d['command']}")
    if d["data"]:
        print(d["data"])
    for row in d["rows"]:
        print(f"\n[{row['qid']}]")
        if row["question"] is not None:
            where = "" if row["joined_from"] == "dataset" else " (from the record)" if row["in_dataset"] else \
                " (from the record; the dataset has no such qid today)"
            print(f"  question:   {row['question']}{where}")
            print(f"  gold:       {' | '.join(map(str, row['gold'] or [])) or '(none)'}")
        elif not row["in_dataset"]:
            print("  question and gold answers: the dataset has no such qid (its questions changed since the run)")
        if row["gold_changed"]:
            print("  note:       the gold answers the record was scored on differ from the dataset's today")
        pred = row["prediction"]
        print("  prediction: " + (inspect.NOT_KEPT_NOTE if pred is None else " | ".join(map(str, pred))
                                  or "(none: the method returned no answer)")
              + (f" ({row['prediction_cut']} answers or characters cut when saved)" if row["prediction_cut"] else ""))
        print("  metrics:    " + ", ".join(f"{k} {v:.3g}" for k, v in row["metrics"].items()))
        if row["error"]:
            print(f"  error:      {row['error']}")
        for label, value in row["outputs"]:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            print(f"  {label}: {text}")
        print(f"  cost:       {row['cost']}")
    return 0


def cmd_bench_rescore(args: argparse.Namespace) -> int:
    """``kgqa bench rescore TABLE --metric M [--cells CELL…] [--llm MODEL]``: a metric recomputed from the
    records' kept predictions against the dataset files' gold (:func:`kgqa_lib.bench.inspect.rescore`)."""
    from .bench import inspect

    d = inspect.rescore(args.table, args.metric, llm=args.llm, cells=args.cells)
    same = f" (= {d['key']})" if d["key"] != d["metric"] else ""
    print(f"{d['table']}, model {d['model']}: {d['metric']}{same} re-scored from each record's kept prediction "
          "against the gold answers of the dataset files; points, 95% bootstrap CI; `stored`: the records' own "
          "value on the same questions")
    done = [r for r in d["rows"] if r["status"] == "rescored"]
    w = max([len(r["cell"]) for r in d["rows"]] + [4])
    if done:
        print(f"{'cell':<{w}}  {'n':>5}  {'re-scored':<20}  {'stored':>6}  {'≠ stored':>8}  not re-scored")
    for r in d["rows"]:
        if r["status"] == "not applicable":
            print(f"{r['cell']:<{w}}  not applicable: its questions are {'/'.join(r['kinds'])}, "
                  + (f"{d['metric']} is for factoid questions (open ones: --metric rouge_l)" if "open" in r["kinds"]
                     else f"{d['metric']} is for open questions (factoid ones: e.g. --metric hits@1)"))
        if r["status"] != "rescored":
            continue
        ci = f"{100 * r['mean']:.1f} [{100 * r['low']:.1f}, {100 * r['high']:.1f}]" if r["n"] else "—"
        stored = "—" if r["stored"] is None else f"{100 * r['stored']:.1f}"
        why = [f"{r[k]} {label}" for k, label in (("not_kept", "prediction not kept (older records)"),
                                                  ("cut", "prediction cut when saved"),
                                                  ("no_response", "open question, response not kept"),
                                                  ("missing", "qid no longer in the dataset"),
                                                  ("other_kind", "question of the other kind")) if r[k]]
        skipped = sum(r[k] for k in ("not_kept", "cut", "no_response", "missing", "other_kind"))
        note = f"{skipped}" + (f" ({', '.join(why)})" if why else "")
        if skipped and r["stored_all"] is not None:
            note += f"; stored mean of all {r['stored_n']} records {100 * r['stored_all']:.1f}"
        if r["gold_changed"]:
            note += f"; {r['gold_changed']} scored on gold answers that changed since"
        print(f"{r['cell']:<{w}}  {r['n']:>5}  {ci:<20}  {stored:>6}  {r['differ']:>8}  {note}")
    for status, what in (("not run", "not run (no saved records)"),
                         ("not kept", "cannot be re-scored: predictions not kept (older records; re-run the cells "
                                      "to keep them)")):
        names = [r["cell"] for r in d["rows"] if r["status"] == status]
        if names:
            print(f"{what}: {', '.join(names)}")
    return 0


def _bench_again(table, args: argparse.Namespace, cells: list[str] | None, model: str | None, llm: str | None) -> int:
    """``kgqa bench run TABLE [--cells …] --again [--yes]``: the estimate of re-running complete cells from
    scratch (:func:`kgqa_lib.bench.core.again_plan`), then (``--yes``) the re-run."""
    from . import bench

    rows = bench.core.again_plan(table, bench.runs_dir(), model, cells)  # a named cell not complete: UsageError
    which = "the named cells" if cells else "only its complete cells whose saved records lack predictions (name others with --cells)"
    print(f"{table.name} with {model or bench.default_key()}: re-running from scratch with today's code {which}; "
          "costs from their records' per-question means; the records stay as they are until a re-run is complete")
    if not rows:
        print("nothing to re-run: every complete cell's records keep their predictions")
        return 0
    print(bench.format_estimate(rows))
    if not args.yes:
        only = f" --cells {' '.join(cells)}" if cells else ""
        with_llm = f" --llm {llm}" if llm else ""
        print(f"nothing was run: add --yes to re-run these (`kgqa bench run {table.name}{with_llm}{only} --again --yes`)")
        return 0
    try:
        return bench.run(table, batch=args.batch, cells=cells, procs=args.procs, llm=llm, workers=args.workers,
                         again=True)
    except bench.Interrupted as exc:  # the cells were stopped and their answers saved beside the records (said by run)
        return 128 + exc.signum


def _bench_cells(table, names: list[str] | None) -> list[str] | None:
    """``--cells``: the named cells of ``table`` (None: all); an unknown name is a usage error."""
    if not names:
        return None
    import difflib

    valid = [c.name for c in table.cells]
    for name in names:
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=1)
            raise UsageError(f"{table.name} has no cell {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                             + f": see `kgqa bench list {table.name}`")
    return list(names)


def _run_measurement(table: Any, args: argparse.Namespace) -> int:
    """``kgqa bench run`` of a measurement table: its options, the estimate, then (``--yes``) the
    measurement, given the app-layer modules it needs (local servers, the Dask engine)."""
    from . import distributed, servers
    from .bench import measure

    options = measure.parse_options(table, args.table_options)
    print(f"{table.name}: {table.estimate(options, measure.read(table))}")
    if not args.yes:
        print(f"nothing was run: add --yes to measure (`kgqa bench run {table.name} … --yes`)")
        return 0
    return measure.run(table, options, provide={"servers": servers, "distributed": distributed})


def _parse_grid(items: list) -> dict[str, list]:
    """``--grid N_PER_SET=4,50`` → {"N_PER_SET": [4, 50]} (values parsed like --set)."""
    from .reproduce import parse_grid

    return parse_grid(items)


_Parser = ArgvParser  # a bad command line is a UsageError (one line on stderr, exit code 2: see main)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kgqa", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    r = add_run_arguments(sub.add_parser("run", help="run a method over a dataset (resumable)"))
    r.set_defaults(fn=cmd_run)

    rep = sub.add_parser("report", help="aggregate run files into a table")
    rep.add_argument("runs", nargs="*", type=_existing_file)
    rep.add_argument("--metrics", type=_metric_list, default=None, help="comma-separated, e.g. hits@1,f1")
    rep.add_argument("--out", type=_out_file, default=None, help="write Markdown here (and a .csv beside it)")
    rep.set_defaults(fn=cmd_report)

    c = sub.add_parser("cache", help="LLM cache statistics; merge shard caches into this one and the transcripts")
    c.add_argument("action", choices=["stats", "merge"])
    c.add_argument("sources", nargs="*", metavar="FILE",
                   help="merge: shard caches (<KGQA_CACHE_DIR of a shard>/llm_cache.sqlite) or transcripts (.jsonl); "
                        "none: transcribe this cache's own pending entries")
    c.add_argument("--into", default=None, help="merge: the SQLite cache to merge into (default: this machine's)")
    c.add_argument("--transcripts", default=None, help="merge: the transcripts folder to append to (default data/llm_cache/)")
    c.set_defaults(fn=cmd_cache)

    m = sub.add_parser("model", help="assemble / verify the embedded local model")
    m.add_argument("action", choices=["assemble", "verify"])
    m.add_argument("--name", default="qwen2.5-coder-1.5b")
    m.set_defaults(fn=cmd_model)

    n = sub.add_parser("notebooks", help="normalise committed notebooks (or check they are)")
    n.add_argument("action", choices=["normalize", "check"])
    n.add_argument("paths", nargs="*")
    n.set_defaults(fn=cmd_notebooks)

    sl = sub.add_parser("slices", help="cut per-question KG slices from a SPARQL endpoint and cache them")
    sl.add_argument("action", choices=["build"])
    sl.add_argument("--dataset", required=True, help="e.g. qald10:tog, simplequestions:tog, webqsp:test, grailqa:dev")
    sl.add_argument("--kg", required=True, help="sparql+http://HOST:PORT/PATH#profile=wikidata|freebase")
    sl.add_argument("--depth", type=_positive_int, default=1)
    sl.add_argument("--fanout", type=_positive_int, default=100, help="edges kept per node and direction")
    sl.add_argument("--limit", type=_positive_int, default=None)
    sl.add_argument("--sample", type=_positive_int, default=None)
    sl.add_argument("--seed", type=int, default=0)
    sl.add_argument("--refresh", action="store_true", help="cut again even when cached")
    sl.set_defaults(fn=cmd_slices)
    d = sub.add_parser("doctor", help="check the setup offline (model, embeddings, transcripts, data, endpoints)")
    d.add_argument("--kg", default=None, help="also check a SPARQL endpoint: sparql+http://HOST:PORT/PATH#profile=…")
    d.add_argument("--llm", default=None, help="also check an LLM endpoint, e.g. openai:MODEL (one short call)")
    d.add_argument("--no-model", action="store_true", help="skip assembling/verifying the local model (~1 GB)")
    d.set_defaults(fn=cmd_doctor)
    w = sub.add_parser("workshop", help="copies of the notebooks with outputs stripped (default: workshop/)")
    w.add_argument("--out", type=_out_folder, default=None, help="folder of the copies (default workshop/)")
    w.add_argument("--force", action="store_true", help="also overwrite copies a participant edited or ran")
    w.set_defaults(fn=cmd_workshop)
    st = sub.add_parser("site", help="a static HTML site of the committed notebooks (with their outputs) and "
                        "benchmark reports, readable offline (default: build/site/)")
    st.add_argument("--out", default=None, help="folder to write (default build/site/); emptied first when an "
                    "earlier `kgqa site` wrote it, refused when it holds anything else")
    st.set_defaults(fn=cmd_site)
    from .reproduce import add_arguments as reproduce_arguments

    rp = reproduce_arguments(sub.add_parser("reproduce", help="execute every notebook with papermill, in order"))
    rp.set_defaults(fn=cmd_reproduce)
    b = sub.add_parser("bench", help="benchmark tables: list their completeness, regenerate reports, run what is missing, "
                       "show and re-score saved records")
    bsub = b.add_subparsers(dest="action", required=True)
    bl = bsub.add_parser("list", help="tables, planned sizes and completeness per cell")
    bl.add_argument("tables", nargs="*", help="table names (default: all)")
    bl.add_argument("--llm", default=None, help="also list this model's completeness (every model with saved "
                    "records is listed)")
    br = bsub.add_parser("report", help="regenerate results/bench/*.md from the saved records")
    br.add_argument("tables", nargs="*", help="table names (default: all)")
    br.add_argument("--check", action="store_true", help="compare with the committed reports, write nothing "
                    "(exit 1 when one differs)")
    bu = bsub.add_parser("run", help="estimate, then run/resume the missing questions of a table, or measure",
                         epilog="A measurement table takes its own options after its name (e.g. `kgqa bench run "
                         "embed --n 1000 --yes`): `kgqa bench list TABLE` lists them.")
    bu.add_argument("tables", nargs="+", metavar="table",
                    help="a table, or several papers' tables run one after the other (with --cells: the named "
                         "cells of each)")
    bu.add_argument("--yes", action="store_true", help="run them (without it: the estimate only)")
    bu.add_argument("--cells", nargs="+", metavar="CELL", default=None,
                    help="only these cells of the table (names as `kgqa bench list` shows them)")
    bu.add_argument("--again", action="store_true",
                    help="paper tables: re-run complete cells from scratch with today's code (with --cells: those; "
                         "without: the ones whose saved records lack predictions); saved beside the records until "
                         "complete, then in their place")
    bu.add_argument("--batch", type=_positive_int, default=10,
                    help="paper tables: save the stripped records and rewrite the report every N new records")
    bu.add_argument("--procs", type=_positive_int, default=1,
                    help="paper tables: run N cells at once, each with cores/N model threads (more tokens/s on a "
                         "CPU; results do not depend on it)")
    bu.add_argument("--llm", default=None,
                    help="paper tables: run the cells with this model (local | local:qwen2.5-0.5b | openai:NAME | "
                         "openai:NAME@http://host:port/v1); its records are saved apart, "
                         "results/bench/runs/<table>/<model>/ (default: the model the cells name, local)")
    bu.add_argument("--workers", default=None,  # a paper table's: a number (checked in cmd_bench); a measurement
                    # table may have its own --workers (distributed: a list), handed on to it unchanged
                    help="paper tables: questions of a cell answered at once (an endpoint's concurrency; the answers "
                         "do not depend on it)")
    bu.set_defaults(table_options=[])  # a measurement table's own options: what the parser did not know (main)
    for sp in (b, bl, br, bu):
        sp.set_defaults(fn=cmd_bench)
    bq = bsub.add_parser("queue", help="run the `kgqa bench run` lines of a file one after the other (estimates "
                         "first; --yes runs them)")
    bq.add_argument("file", help="a text file: one `kgqa bench run` argument line each (e.g. `keqing_full --llm "
                    "local:qwen2.5-0.5b`), # comments")
    bq.add_argument("--yes", action="store_true", help="run them (without it: every line's estimate only)")
    bq.set_defaults(fn=cmd_bench_queue, table_options=None)
    bs = bsub.add_parser("show", help="saved records of a cell, question by question: prediction, metrics, the "
                         "method's outputs, and the question and gold answers from KGQA_DATA_DIR")
    bs.add_argument("table")
    bs.add_argument("cell", help="a cell of the table (names as `kgqa bench list TABLE` shows them)")
    bs.add_argument("qids", nargs="*", metavar="QID", help="questions to show (default: the first --limit records)")
    bs.add_argument("--wrong", action="store_true", help="the first --limit records with hits@1 = 0 or F1 < 1")
    bs.add_argument("--limit", type=_positive_int, default=5, help="records shown without QIDs (default 5)")
    bs.add_argument("--llm", default=None, help="the model's records (a model name, or its folder as `kgqa bench "
                    "list` shows it; default: the default model)")
    bs.set_defaults(fn=cmd_bench_show, table_options=[])  # (QIDs given after an option land there: cmd_bench_show)
    bc = bsub.add_parser("rescore", help="re-score a table's saved records with a metric, from their kept "
                         "predictions and the gold answers in KGQA_DATA_DIR")
    bc.add_argument("table")
    bc.add_argument("--metric", required=True, help="hits@1 | any_hit | exact_set | f1 | precision | recall | "
                    "lenient | rouge_l (open questions)")
    bc.add_argument("--cells", nargs="+", metavar="CELL", default=None, help="only these cells (default: all)")
    bc.add_argument("--llm", default=None, help="the model's records (as for show)")
    bc.set_defaults(fn=cmd_bench_rescore)
    return p


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean "fix the setup or the command", shown as one line instead of a traceback."""
    from .data.datasets import DatasetNotFound
    from .kg.graph import QueryTimeout
    from .llm.chat import ReplayMiss
    from .llm.models import ModelNotAvailable
    from .kg.remote import EndpointError
    from .evaluate.runner import RunLocked
    from .kg.slices import SliceMissing

    return (UserError, DatasetNotFound, EndpointError, SliceMissing, QueryTimeout, ReplayMiss, ModelNotAvailable,
            RunLocked)


def _one_line(exc: BaseException) -> str:
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """The one place a user error (bad argument, setting, data file or setup; see
    :mod:`kgqa_lib.errors`) becomes ``error: …`` on one line of stderr and exit code 2 (an
    infrastructure failure met before a run starts, e.g. a cache on a full disk: exit code 3)."""
    from .procs import end_with_parent

    end_with_parent()  # started by `kgqa bench run` or a Dask worker: end with it
    try:
        parser = build_parser()
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # only `kgqa bench run TABLE` takes options the parser does not know: the table's own
            if getattr(args, "table_options", None) is None:
                parser.error(f"unrecognized arguments: {' '.join(unknown)}")
            args.table_options = unknown
        return args.fn(args)
    except _user_errors() as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except ValueError as exc:  # unknown dataset / KG / profile names: the message lists the choices
        if "Unknown" not in str(exc) and "unknown" not in str(exc):
            raise
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except InfrastructureError as exc:  # e.g. a cache that cannot be opened (disk full, read-only): exit 3
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
