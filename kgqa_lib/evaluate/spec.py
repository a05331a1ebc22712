"""A run as one value, and the one place that turns it into what a method runs with.

:class:`RunSpec` says what a run is: method, dataset, KG, the method's settings (typed: coerced
through the method's declared settings class), the model and its mode, seed, the selection of
questions (sample, limit, shard) and how it is executed (workers, LLM timeout, transcripts).
``kgqa run`` parses its arguments into one (:meth:`RunSpec.from_argv`; the argument definitions live
here, :func:`add_run_arguments`, so the CLI, the benchmark cells and :mod:`kgqa_lib.distributed`
share one parser), a benchmark cell is one without a model (``Cell.spec(llm)``), a subprocess gets
one back as arguments (:meth:`RunSpec.to_argv`, which round-trips), and a notebook asks for the
context of one (:func:`context_for`).

:func:`build_context` is the one builder: the dataset (and its shard), the LLM name checked, the KG the
method reads (its own capabilities, declared when it registered: ``needs``/``uses``) and the encoder,
the transcripts policy (only runs on the project's own data write ``data/llm_cache/``), the LLM with
its cache, and the :class:`~kgqa_lib.methods.Context`. Everything it can check is checked before any
cache or run file is opened: an unknown method, setting or value, ``--kg`` for a method that reads no KG,
a dataset that names no KG for a method that needs one, a method's own check of the run (a FuSIC
transfer task that is not its dataset's, a Keqing KG without a question pool) — each a one-line
:class:`~kgqa_lib.errors.UsageError`.

The run file (``--out``), ``--overwrite`` and ``--quiet`` are kept apart, in :class:`RunOptions`: where
the records go, whether an old file is replaced and whether a progress bar is drawn change nothing in
what is run or in its records' configuration, so a benchmark cell (whose file is its table's) and the
shards of a sharded run (a file each) share one spec.
"""

from __future__ import annotations

import argparse
import functools
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..errors import UsageError


# --------------------------------------------------------------------------------------------
# Argument checks, as argparse types: a bad value is one line on stderr, exit code 2
# --------------------------------------------------------------------------------------------
def int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expects a number ≥ {low}, got {value}")
        return value

    parse.__name__ = f"int ≥ {low}"
    return parse


positive_int = int_at_least(1)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expects a number of seconds > 0, got {text!r}")
    return value


def key_value(text: str) -> tuple[str, str]:
    """``--set KEY=VALUE`` → (KEY, VALUE); the value is converted later, by the setting's type."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expects KEY=VALUE (e.g. --set threshold=0.5), got {text!r}")
    return key.strip(), value


def shard_arg(text: str) -> tuple[int, int]:
    """``--shard i/n`` → (i, n), 0 ≤ i < n."""
    i, sep, n = text.partition("/")
    try:
        index, count = int(i), int(n)
    except ValueError:
        index = count = -1
    if not sep or count < 1 or not 0 <= index < count:
        raise argparse.ArgumentTypeError(f"expects i/n with 0 ≤ i < n (e.g. --shard 0/4 … 3/4), got {text!r}")
    return index, count


def no_file_above(path: Path, text: str) -> None:
    """The nearest existing folder of ``path`` (itself or a parent) must be a folder, not a file."""
    for parent in (path, *path.parents):
        if parent.exists():
            if not parent.is_dir():
                raise argparse.ArgumentTypeError(f"{text!r} cannot be created: {str(parent)!r} is a file, not a folder")
            return


def out_file(text: str) -> str:
    """``--out FILE``: a file path whose folders exist or can be created (checked before anything runs)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder: give the path of a file (in it, or elsewhere)")
    no_file_above(path.parent, text)
    return text


def run_file(text: str) -> str:
    """``kgqa run --out FILE``: as :func:`out_file`, and a plain ``.jsonl`` (answers are appended one line
    at a time, which a gzip file cannot take; ``kgqa bench`` keeps compressed ``.jsonl.gz`` copies)."""
    if text.lower().endswith((".gz", ".gzip")):
        raise argparse.ArgumentTypeError(f"{text!r} is a gzip name: a run is written as plain JSONL, one answer a "
                                         f"line; give a .jsonl path (e.g. {text[:text.lower().rindex('.gz')]!r})")
    return out_file(text)


