"""``kgqa reproduce``: execute the notebooks in order with papermill and say what happened.

With no parameters the committed notebooks are re-executed in place (the main job; the recorded
transcripts answer the LLM cells). With ``--set`` / ``--grid`` / ``--llm`` each parameter
combination writes its executed notebooks to ``results/reproduce/<params>/`` and keeps its run
records under ``results/runs/reproduce/<params>/`` (notebooks with a ``RUNS_DIR`` parameter), so
a sweep never touches the committed notebooks. A parameter goes only to notebooks that declare it
in their ``parameters`` cell; one that no selected notebook declares is refused. ``--resume`` skips notebooks already executed with the same
parameters; the state file is rewritten after every notebook, so an interrupted sweep loses at
most the notebook in flight.

At the end: a summary per notebook (status, seconds, LLM calls, cache hits, live calls, tokens, the
headline metric it recorded with :func:`kgqa_lib.notebooks.headline`),
printed and written to ``summary.md`` / ``summary.json`` beside the executed notebooks' state. A
``--grid`` also writes, per notebook, its metrics against the swept parameters (a Markdown table, a
CSV and a figure, from every combination's run records) to ``results/reproduce/sweep-<params>/``.
Only the default run writes the committed ``figures/`` and ``results/tables/``: a run with
parameters writes them under its own ``results/reproduce/<params>/``.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from .errors import UsageError
from .notebooks import execute, headlines, notebook_paths, relative
from .paths import results_dir


def declared_parameters(path: Path) -> list[str]:
    """Names assigned in the notebook's ``parameters`` cell."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            names = []
            for node in ast.parse("".join(cell["source"])).body:
                if isinstance(node, ast.Assign):
                    names += [t.id for t in node.targets if isinstance(t, ast.Name)]
            return names
    return []


def _tag(params: dict[str, Any]) -> str:
    if not params:
        return "default"
    text = "_".join(f"{k}={v}" for k, v in sorted(params.items()))
    return re.sub(r"[^\w=.,-]+", "-", text)[:80] + "-" + hashlib.sha256(text.encode()).hexdigest()[:6]


def _usage(log: Path) -> dict[str, Any]:
    calls = hits = tokens = 0
    live_seconds = 0.0
    if log.exists():
        for line in log.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            calls += 1
            hits += int(r["cache_hit"])
            tokens += r["prompt_tokens"] + r["completion_tokens"]
            live_seconds += 0.0 if r["cache_hit"] else r["seconds"]
    return {"llm_calls": calls, "cache_hits": hits, "live_calls": calls - hits, "tokens": tokens,
            "live_llm_seconds": round(live_seconds, 1)}


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def summary_table(rows: list[dict[str, Any]]) -> str:
    head = ("| notebook | status | seconds | LLM calls | cache hits | live calls | tokens | parameters | headline |\n"
            "|---|---|---|---|---|---|---|---|---|\n")
    body = "".join(
        f"| {r['notebook']} | {r['status']} | {r['seconds']:.1f} | {r['llm_calls']} | {r['cache_hits']} | "
        f"{r['live_calls']} | {r['tokens']} | {', '.join(f'{k}={v}' for k, v in r['parameters'].items()) or '—'} | "
        f"{r.get('headline') or '—'} |\n"
        for r in rows)
    tot = {k: sum(r[k] for r in rows) for k in ("seconds", "llm_calls", "cache_hits", "live_calls", "tokens")}
    ok = sum(r["status"] in ("ok", "skipped (done)") for r in rows)
    return head + body + (f"| **total** ({ok}/{len(rows)} ok) | | {tot['seconds']:.1f} | {tot['llm_calls']} | "
                          f"{tot['cache_hits']} | {tot['live_calls']} | {tot['tokens']} | | |\n")


def literal(value: str) -> Any:
    """A notebook parameter's value: a Python literal, else the string itself."""
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value


