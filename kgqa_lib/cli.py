"""The ``kgqa`` command: run methods, report, reproduce the notebooks, inspect caches."""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from pathlib import Path


def _parse_set(items: list[str]) -> dict:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set expects KEY=VALUE, got {item!r}")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


KG_METHODS = {"pgakv", "qsm", "keqing"}


def default_kg(dataset: str) -> str:
    """The KG a dataset's questions are asked against: ``miniworld:simple`` → ``miniworld``."""
    head = dataset.split(":")[0]
    return head if head in ("miniworld", "metaqa", "tiny") else "miniworld"


def cmd_run(args: argparse.Namespace) -> int:
    from .datasets import load_dataset
    from .evaluate.report import format_table, summarize
    from .evaluate.runner import run
    from .llm import make_llm
    from .methods import Context

    ds = load_dataset(args.dataset, limit=args.limit, sample=args.sample, seed=args.seed)  # errors: see main()
    # Transcripts under data/llm_cache/ are committed, so only runs on the project's own data
    # write them; prompts of external benchmarks stay in the machine's SQLite cache.
    from .llm import LLMCache
    from .paths import data_dir

    own = bool(ds.source_files) and all(data_dir().resolve() in p.resolve().parents for p in ds.source_files)
    record = own and not args.no_transcripts
    llm = make_llm(args.llm, args.llm_mode, cache=LLMCache(transcripts=True if record else None))
    settings = _parse_set(args.set)
    kg = embedder = None
    if args.kg or args.method in KG_METHODS:
        from .embed import Embedder
        from .kg import load_named

        from .remote import redact_url

        kg_name = args.kg or ds.kg or default_kg(args.dataset)
        settings["kg"] = redact_url(kg_name)  # run records never hold endpoint credentials
        if kg_name.startswith("slices:"):  # cached per-question slices of an endpoint (built when missing)
            from .slices import kg_for_run

            kg, embedder = kg_for_run(ds, kg_name), Embedder()
        else:
            kg, embedder = load_named(kg_name), Embedder()
    elif args.method == "fusic":  # its transfer task names both KGs; the encoder links and picks exemplars
        from .embed import Embedder

        embedder = Embedder()
    ctx = Context(llm=llm, kg=kg, embedder=embedder, settings=settings, seed=args.seed)
    out = args.out
    if out is None:
        from .evaluate.runner import default_run_path

        tag = f"sample{args.sample}-seed{args.seed}" if args.sample else ""
        out = default_run_path(args.method, ds.name, llm.model_id, tag)
    records = run(args.method, ds, ctx, out, overwrite=args.overwrite, progress=not args.quiet, workers=args.workers)
    import pandas as pd

    print(format_table(pd.DataFrame([summarize(records)])))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .evaluate.report import format_table, report
    from .paths import results_dir

    paths = args.runs or sorted((results_dir() / "runs").glob("*.jsonl"))
    if not paths:
        print("no run files given and none under results/runs/", file=sys.stderr)
        return 2
    df = report(paths, args.metrics.split(",") if args.metrics else None)
    table = format_table(df)
    print(table)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(table + "\n", encoding="utf-8")
        df.drop(columns=[c for c in df.columns if c.endswith("_ci")]).to_csv(out.with_suffix(".csv"), index=False)
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from .llm import LLMCache

    print(json.dumps(LLMCache().stats(), indent=2))
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    from . import models

    path = models.model_path(args.name)
    print(path)
    if args.action == "verify":
        ok = models.verify(args.name)
        print("sha256 ok" if ok else "sha256 MISMATCH")
        return 0 if ok else 1
    return 0


def cmd_notebooks(args: argparse.Namespace) -> int:
    from .notebooks import normalize_file, notebook_paths, relative

    paths = [Path(p) for p in args.paths] or notebook_paths()
    changed = [p for p in paths if normalize_file(p, check=args.action == "check")]
    for p in changed:
        print(("not normalised: " if args.action == "check" else "normalised: ") + relative(p))
    if args.action == "check" and changed:
        print("run `kgqa notebooks normalize` and commit the result", file=sys.stderr)
        return 1
    return 0


def cmd_slices(args: argparse.Namespace) -> int:
    from .datasets import load_dataset
    from .slices import build_slices, summary

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

    written = make_workshop(args.out)
    print(f"{len(written)} notebooks without outputs in {relative(written[0].parent) if written else args.out}; "
          "open them with `.venv/bin/jupyter lab` (check the setup with `kgqa doctor`)")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from .reproduce import reproduce

    return reproduce(only=args.only, params=_parse_set(args.set), grid=_parse_grid(args.grid), llm=args.llm,
                     llm_mode=args.llm_mode, out=args.out, resume=args.resume)