class ArgvParser(argparse.ArgumentParser):
    """A bad command line is a :class:`~kgqa_lib.errors.UsageError` (one line on stderr, exit code 2:
    see :func:`kgqa_lib.cli.main`), never a SystemExit."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def add_run_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of ``kgqa run`` (a :class:`RunSpec`, and the :class:`RunOptions` beside it)."""
    p.add_argument("--method", required=True, help="io | cot | sc | qsm | pgakv | fusic | keqing | tog | kbbinder | "
                   "langchain_sparql (its settings: --help-settings)")
    p.add_argument("--dataset", default=None, help="e.g. metaqa:1hop:dev, tiny:films, or a .jsonl path (required)")
    p.add_argument("--help-settings", action="store_true",
                   help="list the method's settings (--set KEY=VALUE) with types, defaults and help, and exit")
    p.add_argument("--limit", type=positive_int, default=None, help="the first N questions")
    p.add_argument("--sample", type=positive_int, default=None, help="a seeded random subset of N questions (--seed)")
    p.add_argument("--shard", type=shard_arg, default=None, metavar="i/n",
                   help="only shard i of n (0-based) of the selected questions (after --sample/--limit), by a "
                        "stable hash of the qid; `kgqa report` merges the n shard files into one row")
    p.add_argument("--llm", default=None, help="local | local:qwen2.5-0.5b | server[:MODEL][?slots=N] (a managed "
                   "llama-server, `make llama-server`) | openai:MODEL (default $KGQA_LLM or local)")
    p.add_argument("--llm-mode", default=None, choices=["auto", "replay", "live"])
    p.add_argument("--llm-timeout", type=positive_seconds, default=None, metavar="SECONDS",
                   help="seconds one call to an LLM endpoint may take in all, retries included (default "
                        "$KGQA_LLM_TIMEOUT or 300; the embedded model needs none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", action="append", default=[], type=key_value, metavar="KEY=VALUE",
                   help="method setting (see --help-settings)")
    p.add_argument("--out", type=run_file, default=None,
                   help="run file (default results/runs/<dataset>__<method>__<model>.jsonl)")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--kg", default=None, help="the KG the questions are asked against, for the methods that read one "
                   "(pgakv, qsm, keqing, tog, kbbinder; langchain_sparql): miniworld | miniworld:freebase | metaqa | "
                   "tiny | grailqa-fragment | sparql+http://HOST:PORT/PATH#profile=wikidata|freebase|miniworld:… | "
                   "slices:sparql+… (default: the dataset's own)")
    p.add_argument("--no-transcripts", action="store_true",
                   help="keep new LLM answers in the machine's cache only (benchmarks), not in data/llm_cache/")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--workers", type=positive_int, default=1,
                   help="questions run concurrently (remote LLM/endpoint; the local model serialises its calls)")
    return p


@functools.lru_cache(maxsize=1)
def run_parser() -> ArgvParser:
    """The parser of ``kgqa run``'s arguments alone (without the ``run``)."""
    return add_run_arguments(ArgvParser(prog="kgqa run"))


# --------------------------------------------------------------------------------------------
# The value
# --------------------------------------------------------------------------------------------
class FrozenSettings(Mapping[str, Any]):
    """A run's settings: read-only, ordered by key, hashable, equal to a dict of the same items."""

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items = tuple(sorted((str(k), _frozen(v)) for k, v in dict(items or {}).items()))
        self._dict = {k: _thawed(v) for k, v in self._items}

    def __getitem__(self, key: str) -> Any:
        return self._dict[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def __hash__(self) -> int:
        return hash(self._items)

    def __repr__(self) -> str:
        return repr(self._dict)


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, (list, tuple)) else value


def _thawed(value: Any) -> Any:
    return [_thawed(v) for v in value] if isinstance(value, tuple) else value


