"""Measurement tables: the second kind of benchmark table, for what is measured on a machine.

A paper table (:mod:`.core`) is computed from saved question records. A :class:`Measurement`
(the speed benchmarks of :mod:`.speed`) measures the machine instead: ``kgqa bench run NAME``
runs its measurement with the table's options (``--n 1000``…), saves the raw measurements as
``results/bench/<data>`` (JSON, committed) and rewrites its report ``results/bench/<output>`` from
that JSON. As for paper tables, the report is a function of the committed file alone, so
``kgqa bench report --check`` (and ``make test``) regenerates it byte for byte; a table never
measured (no JSON, no report) has nothing to check.

A measurement may use what lives above the bench layer (local servers, the Dask engine: the app
layer). It names those as ``needs``; whoever runs it (the ``kgqa`` command) passes them in, so the
bench layer never imports the app layer (``tests/unit/test_layers.py``)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from ..errors import UsageError, UserError
from .core import TABLES, bench_dir, compare, read_json, write_text


@dataclass(frozen=True)
class Option:
    """One knob of a measurement: ``kgqa bench run NAME --flag VALUE``. The default's type is the
    option's (int, float, str); ``False``: a switch. ``kind="ints"``: comma-separated whole numbers
    ≥ ``low``; ``kind="names"``: comma-separated items of ``choices``."""

    flag: str
    default: Any
    help: str
    low: float | None = None
    kind: str = ""
    choices: tuple[str, ...] = ()

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def parse(self, text: str) -> Any:
        """The value of ``text``; ``argparse.ArgumentTypeError`` saying what is expected when it cannot be."""
        if self.kind:
            items = [i.strip() for i in text.split(",") if i.strip()]
            if not items:
                raise argparse.ArgumentTypeError(f"expects a comma-separated list, got {text!r}")
            if self.kind == "names":
                bad = [i for i in items if i not in self.choices]
                if bad:
                    raise argparse.ArgumentTypeError(f"expects items of {','.join(self.choices)}, got {bad[0]!r}")
                return items
            return [self._number(i, int) for i in items]
        return self._number(text, type(self.default)) if isinstance(self.default, (int, float)) else text

    def _number(self, text: str, kind: type) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects {'a whole number' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        if self.low is not None and value < self.low:
            raise argparse.ArgumentTypeError(f"expects numbers ≥ {self.low:g}, got {value:g}")
        return value

    def shown(self) -> str:
        """``--n 130000`` / ``--fresh`` (a switch), for ``kgqa bench list``."""
        value = "…" if self.default is None else '""' if self.default == "" else self.default
        return self.flag if self.default is False else f"{self.flag} {value}"


@dataclass(frozen=True)
class Measurement:
    """A benchmark table whose saved record is a JSON of measurements (see the module's doc)."""

    name: str
    title: str  # what it measures, one line
    data: str  # the JSON of measurements under results/bench/
    output: str  # the report under results/bench/
    report: Callable[[dict[str, Any]], str]  # the JSON → the report's text (Markdown)
    measure: Callable[..., dict[str, Any]]  # (options, the JSON so far, **needs) → the new JSON
    estimate: Callable[[SimpleNamespace, dict[str, Any]], str]  # (options, the JSON so far) → one line
    options: tuple[Option, ...] = ()
    target: str = ""
    verdict: Callable[[dict[str, Any]], bool] | None = None  # the target met by these numbers?
    # what the measurement is given as keywords: app-layer modules ("servers", "distributed"), or "save"
    # (saves the JSON so far and rewrites the report: a long measurement keeps each finished part)
    needs: tuple[str, ...] = field(default=())
    requires: str = ""  # what the machine needs besides the package (data, binaries)
    status: Callable[[dict[str, Any]], list[str]] | None = None  # more lines of `kgqa bench list` (the JSON → lines)

    @property
    def data_path(self) -> Path:
        return bench_dir() / self.data

    @property
    def output_path(self) -> Path:
        return bench_dir() / self.output


MEASUREMENTS: dict[str, Measurement] = {}


def register(m: Measurement) -> Measurement:
    """Add a measurement table (its name must be new among all tables, its files too)."""
    old = MEASUREMENTS.get(m.name)
    if m.name in TABLES or (old is not None and old.report.__module__ != m.report.__module__):
        raise ValueError(f"benchmark table {m.name!r} is registered twice")
    files = {t.output for t in TABLES.values()} | {f for o in MEASUREMENTS.values() if o.name != m.name
                                                      for f in (o.output, o.data)}
    if {m.output, m.data} & files:
        raise ValueError(f"benchmark table {m.name!r} writes {m.output} or {m.data}, which another table writes")
    MEASUREMENTS[m.name] = m
    return m


def lookup(names: list[str] | None = None) -> list[Any]:
    """Tables of both kinds by name (none given: every paper table, then every measurement table)."""
    known: dict[str, Any] = {**TABLES, **MEASUREMENTS}
    if not names:
        return list(known.values())
    bad = [n for n in names if n not in known]
    if bad:
        raise UserError(f"unknown benchmark table {bad[0]!r}; known: {', '.join(known)} (see `kgqa bench list`)")
    return [known[n] for n in names]


def read(m: Measurement) -> dict[str, Any]:
    """The committed measurements ({} when never measured; a JSON that does not parse is a
    :class:`~kgqa_lib.errors.UserError` naming the file)."""
    return read_json(m.data_path, f"measure again with `kgqa bench run {m.name}`")


def render(m: Measurement) -> str | None:
    """The report, from the JSON alone (None when there is no JSON)."""
    data = read(m)
    return m.report(data) if data else None


def write_report(m: Measurement) -> Path | None:
    text = render(m)
    if text is None:
        return None
    write_text(m.output_path, text)
    return m.output_path


def check(m: Measurement) -> str | None:
    """None when the committed report is what the committed JSON gives (or neither exists); else
    what differs, in one line."""
    text = render(m)
    if text is None:
        return None if not m.output_path.exists() else \
            f"{m.output} has no {m.data} to regenerate it from (measure with `kgqa bench run {m.name}`)"
    return compare(m.output_path, text, m.name, f"{m.data} gives")


# ---------------------------------------------------------------- options, estimate, run
class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message} (see `kgqa bench list {self.prog.split()[-1]}` for its options)")


