"""Executing and normalising the notebooks.

Committed notebooks keep their outputs (a reader on GitHub sees results) but no volatile
metadata: papermill timings, execution timestamps, kernel versions and stderr streams (progress
bars) are removed, so a re-run from the recorded transcripts leaves the files byte-identical."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .paths import notebooks_dir, repo_root

KERNEL = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def normalize(nb: dict[str, Any]) -> dict[str, Any]:
    """Return a normalised copy of a notebook (as a JSON dict)."""
    nb = json.loads(json.dumps(nb))
    nb["metadata"] = {"kernelspec": KERNEL, "language_info": {"name": "python"}}
    for i, cell in enumerate(nb.get("cells", [])):
        md = cell.get("metadata", {})
        for key in ("papermill", "execution", "ExecuteTime", "collapsed", "scrolled"):
            md.pop(key, None)
        cell["metadata"] = md
        cell.setdefault("id", f"cell-{i:02d}")
        if cell.get("cell_type") == "code":
            outputs = []
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and out.get("name") == "stderr":
                    continue  # progress bars and warnings: volatile
                if "metadata" in out and not out["metadata"]:
                    out["metadata"] = {}
                outputs.append(out)
            cell["outputs"] = outputs
    return nb


def dumps(nb: dict[str, Any]) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def normalize_file(path: str | Path, check: bool = False) -> bool:
    """Normalise in place (or only compare, with ``check``). True if the file was/would be changed."""
    path = Path(path)
    raw = path.read_text(encoding="utf-8")
    new = dumps(normalize(json.loads(raw)))
    if new == raw:
        return False
    if not check:
        path.write_text(new, encoding="utf-8")
    return True


def notebook_paths() -> list[Path]:
    return sorted(p for p in notebooks_dir().glob("*.ipynb") if not p.name.startswith("."))


@dataclass
class Executed:
    path: Path
    seconds: float
    error: str | None = None


def execute(path: str | Path, output: str | Path | None = None, parameters: dict[str, Any] | None = None,
            normalise: bool = True, progress: bool = False) -> Executed:
    """Execute one notebook with papermill (kernel ``python3`` of this environment, cwd = the
    notebook's folder) and normalise the result. Writes in place unless ``output`` is given."""
    import papermill as pm

    path = Path(path)
    output = Path(output) if output else path
    t = time.perf_counter()
    error = None
    try:
        pm.execute_notebook(str(path), str(output), parameters=parameters or {}, kernel_name="python3",
                            cwd=str(path.parent), progress_bar=progress, log_output=False)
    except Exception as exc:  # papermill raises PapermillExecutionError with the cell's traceback
        error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
    if normalise and output.exists():
        normalize_file(output)
    return Executed(output, time.perf_counter() - t, error)


def relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(repo_root()))
    except ValueError:
        return str(path)