@dataclass(frozen=True)
class RunSpec:
    """One run: ``kgqa run``'s arguments as a typed value (see the module). ``settings`` are the method's
    settings given (no defaults added: the run configuration holds what was given), coerced to their
    declared types; the KG is ``kg`` (None: the dataset's own, for a method that needs one), never a
    setting. ``llm``/``llm_mode`` None: ``$KGQA_LLM`` / ``$KGQA_LLM_MODE`` or their defaults where the run is
    built. Constructing one checks it (:meth:`__post_init__`); nothing is loaded."""

    method: str
    dataset: str
    kg: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    llm: str | None = None
    llm_mode: str | None = None
    seed: int = 0
    sample: int | None = None
    limit: int | None = None
    shard: tuple[int, int] | None = None
    workers: int = 1
    llm_timeout: float | None = None
    no_transcripts: bool = False

    def __post_init__(self) -> None:
        from ..llm.chat import MODES, check_llm
        from ..methods import coerce_settings, method_info

        if not self.dataset:
            raise UsageError("kgqa run needs --dataset (e.g. tiny:films, miniworld:simple, metaqa:1hop:dev or a "
                             ".jsonl file)")
        try:
            info = method_info(self.method)
        except ValueError as exc:  # "Unknown method …; known: …"
            raise UsageError(str(exc)) from None
        settings = coerce_settings(dict(self.settings or {}), self.method)  # unknown setting, bad value
        if "kg" in settings:
            raise UsageError(f"the KG is not a setting: give it with --kg {settings['kg']} (RunSpec(kg=…)), not "
                             "--set kg=…")
        if self.kg is not None and not info.reads("kg"):
            task = " (its KGs come from its transfer task: --set task=SOURCE>TARGET)" if "task" in \
                {f.name for f in fields(info.settings)} else ""
            raise UsageError(f"{self.method} reads no KG{task}: drop --kg {self.kg}")
        for name, low in (("seed", None), ("sample", 1), ("limit", 1), ("workers", 1)):
            value = getattr(self, name)
            if value is None and name in ("sample", "limit"):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or (low is not None and value < low):
                raise UsageError(f"{name} expects a whole number{f' ≥ {low}' if low is not None else ''}, got {value!r}")
        if self.shard is not None:
            shard = tuple(self.shard)
            if len(shard) != 2 or not all(isinstance(x, int) for x in shard) or not 0 <= shard[0] < shard[1]:
                raise UsageError(f"shard expects (i, n) with 0 ≤ i < n, got {self.shard!r}")
            object.__setattr__(self, "shard", shard)
        if self.llm_timeout is not None:
            try:
                positive_seconds(str(self.llm_timeout))
            except argparse.ArgumentTypeError as exc:
                raise UsageError(f"llm_timeout {exc}") from None
        if self.llm_mode is not None and self.llm_mode not in MODES:
            raise UsageError(f"LLM mode must be one of {MODES}, got {self.llm_mode!r}")
        if self.llm is not None:
            check_llm(self.llm, "replay")  # the name and its options (a key or a server is the builder's to check)
        object.__setattr__(self, "settings", FrozenSettings(settings))
        object.__setattr__(self, "no_transcripts", bool(self.no_transcripts))
        if info.check is not None:
            from ..kg.remote import redact_url

            given = dict(settings, **({"kg": redact_url(self.kg)} if self.kg and info.reads("kg") else {}))
            info.check(self.dataset, given)

    # ---------------------------------------------------------------- command lines
    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "RunSpec":
        """The spec of parsed ``kgqa run`` arguments (:func:`add_run_arguments`)."""
        return cls(method=args.method, dataset=args.dataset, kg=args.kg, settings=dict(args.set or []), llm=args.llm,
                   llm_mode=args.llm_mode, seed=args.seed, sample=args.sample, limit=args.limit, shard=args.shard,
                   workers=args.workers, llm_timeout=args.llm_timeout, no_transcripts=args.no_transcripts)

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> "RunSpec":
        """The spec of ``kgqa run ARGV`` (``--out``/``--overwrite``/``--quiet`` are :class:`RunOptions`:
        :func:`parse_run_argv` gives both)."""
        return parse_run_argv(argv)[0]

    def to_argv(self, out: str | Path | None = None, *, overwrite: bool = False, quiet: bool = False) -> list[str]:
        """``kgqa run`` arguments that give this spec back (``RunSpec.from_argv(s.to_argv()) == s``), with
        the run file and options when given. Only what differs from the defaults is written."""
        argv = ["--method", self.method, "--dataset", self.dataset]
        if self.kg is not None:
            argv += ["--kg", self.kg]
        for key, value in self.settings.items():
            argv += ["--set", f"{key}={self._setting_text(key, value)}"]
        for flag, value in (("--llm", self.llm), ("--llm-mode", self.llm_mode), ("--llm-timeout", self.llm_timeout),
                            ("--sample", self.sample), ("--limit", self.limit)):
            if value is not None:
                argv += [flag, str(value)]
        if self.seed:
            argv += ["--seed", str(self.seed)]
        if self.shard is not None:
            argv += ["--shard", f"{self.shard[0]}/{self.shard[1]}"]
        if self.workers != 1:
            argv += ["--workers", str(self.workers)]
        if self.no_transcripts:
            argv.append("--no-transcripts")
        if out is not None:
            argv += ["--out", str(out)]
        return argv + (["--overwrite"] if overwrite else []) + (["--quiet"] if quiet else [])

    def command(self, out: str | Path | None = None) -> str:
        """The ``kgqa run`` command line of this spec, as a shell reads it."""
        import shlex

        return "kgqa run " + " ".join(shlex.quote(a) for a in self.to_argv(out))

    def _setting_text(self, key: str, value: Any) -> str:
        """A setting's value as ``--set`` text that coerces back to the same value of the same type."""
        from ..methods import coerce_settings

        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str):
            text = value
        else:
            text = repr(value)
        back = coerce_settings({key: text}, self.method)[key]
        return text if back == value and type(back) is type(value) else repr(value)

    def replace(self, **changes: Any) -> "RunSpec":
        """This spec with some fields changed (checked again)."""
        return replace(self, **changes)


