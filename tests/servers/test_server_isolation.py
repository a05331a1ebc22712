"""The project's test servers touch nothing but themselves: they listen on 127.0.0.1 only, the
Virtuoso ``dba`` password is random per instance (``dba/dba`` is refused), and stopping one of them
ends only its own process: another Virtuoso or Oxigraph on the machine keeps running."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

from kgqa_lib.paths import data_dir
from kgqa_lib.servers import (_VIRTUOSO_INI, OxigraphServer, VirtuosoServer, _wait_http, free_port, oxigraph_binary,
                              virtuoso_binary)

pytestmark = pytest.mark.server
needs_virtuoso = pytest.mark.skipif(virtuoso_binary() is None, reason="Virtuoso not installed (`make virtuoso`)")
FILES = [data_dir() / "miniworld" / "ontology.nt"]


def _decode(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    # /proc/net/tcp{,6} print the address as 32-bit words in host (little-endian) order
    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(raw))


def listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket the process listens on, read from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # 0A: LISTEN
                addr, port = f[1].split(":")
                found.add((_decode(addr), int(port, 16)))
    return found


def _loopback_only(pid: int, ports: set[int]) -> None:
    socks = listening(pid)
    assert {p for _, p in socks} >= ports, socks
    assert all(ipaddress.ip_address(a).is_loopback for a, _ in socks), f"listens beyond 127.0.0.1: {socks}"


def _isql_login(port: int, password: str) -> bool:
    isql = shutil.which("isql-vt") or shutil.which("isql")
    out = subprocess.run([isql, f"127.0.0.1:{port}", "dba", password, "exec=select 1;"],
                         capture_output=True, text=True, timeout=60)
    return out.returncode == 0 and "*** Error" not in out.stdout + out.stderr


def test_oxigraph_listens_on_loopback_only():
    with OxigraphServer(FILES) as srv:
        _loopback_only(srv.proc.pid, {srv.port})


@needs_virtuoso
def test_virtuoso_listens_on_loopback_only_with_a_random_password():
    with VirtuosoServer(FILES) as srv:
        _loopback_only(srv.proc.pid, {srv.http_port, srv.isql_port})
        assert len(srv.password) >= 16 and srv.password != "dba"
        assert not _isql_login(srv.isql_port, "dba")  # the default dba/dba is refused
        assert _isql_login(srv.isql_port, srv.password)
        with VirtuosoServer(FILES) as other:
            assert other.password != srv.password  # per instance


def _start_by_hand_oxigraph(tmp: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([oxigraph_binary(), "serve", "--location", str(tmp / "ox"), "--bind", f"127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/query"
    _wait_http(url, 30, proc, data={"query": "ASK {}"})
    return proc, url


def _start_by_hand_virtuoso(tmp: Path) -> tuple[subprocess.Popen, str]:
    d = tmp / "virtuoso"
    (d / "data").mkdir(parents=True)
    http, isql = free_port(), free_port()
    (d / "virtuoso.ini").write_text(_VIRTUOSO_INI.format(d=d, data=d / "data", isql=isql, http=http, graph="urn:g"))
    binary = virtuoso_binary()
    subprocess.run([binary, "+foreground", "+configfile", str(d / "virtuoso.ini"), "+pwdold", "dba",
                    "+pwddba", "by-hand-" + os.urandom(8).hex()], cwd=d, capture_output=True, timeout=120)
    proc = subprocess.Popen([binary, "+foreground", "+configfile", str(d / "virtuoso.ini")], cwd=d,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{http}/sparql"
    _wait_http(url + "?query=ASK%20%7B%7D", 60, proc)
    return proc, url


def _answers(url: str) -> bool:
    return requests.get(url, params={"query": "ASK {}"}, timeout=10).status_code == 200


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()  # by pid: only the process this test started
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_stopping_our_servers_leaves_other_instances_running(tmp_path):
    others = [_start_by_hand_oxigraph(tmp_path)]
    try:
        if virtuoso_binary():
            others.append(_start_by_hand_virtuoso(tmp_path))
        with OxigraphServer(FILES) as srv:
            ours = [srv.proc]
        if virtuoso_binary():
            with VirtuosoServer(FILES) as vsrv:
                ours.append(vsrv.proc)
        time.sleep(0.5)
        assert all(p.poll() is not None for p in ours)  # ours are gone ...
        for proc, url in others:  # ... the ones started independently still run and answer
            assert proc.poll() is None, f"{url}: an independently started server was stopped"
            assert _answers(url)
    finally:
        for proc, _ in others:
            _stop(proc)


SCRIPT_SUFFIXES = ("", ".py", ".sh", ".mk", ".ipynb", ".toml", ".yml", ".yaml", ".cfg")  # "": Makefile, .ci/run


# the kill-by-name commands, spelled in parts so this file does not name them itself
BY_NAME = re.compile(r"\b(" + "|".join(("p" + "kill", "kill" + "all")) + r")\b")


def test_no_broad_process_kill_anywhere_in_the_repository():
    """Processes are stopped by pid; never by name (the kill-by-name commands stop every user's instance)."""
    root = Path(__file__).resolve().parents[2]
    try:
        names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.split()
        files = [root / n for n in names]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout
        files = [p for p in root.rglob("*") if not {".git", ".venv"} & set(p.relative_to(root).parts)]
    me = Path(__file__).resolve()
    bad = []
    for p in files:
        if p.resolve() == me or not p.is_file() or p.suffix not in SCRIPT_SUFFIXES:
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        bad += [f"{p.relative_to(root)}:{i}" for i, line in enumerate(text.splitlines(), 1)
                if BY_NAME.search(line) and not line.lstrip().startswith("#")]
    assert not bad, f"processes killed by name (stop them by pid instead): {bad}"


def test_a_server_that_fails_to_start_is_stopped(monkeypatch):
    """A server whose load fails inside ``with`` must not outlive the test (no cleanup by name)."""
    started = []
    real_popen = subprocess.Popen

    def recording_popen(*a, **kw):
        started.append(real_popen(*a, **kw))
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", recording_popen)
    with pytest.raises(RuntimeError, match="loading .* into Oxigraph failed|exited|no answer"):
        with OxigraphServer([Path(__file__)]):  # a Python file is not N-Triples: the load fails
            pass
    assert started and all(p.poll() is not None for p in started)
