"""The package installs like one: pyproject.toml declares what requirements.txt pins (as ranges that
hold the pins), Python 3.11–3.13, and environment.yml builds llama.cpp with the Makefile's flags."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from kgqa_lib.paths import repo_root


def _pins(name: str) -> dict[str, str]:
    out = {}
    for line in (repo_root() / name).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            req = Requirement(line)
            out[canonicalize_name(req.name)] = str(req.specifier).removeprefix("==")
    return out


def _declared() -> dict[str, list[Requirement]]:
    project = tomllib.loads((repo_root() / "pyproject.toml").read_text())["project"]
    groups = {"core": project["dependencies"], **project["optional-dependencies"]}
    return {g: [Requirement(r) for r in reqs] for g, reqs in groups.items()}


def test_every_pin_is_declared_within_its_range():
    declared: dict[str, SpecifierSet] = {}
    for reqs in _declared().values():
        for r in reqs:
            if canonicalize_name(r.name) != "kgqa-lib":
                declared[canonicalize_name(r.name)] = r.specifier
    pins = _pins("requirements.txt")
    missing = sorted(set(pins) - set(declared))
    assert not missing, f"pinned in requirements.txt but not declared in pyproject.toml: {missing}"
    outside = {n: (v, str(declared[n])) for n, v in pins.items() if v not in declared[n]}
    assert not outside, f"pins outside pyproject's ranges: {outside}"
    lock = _pins("constraints.txt")
    for n, v in pins.items():  # the lock agrees with the pins (torch is installed first, not locked)
        assert lock.get(n, v) == v, (n, v, lock.get(n))


def test_extras_and_python_versions():
    groups = _declared()
    assert {"local", "finetune", "servers", "notebooks", "test", "distributed"} <= set(groups)
    names = lambda g: {canonicalize_name(r.name) for r in groups[g]}  # noqa: E731
    assert {"pyoxigraph", "openai", "sentence-transformers", "torch"} <= names("core")
    assert "llama-cpp-python" in names("local") and "llama-cpp-python" not in names("core")
    assert {"transformers", "peft", "accelerate", "gguf"} <= names("finetune")
    assert "distributed" in names("distributed")
    project = tomllib.loads((repo_root() / "pyproject.toml").read_text())["project"]
    py = SpecifierSet(project["requires-python"])
    assert all(v in py for v in ("3.11", "3.12", "3.13")) and "3.10" not in py


def test_environment_yml_builds_llama_cpp_like_the_makefile():
    env = (repo_root() / "environment.yml").read_text()
    make = (repo_root() / "Makefile").read_text()
    base = re.search(r"LLAMA_CMAKE_ARGS \?= (.*?) \\", make).group(1).split()
    flags = re.search(r'CMAKE_ARGS: "([^"]+)"', env).group(1).split()
    assert flags == base
    assert "print-llama-cmake-args" in env


def _pip(*args, cwd=None, timeout=300):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "pip", *args], cwd=cwd or repo_root(), capture_output=True,
                          text=True, timeout=timeout)


def test_declared_dependencies_are_satisfied_by_the_lock():
    """`pip install ".[all]"` resolves, offline, to what `make setup` installed (requirements.txt +
    constraints.txt) and nothing else: the ranges hold the lock. (A fresh venv resolving from the
    index takes ~12 min here, most of it unpacking torch: too slow for CI; see README.)"""
    proc = _pip("install", "--dry-run", "--no-index", "--no-build-isolation", ".[all]", "-c", "constraints.txt")
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    would = [line for line in proc.stdout.splitlines() if line.startswith("Would install")]
    assert would and would[-1].split()[2:] == ["kgqa-lib-0.1.0"], would


def test_the_built_wheel_imports_outside_the_clone(tmp_path):
    """The wheel (not the editable install) carries the package and its prompts: a venv that sees
    the installed dependencies but not the clone imports ``kgqa_lib.cli`` and ``pyoxigraph``."""
    import subprocess
    import sys
    import sysconfig
    import zipfile

    import shutil

    src = tmp_path / "src"  # setuptools writes build/ beside the sources: build a copy, not the clone
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo_root() / name, src / name)
    shutil.copytree(repo_root() / "kgqa_lib", src / "kgqa_lib", ignore=shutil.ignore_patterns("__pycache__"))
    proc = _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(src))
    assert proc.returncode == 0, proc.stderr[-1500:]
    wheel = next((tmp_path / "dist").glob("kgqa_lib-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True, timeout=120)
    purelib = Path(subprocess.run([str(tmp_path / "v" / "bin" / "python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    with zipfile.ZipFile(wheel) as z:
        z.extractall(purelib)
    deps = sysconfig.get_paths()["purelib"]  # this environment's packages (its editable kgqa_lib stays out:
    (purelib / "_deps.pth").write_text(deps + "\n")  # .pth files of a .pth-added folder are not read)
    code = ("import kgqa_lib, kgqa_lib.cli, kgqa_lib.distributed, pyoxigraph; from kgqa_lib.llm.prompting import load_prompt; "
            "load_prompt('io'); print(kgqa_lib.__file__)")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([str(tmp_path / "v" / "bin" / "python"), "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-1500:]
    assert out.stdout.strip().startswith(str(purelib)), out.stdout