@dataclass(frozen=True)
class RunOptions:
    """What ``kgqa run`` is told beside its spec: the run file (None: :meth:`RunContext.default_out`),
    whether an old file of another configuration is replaced, whether a progress bar is drawn."""

    out: str | None = None
    overwrite: bool = False
    quiet: bool = False


def parse_run_argv(argv: Sequence[str]) -> tuple[RunSpec, RunOptions]:
    """``kgqa run ARGV`` → (its spec, its options); a bad argument is a UsageError."""
    args = run_parser().parse_args(list(argv))
    return RunSpec.from_args(args), RunOptions(args.out, args.overwrite, args.quiet)


# --------------------------------------------------------------------------------------------
# The one builder
# --------------------------------------------------------------------------------------------
#: Dataset names whose head names their KG when the dataset itself does not
KG_OF_HEAD = ("miniworld", "metaqa", "tiny")


def resolve_kg(spec: RunSpec, dataset: Any) -> str:
    """The KG a run's questions are asked against: ``--kg``, else the dataset's own (``Dataset.kg``, or
    the head of its name: ``miniworld``, ``metaqa``, ``tiny``). A dataset that names none, or names one
    without an embedded copy (Wikidata, Freebase), is a :class:`~kgqa_lib.errors.UsageError` saying how
    to give one — never another KG in its place."""
    from ..kg.sources import KGS

    if spec.kg:
        return spec.kg
    name = dataset.kg or (spec.dataset.split(":")[0] if spec.dataset.split(":")[0] in KG_OF_HEAD else None)
    if not name:
        raise UsageError(f"{spec.method} asks its questions against a KG and {spec.dataset} names none: give one "
                         "with --kg (miniworld, miniworld:freebase, metaqa, tiny, grailqa-fragment, or "
                         "sparql+http://HOST:PORT/PATH#profile=…)")
    if name not in KGS and not name.startswith(("sparql+", "slices:")):
        raise UsageError(f"{dataset.name} is asked against {name}, which has no embedded copy: give an endpoint "
                         f"with --kg 'sparql+http://HOST:PORT/PATH#profile={name}' or its per-question slices with "
                         f"--kg 'slices:sparql+…#profile={name}' (`kgqa slices build`)")
    return name


