"""A small headless Chromium driver over the Chrome DevTools Protocol (websocket-client).

Starts the system's chromium with a fresh profile, attaches to its first page and
records every console error, uncaught exception and failed resource load, so a test
can fail on any of them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-default-apps", "--disable-extensions", "--window-size=1280,900")


def find_chromium() -> str | None:
    """The chromium executable ($BENCHBOX_CHROMIUM, else the system's), or None when there is none."""
    forced = os.environ.get("BENCHBOX_CHROMIUM")
    if forced is not None:
        return forced if Path(forced).is_file() else None
    for c in CANDIDATES:
        if Path(c).exists():
            return c
    return shutil.which("chromium")


class BrowserError(RuntimeError):
    """The browser did not start or did not answer."""


class Chromium:
    """One headless browser with one page, driven over CDP."""

    def __init__(self, executable: str, timeout: float = 30.0) -> None:
        import websocket

        self.timeout = timeout
        self.profile = Path(tempfile.mkdtemp(prefix="benchbox-chromium-"))
        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.events: list[dict[str, Any]] = []
        self._id = 0
        try:
            port = self._port()
            page = self._page_target(port)
            self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=timeout,
                                                  suppress_origin=True)
            for domain in ("Page", "Runtime", "Log"):
                self.send(f"{domain}.enable")
        except BaseException:
            self.close()
            raise

    def _port(self) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrowserError(f"chromium exited with code {self.proc.returncode} at start")
            if marker.exists():
                text = marker.read_text().split()
                if text:
                    return int(text[0])
            time.sleep(0.05)
        raise BrowserError("chromium did not open its DevTools port")

    def _page_target(self, port: int) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                targets = json.loads(r.read())
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return pages[0]
            time.sleep(0.05)
        raise BrowserError("chromium opened no page")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Call a CDP method and return its result (events that arrive meanwhile are kept)."""
        self._id += 1
        mid = self._id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
        raise BrowserError(f"{method}: no answer within {self.timeout} s")

    def wait_event(self, method: str, since: int = 0) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for e in self.events[since:]:
                if e["method"] == method:
                    return e
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
        raise BrowserError(f"no {method} within {self.timeout} s")

    def goto(self, url: str) -> None:
        """Navigate and wait for the load event (scripts have run by then)."""
        since = len(self.events)
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired", since)

    def evaluate(self, expression: str) -> Any:
        """Evaluate JavaScript in the page and return its value (JSON-able)."""
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise BrowserError(f"evaluate failed: {r['exceptionDetails'].get('text')}: "
                               f"{r['exceptionDetails'].get('exception', {}).get('description')}")
        return r["result"].get("value")

    def mouse(self, kind: str, x: float, y: float) -> None:
        """Dispatch a mouse event (mouseMoved, mousePressed, mouseReleased) at page coordinates."""
        extra = {"button": "left", "clickCount": 1} if kind != "mouseMoved" else {}
        self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads seen so far."""
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append(f"exception: {d.get('text')} {d.get('exception', {}).get('description', '')}")
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console." + p["type"] + ": "
                           + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        return out

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            try:
                ws.close()
            except Exception:
                pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