def _parse_grid(items: list[str]) -> dict[str, list]:
    """``--grid N_PER_SET=4,50`` → {"N_PER_SET": [4, 50]} (values parsed like --set)."""
    grid = {}
    for item in items:
        key, _, values = item.partition("=")
        grid[key] = [_parse_set([f"{key}={v}"])[key] for v in values.split(",")]
    return grid


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kgqa", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run a method over a dataset (resumable)")
    r.add_argument("--method", required=True)
    r.add_argument("--dataset", required=True, help="e.g. metaqa:1hop:dev, tiny:films, or a .jsonl path")
    r.add_argument("--limit", type=int, default=None, help="the first N questions")
    r.add_argument("--sample", type=int, default=None, help="a seeded random subset of N questions (--seed)")
    r.add_argument("--llm", default=None, help="local | local:qwen2.5-0.5b | openai:MODEL (default $KGQA_LLM or local)")
    r.add_argument("--llm-mode", default=None, choices=["auto", "replay", "live"])
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="method setting")
    r.add_argument("--out", default=None, help="run file (default results/runs/<dataset>__<method>__<model>.jsonl)")
    r.add_argument("--overwrite", action="store_true")
    r.add_argument("--kg", default=None, help="KG for KG-based methods (pgakv, qsm, keqing): miniworld | miniworld:freebase | "
                   "metaqa | tiny | sparql+http://HOST:PORT/PATH#profile=wikidata|freebase|miniworld:… "
                   "(default: the dataset's own)")
    r.add_argument("--no-transcripts", action="store_true",
                   help="keep new LLM answers in the machine's cache only (benchmarks), not in data/llm_cache/")
    r.add_argument("--quiet", action="store_true")
    r.add_argument("--workers", type=int, default=1,
                   help="questions run concurrently (remote LLM/endpoint; the local model serialises its calls)")
    r.set_defaults(fn=cmd_run)

    rep = sub.add_parser("report", help="aggregate run files into a table")
    rep.add_argument("runs", nargs="*")
    rep.add_argument("--metrics", default=None, help="comma-separated, e.g. hits@1,f1")
    rep.add_argument("--out", default=None, help="write Markdown here (and a .csv beside it)")
    rep.set_defaults(fn=cmd_report)

    c = sub.add_parser("cache", help="LLM cache statistics")
    c.add_argument("action", choices=["stats"])
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
    sl.add_argument("--depth", type=int, default=1)
    sl.add_argument("--fanout", type=int, default=100, help="edges kept per node and direction")
    sl.add_argument("--limit", type=int, default=None)
    sl.add_argument("--sample", type=int, default=None)
    sl.add_argument("--seed", type=int, default=0)
    sl.add_argument("--refresh", action="store_true", help="cut again even when cached")
    sl.set_defaults(fn=cmd_slices)
    d = sub.add_parser("doctor", help="check the setup offline (model, embeddings, transcripts, data, endpoints)")
    d.add_argument("--kg", default=None, help="also check a SPARQL endpoint: sparql+http://HOST:PORT/PATH#profile=…")
    d.add_argument("--llm", default=None, help="also check an LLM endpoint, e.g. openai:MODEL (one short call)")
    d.add_argument("--no-model", action="store_true", help="skip assembling/verifying the local model (~1 GB)")
    d.set_defaults(fn=cmd_doctor)
    w = sub.add_parser("workshop", help="copies of the notebooks with outputs stripped (default: workshop/)")
    w.add_argument("--out", default=None)
    w.set_defaults(fn=cmd_workshop)
    rp = sub.add_parser("reproduce", help="execute every notebook with papermill, in order")
    rp.add_argument("--only", nargs="*", help="substrings of notebook names")
    rp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="notebook parameter")
    rp.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                    help="sweep a notebook parameter: one run per value combination, each in its own folder")
    rp.add_argument("--llm", default=None, help="LLM for every notebook (local | local:qwen2.5-0.5b | openai:MODEL)")
    rp.add_argument("--llm-mode", default=None, choices=["auto", "replay", "live"])
    rp.add_argument("--out", default=None, help="folder for executed notebooks (default: in place for the "
                    "defaults, results/reproduce/<params>/ otherwise)")
    rp.add_argument("--resume", action="store_true", help="skip notebooks that already ran with the same parameters")
    rp.set_defaults(fn=cmd_reproduce)
    return p


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean "fix the setup or the command", shown as one line instead of a traceback."""
    from .datasets import DatasetNotFound
    from .kg import QueryTimeout
    from .llm import ReplayMiss
    from .models import ModelNotAvailable
    from .remote import EndpointError
    from .slices import SliceMissing

    return (DatasetNotFound, EndpointError, SliceMissing, QueryTimeout, ReplayMiss, ModelNotAvailable)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except _user_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # unknown dataset / KG / profile names: the message lists the choices
        if "Unknown" not in str(exc) and "unknown" not in str(exc):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