@dataclass(frozen=True)
class RunPlan:
    """A spec resolved against its data, before anything heavy is loaded: the dataset (selected and
    sharded), the KG the method is given (None: none), the settings the context gets (the spec's, and
    ``kg`` when a KG is given; endpoint credentials redacted) and whether new LLM answers are
    transcribed into ``data/llm_cache/`` (runs on the project's own data only)."""

    spec: RunSpec
    dataset: Any  # kgqa_lib.data.datasets.Dataset
    kg: str | None
    settings: Mapping[str, Any]
    transcripts: bool

    def config(self, model_id: str | None = None) -> dict[str, Any]:
        """The configuration the run's records will carry (:func:`kgqa_lib.evaluate.runner.run_config`),
        for the model ``model_id`` (default: the one the spec's LLM name resolves to)."""
        from ..llm.chat import llm_model_id
        from .runner import run_config

        return run_config(self.spec.method, self.dataset.name, model_id or llm_model_id(self.spec.llm),
                          self.spec.seed, dict(self.settings))


def plan(spec: RunSpec, dataset: Any = None) -> RunPlan:
    """Resolve ``spec``: load its dataset (or take ``dataset``, a loaded one, selected as the spec says),
    its KG name (:func:`resolve_kg`) for a method that reads one, and run the method's own check with
    the final settings. Loads no KG, encoder or model."""
    from ..data.datasets import load_dataset
    from ..kg import grailqa_fragment  # noqa: F401  (registers grailqa:fragment…)
    from ..kg.remote import redact_url
    from ..methods import method_info
    from ..paths import data_dir

    if dataset is None:
        ds = load_dataset(spec.dataset, limit=spec.limit, sample=spec.sample, seed=spec.seed)
    else:
        ds = dataset.sample(spec.sample, spec.seed).head(spec.limit)
    if spec.shard:  # after --sample/--limit: the shards of one selection partition it
        ds = ds.shard(*spec.shard)
    info = method_info(spec.method)
    settings = dict(spec.settings)
    kg = None
    if "kg" in info.needs or (spec.kg and info.reads("kg")):
        kg = resolve_kg(spec, ds)
        settings["kg"] = redact_url(kg)  # run records never hold endpoint credentials
    if info.check is not None:
        info.check(spec.dataset, settings)
    # Transcripts under data/llm_cache/ are committed, so only runs on the project's own data write
    # them; prompts of external benchmarks stay in the machine's SQLite cache.
    own = bool(ds.source_files) and all(data_dir().resolve() in p.resolve().parents for p in ds.source_files)
    return RunPlan(spec, ds, kg, FrozenSettings(settings), own and not spec.no_transcripts)


@dataclass
class RunContext:
    """A built run: its plan (spec, dataset, KG name, settings) and the method's :class:`Context`."""

    plan: RunPlan
    ctx: Any  # kgqa_lib.methods.Context

    @property
    def spec(self) -> RunSpec:
        return self.plan.spec

    @property
    def dataset(self) -> Any:
        return self.plan.dataset

    def config(self) -> dict[str, Any]:
        """The configuration the runner writes into this run's records."""
        from .runner import run_config

        return run_config(self.spec.method, self.dataset.name, self.ctx.llm.model_id, self.ctx.seed, self.ctx.settings)

    def default_out(self) -> Path:
        """``results/runs/<dataset>__<method>__<model>[__sample<N>-seed<S>][-shard<i>of<n>].jsonl``."""
        from .runner import default_run_path

        s = self.spec
        tag = f"sample{s.sample}-seed{s.seed}" if s.sample else ""
        if s.shard:
            tag = "-".join(filter(None, [tag, f"shard{s.shard[0]}of{s.shard[1]}"]))
        return default_run_path(s.method, self.dataset.name, self.ctx.llm.model_id, tag)

    def run(self, out: str | Path | None = None, *, overwrite: bool = False, progress: bool = True):
        """Run it (:func:`kgqa_lib.evaluate.runner.run`), into ``out`` (default :meth:`default_out`)."""
        from .runner import run

        return run(self.spec.method, self.dataset, self.ctx, out or self.default_out(), overwrite=overwrite,
                   progress=progress, workers=self.spec.workers, shard=self.spec.shard)


