"""Embedded SPARQL queries in a worker process that a timeout kills.

pyoxigraph has no way to cancel a running query (``Store.query`` takes no timeout and holds the
GIL-free Rust evaluation until it ends), so a query run in a thread keeps burning a core after its
caller gave up — one leaked thread per timeout. Here every guarded query of an
:class:`~kgqa_lib.kg.graph.EmbeddedKG` runs in a small worker process (``python -m kgqa_lib.kg.query_worker``)
that holds its own read-only view of the KG: an on-disk store is opened with
``Store.read_only`` (RocksDB allows it beside the writer); an in-memory store is sent once as
N-Quads. On timeout the worker is killed (SIGKILL) and the next query starts a fresh one.

The worker also:
- installs a seccomp filter (Linux x86-64/aarch64) that makes ``socket(AF_INET|AF_INET6)`` fail,
  so whatever the query says — Oxigraph would send an HTTP request for ``SERVICE`` — the process
  cannot reach the network (defence in depth behind :mod:`kgqa_lib.kg.sparql_guard`);
- dies with its parent (``PR_SET_PDEATHSIG``); only ever runs ``Store.query`` on a read-only view;
- has a memory bound: once the store is open, its address space may grow by at most
  ``KGQA_QUERY_MEMORY_MB`` (default :data:`DEFAULT_MEMORY_MB`; 0: no bound) — ``RLIMIT_AS``, so a
  query that would need more (a cross product sorted by ``ORDER BY`` grows by ~200 MB a second on the
  mini-world KG) fails at once instead of taking the machine's memory until its timeout; it is that
  query's own error (:class:`WorkerDied`, which the KG reports as a rejected query), and the next
  query starts a fresh worker.

Costs (measured, 2-core VM, see ``kgqa bench run hostile_queries``): a worker starts in ~0.15 s
(interpreter + pyoxigraph; plus ~0.1 s per 10k in-memory triples to copy), a query round trip adds
~0.2 ms. Workers are pooled per KG and reused; one is started per concurrent caller.
"""

from __future__ import annotations

import os
import pickle
import platform
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable

_HEADER = struct.Struct("!Q")
STARTUP_TIMEOUT = 120.0  # seconds to open the store in a new worker (a big in-memory KG takes a while)
MEMORY_ENV = "KGQA_QUERY_MEMORY_MB"
DEFAULT_MEMORY_MB = 1024  # address space a worker's queries may add to the worker with its store open


def memory_limit_mb() -> int:
    """The memory bound of a query worker in MB (``$KGQA_QUERY_MEMORY_MB``; 0: none)."""
    text = os.environ.get(MEMORY_ENV, "").strip()
    if not text:
        return DEFAULT_MEMORY_MB
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        from ..errors import SetupError

        raise SetupError(f"{MEMORY_ENV} must be a whole number of megabytes (0: no bound), got {text!r}")
    return value


def _memory_message(mb: int) -> str:
    return (f"the query needs more memory than a query may use ({mb} MB; {MEMORY_ENV} sets it): "
            "it was stopped")


class WorkerTimeout(TimeoutError):
    pass


class WorkerDied(RuntimeError):
    pass


