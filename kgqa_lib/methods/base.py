"""What every method shares: the context it runs in, its stages and its result."""

from __future__ import annotations

import ast
import difflib
import functools
import math
import numbers
import time
import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, Literal, Mapping, Union

from ..data.datasets import Question
from ..errors import UserError


@dataclass
class Context:
    """What a method may use. Methods that need no KG (IO, CoT) ignore ``kg``/``embedder``."""

    llm: Any  # kgqa_lib.llm.chat.LLM
    kg: Any = None  # kgqa_lib.kg.graph.KnowledgeGraph
    embedder: Any = None  # kgqa_lib.embed.embedder.Embedder
    settings: dict[str, Any] = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self) -> None:
        # Validated once, against every method's settings (one Context may serve several methods):
        # a typo or a bad value is an error here; values are coerced ("false" → False). Only the
        # keys given are kept (defaults live in each method's settings class), so the run config
        # hash of existing runs is unchanged.
        self.settings = coerce_settings(self.settings or {})

    def get(self, key: str, default: Any = None) -> Any:
        return self.settings.get(key, default)


@dataclass
class Stage:
    """One stage's output, as recorded in the trace."""

    name: str
    output: Any
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        out = self.output
        if hasattr(out, "as_dict"):
            out = out.as_dict()
        return {"name": self.name, "output": out, "seconds": round(self.seconds, 4)}


@dataclass
class MethodResult:
    answers: list[str]
    response: str = ""
    trace: list[Stage] = field(default_factory=list)
    error: str | None = None  # category of a recoverable failure (malformed output, ...)

    def __str__(self) -> str:
        return " | ".join(self.answers) or "(no answer)"

    def to_df(self):
        """The trace as a table: one row per stage, its name and seconds (rounded to ms)."""
        import pandas as pd

        return pd.DataFrame([(s.name, round(s.seconds, 3)) for s in self.trace], columns=["stage", "seconds"])


class Tracer:
    """Times named stages and collects them: ``with tracer.stage("generate") as rec: rec.output = ...``."""

    def __init__(self) -> None:
        self.stages: list[Stage] = []

    def record(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        out = fn(*args, **kwargs)
        self.stages.append(Stage(name, out, time.perf_counter() - t))
        return out


# --------------------------------------------------------------------------------------------
# Settings: one typed class per method (defaults, types, a line of help per field)
# --------------------------------------------------------------------------------------------
class SettingsError(UserError, ValueError):
    """An unknown setting or a value of the wrong type or out of its range; the message names the
    key, the expected type or range and the value, or lists the valid keys."""


def setting(default: Any, help: str, *, min: float | None = None, max: float | None = None) -> Any:
    """A settings field: its default, one line of help (shown by ``kgqa run --help-settings``) and,
    for a number, the smallest and largest value it accepts (``min``/``max``, inclusive). A float
    setting is always finite: nan and inf are refused like a value out of range."""
    return field(default=default, metadata={"help": help, "min": min, "max": max})


@dataclass(frozen=True)
class Settings:
    """Settings every method accepts. A method's own class extends this one (``PGAKVSettings``...);
    :func:`coerce_settings` builds it from ``--set`` strings, notebook parameters or Python values."""

    kg: str | None = setting(None, "name of the KG the questions are asked against (`kgqa run` sets it "
                                   "from --kg or the dataset for KG methods)")

    @classmethod
    def of(cls, ctx: "Context | Mapping[str, Any]") -> "Settings":
        """This class filled from a context's settings (defaults for the keys not given; keys of other
        methods are ignored: one Context may serve several methods)."""
        raw = ctx if isinstance(ctx, Mapping) else ctx.settings
        names = _field_types(cls)
        return cls(**coerce_settings({k: v for k, v in raw.items() if k in names}, cls))

    @classmethod
    def describe(cls) -> list[tuple[str, str, Any, str]]:
        """(name, type, default, help) of every field, in declaration order; the type names the
        field's range when it has one (``int ≥ 1``, ``float in [-1, 1]``)."""
        types_, bounds = _field_types(cls), _field_bounds(cls)
        return [(f.name, _type_name(types_[f.name], bounds[f.name]), f.default if f.default is not MISSING else None,
                 f.metadata.get("help", "")) for f in fields(cls)]


@functools.lru_cache(maxsize=None)
def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls)}


@functools.lru_cache(maxsize=None)
def _field_bounds(cls: type) -> dict[str, tuple[Any, Any]]:
    """(min, max) of every field (None: no bound on that side)."""
    return {f.name: (f.metadata.get("min"), f.metadata.get("max")) for f in fields(cls)}


def _range_name(bounds: tuple[Any, Any]) -> str:
    low, high = bounds
    if low is not None and high is not None:
        return f" in [{low}, {high}]"
    return f" ≥ {low}" if low is not None else f" ≤ {high}" if high is not None else ""


