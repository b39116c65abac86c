"""A real headless browser for tests: Debian's chromium, in a network namespace with no route.

Chromium is driven over the DevTools protocol on a *pipe* (``--remote-debugging-pipe``: JSON
messages ended by NUL on file descriptors 3 and 4), not a TCP port, so the browser can live in
a network namespace of its own (``unshare -n``: only a loopback interface, down) and the test
still talks to it. Nothing it tries can leave the machine: the namespace has no other
interface, which `Browser.interfaces` reports (read inside the namespace, just before chromium
starts) and the tests assert. The browser is also started with the flags that stop its own
background traffic (updates, sync, field trials).

Under CI (``CI=true``) or ``SANDBOX_REPLAY_REQUIRE_BROWSER=1`` a missing chromium or an
unusable namespace fails the test; elsewhere it skips (`browser_or_skip`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless=new",
    "--no-sandbox",  # root in CI; the namespace, not chromium's sandbox, is the boundary here
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-features=Translate,MediaRouter,OptimizationHints",
    "--disable-quic",
    "--metrics-recording-only",
    "--remote-debugging-pipe",
]


def browser_required() -> bool:
    """True when a missing browser must fail the test rather than skip it."""
    return os.environ.get("CI", "").lower() == "true" or os.environ.get(
        "SANDBOX_REPLAY_REQUIRE_BROWSER", ""
    ) in ("1", "true", "yes")


def _unusable(reason: str) -> None:
    if browser_required():
        pytest.fail(f"a headless chromium is required here (CI=true): {reason}")
    pytest.skip(f"no usable headless chromium: {reason}")


def _netns_prefix() -> list[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        _unusable("unshare (util-linux) not found")
    assert unshare is not None
    return [unshare, "-n"] if os.geteuid() == 0 else [unshare, "-r", "-n"]


class Browser:
    """One chromium process and one page, driven over the DevTools pipe.

    Args:
        workdir: a folder for the profile and the namespace report.
        width, height: the viewport in CSS pixels.
    """

    def __init__(self, workdir: Path, width: int = 1280, height: int = 900) -> None:
        if not Path(CHROMIUM).exists():
            _unusable(f"{CHROMIUM} missing (apt-get install chromium chromium-driver)")
        profile = workdir / "profile"
        profile.mkdir(parents=True, exist_ok=True)
        self._netns_file = workdir / "netns-interfaces.json"
        probe = (
            f"{sys.executable} -c 'import json, socket; "
            f'print(json.dumps([n for _, n in socket.if_nameindex()]))\' > "{self._netns_file}"'
        )
        command = " ".join(
            [
                probe,
                "&& exec 3<&0 4>&1 0</dev/null 1>&2 &&",
                "exec",
                CHROMIUM,
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ]
        )
        self.proc = subprocess.Popen(
            [*_netns_prefix(), "bash", "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self._next = 0
        self._lock = threading.Lock()
        self._replies: dict[int, dict[str, Any]] = {}
        self._events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:
            targets = self.call("Target.getTargets", timeout=30)["targetInfos"]
        except Exception as exc:
            self.close()
            _unusable(f"chromium did not answer on the DevTools pipe: {exc}")
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}
        )["sessionId"]
        for domain in ("Page.enable", "Runtime.enable", "Network.enable"):
            self.send(domain)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    # -- protocol -----------------------------------------------------------------------

    def _read(self) -> None:
        assert self.proc.stdout is not None
        buffer = b""
        while True:
            chunk = self.proc.stdout.read1(1 << 16)  # type: ignore[attr-defined]
            if not chunk:
                break
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                with self._cond:
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self._events.append(message)
                    self._cond.notify_all()

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: str | None = None,
        timeout: float = 20,
    ) -> dict[str, Any]:
        """Send one command and wait for its result.

        Raises:
            RuntimeError: the browser answered with an error.
            TimeoutError: no answer in ``timeout`` seconds.
        """
        with self._lock:
            self._next += 1
            ident = self._next
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\0")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        with self._cond:
            while ident not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise TimeoutError(f"{method}: no answer")
                self._cond.wait(left)
            reply = self._replies.pop(ident)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return dict(reply.get("result") or {})

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A command to the page's session."""
        return self.call(method, params, session=self.session)

    def events(self, method: str) -> list[dict[str, Any]]:
        """Every event of ``method`` received so far (their params)."""
        with self._cond:
            return [e.get("params") or {} for e in self._events if e.get("method") == method]

    # -- page ---------------------------------------------------------------------------

    def open(self, url: str, *, javascript: bool = True, timeout: float = 20) -> float:
        """Load ``url``; return seconds until its load event."""
        self.send("Emulation.setScriptExecutionDisabled", {"value": not javascript})
        before = len(self.events("Page.loadEventFired"))
        start = time.monotonic()
        self.send("Page.navigate", {"url": url})
        deadline = start + timeout
        with self._cond:
            while (
                len([e for e in self._events if e.get("method") == "Page.loadEventFired"]) <= before
            ):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{url} did not load")
                self._cond.wait(left)
        return time.monotonic() - start

    def js(self, expression: str) -> Any:
        """Evaluate ``expression`` in the page (even with the page's scripts off); its value."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (pressed and released) at the middle of the element."""
        box = self.js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        """Save a PNG of the viewport (or the whole page)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params.update(
                captureBeyondViewport=True,
                clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
            )
        data = self.send("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    @property
    def interfaces(self) -> list[str]:
        """The network interfaces of the browser's namespace (read there before it started)."""
        return list(json.loads(self._netns_file.read_text()))

    def close(self) -> None:
        """Stop the browser."""
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):  # it is being stopped either way
                self.call("Browser.close", timeout=5)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@contextmanager
def browser(workdir: Path, **kwargs: Any) -> Iterator[Browser]:
    """A `Browser` that is closed afterwards."""
    b = Browser(workdir, **kwargs)
    try:
        yield b
    finally:
        b.close()