def parse_options(m: Measurement, argv: list[str]) -> SimpleNamespace:
    """The table's options from ``argv`` (defaults for those not given); a bad or unknown one is a
    :class:`UsageError` (one line, exit code 2)."""
    p = _Parser(prog=f"kgqa bench run {m.name}", add_help=False, allow_abbrev=False)
    for o in m.options:
        if o.default is False:
            p.add_argument(o.flag, action="store_true", help=o.help)
        else:
            p.add_argument(o.flag, type=o.parse, default=o.default, help=o.help)  # a str default is parsed too
    return SimpleNamespace(**vars(p.parse_args(argv)))


def stamp() -> dict[str, Any]:
    """When and where a measurement ran (added to every JSON it writes)."""
    return {"measured_at": time.strftime("%Y-%m-%d %H:%M"),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "platform": platform.platform(terse=True)}}


def write_json(m: Measurement, data: dict[str, Any]) -> None:
    write_text(m.data_path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def save(m: Measurement, data: dict[str, Any]) -> Path | None:
    """Write the JSON (with :func:`stamp`) and rewrite the report from it."""
    data.update(stamp())
    write_json(m, data)
    return write_report(m)


def run(m: Measurement, options: SimpleNamespace, provide: dict[str, Any] | None = None,
        echo: Callable[[str], None] = print) -> int:
    """Measure (given ``provide[n]`` for each of ``m.needs``), save the JSON, rewrite the report;
    1 when the table has a target these numbers miss, else 0."""
    provide = {"save": lambda data: save(m, data), **(provide or {})}
    missing = [n for n in m.needs if n not in provide]
    if missing:
        raise UserError(f"{m.name} needs {', '.join(missing)} (run it with `kgqa bench run {m.name}`)")
    data = m.measure(options, read(m), **{n: provide[n] for n in m.needs})
    path = save(m, data)
    echo(f"{m.name}: wrote results/bench/{m.data} and {path.name if path else '(no report)'}")
    if m.verdict is not None and not m.verdict(data):
        echo(f"{m.name}: target not met ({m.target})")
        return 1
    return 0


def measured(data: dict[str, Any]) -> str:
    """When and where the JSON says it was measured (what it records of it)."""
    when = data.get("measured_at") or ", ".join(sorted({v["run_at"] for v in data.values()
                                                         if isinstance(v, dict) and "run_at" in v}))
    machine = data.get("machine") or data.get("meta") or {}
    cpus = machine.get("cpus") or machine.get("cpu_count") or data.get("cpu_count") or data.get("cores")
    python = machine.get("python") or data.get("python")
    where = ", ".join(filter(None, [f"{cpus} CPUs" if cpus else "", f"Python {python}" if python else "",
                                    machine.get("platform", "")]))
    return "; ".join(filter(None, [f"measured {when}" if when else "date not recorded in the JSON", where]))


def status_lines(m: Measurement) -> list[str]:
    """Lines of ``kgqa bench list`` for one measurement table (a JSON that does not parse: an error line)."""
    lines = [f"{m.name}: {m.title} → results/bench/{m.output}"]
    try:
        data = read(m)
    except UserError as exc:
        return lines + [f"  error: {exc}"]
    lines.append(f"  measurement: results/bench/{m.data} " + (f"({measured(data)})" if data else "(not measured yet)"))
    if m.target:
        met = "" if not data or m.verdict is None else (" — met" if m.verdict(data) else " — NOT met")
        lines.append(f"  target: {m.target}{met}")
    if data.get("note"):
        lines.append(f"  note: {data['note']}")
    if data and m.status is not None:
        lines += m.status(data)
    if m.requires:
        lines.append(f"  requires: {m.requires}")
    if m.options:
        w = max(len(o.shown()) for o in m.options)
        lines += ["  options (defaults shown):"] + [f"    {o.shown():<{w}}  {o.help}" for o in m.options]
    return lines
