"""Thin wrapper kept for callers of the old script: the Keqing benchmark lives in
:mod:`kgqa_lib.bench.keqing` (tables ``keqing_metaqa`` and ``keqing_full``). Use instead:

    kgqa bench list keqing_metaqa keqing_full       # completeness per cell
    kgqa bench run keqing_full [--yes]               # estimate, then run/resume what is missing
    kgqa bench report keqing_metaqa keqing_full      # → results/bench/keqing_*.md

    python scripts/bench_keqing.py --save [--prefix keqing_full]   # stripped records → results/bench/runs/<prefix>/
    python scripts/bench_keqing.py --restore                       # → results/runs/ (the runner skips those questions)
    python scripts/bench_keqing.py                                 # the report of --prefix (default keqing_metaqa)"""

from __future__ import annotations

import argparse
from pathlib import Path

from kgqa_lib import bench
from kgqa_lib.bench.keqing import strip, strip_full  # noqa: F401  (importable from here, as before)
from kgqa_lib.paths import results_dir


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default=str(results_dir() / "runs"))
    ap.add_argument("--prefix", default="keqing_metaqa", choices=["keqing_metaqa", "keqing_full"], help="the table")
    ap.add_argument("--save", action="store_true", help="keep stripped records in results/bench/runs/<prefix>/")
    ap.add_argument("--restore", action="store_true", help="copy the stripped records back to results/runs/")
    args = ap.parse_args()
    table = bench.get_table(args.prefix)
    if args.save:
        for name, n in bench.save(table, Path(args.runs)).items():
            print("saved", name, n, "stripped records")
        bench.write_report(table)
        return 0
    if args.restore:
        for t in (bench.get_table("keqing_metaqa"), bench.get_table("keqing_full")):
            for name, what in bench.restore(t, Path(args.runs)).items():
                print(name, what)
        return 0
    print(bench.write_report(table).read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
