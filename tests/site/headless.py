"""Debian's Chromium, headless, driven over the Chrome DevTools Protocol through a pipe
(``--remote-debugging-pipe``: no port is opened and no driver or Python package is needed; the
protocol's messages are JSON separated by NUL bytes, on file descriptors 3 and 4 of the browser).

What a page does is collected from the protocol's events: ``Runtime.exceptionThrown`` (an uncaught
error), ``Runtime.consoleAPICalled`` of type error/assert, ``Log.entryAdded`` of level error (what a
console shows as errors: a resource that failed to load, a blocked request) — together what
Selenium's browser log calls SEVERE — and every request that is not a ``file:`` or ``data:`` URL
(``Network.requestWillBeSent``)."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

# The flags this machine's closed network needs (no background connections, no component updates)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--mute-audio", "--remote-debugging-pipe", "--window-size=1280,900"]


def find_browser() -> str | None:
    """A Chromium/Chrome executable: $KGQA_CHROMIUM, else the first of CANDIDATES on PATH."""
    env = os.environ.get("KGQA_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless browser process; ``open(url)`` loads a page in a new tab and returns a :class:`Tab`."""

    def __init__(self, executable: str, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="kgqa-chromium-")
        r, self._w = os.pipe()
        self._r, w = os.pipe()
        # the browser reads commands on fd 3 and writes answers on fd 4: its ends are moved above 9 first,
        # so that placing them on 3 and 4 in the child cannot overwrite one with the other
        child_r, child_w = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (r, w))
        os.close(r)
        os.close(w)

        def place_pipe() -> None:  # in the child, before exec
            os.dup2(child_r, 3)
            os.dup2(child_w, 4)

        self.log = Path(self.profile) / "stderr.log"  # read when the browser dies
        try:
            with open(self.log, "wb") as log:
                self.proc = subprocess.Popen([executable, *FLAGS, f"--user-data-dir={self.profile}/profile",
                                              "about:blank"], pass_fds=(3, 4), preexec_fn=place_pipe,
                                             stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        except BaseException:
            for fd in (self._r, self._w):
                os.close(fd)
            shutil.rmtree(self.profile, ignore_errors=True)
            raise
        finally:
            os.close(child_r)
            os.close(child_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        try:
            self.version = self.send("Browser.getVersion")["product"]
        except BaseException:
            self.close()
            raise

    # -- the protocol
    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("no answer from the browser in time")
            ready, _, _ = select.select([self._r], [], [], left)
            if ready:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    err = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
                    raise BrowserError(f"the browser closed its pipe (exit {self.proc.poll()}): {err}")
                self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return json.loads(raw)

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float | None = None) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise BrowserError(f"{method}: {m['error']}")
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def wait_for(self, method: str, session: str, timeout: float | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout or self.timeout)
        for i, e in enumerate(self.events):
            if e["method"] == method and e.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            m = self._read_message(deadline)
            if m.get("method") == method and m.get("sessionId") == session:
                return m
            if "method" in m:
                self.events.append(m)

    # -- pages
    def open(self, url: str) -> "Tab":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.events = [e for e in self.events if e.get("sessionId") != session]  # about:blank's
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_for("Page.loadEventFired", session)
        return Tab(self, target, session, url)

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close", timeout=10)
                except (BrowserError, OSError, ValueError):
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()  # our own child, by its handle
                    self.proc.wait(timeout=10)
        finally:
            for fd in (self._r, self._w):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Tab:
    def __init__(self, browser: Browser, target: str, session: str, url: str) -> None:
        self.browser, self.target, self.session, self.url = browser, target, session, url

    def evaluate(self, expression: str) -> Any:
        r = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                   "awaitPromise": True}, session=self.session)
        if "exceptionDetails" in r:
            raise BrowserError(f"{expression[:60]}…: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def _mine(self) -> list[dict[str, Any]]:
        return [e for e in self.browser.events if e.get("sessionId") == self.session]

    def severe(self) -> list[str]:
        """What the console shows as errors, and uncaught exceptions."""
        out = []
        for e in self._mine():
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append(f"uncaught: {d.get('exception', {}).get('description') or d.get('text')}")
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description")))
                                                                    for a in p.get("args", [])))
            elif e["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(f"{p['entry']['source']}: {p['entry']['text']} {p['entry'].get('url', '')}".strip())
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self._mine() if e["method"] == "Network.requestWillBeSent"]

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            m = self.browser.send("Page.getLayoutMetrics", session=self.session)
            size = m.get("cssContentSize") or m["contentSize"]
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": size["width"],
                                                            "height": min(size["height"], 8000), "scale": 1})
        data = self.browser.send("Page.captureScreenshot", params, session=self.session)["data"]
        path = Path(path)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})
        self.browser.events = [e for e in self.browser.events if e.get("sessionId") != self.session]