def grid_item(text: str) -> tuple[str, list[str]]:
    """``--grid KEY=V1,V2`` → (KEY, [V1, V2]) (an argparse type)."""
    import argparse

    key, sep, values = text.partition("=")
    items = [v.strip() for v in values.split(",")]
    if not sep or not key.strip() or not any(items):
        raise argparse.ArgumentTypeError(f"expects KEY=V1,V2,… (e.g. --grid N_QUESTIONS=4,50), got {text!r}")
    if not all(items):
        raise argparse.ArgumentTypeError(f"has an empty value in {text!r}: write KEY=V1,V2 without empty items")
    return key.strip(), items


def parse_set(items: list) -> dict[str, Any]:
    """Notebook parameters (``kgqa reproduce --set``): values are Python literals, else strings."""
    from .evaluate.spec import key_value

    return {key: literal(value) for key, value in (i if isinstance(i, tuple) else key_value(i) for i in items or [])}


def parse_grid(items: list) -> dict[str, list]:
    """``--grid N_PER_SET=4,50`` → {"N_PER_SET": [4, 50]} (values parsed like --set)."""
    grid: dict[str, list] = {}
    for item in items or []:
        key, values = item if isinstance(item, tuple) else grid_item(item)
        if key in grid:
            raise UsageError(f"--grid {key} is given twice: list all its values once, --grid {key}=V1,V2,V3")
        grid[key] = [literal(v) for v in values]
    return grid


def add_arguments(p: Any) -> Any:
    """The arguments of ``kgqa reproduce`` (shared by the CLI and :func:`kgqa_lib.distributed.run_grid`)."""
    from .evaluate.spec import int_at_least, key_value

    p.add_argument("--only", nargs="*", help="substrings of notebook names")
    p.add_argument("--set", action="append", default=[], type=key_value, metavar="KEY=VALUE", help="notebook parameter")
    p.add_argument("--grid", action="append", default=[], type=grid_item, metavar="KEY=V1,V2",
                   help="sweep a notebook parameter: one run per value combination, each in its own folder")
    p.add_argument("--llm", default=None, help="LLM for every notebook (local | local:qwen2.5-0.5b | openai:MODEL)")
    p.add_argument("--llm-mode", default=None, choices=["auto", "replay", "live"])
    p.add_argument("--out", default=None, help="folder for executed notebooks (default: in place for the "
                   "defaults, results/reproduce/<params>/ otherwise)")
    p.add_argument("--resume", action="store_true", help="skip notebooks that already ran with the same parameters")
    p.add_argument("--list", action="store_true", help="print the grid's combinations with their index (0-based) and exit")
    p.add_argument("--index", type=int_at_least(0), default=None, metavar="K",
                   help="run only combination K of the grid (see --list; e.g. $SLURM_ARRAY_TASK_ID)")
    return p


