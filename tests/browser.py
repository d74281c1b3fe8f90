"""Debian's Chromium, headless, driven over the Chrome DevTools protocol (with `websockets`): open
a page, collect what its console says and every request it makes, run script in it, click, take
screenshots. For the report's tests and for the README's screenshot (tools/report_screenshot.py).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from websockets.sync.client import ClientConnection, connect

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-port=0",
)

#: no network: every request by a proxy nothing listens on (port 9, discard), every host name
#: unresolved (what a proxy bypasses, `<-loopback>` included); file:// is neither
OFFLINE: Final = (
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)


class BrowserError(RuntimeError):
    pass


def available() -> bool:
    return os.path.exists(CHROMIUM)


class Page:
    """One tab. `console_errors` and `requests` fill as events arrive."""

    def __init__(self, ws: ClientConnection, session: str, browser: Chromium) -> None:
        self.ws = ws
        self.session = session
        self.browser = browser
        self.console_errors: list[str] = []
        self.requests: list[str] = []
        self.loaded = False

    def send(self, method: str, timeout: float = 30.0, **params: Any) -> dict[str, Any]:
        return self.browser.call(method, params, self.session, timeout)

    def event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = params.get("args", [])
            self.console_errors.append(" ".join(str(a.get("value", a)) for a in args))
        elif method == "Runtime.exceptionThrown":
            self.console_errors.append(json.dumps(params.get("exceptionDetails", {}))[:500])
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.console_errors.append(params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            self.requests.append(params.get("request", {}).get("url", ""))
        elif method == "Page.loadEventFired":
            self.loaded = True

    def open(self, path: Path, width: int = 1400, height: int = 1000) -> None:
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.send(f"{domain}.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.loaded = False
        self.send("Page.navigate", url=path.resolve().as_uri())
        self.wait(lambda: self.loaded, "the page's load event")

    def eval(self, expression: str, timeout: float = 30.0) -> Any:
        reply = self.send(
            "Runtime.evaluate",
            timeout,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        if "exceptionDetails" in reply:
            raise BrowserError(json.dumps(reply["exceptionDetails"])[:500])
        return reply.get("result", {}).get("value")

    def wait(self, ready: Any, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = self.eval(ready) if isinstance(ready, str) else ready()
            if done:
                return
            self.browser.pump(0.1)
        raise BrowserError(f"timed out waiting for {what}")

    def click(self, selector: str) -> None:
        """A real mouse click at the middle of the element `selector` finds."""
        box = self.eval(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def key(self, key: str, code: str, keycode: int) -> None:
        for kind in ("rawKeyDown", "keyUp"):
            self.send(
                "Input.dispatchKeyEvent",
                type=kind,
                key=key,
                code=code,
                windowsVirtualKeyCode=keycode,
            )

    def screenshot(self, full: bool = False, clip: dict[str, float] | None = None) -> bytes:
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full}
        if clip:
            params["clip"] = {**clip, "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", **params)["data"])


class Chromium:
    """`with Chromium() as browser: page = browser.page()`: a fresh profile each time; `flags`
    added to FLAGS (OFFLINE: no network)."""

    def __init__(self, flags: tuple[str, ...] = ()) -> None:
        self.flags = flags
        self.profile = tempfile.mkdtemp(prefix="amqpscope-chromium-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.ws: ClientConnection | None = None
        self.ids = itertools.count(1)
        self.pages: dict[str, Page] = {}
        self.stack = contextlib.ExitStack()

    def __enter__(self) -> Chromium:
        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, *self.flags, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # Chromium writes the port it listens on, and the browser's path, to this file
        active = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            lines = active.read_text().split("\n") if active.exists() else []
            if len(lines) >= 2 and lines[1].startswith("/devtools/"):
                url = f"ws://127.0.0.1:{lines[0].strip()}{lines[1].strip()}"
                self.ws = self.stack.enter_context(connect(url, max_size=None, open_timeout=30))
                return self
            time.sleep(0.05)
        self.__exit__(None, None, None)
        raise BrowserError("chromium did not start")

    def __exit__(self, *exc: object) -> None:
        if self.ws is not None:
            with contextlib.suppress(Exception):
                self.call("Browser.close", {}, None, 10)
            self.stack.close()
        if self.proc is not None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(
        self, method: str, params: dict[str, Any], session: str | None, timeout: float = 30.0
    ) -> dict[str, Any]:
        assert self.ws is not None
        ident = next(self.ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reply = self._receive(deadline - time.monotonic())
            if reply is not None and reply.get("id") == ident:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
        raise BrowserError(f"{method}: no answer in {timeout} s")

    def _receive(self, timeout: float) -> dict[str, Any] | None:
        assert self.ws is not None
        try:
            message = json.loads(self.ws.recv(timeout=max(timeout, 0.01)))
        except TimeoutError:
            return None
        if "method" in message:
            page = self.pages.get(message.get("sessionId", ""))
            if page is not None:
                page.event(message)
            return None
        return message

    def pump(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._receive(deadline - time.monotonic())

    def page(self) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"}, None)["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True}, None)[
            "sessionId"
        ]
        assert self.ws is not None
        page = Page(self.ws, session, self)
        self.pages[session] = page
        return page
