"""``faults``: ``kgqa run`` under one fault of this machine or of its LLM endpoint at a time, then the
same command once the fault is gone.

A fault of the machine (its disk, its caches) or of the endpoint is never an answer: the run stops
with a non-zero exit code and one line saying what to do, records nothing for the questions it could
not answer, and the same command answers every one of them (once each) when the fault is gone::

    kgqa bench run faults --yes                 # writes results/bench/faults.json and faults.md
    kgqa bench run faults --only html,drip --yes

Every scenario runs the project's CLI in a child process (``python -m kgqa_lib.cli run --method io
--dataset tiny:films --limit 3 …``) against a small OpenAI-compatible endpoint of the standard library
on 127.0.0.1 (:class:`Endpoint`, whose behaviour is switched between the faulty run and the resume),
with its own temporary ``KGQA_CACHE_DIR`` and ``KGQA_RESULTS_DIR``. The faults (:data:`SCENARIOS`):

* ``disk-run`` — the disk under the run file is full: when the first request arrives, ``--out`` is
  replaced by a link to ``/dev/full`` (the kernel's own ENOSPC on every write);
* ``disk-cache`` — the disk under the LLM cache is full: SQLite's own "database or disk is full",
  made by capping the cache file at its current size (``PRAGMA max_page_count``, set by a wrapper
  around the same CLI: no tmpfs is needed);
* ``locked`` — another process holds the LLM cache's write lock (``BEGIN EXCLUSIVE``) past the
  cache's 30 s busy timeout;
* ``read-only`` — the LLM cache file and its folder are read-only (mode 0444/0555; run by root, the
  command is started without the capability that lets root write past file modes);
* ``corrupt`` — the SPARQL answer cache is damaged (a file that is not a database) for a method
  that asks a SPARQL endpoint (``qsm`` on the mini-world KG behind the project's Oxigraph server);
  the fix the message names is to delete it. (A damaged LLM or embedding cache is rebuilt by design:
  it only speeds things up and its answers are in the transcripts.)
* ``html`` / ``empty`` — the endpoint answers HTTP 200 with an HTML login page / with
  ``"choices": []``;
* ``drip`` — the endpoint sends a valid answer one byte every 0.5 s, under ``--llm-timeout 2``;
* ``kill`` — ``kgqa bench run`` of a one-cell table (6 questions, 1 s per answer) gets SIGTERM after
  2 answers: no ``kgqa run`` child may outlive it and the saved records must be exactly the questions
  answered; the same ``kgqa bench run`` then completes the table.

Per scenario: the exit code, the records of the questions the fault stopped (0 expected), whether
the error is one line without a traceback, the seconds the faulty command took, and the resume's
exit code, questions answered and duplicate records. Paths in the stored messages are shown as
``<tmp>`` (the scenario's temporary folder), ports as ``<port>``."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, Callable

from ...paths import data_dir, repo_root
from ..measure import Measurement, Option, register
from .timing import md_table

QUESTIONS = 3  # of tiny:films, per scenario
KILL_QUESTIONS = 6  # of the killed table's cell
REPLY = "Answer: {Christopher Nolan} " + "because " * 600  # a few KB: every stored answer needs new cache pages

#: scenario key → (what the fault is, how it is made)
SCENARIOS: dict[str, tuple[str, str]] = {
    "disk-run": ("full disk under the run file", "`--out` swapped for a link to /dev/full at the first request (ENOSPC)"),
    "disk-cache": ("full disk under the LLM cache", "SQLite's own 'database or disk is full' (file capped at its size)"),
    "locked": ("locked LLM cache", "a second connection holds BEGIN EXCLUSIVE past the 30 s busy timeout"),
    "read-only": ("read-only LLM cache", "file 0444, folder 0555 (run by root: without CAP_DAC_OVERRIDE)"),
    "corrupt": ("damaged SPARQL cache", "sparql_cache.sqlite is not a database (qsm on an Oxigraph server)"),
    "html": ("HTML reply", "HTTP 200 with an HTML login page"),
    "empty": ("empty `choices`", 'HTTP 200 with a completion whose "choices" is []'),
    "drip": ("dripping endpoint", "a valid answer, 1 byte every 0.5 s, `--llm-timeout 2`"),
    "kill": ("killed `kgqa bench run`", f"SIGTERM to the parent after 2 of {KILL_QUESTIONS} answers"),
}


# ------------------------------------------------------------------------------------ the endpoint
def completion(text: str) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "fake",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}).encode()


class Endpoint:
    """``POST /v1/chat/completions`` on 127.0.0.1, answered by ``mode``: ``ok`` (:data:`REPLY` after
    ``latency`` s), ``html`` (HTTP 200, a login page), ``empty`` (HTTP 200, ``"choices": []``), ``drip``
    (a valid completion, one byte every ``drip`` s). ``hook`` (if set) runs as each request arrives;
    ``requests`` counts them."""

    def __init__(self, mode: str = "ok", latency: float = 0.0, drip: float = 0.5) -> None:
        self.mode, self.latency, self.drip, self.requests = mode, latency, drip, 0
        self.hook: Callable[[], None] | None = None
        ep = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                ep.requests += 1
                if ep.hook is not None:
                    ep.hook()
                mode = ep.mode
                if mode == "html":
                    body, ctype = b"<html><body><form>Please log in</form></body></html>", "text/html"
                elif mode == "empty":
                    body, ctype = b'{"id": "x", "object": "chat.completion", "choices": []}', "application/json"
                else:
                    body, ctype = completion(REPLY), "application/json"
                    time.sleep(ep.latency if mode == "ok" else 0)
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    if mode != "drip":
                        self.wfile.write(body)
                        return
                    for i in range(len(body)):
                        if ep.mode != "drip":  # stopped: the rest at once
                            self.wfile.write(body[i:])
                            return
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                        time.sleep(ep.drip)
                except OSError:
                    pass  # the client gave up

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_port
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.llm = f"openai:fake@{self.base_url}"

    def __enter__(self) -> "Endpoint":
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.mode = "ok"  # a dripping answer ends at once
        self.httpd.shutdown()
        self.httpd.server_close()


# ------------------------------------------------------------------------------ running the CLI
# `kgqa run` with the LLM cache's file capped at its size when opened: SQLite's own SQLITE_FULL
FULL_CACHE = """
import sys
from kgqa_lib import _sqlite, cli
real = _sqlite.connect
def connect(path, *args, **kwargs):
    con = real(path, *args, **kwargs)
    if str(path).endswith("llm_cache.sqlite"):
        con.execute("PRAGMA max_page_count=%d" % con.execute("PRAGMA page_count").fetchone()[0])
    return con
