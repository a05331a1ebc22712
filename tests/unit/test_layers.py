"""The library's layers: data flows one way, data → kg / llm / embed → methods → evaluate → bench →
the CLI and notebooks. Every import in ``kgqa_lib`` (module level or inside a function, and module
names given to ``importlib.import_module`` / ``__import__``) may name its own layer or a layer
below it, never one above; the layers of one tier (kg, llm, embed) do not import each other."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kgqa_lib

#: (layer, tier, the modules it holds: a package holds its submodules). Lower tiers first.
LAYERS = [
    ("base", 0, ["kgqa_lib", "kgqa_lib.paths", "kgqa_lib.errors", "kgqa_lib._sqlite", "kgqa_lib.text",
              "kgqa_lib.procs"]),
    ("data", 1, ["kgqa_lib.data"]),
    ("kg", 2, ["kgqa_lib.kg"]),
    ("llm", 2, ["kgqa_lib.llm"]),
    ("embed", 2, ["kgqa_lib.embed"]),
    ("methods", 3, ["kgqa_lib.methods"]),
    ("evaluate", 4, ["kgqa_lib.evaluate"]),
    ("bench", 5, ["kgqa_lib.bench"]),
    ("app", 6, ["kgqa_lib.cli", "kgqa_lib.registry", "kgqa_lib.reproduce", "kgqa_lib.notebooks", "kgqa_lib.doctor",
                "kgqa_lib.distributed", "kgqa_lib.servers", "kgqa_lib.viz", "kgqa_lib.site"]),
]

PACKAGE = Path(kgqa_lib.__file__).parent


def layer_of(module: str) -> tuple[str, int] | None:
    """(layer, tier) of a ``kgqa_lib`` module: the layer naming it or its longest parent."""
    best = None
    for name, tier, prefixes in LAYERS:
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[0]):
                best = (len(p), name, tier)
    return (best[1], best[2]) if best else None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module) of every ``kgqa_lib`` import in ``source`` (the code of ``module``):
    ``import``/``from`` statements anywhere (function bodies too; relative ones resolved; a name
    imported from a package counts as its submodule when there is one), and string constants
    given to ``importlib.import_module`` or ``__import__``."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                is_module = (PACKAGE.parent.joinpath(*sub.split(".")).with_suffix(".py").exists()
                             or PACKAGE.parent.joinpath(*sub.split("."), "__init__.py").exists())
                found.append((node.lineno, sub if is_module else target))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in ("import_module", "__import__"):
                found.append((node.lineno, node.args[0].value))
    return list(dict.fromkeys((line, m) for line, m in found if m == "kgqa_lib" or m.startswith("kgqa_lib.")))


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """``module:line imports target (layer above / a peer layer)`` for every import of a layer
    above ``module``'s, or of another layer of its tier."""
    mine = layer_of(module)
    assert mine is not None, f"{module} is in no layer: add it to LAYERS"
    out = []
    for line, target in imports(source, module, is_package):
        theirs = layer_of(target)
        assert theirs is not None, f"{module}:{line} imports {target}, which is in no layer: add it to LAYERS"
        if theirs[1] > mine[1]:
            out.append(f"{module}:{line} imports {target} (layer {mine[0]} imports {theirs[0]}, a layer above it)")
        elif theirs[1] == mine[1] and theirs[0] != mine[0]:
            out.append(f"{module}:{line} imports {target} (layer {mine[0]} imports its peer {theirs[0]})")
    return out


def library_modules() -> list[tuple[str, Path]]:
    return sorted((module_name(p), p) for p in PACKAGE.rglob("*.py"))


def test_every_module_is_in_a_layer():
    assert [m for m, _ in library_modules() if layer_of(m) is None] == []


def test_no_module_imports_from_a_layer_above_it():
    found = [v for m, p in library_modules()
             for v in violations(p.read_text(encoding="utf-8"), m, p.name == "__init__.py")]
    assert not found, "upward imports:\n" + "\n".join(found)


@pytest.mark.parametrize("source, module, expected", [
    # an upward import at module level, in a function, relative, and through importlib / __import__
    ("from kgqa_lib.methods import get_method", "kgqa_lib.data.datasets", "layer data imports methods"),
    ("def f():\n    from ..methods.keqing import keqing_dataset", "kgqa_lib.data.datasets", "layer data imports methods"),
    ("import importlib\nimportlib.import_module('kgqa_lib.evaluate.runner')", "kgqa_lib.methods.tog",
     "layer methods imports evaluate"),
    ("x = __import__('kgqa_lib.methods.fusic', fromlist=['task_dataset'])", "kgqa_lib.data.datasets",
     "layer data imports methods"),
    ("from .. import cli", "kgqa_lib.bench.core", "layer bench imports app"),
    # peers of one tier
    ("from ..llm.chat import LLMCache", "kgqa_lib.embed.embedder", "layer embed imports its peer llm"),
])
def test_an_upward_import_is_flagged(source, module, expected):
    found = violations(source, module)
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize("source, module", [
    ("from ..data.datasets import Dataset\nfrom ..kg.graph import EmbeddedKG", "kgqa_lib.methods.tog"),
    ("from .metrics import score\nfrom ..methods import get_method", "kgqa_lib.evaluate.runner"),
    ("from . import chat", "kgqa_lib.llm.models"),
])
def test_a_downward_or_same_layer_import_passes(source, module):
    assert violations(source, module) == []


def _app_cycles() -> list[list[str]]:
    """Import circles among the top-level modules of ``kgqa_lib`` (the CLI, the drivers, the app modules):
    each a list of modules that import each other, directly or through others of them."""
    top = {m: p for m, p in library_modules() if m.count(".") == 1}
    graph = {m: {t for _, t in imports(p.read_text(encoding="utf-8"), m) if t in top and t != m} for m, p in top.items()}

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for t in graph[todo.pop()] - seen:
                seen.add(t)
                todo.append(t)
        return seen

    reached = {m: reach(m) for m in graph}
    return sorted({tuple(sorted({m, *[t for t in reached[m] if m in reached[t]]})) for m in graph
                   if m in reached[m]})


def test_the_app_modules_import_no_circle():
    """e.g. the CLI starts sharded runs (``distributed``), so ``distributed`` builds its runs from the run's
    value (``kgqa_lib.evaluate.spec``) and prints reports through ``kgqa_lib.evaluate.report``, never
    through the CLI."""
    assert _app_cycles() == []