# ---------------------------------------------------------------------------------------------
# Framing: 8-byte length + pickle (both ends are this module)
# ---------------------------------------------------------------------------------------------
def _write(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _readable(fd: int, seconds: float) -> bool:
    """Wait until ``fd`` can be read (``poll``, not ``select``: a process holding many KGs has
    descriptors above 1024, which ``select`` cannot watch)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(max(0, int(seconds * 1000) + 1)))


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not _readable(fd, left):
                raise WorkerTimeout()
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise WorkerDied("the query worker exited")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read(fd: int, deadline: float | None = None) -> Any:
    (n,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    return pickle.loads(_read_exact(fd, n, deadline))


# ---------------------------------------------------------------------------------------------
# The worker side
# ---------------------------------------------------------------------------------------------
def block_network() -> bool:
    """Make ``socket(AF_INET/AF_INET6)`` fail with EACCES in this process from now on (seccomp,
    no privileges needed). Returns False where unsupported (not Linux x86-64/aarch64)."""
    import ctypes

    arch = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}.get(platform.machine())
    if sys.platform != "linux" or arch is None:
        return False
    audit_arch, nr_socket = arch

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    ld, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    allow, deny = 0x7FFF0000, 0x00050000 | 13  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EACCES
    prog = [
        (ld, 0, 0, 4),                # seccomp_data.arch
        (jeq, 0, 5, audit_arch),      # another ABI: allow (not used by this process)
        (ld, 0, 0, 0),                # seccomp_data.nr
        (jeq, 0, 3, nr_socket),
        (ld, 0, 0, 16),               # seccomp_data.args[0] (low 32 bits): the address family
        (jeq, 2, 0, 2),               # AF_INET → deny
        (jeq, 1, 0, 10),              # AF_INET6 → deny
        (ret, 0, 0, allow),
        (ret, 0, 0, deny),
    ]
    filters = (SockFilter * len(prog))(*[SockFilter(*f) for f in prog])
    fprog = SockFprog(len(prog), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return False
    return libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER


def _run(store, msg: dict) -> dict:
    import pyoxigraph as ox

    if msg.get("parse_only"):  # Oxigraph's own syntax message, from a run on an empty store
        try:
            ox.Store().query(msg["query"])
        except SyntaxError as exc:
            return {"error": "syntax", "message": str(exc)}
        except Exception:  # noqa: BLE001
            pass
        return {"parsed": True}
    try:
        res = store.query(msg["query"], default_graph=ox.NamedNode(msg["graph"]))
    except SyntaxError as exc:
        return {"error": "syntax", "message": str(exc)}
    except Exception as exc:  # noqa: BLE001 - reported to the caller, the worker lives on
        return {"error": type(exc).__name__, "message": str(exc)}
    if isinstance(res, ox.QueryBoolean):
        return {"boolean": bool(res)}
    if not isinstance(res, ox.QuerySolutions):
        return {"error": "form", "message": "only SELECT/ASK results are returned"}
    names = [v.value for v in res.variables]
    rows, truncated, cap = [], False, msg["max_rows"]
    try:
        for sol in res:
            if len(rows) >= cap:
                truncated = True
                break
            rows.append({n: sol[n].value for n in names if sol[n] is not None})
    except Exception as exc:  # noqa: BLE001
        return {"error": type(exc).__name__, "message": str(exc)}
    return {"vars": names, "rows": rows, "truncated": truncated}


def _limit_memory(mb: int) -> int | None:
    """Cap this process's address space at its present size plus ``mb`` MB (``RLIMIT_AS``; never
    above a limit already set). The cap in bytes, or None (no bound asked, or not Linux)."""
    if mb <= 0 or sys.platform != "linux":
        return None
    import resource

    with open("/proc/self/statm") as fh:
        size = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = size + mb * (1 << 20)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    for limit in (soft, hard):
        if limit != resource.RLIM_INFINITY:
            cap = min(cap, limit)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    return cap


def main() -> None:  # pragma: no cover - runs in the worker process (tested through EmbeddedKG)
    from ..procs import die_with_parent

    die_with_parent(signal.SIGKILL)
    # Ctrl-C / a kernel interrupt goes to the whole process group: the parent decides when this
    # worker ends (it kills it on timeout or exit), so the worker ignores SIGINT instead of printing
    # a KeyboardInterrupt traceback into the user's console.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fd_in, fd_out = 0, os.dup(1)
    os.dup2(2, 1)  # a stray print must not corrupt the protocol
    import pyoxigraph as ox

    hello = _read(fd_in)
    try:
        if hello.get("path"):
            store = ox.Store.read_only(hello["path"])
        else:
            store = ox.Store()
            if hello.get("nquads"):
                store.bulk_load(input=hello["nquads"], format=ox.RdfFormat.N_QUADS)
        blocked = block_network() if hello.get("block_network", True) else False
        _limit_memory(int(hello.get("memory_mb") or 0))
    except Exception as exc:  # noqa: BLE001
        _write(fd_out, {"error": type(exc).__name__, "message": str(exc)})
        return
    _write(fd_out, {"ready": True, "network_blocked": blocked, "pid": os.getpid()})
    while True:
        try:
            msg = _read(fd_in)
        except (WorkerDied, EOFError):
            return
        _write(fd_out, _run(store, msg))


# ---------------------------------------------------------------------------------------------
# The parent side
# ---------------------------------------------------------------------------------------------
@dataclass
class StoreSource:
    """What a worker opens: an on-disk store's folder, or an in-memory store's N-Quads."""

    path: str | None = None
    nquads: bytes | None = None
    generation: int = 0


class Worker:
    def __init__(self, source: StoreSource, block_net: bool = True) -> None:
        self.generation = source.generation
        self.memory_mb = memory_limit_mb()
        self.proc = subprocess.Popen([sys.executable, "-m", "kgqa_lib.kg.query_worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, close_fds=True, cwd=_package_parent())
        self.network_blocked = False
        try:
            _write(self.proc.stdin.fileno(), {"path": source.path, "nquads": source.nquads, "block_network": block_net,
                                              "memory_mb": self.memory_mb})
            hello = _read(self.proc.stdout.fileno(), time.monotonic() + STARTUP_TIMEOUT)
        except BaseException:
            self.kill()
            raise
        if "error" in hello:
            self.kill()
            raise OSError(f"the query worker could not open the KG: {hello['error']}: {hello['message']}")
        self.network_blocked = bool(hello.get("network_blocked"))
        self.pid = self.proc.pid

    def query(self, query: str, graph: str, max_rows: int, timeout: float, parse_only: bool = False) -> dict:
        """The worker's answer; :class:`WorkerDied` (this worker is then ended) when the query ran past the
        memory bound — the engine aborts on a failed allocation, Python raises ``MemoryError`` — or the
        worker exited otherwise; :class:`WorkerTimeout` past ``timeout``."""
        try:
            _write(self.proc.stdin.fileno(), {"query": query, "graph": graph, "max_rows": max_rows,
                                              "parse_only": parse_only})
            out = _read(self.proc.stdout.fileno(), time.monotonic() + timeout)
        except (WorkerDied, BrokenPipeError) as exc:
            try:
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            self.kill()
            if self.memory_mb and code == -signal.SIGABRT:  # an allocation failed under the bound
                raise WorkerDied(_memory_message(self.memory_mb)) from None
            raise WorkerDied(str(exc) if isinstance(exc, WorkerDied) else "the query worker exited") from None
        if out.get("error") == "MemoryError":
            self.kill()  # a worker that ran out of memory is not reused
            raise WorkerDied(_memory_message(self.memory_mb) if self.memory_mb else "the query ran out of memory")
        return out

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


def _package_parent() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


MAX_IDLE_TOTAL = 8  # idle workers kept across every KG of the process (the oldest is ended first)
_IDLE_LOCK = threading.Lock()  # one lock for the idle lists of all pools, so eviction can cross pools
_IDLE_ORDER: list[tuple["WorkerPool", Worker]] = []  # every idle worker, oldest first


class WorkerPool:
    """Idle workers of one KG, reused across queries; one busy worker per concurrent caller.
    Idle workers are bounded per KG (``max_idle``) and across all KGs (:data:`MAX_IDLE_TOTAL`): a
    run over thousands of per-question slice KGs keeps a handful of processes, not thousands."""

    def __init__(self, source: Callable[[], StoreSource], max_idle: int = 2) -> None:
        self._source = source
        self._idle: list[Worker] = []
        self._lock = _IDLE_LOCK
        self.max_idle = max_idle
        self.started = 0
        self.killed = 0
        self._finalizer = weakref.finalize(self, WorkerPool._close_all, self._idle)

    @staticmethod
    def _close_all(idle: list[Worker]) -> None:
        with _IDLE_LOCK:
            doomed = list(idle)
            idle.clear()
            _IDLE_ORDER[:] = [(p, w) for p, w in _IDLE_ORDER if w not in doomed]
        for w in doomed:
            w.kill()

    @staticmethod
    def _forget(worker: Worker) -> None:
        """Drop ``worker`` from the global idle order (call with the lock held)."""
        for i, (_, w) in enumerate(_IDLE_ORDER):
            if w is worker:
                del _IDLE_ORDER[i]
                return

    def run(self, query: str, graph: str, max_rows: int, timeout: float, generation: int,
            parse_only: bool = False) -> dict:
        """Run one query; raises :class:`WorkerTimeout` (the worker was killed) when it runs too long.
        ``parse_only``: run it on an empty store instead, for Oxigraph's own syntax message."""
        worker = None
        stale: list[Worker] = []
        with self._lock:
            while self._idle:
                w = self._idle.pop()
                self._forget(w)
                if w.generation == generation and w.alive():
                    worker = w
                    break
                stale.append(w)
        for w in stale:
            w.kill()
        if worker is None:
            worker = Worker(self._source())
            self.started += 1
        try:
            out = worker.query(query, graph, max_rows, timeout, parse_only)
        except WorkerTimeout:
            worker.kill()
            self.killed += 1
            raise
        except BaseException:
            worker.kill()
            raise
        evicted: list[Worker] = []
        with self._lock:
            if len(self._idle) < self.max_idle and worker.generation == generation:
                self._idle.append(worker)
                _IDLE_ORDER.append((self, worker))
                worker = None
                while len(_IDLE_ORDER) > MAX_IDLE_TOTAL:
                    pool, old = _IDLE_ORDER.pop(0)
                    if old in pool._idle:
                        pool._idle.remove(old)
                    evicted.append(old)
        if worker is not None:
            evicted.append(worker)
        for w in evicted:
            w.kill()
        return out

    def close(self) -> None:
        self._close_all(self._idle)


if __name__ == "__main__":  # pragma: no cover
    main()