def _in_range(value: Any, bounds: tuple[Any, Any]) -> bool:
    """Whether a coerced value fits its field's bounds (a float must be finite); not a number: True."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return True
    low, high = bounds
    return math.isfinite(value) and (low is None or value >= low) and (high is None or value <= high)


def _optional_of(tp: Any) -> Any:
    """``X`` for ``X | None`` (else None)."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0]
    return None


def _type_name(tp: Any, bounds: tuple[Any, Any] = (None, None)) -> str:
    inner = _optional_of(tp)
    if inner is not None:
        return f"{_type_name(inner, bounds)} or None"
    if tp in (int, float):
        return tp.__name__ + _range_name(bounds) + (" (finite)" if tp is float and bounds[1] is None else "")
    if typing.get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is list:
        return f"list of {_type_name(typing.get_args(tp)[0])}"
    return getattr(tp, "__name__", str(tp))


_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


class _Bad(Exception):
    """A value that does not fit a type (turned into a SettingsError naming the key)."""


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _coerce(value: Any, tp: Any) -> Any:
    inner = _optional_of(tp)
    if inner is not None:
        if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null")):
            return None
        return _coerce(value, inner)
    origin = typing.get_origin(tp)
    if origin is Literal:
        choices = typing.get_args(tp)
        if isinstance(value, str):
            value = value.strip()
            if value not in choices and (isinstance(_literal(value), str) or _literal(value) in choices):
                value = _literal(value)  # a quoted string: "'chain'"; a number of int choices: "3"
        if value in choices and not isinstance(value, bool) and type(value) in {type(c) for c in choices}:
            return next(c for c in choices if c == value)
        raise _Bad
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise _Bad
    if tp is int:
        if isinstance(value, str):
            value = _literal(value)
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)  # (a numpy integer too)
        raise _Bad
    if tp is float:  # an int stays an int (as old runs stored it: their config hash is unchanged)
        if isinstance(value, str):
            text, value = value, _literal(value)
            if isinstance(value, str):
                try:
                    value = float(text)
                except ValueError:
                    raise _Bad from None
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
        if isinstance(value, numbers.Real):
            return float(value)
        raise _Bad
    if tp is str:
        if isinstance(value, str):
            parsed = _literal(value)
            return parsed if isinstance(parsed, str) else value  # '""' (a quoted string) → ""
        raise _Bad
    if origin is list:
        (item,) = typing.get_args(tp)
        if isinstance(value, str):
            parsed = _literal(value)
            value = parsed if isinstance(parsed, (list, tuple)) else [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, (list, tuple)):
            return [_coerce(v, item) for v in value]
        raise _Bad
    raise TypeError(f"settings of type {tp!r} are not supported")  # a bug in a settings class