_sqlite.connect = connect
sys.exit(cli.main(sys.argv[1:]))
"""

# A command run without root's power to read and write past file modes: CAP_DAC_OVERRIDE and
# CAP_DAC_READ_SEARCH dropped from the bounding set (PR_CAPBSET_DROP), then exec. Run by root, the
# command meets a read-only file as any user does; run by another user, it changes nothing.
AS_PLAIN_USER = """
import ctypes, os, sys
if os.geteuid() == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:
            sys.exit("error: cannot drop capability %d (%s)" % (cap, os.strerror(ctypes.get_errno())))
os.execv(sys.argv[1], sys.argv[1:])
"""

# `kgqa bench run` of a one-cell table of its own
STOP_TABLE = f"""
import sys
from kgqa_lib import cli
from kgqa_lib.bench import core
core.register(core.Table(name="faults_stop", title="a stopped bench run", output="faults_stop.md",
                         cells=(core.Cell("stop_io", "io", "tiny:films", {KILL_QUESTIONS},
                                          ("--limit", "{KILL_QUESTIONS}", "--no-transcripts")),),
                         report=lambda rs: "io n=%d\\n" % len(rs("stop_io"))))
sys.exit(cli.main(sys.argv[1:]))
"""


class Scene:
    """One scenario's temporary folder (cache, results, a home), the environment of its commands
    and, as root, the unprivileged user they may run as."""

    def __init__(self, root: Path, key: str) -> None:
        self.root = root / key
        self.cache, self.results = self.root / "cache", self.root / "results"
        for d in (self.cache, self.results, self.root / "home"):
            d.mkdir(parents=True)
        self.out = self.results / "run.jsonl"
        keep = {k: v for k, v in os.environ.items()
                if not k.startswith(("KGQA_", "OPENAI_")) or k in ("KGQA_DATA_DIR", "KGQA_SQLITE_JOURNAL")}
        pythonpath = os.pathsep.join(filter(None, [str(repo_root()), os.environ.get("PYTHONPATH")]))
        self.env = {**keep, "KGQA_CACHE_DIR": str(self.cache), "KGQA_RESULTS_DIR": str(self.results),
                    "KGQA_FIGURES_DIR": str(self.root / "figures"), "KGQA_TABLES_DIR": str(self.root / "tables"),
                    "KGQA_LLM_MODE": "auto", "OPENAI_API_KEY": "sk-local-test", "NO_PROXY": "127.0.0.1,localhost",
                    "no_proxy": "127.0.0.1,localhost", "PYTHONPATH": pythonpath, "HOME": str(self.root / "home"),
                    "XDG_CACHE_HOME": str(self.root / "home"), "MPLCONFIGDIR": str(self.root / "home"),
                    "TMPDIR": str(self.root / "home")}

    def run_argv(self, llm: str, *more: str, method: str = "io", dataset: str = "tiny:films") -> list[str]:
        return ["run", "--method", method, "--dataset", dataset, "--limit", str(QUESTIONS), "--llm", llm,
                "--llm-mode", "auto", "--no-transcripts", "--quiet", *more, "--out", str(self.out)]

    def kgqa(self, argv: list[str], wrapper: str | None = None, timeout: float = 150.0,
             plain: bool = False) -> tuple[int | None, str, float]:
        """(exit code, stderr, seconds) of ``kgqa ARGV`` (through ``wrapper``, a script, when given;
        ``plain``: without root's power over file modes, :data:`AS_PLAIN_USER`); exit None: still
        running after ``timeout`` s (then killed)."""
        cmd = [sys.executable, *(["-c", AS_PLAIN_USER, sys.executable] if plain else []),
               *(["-c", wrapper] if wrapper else ["-m", "kgqa_lib.cli"]), *argv]
        t = time.perf_counter()
        try:
            p = subprocess.run(cmd, env=self.env, cwd=self.root, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            err = exc.stderr.decode("utf-8", "replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            return None, err, time.perf_counter() - t
        return p.returncode, p.stderr, time.perf_counter() - t

    def mask(self, text: str, port: int | None = None) -> str:
        text = text.replace(str(self.root), "<tmp>").replace(str(repo_root()), "<repo>")
        if port:
            text = text.replace(f"127.0.0.1:{port}", "127.0.0.1:<port>")
        return re.sub(r"\(process \d+", "(process <pid>", text)


def lines_of(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON record of a run file (``.gz`` too), duplicates kept; [] when there is none."""
    if not path.is_file():
        return []
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8", "replace")
    out = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill or a full disk
        if isinstance(rec, dict) and "qid" in rec:
            out.append(rec)
    return out


def one_line(stderr: str) -> tuple[bool, str]:
    """(stderr is one ``error: …`` line without a traceback, that line — or the last line)."""
    lines = [x for x in stderr.splitlines() if x.strip()]
    ok = len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in stderr
    return ok, (lines[-1] if lines else "")


def row(scene: Scene, key: str, code: int | None, stderr: str, seconds: float, scored: int,
        resume: tuple[int | None, str, float], port: int | None = None, requests: int | None = None,
        **extra: Any) -> dict[str, Any]:
    """One scenario's measurements, the resume read from the run file."""
    recs = lines_of(scene.out)
    qids = [r["qid"] for r in recs]
    single, line = one_line(stderr)
    out = {"key": key, "fault": SCENARIOS[key][0], "made_by": SCENARIOS[key][1], "exit": code, "scored": scored,
           "one_line": single, "message": scene.mask(line, port)[:600], "seconds": round(seconds, 1),
           "requests": requests, "resume_exit": resume[0], "resume_seconds": round(resume[2], 1),
           "questions": QUESTIONS, "answered": len(set(qids)), "duplicates": len(qids) - len(set(qids)),
           "resume_message": "" if resume[0] == 0 else scene.mask(one_line(resume[1])[1], port)[:600], **extra}
    out["ok"] = verdict_row(out)
    return out


def verdict_row(r: dict[str, Any]) -> bool:
    return (r["exit"] not in (0, None) and r["scored"] == 0 and r["one_line"] and r["resume_exit"] == 0
            and r["answered"] == r["questions"] and r["duplicates"] == 0 and r.get("orphans", 0) == 0
            and r.get("saved_is_answered", True))


def _precreate_cache(scene: Scene) -> Path:
    """The LLM cache file with its tables (as an earlier run leaves it)."""
    from ...llm.chat import LLMCache

    cache = LLMCache(scene.cache / "llm_cache.sqlite", transcripts=None)
    cache._conn().close()
    return cache.path


# -------------------------------------------------------------------------------- the scenarios
def endpoint_fault(scene: Scene, key: str, **_: Any) -> dict[str, Any]:
    """``html`` / ``empty`` / ``drip``: the endpoint misbehaves, then answers."""
    timeout = "2" if key == "drip" else "30"
    with Endpoint(mode=key) as ep:
        argv = scene.run_argv(ep.llm, "--llm-timeout", timeout)
        code, err, seconds = scene.kgqa(argv)
        requests, scored = ep.requests, len(lines_of(scene.out))
        ep.mode = "ok"
        resume = scene.kgqa(argv)
    return row(scene, key, code, err, seconds, scored, resume, ep.port, requests)


def disk_run(scene: Scene, key: str, **_: Any) -> dict[str, Any]:
    out = scene.out

    def fill() -> None:  # the disk fills while the first question is asked
        if not out.exists() and not out.is_symlink():
            out.symlink_to("/dev/full")

    with Endpoint() as ep:
        argv = scene.run_argv(ep.llm)
        ep.hook = fill
        try:
            code, err, seconds = scene.kgqa(argv)
        finally:
            ep.hook = None
            if out.is_symlink():
                out.unlink()  # space freed
        scored, requests = len(lines_of(out)), ep.requests
        resume = scene.kgqa(argv)
    return row(scene, key, code, err, seconds, scored, resume, ep.port, requests)


def disk_cache(scene: Scene, key: str, **_: Any) -> dict[str, Any]:
    _precreate_cache(scene)
    with Endpoint() as ep:
        argv = scene.run_argv(ep.llm)
        code, err, seconds = scene.kgqa(argv, wrapper=FULL_CACHE)
        scored, requests = len(lines_of(scene.out)), ep.requests
        resume = scene.kgqa(argv)  # the same command without the cap: space freed
    return row(scene, key, code, err, seconds, scored, resume, ep.port, requests)


def locked(scene: Scene, key: str, **_: Any) -> dict[str, Any]:
    path = _precreate_cache(scene)
    with Endpoint() as ep:
        argv = scene.run_argv(ep.llm)
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")  # another process writing, for longer than the busy timeout
        try:
            code, err, seconds = scene.kgqa(argv)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        scored, requests = len(lines_of(scene.out)), ep.requests
        resume = scene.kgqa(argv)
    return row(scene, key, code, err, seconds, scored, resume, ep.port, requests)


def read_only(scene: Scene, key: str, **_: Any) -> dict[str, Any]:
    path = _precreate_cache(scene)
    path.chmod(0o444)
    scene.cache.chmod(0o555)
    with Endpoint() as ep:
        argv = scene.run_argv(ep.llm)
        try:
            code, err, seconds = scene.kgqa(argv, plain=True)
        finally:
            scene.cache.chmod(0o755)  # made writable again
            path.chmod(0o644)
        scored, requests = len(lines_of(scene.out)), ep.requests
        resume = scene.kgqa(argv, plain=True)
    return row(scene, key, code, err, seconds, scored, resume, ep.port, requests)


def corrupt(scene: Scene, key: str, servers: ModuleType, **_: Any) -> dict[str, Any]:
    files = [data_dir() / "miniworld" / "kg_wikidata.nt", data_dir() / "miniworld" / "ontology.nt"]
    bad = scene.cache / "sparql_cache.sqlite"
    bad.write_bytes(b"this is not a SQLite database\n" * 200)
    with Endpoint() as ep, servers.OxigraphServer(files) as srv:
        argv = scene.run_argv(ep.llm, "--kg", srv.kg_url("miniworld"), method="qsm", dataset="miniworld:simple")
        code, err, seconds = scene.kgqa(argv)
        scored, requests = len(lines_of(scene.out)), ep.requests
        bad.unlink()  # what the message says to do
        resume = scene.kgqa(argv)
    r = row(scene, key, code, err, seconds, scored, resume, ep.port, requests)
    r["message"] = r["message"].replace(f"127.0.0.1:{srv.port}", "127.0.0.1:<port>")
    return r


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of a process; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[19])


