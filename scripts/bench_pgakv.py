"""Thin wrapper kept for callers of the old script: the PG&AKV Table 2 benchmark lives in
:mod:`kgqa_lib.bench.pgakv` (table ``pgakv_t2``). Use instead:

    kgqa bench list pgakv_t2          # completeness per cell
    kgqa bench run pgakv_t2 [--yes]   # estimate, then run/resume what is missing
    kgqa bench report pgakv_t2        # → results/bench/pgakv_table2.md (from the saved records)

    python scripts/bench_pgakv.py --save      # results/runs/t2_*.jsonl → results/bench/runs/pgakv_t2/
    python scripts/bench_pgakv.py --restore   # and back, to resume the runs"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kgqa_lib import bench
from kgqa_lib.paths import results_dir


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default=str(results_dir() / "runs"))
    ap.add_argument("--save", action="store_true", help="gzip results/runs/t2_*.jsonl into results/bench/runs/pgakv_t2/")
    ap.add_argument("--restore", action="store_true", help="copy the saved runs back to results/runs/ (to resume)")
    args = ap.parse_args()
    table = bench.get_table("pgakv_t2")
    if args.save:
        for name, n in bench.save(table, Path(args.runs)).items():
            print("saved", name, n, "records")
        bench.write_report(table)
        return 0
    if args.restore:
        for name, what in bench.restore(table, Path(args.runs)).items():
            print(name, what)
        return 0
    print(bench.write_report(table).read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
