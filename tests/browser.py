"""Headless Chromium for tests, driven over the DevTools protocol on a pipe.

``--remote-debugging-pipe`` has Chromium read protocol messages (JSON, each
ended by a NUL byte) from its file descriptor 3 and answer on 4: no port, no
websocket library. Debian's ``chromium`` package provides the binary
(``.ci/run`` installs it); when it is missing a test FAILS in CI and skips
elsewhere (``tests.services.unavailable``).

    with Browser(tmp_path) as page:
        page.cookie("sessionid", value, "http://127.0.0.1:8080")
        page.open("http://127.0.0.1:8080/projects/1/data?labeling=1")
        page.wait_for("document.body.innerText.includes('Query')")
        png = page.screenshot()
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.services import apt, unavailable

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--remote-debugging-pipe")


def chromium() -> str:
    """The Chromium binary, or the test skips (fails in CI)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        unavailable("chromium is not installed: apt-get install chromium", apt("chromium"))
    return found


# A promise that settles when the expression turns truthy (checked on every DOM
# mutation, and on a timer for what no mutation shows, such as scrolling) or, with
# false, after `ms` milliseconds.
_WAIT = """new Promise(resolve => {
  const value = () => { try { return (%(expression)s); } catch (e) { return false; } };
  let observer, tick, stop;
  const done = v => { observer.disconnect(); clearInterval(tick); clearTimeout(stop); resolve(v); };
  const check = () => { const v = value(); if (v) done(v); };
  observer = new MutationObserver(check);
  observer.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  tick = setInterval(check, 100);
  stop = setTimeout(() => done(false), %(ms)d);
  check();
})"""


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium with one page, ``width`` x ``height`` CSS pixels."""

    def __init__(self, tmpdir: Path, width: int = 1280, height: int = 900, timeout: float = 30.0) -> None:
        self.tmpdir, self.width, self.height, self.timeout = Path(tmpdir), width, height, timeout
        self._id = 0
        self._buffer = b""
        self.session: str | None = None

    def __enter__(self) -> Browser:
        binary = chromium()
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()

        def descriptors() -> None:  # in the child: its fd 3 reads our messages, fd 4 writes the answers
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child, from_child)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.log = open(self.tmpdir / "chromium.log", "wb")  # closed in __exit__
        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.tmpdir / 'profile'}",
             f"--window-size={self.width},{self.height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            preexec_fn=descriptors, pass_fds=(3, 4))
        os.close(to_child)
        os.close(from_child)
        try:
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            self.call("Page.enable")
            self.call("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                      deviceScaleFactor=1, mobile=False)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._write, self._read):
            os.close(fd)
        self.log.close()

    def call(self, method: str, **params: Any) -> dict:
        """Send one command (to the page once attached) and wait for its answer."""
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._next(deadline)
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def _next(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                raise BrowserError(f"chromium did not answer within {self.timeout:.0f} s")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise BrowserError(f"chromium exited: see {self.tmpdir / 'chromium.log'}")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def cookie(self, name: str, value: str, url: str) -> None:
        self.call("Network.setCookie", name=name, value=value, url=url)

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited when a promise)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0) -> Any:
        """Wait in the page, on each change of its DOM, until the expression is
        truthy (one that throws is not: the page may be loading); its value."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                value = self.evaluate(_WAIT % {"expression": expression, "ms": int(min(left, self.timeout / 2) * 1000)})
            except BrowserError:  # the page navigated away mid-wait: wait in the new one
                continue
            if value:
                return value
        raise BrowserError(f"timed out after {timeout:.0f} s waiting for {expression[:120]}")

    def press(self, key: str) -> None:
        """One key press, as a judge's keyboard sends it."""
        code = f"Digit{key}" if key.isdigit() else f"Key{key.upper()}"
        vk = ord(key.upper())
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=key, code=code, text=key if kind == "keyDown" else "",
                      windowsVirtualKeyCode=vk, nativeVirtualKeyCode=vk)

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