def _children(pid: int) -> dict[int, int]:
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            st = _proc_stat(int(d.name))
            if st and st[1] == pid:
                out[int(d.name)] = st[2]
    return out


def _alive(pid: int, started: int) -> bool:
    st = _proc_stat(pid)
    return st is not None and st[2] == started and st[0] != "Z"


def kill(scene: Scene, key: str, **_: Any) -> dict[str, Any]:
    """SIGTERM to ``kgqa bench run`` mid-run; then the same command."""
    from ..core import model_key

    script = scene.root / "bench_stop.py"
    script.write_text(STOP_TABLE)
    seen: dict[int, int] = {}

    def bench(log: str) -> subprocess.Popen:
        with open(scene.root / log, "w") as fh:  # a file: an orphan holding a pipe would block its reader
            return subprocess.Popen([sys.executable, str(script), "bench", "run", "faults_stop", "--llm", llm, "--yes",
                                     "--batch", "100"], env=scene.env, cwd=scene.root, stdout=fh,
                                    stderr=subprocess.STDOUT)

    with Endpoint(latency=1.0) as ep:
        llm = ep.llm
        model = model_key(llm)
        live = scene.results / "runs" / model / "stop_io.jsonl"
        saved = scene.results / "bench" / "runs" / "faults_stop" / model / "stop_io.jsonl.gz"
        scene.out = saved  # what the resume is read from
        try:
            parent = bench("stopped.log")
            deadline = time.monotonic() + 180
            while len({r["qid"] for r in lines_of(live)}) < 2 and parent.poll() is None and time.monotonic() < deadline:
                seen.update(_children(parent.pid))
                time.sleep(0.1)
            seen.update(_children(parent.pid))
            t = time.perf_counter()
            parent.send_signal(signal.SIGTERM)
            try:
                code: int | None = parent.wait(timeout=90)
            except subprocess.TimeoutExpired:
                parent.kill()
                code = None
            seconds = time.perf_counter() - t
            end = time.monotonic() + 5
            while any(_alive(p, s) for p, s in seen.items()) and time.monotonic() < end:
                time.sleep(0.1)
            orphans = sum(_alive(p, s) for p, s in seen.items())
            answered = {r["qid"] for r in lines_of(live)}
            saved_qids = {r["qid"] for r in lines_of(saved)}
            text = (scene.root / "stopped.log").read_text()
            said = re.findall(r"faults_stop: stopped by SIGTERM[^\r\n]*", text)  # (after the cell's progress bar)
            requests = ep.requests
            t2 = time.perf_counter()
            again = bench("resume.log")
            try:
                resume_code: int | None = again.wait(timeout=300)
            except subprocess.TimeoutExpired:
                again.kill()
                resume_code = None
            resume = (resume_code, (scene.root / "resume.log").read_text(), time.perf_counter() - t2)
        finally:
            for pid, started in seen.items():  # an orphan left behind: ours to end
                if _alive(pid, started):
                    os.kill(pid, signal.SIGKILL)
    r = row(scene, key, code, "", seconds, len(saved_qids - answered), resume, ep.port, requests,
            orphans=orphans, answered_before=len(answered), saved_before=len(saved_qids),
            saved_is_answered=saved_qids == answered and 0 < len(answered) < KILL_QUESTIONS)
    r.update(one_line=len(said) == 1 and "Traceback" not in text, message=scene.mask(said[-1] if said else text[-300:]),
             questions=KILL_QUESTIONS)
    r["ok"] = verdict_row(r)
    return r


