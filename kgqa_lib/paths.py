"""Where things live. Every path is resolved from the repository root, never from the cwd.

papermill starts the kernel in the caller's cwd while nbval starts it in the notebook's folder;
resolving everything from here makes both (and a plain ``jupyter lab``) see the same files.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def repo_root() -> Path:
    """The repository root: ``$KGQA_HOME`` if set, else the folder holding ``kgqa_lib/``
    (an editable install, the normal case), else the first parent of the cwd with a
    ``pyproject.toml`` next to a ``notebooks/`` folder."""
    env = os.environ.get("KGQA_HOME")
    if env:
        return Path(env).expanduser().resolve()
    candidate = _PACKAGE_DIR.parent
    if (candidate / "pyproject.toml").exists():
        return candidate
    for parent in [Path.cwd(), *Path.cwd().parents]:
        if (parent / "pyproject.toml").exists() and (parent / "notebooks").is_dir():
            return parent
    raise RuntimeError(
        "Cannot find the kgqa repository root. Install the package in editable mode "
        "(`pip install -e .` from the clone) or set KGQA_HOME to the clone's path."
    )


def data_dir() -> Path:
    """The project's own embedded data (``data/``)."""
    return repo_root() / "data"


def figures_dir() -> Path:
    """``figures/``, or ``$KGQA_FIGURES_DIR`` (the test suite writes its figures elsewhere)."""
    env = os.environ.get("KGQA_FIGURES_DIR")
    return Path(env).expanduser() if env else repo_root() / "figures"


def tables_dir() -> Path:
    """``results/tables/`` (aggregated tables), or ``$KGQA_TABLES_DIR`` (the test suite writes elsewhere)."""
    env = os.environ.get("KGQA_TABLES_DIR")
    return Path(env).expanduser() if env else results_dir() / "tables"


def results_dir() -> Path:
    """``results/`` of the repository, or ``$KGQA_RESULTS_DIR`` (tests, sweeps kept elsewhere)."""
    env = os.environ.get("KGQA_RESULTS_DIR")
    return Path(env).expanduser() if env else repo_root() / "results"


def notebooks_dir() -> Path:
    return repo_root() / "notebooks"


def prompts_dir() -> Path:
    return _PACKAGE_DIR / "prompts"


def user_cache_dir() -> Path:
    """Machine-local caches (assembled model file, SQLite caches, on-disk KG stores).

    ``$KGQA_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/kgqa``, else ``~/.cache/kgqa``."""
    env = os.environ.get("KGQA_CACHE_DIR")
    path = Path(env).expanduser() if env else _xdg_cache_home() / "kgqa"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        from .errors import SetupError

        what = f"KGQA_CACHE_DIR={env}" if env else f"the cache folder {path}"
        raise SetupError(f"{what} is not a usable folder ({exc.strerror}: {exc.filename or path}); point "
                         f"{'KGQA_CACHE_DIR' if env else 'XDG_CACHE_HOME'} at a folder (or move the file away)") from None
    return path


def _xdg_cache_home() -> Path:
    """``$XDG_CACHE_HOME`` (absolute paths only, as the XDG spec says), else ``~/.cache``: the one
    rule every machine-local cache path of the project follows."""
    base = os.environ.get("XDG_CACHE_HOME")
    return Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"


def shown_path(path: str | Path) -> str:
    """A path as written into committed files and reports: repo-relative inside the repository,
    ``<user cache>/…`` inside :func:`user_cache_dir`, ``<model dir>/…`` inside :func:`model_dir`,
    else just the file name: never a home folder or another machine-specific absolute path."""
    p = Path(path).expanduser()
    p = p if p.is_absolute() else Path.cwd() / p
    p = Path(os.path.normpath(p))
    for base, label in ((repo_root, None), (user_cache_dir, "<user cache>"), (model_dir, "<model dir>")):
        try:
            rel = p.relative_to(Path(os.path.normpath(base())))
        except (ValueError, RuntimeError, OSError):  # not inside it, or the folder is unusable
            continue
        return rel.as_posix() if label is None else f"{label}/{rel.as_posix()}"
    return p.name


def model_dir() -> Path:
    """Where assembled model files live: ``$KGQA_MODEL_DIR``, else ``$XDG_CACHE_HOME/kgqa/models``,
    else ``~/.cache/kgqa/models``.

    Deliberately independent of ``$KGQA_CACHE_DIR``, so tests with a throw-away cache do not
    re-assemble a 1 GB model. Models assembled in ``~/.cache/kgqa/models`` before
    ``$XDG_CACHE_HOME`` was honoured are used where they are (never moved or assembled twice)."""
    env = os.environ.get("KGQA_MODEL_DIR")
    if env:
        path = Path(env).expanduser()
    else:
        path = _xdg_cache_home() / "kgqa" / "models"
        legacy = Path.home() / ".cache" / "kgqa" / "models"
        if path != legacy and not path.exists() and any(legacy.glob("*.gguf")):
            path = legacy
    path.mkdir(parents=True, exist_ok=True)
    return path


def external_data_dir(required: bool = False) -> Path | None:
    """The external benchmarks folder from ``$KGQA_DATA_DIR`` (e.g. ``../shared/datasets``).

    Returns None when unset (or raises a helpful error when ``required``)."""
    env = os.environ.get("KGQA_DATA_DIR")
    if not env:
        if required:
            raise FileNotFoundError(
                "KGQA_DATA_DIR is not set. Point it at the folder holding the public benchmarks, "
                "e.g. `export KGQA_DATA_DIR=../shared/datasets`; see README.md "
                "('External benchmarks') for where to download them."
            )
        return None
    path = Path(env).expanduser()
    if not path.is_absolute():
        path = (Path.cwd() / path).resolve()
        if not path.exists():  # relative paths are read from the repo root too
            path = (repo_root() / env).resolve()
    if not path.is_dir():
        if required:
            raise FileNotFoundError(
                f"KGQA_DATA_DIR={env!r} is not a folder (resolved to {path}). Fix the variable or "
                "download the benchmarks as README.md ('External benchmarks') explains."
            )
        return None
    return path
