"""Local servers on 127.0.0.1 for tests, benchmarks and workshops: an Oxigraph SPARQL server
(the ``oxigraph`` PyPI package's binary), Debian's Virtuoso, a deterministic OpenAI-compatible
chat server with a fixed latency (for concurrency measurements without a model), and a listener
that stands for "the network" (it records every connection).

Each is a context manager that starts the server, waits until it answers, and stops it on exit;
``timings`` holds the measured load and start seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Sequence


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, timeout: float, proc: subprocess.Popen | None = None, data: dict | None = None) -> None:
    import requests

    deadline = time.perf_counter() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode} before answering at {url}")
        try:
            r = requests.post(url, data=data, timeout=2) if data else requests.get(url, timeout=2)
            if r.status_code < 500:
                return
        except requests.RequestException:
            pass
        if time.perf_counter() > deadline:
            raise TimeoutError(f"no answer from {url} within {timeout:.0f} s")
        time.sleep(0.05)


def oxigraph_binary() -> str:
    """The ``oxigraph`` CLI installed beside this Python (``pip install oxigraph``)."""
    cand = Path(sys.executable).parent / "oxigraph"
    found = str(cand) if cand.exists() else shutil.which("oxigraph")
    if not found:
        raise FileNotFoundError("the Oxigraph server binary is missing: `pip install oxigraph==0.5.13` "
                                "(it is in requirements.txt; `make setup` installs it)")
    return found


class _Server:
    """Start/stop plumbing shared by the server wrappers."""

    proc: subprocess.Popen | None = None
    stop_timeout = 10.0

    def start(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def _cleanup(self) -> None:
        pass

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._cleanup()

    def __enter__(self):
        try:
            return self.start()
        except BaseException:  # a server that started but failed to load must not outlive the test
            self.stop()
            raise

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class OxigraphServer(_Server):
    """An Oxigraph SPARQL server on 127.0.0.1 loaded with RDF files.

    In memory (the default) the server is started empty and the files are posted to its Graph
    Store endpoint, so its triples keep file order, as the embedded in-memory store does (answers
    come back in the same order, which keeps prompts identical). With ``location`` the files are
    bulk-loaded into an on-disk store (``oxigraph load``) served read-only; its order is the
    store's index order.

    >>> with OxigraphServer(["data/miniworld/kg_wikidata.nt"]) as srv:
    ...     srv.query_url  # http://127.0.0.1:PORT/query
    """

    def __init__(self, files: Sequence[str | Path], location: str | Path | None = None, port: int | None = None,
                 timeout_s: int | None = None) -> None:
        self.files = [Path(f) for f in files]
        self.location = Path(location) if location else None
        self.port = port or free_port()
        self.timeout_s = timeout_s
        self.proc: subprocess.Popen | None = None
        self.timings: dict[str, float] = {}

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def query_url(self) -> str:
        return f"{self.base_url}/query"

    def kg_url(self, profile: str) -> str:
        return f"sparql+{self.query_url}#profile={profile}"

    def _serve(self, cmd: list[str]) -> None:
        if self.timeout_s:
            cmd += ["--timeout-s", str(self.timeout_s)]
        t = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_http(self.query_url, 30, self.proc, data={"query": "ASK {}"})
        self.timings["start_s"] = time.perf_counter() - t

    def start(self) -> "OxigraphServer":
        import requests

        binary = oxigraph_binary()
        bind = f"127.0.0.1:{self.port}"
        if self.location:  # bulk load on disk, then serve read-only
            t = time.perf_counter()
            if self.files:
                subprocess.run([binary, "load", "--location", str(self.location), "--file", *map(str, self.files)],
                               check=True, capture_output=True)
            self.timings["load_s"] = time.perf_counter() - t
            self._serve([binary, "serve-read-only", "--location", str(self.location), "--bind", bind])
            return self
        self._serve([binary, "serve", "--bind", bind])
        t = time.perf_counter()
        for f in self.files:
            ctype = "text/turtle" if f.suffix in (".ttl", ".turtle") else "application/n-triples"
            r = requests.post(f"{self.base_url}/store?default", data=f.read_bytes(), headers={"Content-Type": ctype},
                              timeout=300)
            if r.status_code >= 300:
                self.stop()
                raise RuntimeError(f"loading {f} into Oxigraph failed: HTTP {r.status_code} {r.text[:300]}")
        self.timings["load_s"] = time.perf_counter() - t
        return self


# --------------------------------------------------------------------------------------------
# Virtuoso (Debian's virtuoso-opensource 7.2; `make virtuoso` installs it)
# --------------------------------------------------------------------------------------------
def virtuoso_binary() -> str | None:
    return shutil.which("virtuoso-t") or (
        "/usr/bin/virtuoso-t" if Path("/usr/bin/virtuoso-t").exists() else None)


_VIRTUOSO_INI = """[Database]
DatabaseFile = {d}/virtuoso.db
ErrorLogFile = {d}/virtuoso.log
TransactionFile = {d}/virtuoso.trx
xa_persistent_file = {d}/virtuoso.pxa
[TempDatabase]
DatabaseFile = {d}/virtuoso-temp.db
TransactionFile = {d}/virtuoso-temp.trx
[Parameters]
ServerPort = 127.0.0.1:{isql}
DirsAllowed = ., {d}, {data}
NumberOfBuffers = 20000
MaxDirtyBuffers = 15000
MaxQueryExecutionTime = 60
[HTTPServer]
ServerPort = 127.0.0.1:{http}
ServerRoot = {d}
MaxClientConnections = 8
ServerThreads = 8
[SPARQL]
ResultSetMaxRows = 100000
MaxQueryExecutionTime = 60
DefaultGraph = {graph}
"""


class VirtuosoServer(_Server):
    """A throw-away Virtuoso instance: its own database directory, loaded with N-Triples files
    into ``graph`` via ``isql`` (``ld_dir`` + ``rdf_loader_run``), SPARQL at ``/sparql``.

    Both ports (SQL and HTTP) listen on 127.0.0.1 only; the ``dba``/``dav`` passwords are random
    per instance (``password``), set by ``virtuoso-t +pwddba`` on the fresh database before the
    server first listens, so ``dba/dba`` never works. ``stop()`` ends this instance's process only."""

    def __init__(self, files: Sequence[str | Path], graph: str = "http://kgqa.local/graph") -> None:
        self.files = [Path(f).resolve() for f in files]
        self.graph = graph
        self._tmp = tempfile.TemporaryDirectory(prefix="kgqa-virtuoso-")
        self.dir = Path(self._tmp.name)
        self.http_port, self.isql_port = free_port(), free_port()
        self.password = secrets.token_hex(10)  # 20 characters: +pwddba silently mis-sets longer ones (7.2.5)
        self.proc: subprocess.Popen | None = None
        self.timings: dict[str, float] = {}

    @property
    def query_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/sparql"

    def kg_url(self, profile: str) -> str:
        return f"sparql+{self.query_url}#profile={profile}&graph={self.graph}"

    def _isql(self, sql: str) -> str:
        isql = shutil.which("isql-vt") or shutil.which("isql")
        out = subprocess.run([isql, f"127.0.0.1:{self.isql_port}", "dba", self.password, f"exec={sql}"],
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0 or "*** Error" in out.stdout + out.stderr:
            raise RuntimeError(f"isql failed on {sql!r}: {out.stdout[-500:]} {out.stderr[-500:]}")
        return out.stdout

    def start(self) -> "VirtuosoServer":
        binary = virtuoso_binary()
        if not binary:
            raise FileNotFoundError("Virtuoso is not installed: `make virtuoso` (Debian's virtuoso-opensource)")
        data = self.dir / "data"
        data.mkdir()
        for f in self.files:  # loader reads from an allowed directory
            shutil.copy(f, data / f.name)
        (self.dir / "virtuoso.ini").write_text(_VIRTUOSO_INI.format(
            d=self.dir, data=data, isql=self.isql_port, http=self.http_port, graph=self.graph))
        t = time.perf_counter()
        # Creates the database and sets the passwords, then exits (no port is opened in this mode).
        pwd = subprocess.run([binary, "+foreground", "+configfile", str(self.dir / "virtuoso.ini"), "+pwdold", "dba",
                              "+pwddba", self.password, "+pwddav", self.password],
                             cwd=self.dir, capture_output=True, text=True, timeout=120)
        log = pwd.stdout + pwd.stderr  # +foreground logs to stderr
        if "The DBA password is changed" not in log:
            raise RuntimeError(f"could not set the Virtuoso dba password (exit {pwd.returncode}): {log[-500:]}")
        self.proc = subprocess.Popen([binary, "+foreground", "+configfile", str(self.dir / "virtuoso.ini")],
                                     cwd=self.dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_http(self.query_url + "?query=ASK%20%7B%7D", 60, self.proc)
        self.timings["start_s"] = time.perf_counter() - t
        t = time.perf_counter()
        for f in self.files:
            self._isql(f"ld_dir('{data}', '{f.name}', '{self.graph}');")
        self._isql("rdf_loader_run();")
        self._isql("checkpoint;")
        self.timings["load_s"] = time.perf_counter() - t
        return self

    stop_timeout = 20.0

    def _cleanup(self) -> None:
        self._tmp.cleanup()


# --------------------------------------------------------------------------------------------
# "The network": a loopback listener that records every connection
# --------------------------------------------------------------------------------------------
class Listener:
    """A TCP listener on 127.0.0.1 that records every connection (and what was sent): a query that
    must not reach the network names it, and ``count`` must stay 0."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections: list[bytes] = []
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def count(self) -> int:
        return len(self.connections)

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            conn.settimeout(0.5)
            try:
                self.connections.append(conn.recv(4096))
            except OSError:
                self.connections.append(b"")
            conn.close()

    def close(self) -> None:
        self._stop = True
        self.thread.join(2)
        self.sock.close()


# --------------------------------------------------------------------------------------------
# A deterministic OpenAI-compatible chat server with a fixed latency
# --------------------------------------------------------------------------------------------
def echo_answer(messages: list[dict[str, str]]) -> str:
    """A deterministic reply: the last user message's last line, hashed into one of a few
    braced answers (stable across processes; enough to check that runs agree)."""
    last = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    h = int(hashlib.sha256(last.encode()).hexdigest()[:8], 16)
    return f"Answer: {{answer-{h % 7}}}"


class FakeChatServer:
    """``POST /v1/chat/completions`` answered after ``latency`` seconds with
    ``reply(messages)``; ``fail`` (optional) maps the n-th request (1-based) to an HTTP status to
    return instead (429/500 fault injection; a 429 carries ``Retry-After: <retry_after>``). Runs in a
    thread of this process; ``times`` holds the monotonic arrival time of every request."""

    def __init__(self, latency: float = 0.0, reply: Callable[[list[dict[str, str]]], str] = echo_answer,
                 fail: Callable[[int], int | None] | None = None, port: int | None = None,
                 retry_after: float = 0) -> None:
        self.latency, self.reply, self.fail = latency, reply, fail
        self.retry_after = retry_after
        self.times: list[float] = []
        self.port = port or free_port()
        self.requests = 0
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self.headers_seen: list[dict[str, str]] = []
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server._lock:
                    server.requests += 1
                    n = server.requests
                    server._in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server._in_flight)
                    server.headers_seen.append(dict(self.headers))
                    server.times.append(time.monotonic())
                try:
                    time.sleep(server.latency)
                    status = server.fail(n) if server.fail else None
                    if status:
                        payload = json.dumps({"error": {"message": f"injected HTTP {status}"}}).encode()
                        self.send_response(status)
                        if status == 429:
                            self.send_header("Retry-After", f"{server.retry_after:g}")
                    else:
                        text = server.reply(body.get("messages", []))
                        payload = json.dumps({
                            "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0,
                            "model": body.get("model", "fake"),
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": text}}],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                        }).encode()
                        self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its timeout): nothing to answer
                finally:
                    with server._lock:
                        server._in_flight -= 1

        return Handler

    def start(self) -> "FakeChatServer":
        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # socketserver's default backlog of 5 drops bursts of connections (1 s SYN retry)

        self._httpd = Server(("127.0.0.1", self.port), self._handler())
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()

    def __enter__(self) -> "FakeChatServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def env_for_openai(base_url: str, model: str = "fake", key: str = "sk-local-test") -> dict[str, str]:
    """Environment variables that point ``--llm openai:…`` at a local server."""
    return {**os.environ, "KGQA_LLM_BASE_URL": base_url, "KGQA_LLM_MODEL": model, "OPENAI_API_KEY": key}
