"""Sharded runs and grid sweeps on a Dask cluster (``distributed``), then merged.

Every unit of work is the command a job array would run, as a subprocess on a Dask worker:
``kgqa run … --shard i/n --out <run>__shard<i>of<n>.jsonl`` for a run (each shard's command is the
run's :class:`~kgqa_lib.evaluate.spec.RunSpec` with its shard, :meth:`~kgqa_lib.evaluate.spec.RunSpec.to_argv`),
``kgqa reproduce … --index k`` for a grid combination. The cluster only places them; the files are the interface, so
the same shards can be run by Slurm, by hand, or here, and merged the same way (``kgqa report``
merges the shard files into one row, ``kgqa cache merge`` the shards' caches).

Why Dask distributed rather than Ray: it is a 1 MB pure-Python wheel (Ray: a 79 MB binary wheel per
Python version and platform) with wheels for every Python we support, a ``LocalCluster`` that
starts a scheduler and worker processes on 127.0.0.1 in about a second, and the same ``Client``
for an existing cluster (``dask scheduler`` / ``dask worker``, ``dask-jobqueue`` on Slurm/PBS,
``dask-kubernetes``). A shard is a long, independent job: nothing here needs Ray's actors or
object store. Measured start-up and per-shard overhead: ``results/bench/distributed.md``
(``kgqa bench run distributed``).

Caches: shards on one machine share its cache folder (SQLite in WAL mode, safe for many local
writers). On a network file system give each shard its own (``cache="per-shard"``: the worker gets
``KGQA_CACHE_DIR=<cache_root>/shard-<i>`` and ``KGQA_SQLITE_JOURNAL=delete``); the shards' caches are
merged into this machine's cache (and their deferred transcripts into ``data/llm_cache/``) at the end.

    python -m kgqa_lib.distributed run --shards 8 --workers 4 -- --method io --dataset miniworld:simple --llm openai:M
    python -m kgqa_lib.distributed run --shards 8 --address tcp://10.0.0.5:8786 -- --method io --dataset …
    python -m kgqa_lib.distributed reproduce --workers 2 -- --only 31_keqing --grid K=1,2,4,8
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from .errors import SetupError, UsageError, UserError
from .evaluate.spec import ArgvParser, RunOptions, RunSpec, parse_run_argv


@dataclass
class TaskResult:
    """One shard or grid combination as it ran on a worker."""

    name: str
    argv: list[str]
    returncode: int
    seconds: float  # the subprocess, start to exit
    queued_seconds: float  # submitted → started on a worker (the engine's part, with waiting for a free worker)
    worker: str
    stderr_tail: str = ""


@dataclass
class DistributedResult:
    tasks: list[TaskResult]
    files: list[Path] = field(default_factory=list)  # the shard run files (run) / nothing (reproduce)
    cluster_start_seconds: float = 0.0
    wall_seconds: float = 0.0  # first submit → every task done (+ merging the caches); cluster start/stop excluded
    merged: dict[str, int] | None = None  # kgqa cache merge counts (per-shard caches)

    @property
    def failed(self) -> list[TaskResult]:
        return [t for t in self.tasks if t.returncode != 0]


def _run_task(name: str, argv: list[str], env_updates: dict[str, str], submitted: float) -> TaskResult:
    """On a worker: ``python -m kgqa_lib.cli ARGV`` with the given environment additions. The command
    ends with the worker process (:mod:`kgqa_lib.procs`): a cluster stopped or killed leaves no
    ``kgqa run`` behind, holding its run file's lock."""
    import socket

    from .procs import child_env

    started = time.time()
    env = child_env({**os.environ, **env_updates})
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kgqa_lib.cli", *argv], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t
    lines = [ln for ln in (proc.stderr or "").splitlines() if ln.strip() and "\r" not in ln and "it/s]" not in ln]
    return TaskResult(name, list(argv), proc.returncode, round(seconds, 3), round(max(0.0, started - submitted), 3),
                      f"{socket.gethostname()}:{os.getpid()}", "\n".join(lines[-5:]))


def engine_available() -> str | None:
    """None when Dask distributed can be imported, else why not (one line)."""
    try:
        import distributed  # noqa: F401
    except ImportError as exc:
        return f"Dask distributed is not installed ({exc}); `pip install 'kgqa-lib[distributed]'` or `make setup`"
    return None