def _valid_keys_hint(valid: list[str], key: str) -> str:
    close = difflib.get_close_matches(key, valid, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def coerce_settings(raw: Mapping[str, Any], of: "type[Settings] | str | None" = None) -> dict[str, Any]:
    """Check and convert settings given as ``--set`` strings, notebook parameters or Python values.

    ``of``: a settings class, a method name, or None for any registered method's settings (what a
    :class:`Context` accepts, as one context may serve several methods). Returns the keys given
    (no defaults added), each converted to its field's type: bools from true/false/yes/no/on/off/1/0
    in any case, ints and floats from their text, ``None``/``none`` for optional fields, lists from
    ``a,b`` or ``[a, b]``. An unknown key or a value of the wrong type is a :class:`SettingsError`."""
    if of is None:
        (table, bounds), who = _all_setting_types(), ""
    elif isinstance(of, str):
        cls = method_settings(of)
        table, bounds, who = _field_types(cls), _field_bounds(cls), of
    else:
        table, bounds, who = _field_types(of), _field_bounds(of), of.__name__
    out: dict[str, Any] = {}
    for key, value in dict(raw).items():
        if key not in table:
            valid = sorted(table)
            how = f"`kgqa run --method {who} --help-settings`" if isinstance(of, str) else \
                "`kgqa run --method METHOD --help-settings`"
            what = f"no method has a setting {key!r}" if of is None else f"unknown setting {key!r} for {who}"
            raise SettingsError(f"{what}{_valid_keys_hint(valid, str(key))}; valid settings: {', '.join(valid)} "
                                f"(see {how})")
        try:
            out[key] = _coerce(value, table[key])
        except _Bad:
            raise SettingsError(f"setting {key!r}{' of ' + who if who else ''} expects {_type_name(table[key])}"
                                f"{' (true/false/yes/no/1/0)' if table[key] is bool else ''}, got {value!r}") from None
        if not _in_range(out[key], bounds[key]):
            raise SettingsError(f"setting {key!r}{' of ' + who if who else ''} expects "
                                f"{_type_name(table[key], bounds[key])}, got {value!r}")
    return out


MethodFn = Callable[[Question, Context], MethodResult]
_METHODS: dict[str, MethodFn] = {}
_SETTINGS: dict[str, type[Settings]] = {}

#: What a method may be given besides its LLM: the KG its questions are asked against (its name is the
#: ``kg`` setting) and the sentence encoder.
CAPABILITIES = ("kg", "embedder")

#: ``check(dataset name, settings)``: raises a :class:`~kgqa_lib.errors.UserError` for a run the method
#: cannot make sense of (a FuSIC transfer task that is not its dataset's, a KG without an exemplar pool),
#: before anything runs. ``settings`` are the given ones, with ``kg`` when the run names a KG.
RunCheck = Callable[[str, Mapping[str, Any]], None]


@dataclass(frozen=True)
class MethodInfo:
    """What a registered method declares: its prompt files (their hashes enter the run config), its
    settings class, what a run must give it (``needs``) or may give it (``uses``: a KG named with
    ``--kg``, which it reads instead of its own), and its check of a run (``check``)."""

    name: str
    prompts: tuple[str, ...]
    settings: type[Settings]
    needs: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    check: RunCheck | None = None

    def reads(self, what: str) -> bool:
        """Whether the method reads ``what`` ("kg", "embedder") when a run gives it."""
        return what in self.needs or what in self.uses


_INFO: dict[str, MethodInfo] = {}


def register_method(name: str, prompts: tuple[str, ...] = (), settings: type[Settings] = Settings, *,
                    needs: tuple[str, ...] = (), uses: tuple[str, ...] = (),
                    check: RunCheck | None = None) -> Callable[[MethodFn], MethodFn]:
    """Register a method under ``name``; ``prompts`` names the prompt files it uses (their
    hashes go into the run config, so editing a prompt starts a new run); ``settings`` is its
    settings class (a subclass of :class:`Settings`). A key shared by several methods must have
    the same type and range in each (one Context may serve several methods).

    ``needs``: what every run of it must be given, of :data:`CAPABILITIES` — ``"kg"`` (the dataset's
    KG, or the one named with ``--kg``; its name becomes the ``kg`` setting) and ``"embedder"``;
    ``uses``: what it reads only when a run names it (a KG given with ``--kg``); a method that declares
    neither reads no KG, and ``--kg`` is refused for it. ``check(dataset, settings)`` refuses a run it
    cannot make sense of before anything runs (:data:`RunCheck`). The run builder
    (:func:`kgqa_lib.evaluate.spec.build_context`) reads these; nothing else lists them."""
    for what in (*needs, *uses):
        if what not in CAPABILITIES:
            raise TypeError(f"method {name}: unknown capability {what!r} (known: {', '.join(CAPABILITIES)})")
    known, known_bounds = _all_setting_types()
    bounds = _field_bounds(settings)
    for key, tp in _field_types(settings).items():
        if key in known and known[key] != tp:
            raise TypeError(f"setting {key!r} of {name} is {tp}, elsewhere {known[key]}: use one type")
        if key in known and known_bounds[key] != bounds[key]:
            raise TypeError(f"setting {key!r} of {name} has the range {bounds[key]}, elsewhere {known_bounds[key]}: "
                            "use one range")
    info = MethodInfo(name, tuple(prompts), settings, tuple(needs), tuple(uses), check)

    def deco(fn: MethodFn) -> MethodFn:
        fn.prompts = prompts  # type: ignore[attr-defined]
        fn.settings = settings  # type: ignore[attr-defined]
        fn.info = info  # type: ignore[attr-defined]
        _METHODS[name] = fn
        _SETTINGS[name] = settings
        _INFO[name] = info
        _all_setting_types.cache_clear()
        return fn

    return deco


@functools.lru_cache(maxsize=1)
def _all_setting_types() -> tuple[dict[str, Any], dict[str, tuple[Any, Any]]]:
    """(type, (min, max)) of every setting of every registered method, by key."""
    types_, bounds = dict(_field_types(Settings)), dict(_field_bounds(Settings))
    for cls in _SETTINGS.values():
        types_.update(_field_types(cls))
        bounds.update(_field_bounds(cls))
    return types_, bounds


def get_method(name: str) -> MethodFn:
    if name not in _METHODS:
        raise ValueError(f"Unknown method {name!r}; known: {', '.join(method_names())}")
    return _METHODS[name]


def method_settings(name: str) -> type[Settings]:
    """The settings class of a registered method."""
    get_method(name)
    return _SETTINGS[name]


def method_info(name: str) -> MethodInfo:
    """What a registered method declares (:class:`MethodInfo`)."""
    get_method(name)
    return _INFO[name]


def method_names() -> list[str]:
    return sorted(_METHODS)