def grid_combinations(grid: dict[str, list] | None) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in a fixed order (the first key varies slowest):
    the indices of ``kgqa reproduce --list`` / ``--index``."""
    keys = list((grid or {}).keys())
    return [dict(zip(keys, values)) for values in itertools.product(*(grid or {}).values())] or [{}]


def reproduce(only: list[str] | None = None, params: dict[str, Any] | None = None,
              grid: dict[str, list] | None = None, llm: str | None = None, llm_mode: str | None = None,
              out: str | Path | None = None, resume: bool = False, list_only: bool = False,
              index: int | None = None) -> int:
    """Execute the notebooks once per combination of ``grid`` values (on top of ``params``).
    ``list_only``: print each combination with its index (0-based) and its output folder, run
    nothing; ``index``: run only that combination (as the full sweep would: same folders, same
    tags), so a job array (Slurm ``--array=0-(N-1)``, :mod:`kgqa_lib.distributed`) maps onto it."""
    paths = [p for p in notebook_paths() if not only or any(s in p.name for s in only)]
    unmatched = [s for s in only or [] if not any(s in p.name for p in notebook_paths())]
    if unmatched:
        raise UsageError(f"--only {' '.join(unmatched)} matches no notebook; use a part of a name: "
                         f"{', '.join(p.stem for p in notebook_paths())}")
    empty = [k for k, values in (grid or {}).items() if not values]
    if empty:
        raise UsageError(f"--grid {empty[0]} has no values: write --grid {empty[0]}=V1,V2")
    asked = list(dict.fromkeys([*(params or {}), *(grid or {})]))
    if asked:  # a parameter no selected notebook declares would be dropped: a typo ran as the defaults
        known = sorted({name for nb in paths for name in declared_parameters(nb)})
        unknown = [k for k in asked if k not in known]
        if unknown:
            raise UsageError(f"no selected notebook declares {', '.join(unknown)} (--set/--grid); their parameters: "
                             f"{', '.join(known) or 'none'}")
    base = dict(params or {})
    if llm:
        base["LLM"] = llm
    if llm_mode:
        base["LLM_MODE"] = llm_mode
    combos = grid_combinations(grid)
    n_combos = len(combos)
    if list_only:
        for k, combo in enumerate(combos):
            print(f"{k}\t{_tag({**base, **combo})}\t{' '.join(f'{key}={v!r}' for key, v in combo.items()) or '(defaults)'}")
        return 0
    if index is not None:
        if not 0 <= index < n_combos:
            raise UsageError(f"--index {index} is out of range: the grid has {n_combos} combination(s), "
                             f"0…{n_combos - 1} (see --list)")
        combos = [combos[index]]
    failed_total = 0
    done_runs: list[tuple[dict[str, Any], dict[str, str | None]]] = []
    for combo in combos:
        wanted = {**base, **combo}
        tag = _tag(wanted)
        state_dir = results_dir() / "reproduce" / tag
        state_dir.mkdir(parents=True, exist_ok=True)
        out_dir = Path(out) / tag if out and n_combos > 1 else (Path(out) if out else (None if not wanted else state_dir))
        state_file = state_dir / "state.json"
        state = json.loads(state_file.read_text()) if resume and state_file.exists() else {}
        rows: list[dict[str, Any]] = []
        started = time.perf_counter()
        print(f"reproduce [{tag}]: {len(paths)} notebooks" + (f" → {relative(out_dir)}" if out_dir else " (in place)"), flush=True)
        for i, nb in enumerate(paths, 1):
            declared = declared_parameters(nb)
            given = {k: v for k, v in wanted.items() if k in declared}
            if out_dir is not None and "RUNS_DIR" in declared and "RUNS_DIR" not in given:
                given["RUNS_DIR"] = str(results_dir() / "runs" / "reproduce" / tag / nb.stem)
            target = (out_dir / nb.name) if out_dir else nb
            phash = hashlib.sha256(json.dumps(given, sort_keys=True, default=str).encode()).hexdigest()[:12]
            prev = state.get(nb.name)
            if resume and prev and prev["status"] == "ok" and prev["params_hash"] == phash and target.exists():
                rows.append({**prev, "status": "skipped (done)", "seconds": 0.0})
                print(f"[{i}/{len(paths)}] {nb.name}: already done, skipped", flush=True)
                continue
            print(f"[{i}/{len(paths)}] {nb.name} …", end=" ", flush=True)
            if out_dir:
                out_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory() as tmp:
                log = Path(tmp) / "usage.jsonl"
                env = {"KGQA_USAGE_LOG": str(log)}
                if wanted:  # only the default run writes the committed figures/ and results/tables/
                    env.update({k: str(state_dir / sub) for k, sub in (("KGQA_FIGURES_DIR", "figures"),
                                                                       ("KGQA_TABLES_DIR", "tables")) if k not in os.environ})
                for k in ("KGQA_FIGURES_DIR", "KGQA_TABLES_DIR"):
                    if k in env:
                        Path(env[k]).mkdir(parents=True, exist_ok=True)
                saved_env = {k: os.environ.get(k) for k in env}
                os.environ.update(env)
                try:
                    res = execute(nb, output=target, parameters=given, failed_copy=state_dir / "failed" / nb.name)
                finally:
                    for k, v in saved_env.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
                usage = _usage(log)
            row = {"notebook": nb.name, "status": "ok" if res.error is None else "FAILED", "error": res.error,
                   "seconds": round(res.seconds, 1), "parameters": given, "params_hash": phash,
                   "output": relative(target), **usage}
            if res.error is None and target.exists():  # the headline metric the notebook recorded
                row["headline"] = "; ".join(f"{h['metric']}: {h['value']}" for h in headlines(json.loads(target.read_text())))
            if res.failed_copy:  # the committed/previous notebook is left as it was
                row["failed_copy"] = relative(res.failed_copy)
            rows.append(row)
            state[nb.name] = row
            _write_json(state_file, state)  # after every notebook: an interrupted sweep resumes here
            print(f"{row['status']} ({res.seconds:.1f} s; {usage['llm_calls']} LLM calls, {usage['cache_hits']} cached, "
                  f"{usage['live_calls']} live)" + (f"\n    {res.error}" if res.error else "")
                  + (f"\n    {relative(target)} not replaced; the failed run is in {relative(res.failed_copy)}"
                     if res.failed_copy else ""), flush=True)
        failed = [r for r in rows if r["status"] == "FAILED"]
        failed_total += len(failed)
        table = summary_table(rows)
        (state_dir / "summary.md").write_text(f"# kgqa reproduce — {tag}\n\n{table}")
        _write_json(state_dir / "summary.json", {"tag": tag, "parameters": wanted, "notebooks": rows,
                                                 "wall_seconds": round(time.perf_counter() - started, 1)})
        print(f"\n{table}\nreproduce [{tag}]: {len(rows) - len(failed)} ok, {len(failed)} failed, "
              f"{time.perf_counter() - started:.1f} s wall; summary in {relative(state_dir / 'summary.md')}", flush=True)
        done_runs.append((combo, {r["notebook"]: r.get("parameters", {}).get("RUNS_DIR") for r in rows}))
    if grid:
        for path in write_sweep(grid, base, done_runs):
            print(f"sweep: {relative(path)}", flush=True)
    return 1 if failed_total else 0


# ---------------------------------------------------------------------------------------------
# Sweeps: metrics against the swept parameters, from each combination's run records
# ---------------------------------------------------------------------------------------------
SWEEP_METRICS = ("hits@1", "f1", "rouge_l")


def sweep_dir(grid: dict[str, list], base: dict[str, Any]) -> Path:
    """The sweep's own folder: ``results/reproduce/sweep-<parameters>``."""
    return results_dir() / "reproduce" / ("sweep-" + _tag({**base, **{k: ",".join(map(str, v)) for k, v in grid.items()}}))