@contextmanager
def client(address: str | None = None, workers: int = 2) -> Iterator[tuple[Any, float]]:
    """(a ``distributed.Client``, seconds it took to start): connected to ``address`` (a running
    scheduler, e.g. ``tcp://10.0.0.5:8786``), else a ``LocalCluster`` of ``workers`` worker processes
    (one thread each: a shard is one subprocess) bound to 127.0.0.1, closed on exit."""
    if address is None and workers < 1:
        raise UsageError(f"workers must be ≥ 1, got {workers}")
    why = engine_available()
    if why:
        raise SetupError(why)
    from distributed import Client, LocalCluster

    t = time.perf_counter()
    if address:
        c = Client(address, timeout="30s")
        try:
            yield c, time.perf_counter() - t
        finally:
            c.close()
        return
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None, silence_logs=40)
    c = Client(cluster)
    try:
        c.wait_for_workers(workers, timeout=120)
        yield c, time.perf_counter() - t
    finally:
        c.close()
        cluster.close()


def _strip(argv: Sequence[str], *options: str) -> list[str]:
    """``argv`` without the given options (and their values): the driver sets them itself."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in options:
            skip = "=" not in a
            continue
        out.append(a)
    return out


def shard_paths(out: str | Path, shards: int) -> list[Path]:
    """The shard files of the run file ``out``: ``<stem>__shard<i>of<n>.jsonl``."""
    out = Path(out)
    stem = out.name[: -len(".jsonl")] if out.name.endswith(".jsonl") else out.name
    return [out.with_name(f"{stem}__shard{i}of{shards}.jsonl") for i in range(shards)]


def run_sharded(run_args: RunSpec | Sequence[str], shards: int, out: str | Path, *, address: str | None = None,
                workers: int = 2, cache: str = "shared", cache_root: str | Path | None = None,
                env: dict[str, str] | None = None) -> DistributedResult:
    """A run (a :class:`~kgqa_lib.evaluate.spec.RunSpec`, or ``kgqa run`` arguments, checked here before a
    cluster starts; their ``--shard`` and ``--out`` are the driver's) split into ``shards`` shards
    (``--shard i/n``) run on the cluster; shard i writes ``shard_paths(out, shards)[i]``. ``cache``: ``"shared"`` (every shard uses the
    worker's cache folder; right on one machine or a local disk) or ``"per-shard"`` (each its own
    folder under ``cache_root``, rollback journal; merged into this machine's cache afterwards).
    Failed shards are reported in the result (their files keep what they answered; run the same
    call again to resume them). ``kgqa report <the files>`` gives the merged table."""
    if not run_args:
        raise UsageError("no kgqa run arguments: give them after --, e.g. python -m kgqa_lib.distributed run --shards 2 "
                         "--out results/runs/r.jsonl -- --method io --dataset tiny:films")
    if shards < 1:
        raise UsageError(f"shards must be ≥ 1, got {shards}")
    if cache not in ("shared", "per-shard"):
        raise UsageError(f"cache must be 'shared' or 'per-shard', got {cache!r}")
    if cache == "per-shard" and cache_root is None:
        raise UsageError("cache='per-shard' needs cache_root: a folder every worker can write (one sub-folder per shard)")
    spec, options = (run_args, RunOptions()) if isinstance(run_args, RunSpec) else parse_run_argv(run_args)
    files = shard_paths(out, shards)
    files[0].parent.mkdir(parents=True, exist_ok=True)
    with client(address, workers) as (c, start_seconds):
        started = time.perf_counter()
        futures = []
        for i, path in enumerate(files):
            extra = dict(env or {})
            if cache == "per-shard":
                extra.setdefault("KGQA_CACHE_DIR", str(Path(cache_root) / f"shard-{i}"))
                extra.setdefault("KGQA_SQLITE_JOURNAL", "delete")
            argv = ["run", *spec.replace(shard=(i, shards)).to_argv(path, overwrite=options.overwrite, quiet=True)]
            futures.append(c.submit(_run_task, f"shard {i}/{shards}", argv, extra, time.time(),
                                    key=f"kgqa-shard-{i}of{shards}-{time.time_ns()}", pure=False))
        tasks = c.gather(futures)
        ran = time.perf_counter() - started
    result = DistributedResult(tasks, files, round(start_seconds, 3))
    started = time.perf_counter()
    if cache == "per-shard":
        from .llm.chat import LLMCache

        caches = [Path(cache_root) / f"shard-{i}" / "llm_cache.sqlite" for i in range(shards)]
        result.merged = LLMCache(transcripts=True, defer=False).merge([p for p in caches if p.exists()])
    result.wall_seconds = round(ran + time.perf_counter() - started, 3)
    return result


def run_grid(reproduce_args: Sequence[str], *, address: str | None = None, workers: int = 2,
             env: dict[str, str] | None = None) -> DistributedResult:
    """``kgqa reproduce REPRODUCE_ARGS`` (with ``--grid``), one grid combination per task
    (``--index k``), each writing its own folders as the sequential sweep would."""
    from .reproduce import add_arguments, grid_combinations, parse_grid

    args = add_arguments(ArgvParser(prog="kgqa reproduce")).parse_args(_strip(reproduce_args, "--index", "--list"))
    n = len(grid_combinations(parse_grid(args.grid)))
    base = ["reproduce", *_strip(reproduce_args, "--index", "--list")]
    with client(address, workers) as (c, start_seconds):
        started = time.perf_counter()
        futures = [c.submit(_run_task, f"combination {k}/{n}", [*base, "--index", str(k)],
                            {"KGQA_DEFER_TRANSCRIPTS": "1", **(env or {})}, time.time(),
                            key=f"kgqa-grid-{k}of{n}-{time.time_ns()}", pure=False) for k in range(n)]
        tasks = c.gather(futures)
        ran = time.perf_counter() - started
    from .llm.chat import LLMCache

    started = time.perf_counter()
    merged = LLMCache(transcripts=True, defer=False).merge([])  # the combinations' deferred transcripts
    return DistributedResult(tasks, [], round(start_seconds, 3), round(ran + time.perf_counter() - started, 3), merged)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kgqa_lib.distributed", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("run", "reproduce"):
        s = sub.add_parser(name, help=f"kgqa {name} on a Dask cluster; arguments after -- go to kgqa {name}")
        s.add_argument("--address", default=None, help="a running Dask scheduler (default: a LocalCluster on 127.0.0.1)")
        s.add_argument("--workers", type=int, default=2, help="worker processes of the LocalCluster")
        if name == "run":
            s.add_argument("--shards", type=int, required=True, help="number of shards (≥ workers balances better)")
            s.add_argument("--out", required=True, help="the run file; shards write <stem>__shard<i>of<n>.jsonl beside it")
            s.add_argument("--cache", choices=["shared", "per-shard"], default="shared")
            s.add_argument("--cache-root", default=None, help="per-shard caches go to <cache-root>/shard-<i>")
        s.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    rest = a.args[1:] if a.args[:1] == ["--"] else a.args
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    old = signal.signal(signal.SIGTERM, stop) if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL else None
    try:
        if a.command == "run":
            res = run_sharded(rest, a.shards, a.out, address=a.address, workers=a.workers, cache=a.cache,
                              cache_root=a.cache_root)
        else:
            res = run_grid(rest, address=a.address, workers=a.workers)
    except UserError as exc:  # a bad run (method, setting, dataset…) or setup: one line, before any cluster starts
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # the cluster is closed (leaving the context), its commands end with it
        name = str(exc) or "SIGINT"
        print(f"stopped by {name}: the cluster is closed, and with it the commands it ran; each shard's run file "
              "keeps what it answered, and the same command resumes", file=sys.stderr)
        return 128 + (signal.SIGTERM if name == "SIGTERM" else signal.SIGINT)
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)
    for t in res.tasks:
        print(f"{t.name}: exit {t.returncode} in {t.seconds:.1f} s on {t.worker}"
              + (f"\n    {t.stderr_tail.splitlines()[-1]}" if t.returncode and t.stderr_tail else ""))
    print(f"cluster start {res.cluster_start_seconds:.1f} s, wall {res.wall_seconds:.1f} s, "
          f"{len(res.failed)} of {len(res.tasks)} failed" + (f"; caches merged: {res.merged}" if res.merged else ""))
    if res.files:
        for line in shard_lines(res):
            print(line)
        written = [f for f in res.files if f.exists()]
        if written:  # (`kgqa report` without files would report every run under results/runs/)
            from .evaluate.report import print_report

            print_report(written)
    return 1 if res.failed else 0


def shard_lines(res: DistributedResult) -> list[str]:
    """What became of each shard that did not finish (its exit code, and whether its run file holds any
    answers), and how to resume them; nothing when every shard finished."""
    lines = []
    for t, path in zip(res.tasks, res.files):
        if t.returncode == 0:
            continue
        held = sum(1 for line in path.open("rb") if line.strip()) if path.exists() else 0
        lines.append(f"{t.name} did not finish (exit {t.returncode}): "
                     + (f"{path.name} holds {held} record(s)" if held else "it wrote no record"))
    if not any(f.exists() for f in res.files):
        lines.append("no shard wrote a run file: nothing to report")
    if lines and res.failed:
        lines.append(f"{len(res.failed)} of {len(res.tasks)} shard(s) did not finish; the same command resumes them "
                     "(finished questions are skipped)")
    return lines


if __name__ == "__main__":
    sys.exit(main())