RUNNERS: dict[str, Callable[..., dict[str, Any]]] = {
    "disk-run": disk_run, "disk-cache": disk_cache, "locked": locked, "read-only": read_only, "corrupt": corrupt,
    "html": endpoint_fault, "empty": endpoint_fault, "drip": endpoint_fault, "kill": kill,
}


def measure(opts: SimpleNamespace, previous: dict[str, Any], servers: ModuleType) -> dict[str, Any]:
    """The scenarios of ``--only`` (all by default), each in its own temporary folder; ``servers`` is
    :mod:`kgqa_lib.servers` (the Oxigraph server of ``corrupt``)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="kgqa-faults-") as tmp:
        root = Path(tmp)
        for key in opts.only:
            print(f"  {key}: {SCENARIOS[key][0]} …", flush=True)
            r = RUNNERS[key](Scene(root, key), key, servers=servers)
            rows.append(r)
            print(f"  {key}: exit {r['exit']}, {r['scored']} scored, one line {r['one_line']}, {r['seconds']} s; "
                  f"resume exit {r['resume_exit']}, {r['answered']}/{r['questions']} answered, "
                  f"{r['duplicates']} duplicates — {'ok' if r['ok'] else 'NOT OK'}", flush=True)
            shutil.rmtree(root / key, ignore_errors=True)
    return {"questions": QUESTIONS, "rows": rows}


# ---------------------------------------------------------------------------------- the report
def all_ok(d: dict[str, Any]) -> bool:
    return bool(d.get("rows")) and all(r["ok"] for r in d["rows"])


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def _code(text: str) -> str:
    """``text`` as inline code (it may hold single backticks)."""
    return f"`` {text} ``" if text else "(nothing)"


def report(d: dict[str, Any]) -> str:
    rows = d["rows"]
    lines = [
        "# Faults of the machine and of the LLM endpoint",
        "",
        f"Written by `kgqa bench run faults`. Each row runs `kgqa run` ({d['questions']} questions of `tiny:films` "
        "with `io`, or of `miniworld:simple` with `qsm` for the SPARQL cache) in a child process against a small "
        "OpenAI-compatible endpoint on 127.0.0.1, with its own temporary cache and results folders, under one fault; "
        "then the fault is removed and the same command is run again. *Scored* counts the records written for the "
        "questions the fault stopped; *one line*: the error is a single `error: …` line without a traceback "
        "(for the killed `kgqa bench run`: its one line saying it was stopped and what it saved). *Seconds*: the "
        "faulty command's wall time (for the kill: from SIGTERM to its exit).",
        "",
        md_table(["fault", "how it is made", "exit", "scored", "one line", "seconds", "resume exit", "answered",
                  "duplicates", "as expected"],
                 [[r["fault"], _cell(r["made_by"]), "hang" if r["exit"] is None else r["exit"], r["scored"],
                   "yes" if r["one_line"] else "**no**", f"{r['seconds']:.1f}",
                   "hang" if r["resume_exit"] is None else r["resume_exit"], f"{r['answered']}/{r['questions']}",
                   r["duplicates"], "yes" if r["ok"] else "**NO**"] for r in rows]),
    ]
    kills = [r for r in rows if "orphans" in r]
    for r in kills:
        lines += ["", f"Killed `kgqa bench run`: {r['answered_before']} answers in the live run file when it was "
                  f"stopped, {r['saved_before']} saved records, saved = answered: "
                  f"{'yes' if r['saved_is_answered'] else '**no**'}; `kgqa run` children alive 5 s after it "
                  f"exited: {r['orphans']}."]
    lines += ["", "What each faulty command said:", ""]
    lines += [f"- {r['fault']}: {_code(r['message'])}" for r in rows]
    failed = [r for r in rows if r["resume_exit"] != 0 and r["resume_message"]]
    if failed:
        lines += ["", "Resumes that failed:", ""] + [f"- {r['fault']}: {_code(r['resume_message'])}" for r in failed]
    lines += ["", "Every fault exits ≠ 0 with 0 scored records and one line, and its resume answers every question "
              f"once: **{'yes' if all_ok(d) else 'NO'}**", ""]
    return "\n".join(lines)


def estimate(opts: SimpleNamespace, previous: dict[str, Any]) -> str:
    slow = 35 if "locked" in opts.only else 0
    return (f"{len(opts.only)} fault scenario(s), each a `kgqa run` of {QUESTIONS} questions and its resume "
            f"(~{15 * len(opts.only) + slow} s; the locked cache waits out SQLite's 30 s busy timeout)")


TABLE = register(Measurement(
    name="faults", title="kgqa run under a full disk, locked/read-only/damaged caches, bad replies, a kill",
    data="faults.json", output="faults.md", report=report, measure=measure, estimate=estimate,
    options=(Option("--only", ",".join(SCENARIOS), "the scenarios to run", kind="names", choices=tuple(SCENARIOS)),),
    target="every fault exits ≠ 0 with 0 scored records and one line; its resume answers all, no duplicate",
    verdict=all_ok, needs=("servers",), requires="Linux (/dev/full, /proc); the `oxigraph` binary for `corrupt`"))