def build_context(spec: RunSpec, *, dataset: Any = None, llm: Any = None, graph: Any = None,
                  embedder: Any = None) -> RunContext:
    """The one context builder: :func:`plan`, then the LLM name checked (an API key where one is needed),
    the KG the method reads (a named one, an endpoint, or ``slices:`` — per-question slices of an endpoint,
    built when missing), the encoder when the method needs it, the LLM with its cache (transcripts per
    :attr:`RunPlan.transcripts`; a shard defers them, :class:`~kgqa_lib.llm.chat.LLMCache`) and the
    :class:`~kgqa_lib.methods.Context`. ``dataset``: a loaded dataset to use instead of loading the spec's;
    ``llm``: an LLM object to use instead of making one from the spec's name (notebooks share one);
    ``graph``: the KG the plan names (``spec.kg`` or the dataset's), already loaded, and ``embedder``: an
    encoder, to use instead of loading them again (notebooks share them between runs). They are given to
    the method only where it reads them, as a loaded KG or encoder would be: a method that reads no KG gets
    none, whatever ``graph`` is. ``graph`` is not compared with the name: it must be that KG."""
    from ..methods import Context, method_info

    p = plan(spec, dataset)
    if llm is None:
        from ..llm.chat import check_llm

        check_llm(spec.llm, spec.llm_mode)  # no API key: before any cache is opened
    kg, encoder = None, None
    if p.kg is not None and graph is not None:
        kg = graph
    elif p.kg is not None:
        if p.kg.startswith("slices:"):  # cached per-question slices of an endpoint (built when missing)
            from ..kg.slices import kg_for_run

            kg = kg_for_run(p.dataset, p.kg)
        else:
            from ..kg.sources import load_named

            kg = load_named(p.kg)
    if "embedder" in method_info(spec.method).needs:
        from ..embed.embedder import Embedder

        encoder = embedder if embedder is not None else Embedder()
    if llm is None:
        from ..llm.chat import LLMCache, make_llm

        # a shard (one of many writers, maybe on other machines) keeps its new answers in its cache
        # until `kgqa cache merge` transcribes them: data/llm_cache/ is never appended to concurrently
        llm = make_llm(spec.llm, spec.llm_mode, cache=LLMCache(transcripts=True if p.transcripts else None,
                                                               defer=True if spec.shard else None),
                       timeout=spec.llm_timeout)
    ctx = Context(llm=llm, kg=kg, embedder=encoder, settings=dict(p.settings), seed=spec.seed)
    return RunContext(p, ctx)


def context_for(method: str, dataset: Any, *, llm: Any = None, llm_mode: str | None = None, kg: str | None = None,
                graph: Any = None, embedder: Any = None, seed: int = 0, sample: int | None = None,
                limit: int | None = None, no_transcripts: bool = False, settings: Mapping[str, Any] | None = None,
                **more_settings: Any):
    """The :class:`~kgqa_lib.methods.Context` a notebook runs ``method`` with on ``dataset`` (a name, or a
    loaded :class:`~kgqa_lib.data.datasets.Dataset`), built as ``kgqa run`` builds it
    (:func:`build_context`): the dataset's KG (or ``kg``) when the method reads one, with its name as the
    ``kg`` setting, the encoder when it needs one, the LLM (a name such as ``"local"``, or an LLM object
    to share) with the transcripts policy of the dataset. Settings come as ``settings`` and/or keywords:
    ``context_for("keqing", "keqing:miniworld", llm=LLM, llm_mode=LLM_MODE, K=2)``. A notebook that runs
    several methods or settings shares what it loaded once: the LLM object, ``graph`` (the KG named by
    ``kg`` or the dataset, loaded) and ``embedder`` — each given only to a method that reads it."""
    from ..data.datasets import Dataset

    loaded = dataset if isinstance(dataset, Dataset) else None
    spec = RunSpec(method=method, dataset=loaded.name if loaded is not None else dataset, kg=kg,
                   settings={**dict(settings or {}), **more_settings}, llm=llm if isinstance(llm, str) else None,
                   llm_mode=llm_mode, seed=seed, sample=sample, limit=limit, no_transcripts=no_transcripts)
    return build_context(spec, dataset=loaded, llm=None if llm is None or isinstance(llm, str) else llm, graph=graph,
                         embedder=embedder).ctx
