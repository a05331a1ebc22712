"""Executing and normalising the notebooks.

Committed notebooks keep their outputs (a reader on GitHub sees results) but no volatile
metadata: papermill timings, execution timestamps, kernel versions and stderr streams (progress
bars) are removed, so a re-run from the recorded transcripts leaves the files byte-identical."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UsageError
from .paths import notebooks_dir, repo_root, results_dir

KERNEL = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def _ipc_kernel_manager():
    """A kernel manager whose kernel talks over local IPC sockets (files in Jupyter's runtime folder)
    instead of loopback TCP: no open port, and no "Kernel is running over TCP without encryption"
    warning on the console of every notebook."""
    from jupyter_client.manager import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any) -> None:
            kwargs.setdefault("transport", "ipc")
            super().__init__(**kwargs)

    return IPCKernelManager


#: The MIME type of a notebook's headline metric in its outputs (:func:`headline`)
HEADLINE_MIME = "application/vnd.kgqa.headline+json"


def headline(metric: str, value: Any) -> None:
    """Show a notebook's headline metric and record it: normalisation keeps it as notebook metadata
    (``metadata["kgqa"]["headline"]``) and ``kgqa reproduce`` collects it into its ``summary.md``."""
    from IPython.display import display

    display({HEADLINE_MIME: {"metric": metric, "value": str(value)}, "text/plain": f"{metric}: {value}"}, raw=True)


def paragraphs(text: str, width: int = 110) -> str:
    """``text`` as a notebook prints it: each of its lines a paragraph, filled to ``width`` characters, with a
    blank line between paragraphs — except a line starting ``- ``, an item of a list under the paragraph before
    it, filled with its continuation lines indented (:func:`say`). Words are not broken at their hyphens
    ("zero-shot", "GrailQA-Tech" stay whole)."""
    from textwrap import fill

    blocks: list[str] = []
    for line in (x.strip() for x in text.splitlines()):
        if not line:
            continue
        if line.startswith("- ") and blocks:
            blocks[-1] += "\n" + fill(line, width, subsequent_indent="  ", break_on_hyphens=False)
        else:
            blocks.append(fill(line, width, break_on_hyphens=False))
    return "\n\n".join(blocks)


def say(text: str, width: int = 110) -> None:
    """Print a summary written as one paragraph per line (:func:`paragraphs`): a few short paragraphs instead of
    one long line."""
    print(paragraphs(text, width))


def headlines(nb: dict[str, Any]) -> list[dict[str, str]]:
    """The headline metrics a notebook's outputs hold, in cell order (:func:`headline`)."""
    return [out["data"][HEADLINE_MIME] for cell in nb.get("cells", []) if cell.get("cell_type") == "code"
            for out in cell.get("outputs", []) if HEADLINE_MIME in out.get("data", {})]


def normalize(nb: dict[str, Any]) -> dict[str, Any]:
    """Return a normalised copy of a notebook (as a JSON dict)."""
    nb = json.loads(json.dumps(nb))
    nb["metadata"] = {"kernelspec": KERNEL, "language_info": {"name": "python"}}
    if headlines(nb):
        nb["metadata"]["kgqa"] = {"headline": headlines(nb)}
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
                if (out.get("output_type") == "stream" and outputs and outputs[-1].get("output_type") == "stream"
                        and outputs[-1].get("name") == out.get("name")):
                    outputs[-1]["text"] = _lines("".join(outputs[-1]["text"]) + "".join(out["text"]))
                    continue  # how the kernel chunked one cell's prints: volatile; one stream output
                outputs.append(out)
            cell["outputs"] = outputs
    return nb


def _lines(text: str) -> list[str]:
    """A stream's text as nbformat stores it: lines with their newline."""
    return text.splitlines(keepends=True)


def dumps(nb: dict[str, Any]) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def read_notebook(path: Path) -> tuple[str, dict[str, Any]]:
    """(text, JSON) of a notebook file; a :class:`~kgqa_lib.errors.UsageError` naming the file when
    it is missing, unreadable or not a notebook (a JSON object with a list of cells)."""
    what = "give .ipynb notebook files (e.g. notebooks/00_quickstart.ipynb)"
    if not path.is_file():
        raise UsageError(f"no notebook {str(path)!r}" + (" (a folder)" if path.is_dir() else "") + f": {what}")
    try:
        raw = path.read_text(encoding="utf-8")
        nb = json.loads(raw)
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not a notebook: not UTF-8 text ({exc.reason} at byte {exc.start}); {what}") from None
    except ValueError as exc:
        raise UsageError(f"{path} is not a notebook: not one JSON document ({exc}); {what}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({exc.strerror or exc}); {what}") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise UsageError(f"{path} is not a notebook: a notebook is a JSON object with a list of cells; {what}")
    return raw, nb


def normalize_file(path: str | Path, check: bool = False) -> bool:
    """Normalise in place (or only compare, with ``check``). True if the file was/would be changed."""
    path = Path(path)
    raw, nb = read_notebook(path)
    new = dumps(normalize(nb))
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
    failed_copy: Path | None = None  # on failure: where the executed (failed) notebook was kept


def execute(path: str | Path, output: str | Path | None = None, parameters: dict[str, Any] | None = None,
            normalise: bool = True, progress: bool = False, failed_copy: str | Path | None = None) -> Executed:
    """Execute one notebook with papermill (kernel ``python3`` of this environment, cwd = the
    notebook's folder) and normalise the result. Writes in place unless ``output`` is given.

    papermill clears the outputs of the file it writes when it starts, so it writes a hidden
    temporary file beside ``output``; ``output`` is replaced (atomically) only when the execution
    succeeded. A failed execution leaves ``output`` untouched and is kept at ``failed_copy``
    (default: ``results/reproduce/failed/<name>``), named in ``Executed.failed_copy``."""
    import papermill as pm

    path = Path(path)
    output = Path(output) if output else path
    tmp = output.parent / f".{output.stem}.running-{os.getpid()}{output.suffix}"  # hidden: not a notebook of the repo
    t = time.perf_counter()
    error = None
    kept = None
    try:
        try:
            pm.execute_notebook(str(path), str(tmp), parameters=parameters or {}, kernel_name="python3",
                                cwd=str(path.parent), progress_bar=progress, log_output=False,
                                kernel_manager_class=_ipc_kernel_manager())
        except Exception as exc:  # papermill raises PapermillExecutionError with the cell's traceback
            error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
        if normalise and tmp.exists():
            normalize_file(tmp)
        if error is None:
            os.replace(tmp, output)
        elif tmp.exists():
            kept = Path(failed_copy) if failed_copy else results_dir() / "reproduce" / "failed" / output.name
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(tmp), str(kept))
    finally:
        tmp.unlink(missing_ok=True)  # interrupted (Ctrl-C): the output was never touched
    return Executed(output if error is None else (kept or output), time.perf_counter() - t, error, kept)


def relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(repo_root()))
    except ValueError:
        return str(path)


VERSIONED = ("kgqa_lib", "numpy", "pandas", "matplotlib", "rdflib", "pyoxigraph", "sentence-transformers",
             "llama-cpp-python", "openai", "papermill")


def versions(packages: tuple[str, ...] = VERSIONED) -> str:
    """One line per package: the versions this notebook ran with (the closing cell of every notebook)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    lines = [f"python {platform.python_version()} on {platform.system()} {platform.machine()}"]
    for name in packages:
        try:
            lines.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            lines.append(f"{name} not installed")
    return "\n".join(lines)


def show(table) -> None:
    """Display a result table whole in a notebook: a :class:`~kgqa_lib.bench.result_table.ResultTable` (its
    title printed above it) or a DataFrame, no row or column cut, no line wrapping."""
    import pandas as pd
    from IPython.display import display

    if hasattr(table, "frame"):
        print(table.title)
        table = table.frame()
    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.expand_frame_repr", False,
                           "display.max_colwidth", None):
        display(table)


class CallRecorder:
    """An LLM that keeps every call's messages and reply (``calls``: ``(messages, ChatResult)``), so a
    notebook can show the prompts exactly as the model received them; everything else is the LLM's."""

    def __init__(self, llm) -> None:
        self.llm, self.calls = llm, []

    def chat(self, messages, **kwargs):
        reply = self.llm.chat(messages, **kwargs)
        self.calls.append((messages, reply))
        return reply

    def __getattr__(self, name):
        return getattr(self.llm, name)

    def find(self, ending: str):
        """The first recorded call whose last message ends with ``ending``, or None."""
        return next(((m, r) for m, r in self.calls if m[-1]["content"].endswith(ending)), None)

    def distinct(self):
        """The recorded calls, one per distinct prompt (the first): a stage shown on its own and then again
        inside the whole method asks the same prompt twice, which a live run answers once (then cached)."""
        import json

        seen: dict[str, tuple] = {}
        for m, r in self.calls:
            seen.setdefault(json.dumps(m, sort_keys=True), (m, r))
        return list(seen.values())