def sweep_rows(grid: dict[str, list], runs: list[tuple[dict[str, Any], dict[str, str | None]]]) -> dict[str, list[dict[str, Any]]]:
    """Per notebook: one row per (combination, run file) — the swept values, the run's method and
    dataset, questions, each metric with its 95% CI, calls and tokens per question."""
    from .evaluate.report import summarize
    from .evaluate.runner import read_records

    out: dict[str, list[dict[str, Any]]] = {}
    for combo, runs_dirs in runs:
        for nb, folder in runs_dirs.items():
            if not folder or not Path(folder).is_dir():
                continue
            for f in sorted(Path(folder).rglob("*.jsonl")):
                recs = read_records(f)
                if not recs:
                    continue
                metrics = [m for m in SWEEP_METRICS if any(m in r.get("metrics", {}) for r in recs)]
                row = summarize(recs, metrics)
                out.setdefault(nb, []).append({**{k: combo.get(k) for k in grid}, "run": f.stem, "method": row["method"],
                                               "dataset": row["dataset"], "n": row["n"],
                                               **{m: row[m] for m in metrics}, **{f"{m}_ci": row[f"{m}_ci"] for m in metrics},
                                               "calls/q": row["calls/q"], "tokens/q": row["tokens/q"]})
    return out


def write_sweep(grid: dict[str, list], base: dict[str, Any], runs: list[tuple[dict[str, Any], dict[str, str | None]]]) -> list[Path]:
    """``<notebook>.md`` / ``.csv`` (and ``.png``: the first metric against the first swept parameter,
    a line per run) in :func:`sweep_dir`, for every notebook whose combinations left run records."""
    import csv

    folder = sweep_dir(grid, base)
    written = []
    keys = list(grid)
    for nb, rows in sweep_rows(grid, runs).items():
        folder.mkdir(parents=True, exist_ok=True)
        stem = Path(nb).stem
        metrics = [m for m in SWEEP_METRICS if any(m in r for r in rows)]
        head = keys + ["run", "method", "dataset", "n"] + metrics + ["calls/q", "tokens/q"]
        lines = [f"# {stem}: metrics against {', '.join(keys)}\n",
                 f"`kgqa reproduce --only {stem} " + " ".join(f"--grid {k}={','.join(map(str, v))}" for k, v in grid.items())
                 + "`" + (" with " + ", ".join(f"{k}={v}" for k, v in base.items()) if base else "")
                 + "; each metric with its 95% bootstrap CI, from each combination's run records.\n",
                 "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in rows:
            cells = [str(r[k]) for k in keys] + [r["run"], str(r["method"]), str(r["dataset"]), str(r["n"])]
            cells += [f"{r[m]:.3f} [{r[m + '_ci'][0]:.3f}, {r[m + '_ci'][1]:.3f}]" if m in r else "—" for m in metrics]
            cells += [f"{r['calls/q']:.2f}", f"{r['tokens/q']:.0f}"]
            lines.append("| " + " | ".join(cells) + " |")
        (folder / f"{stem}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
        with open(folder / f"{stem}.csv", "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(head)
            for r in rows:
                w.writerow([r.get(k) for k in keys + ["run", "method", "dataset", "n"]]
                           + [r.get(m) for m in metrics] + [r["calls/q"], r["tokens/q"]])
        written += [folder / f"{stem}.md", folder / f"{stem}.csv"]
        if metrics:
            written.append(_sweep_figure(folder / f"{stem}.png", keys, metrics[0], rows))
    return written


def _sweep_figure(path: Path, keys: list[str], metric: str, rows: list[dict[str, Any]]) -> Path:
    """Two panels against the first swept parameter: ``metric`` with its 95% CI, and LLM calls per
    question; a line per run (and per value of the other swept parameters)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x_key = keys[0]
    xs = list(dict.fromkeys(r[x_key] for r in rows))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    lines: dict[str, list[tuple[int, float, float, float, float]]] = {}
    for r in rows:
        if metric not in r:
            continue
        label = " ".join([r["run"]] + [f"{k}={r[k]}" for k in keys[1:]])
        lo, hi = r[metric + "_ci"]
        lines.setdefault(label, []).append((xs.index(r[x_key]), r[metric], r[metric] - lo, hi - r[metric], r["calls/q"]))
    for label, pts in lines.items():
        pts.sort()
        x = [p[0] for p in pts]
        ax.errorbar(x, [p[1] for p in pts], yerr=[[p[2] for p in pts], [p[3] for p in pts]], marker="o", capsize=3,
                    label=label, alpha=0.8)
        ax2.plot(x, [p[4] for p in pts], marker="o", label=label, alpha=0.8)
    for a, name in ((ax, f"{metric} (95% CI)"), (ax2, "LLM calls / question")):
        a.set_xticks(range(len(xs)), [str(v) for v in xs])
        a.set_xlabel(x_key)
        a.set_ylabel(name)
    ax2.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
