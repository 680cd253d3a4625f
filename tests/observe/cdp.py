"""A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
messages are JSON ended by a NUL byte, read from fd 3, written to fd 4). Used where the command
line cannot do it: a viewport narrower than headless Chromium's 500 px window (a phone's 390 px,
through `Emulation.setDeviceMetricsOverride`) and measuring the laid-out page
(`Runtime.evaluate`; the page's CSP binds scripts of the page, not the DevTools client)."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["Browser"]

#: generous: the machine runs several test sessions on two shared cores
TIMEOUT = 120.0


class Browser:
    """One headless Chromium; `open(url, width)` gives a page at that viewport width."""

    def __init__(self, chromium: str, profile: Path, flags: list[str]) -> None:
        profile.mkdir(parents=True, exist_ok=True)
        self._log = (profile / "chromium.log").open("wb")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # the child places the pipe ends at 3 and 4 (a trampoline: /usr/bin/chromium is a shell
        # script, and a shell redirects only fds 0-9); above 4 first, so neither overwrites the other
        to_browser_r, from_browser_w = (_above(fd, 5) for fd in (to_browser_r, from_browser_w))
        place = (f"import os, sys; os.dup2({to_browser_r}, 3); os.dup2({from_browser_w}, 4); "
                 "os.execv(sys.argv[1], sys.argv[1:])")
        self.process = subprocess.Popen(
            [sys.executable, "-c", place, chromium, *flags, "--remote-debugging-pipe", f"--user-data-dir={profile}",
             "about:blank"],
            pass_fds=(to_browser_r, from_browser_w), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=self._log)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []

    def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            self.call("Browser.close")
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._log.close()

    def log(self) -> str:
        """The end of what chromium wrote on stderr."""
        self._log.flush()
        return Path(self._log.name).read_text(errors="replace")[-2000:]

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe: {self.log()}")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)  # type: ignore[no-any-return]

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        try:
            os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        except BrokenPipeError:
            raise RuntimeError(f"chromium is gone: {self.log()}") from None
        deadline = time.monotonic() + TIMEOUT
        while True:
            answer = self._read(deadline)
            if answer.get("id") == ident:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})  # type: ignore[no-any-return]
            self._events.append(answer)

    def wait_for(self, event: str, session: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        while True:
            for index, seen in enumerate(self._events):
                if seen.get("method") == event and seen.get("sessionId") == session:
                    return self._events.pop(index)
            self._events.append(self._read(deadline))

    def open(self, url: str, width: int, height: int = 900) -> Page:
        """`url` loaded in a new tab whose viewport is `width` x `height` CSS pixels (a phone's
        `mobile` viewport below 600 px: the page's `<meta name="viewport">` applies)."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", session, width=width, height=height,
                  deviceScaleFactor=1, mobile=width < 600)
        self.call("Emulation.setScrollbarsHidden", session, hidden=True)
        self.call("Page.enable", session)
        self.call("Page.navigate", session, url=url)
        self.wait_for("Page.loadEventFired", session)
        return Page(self, session)


class Page:
    def __init__(self, browser: Browser, session: str) -> None:
        self.browser = browser
        self.session = session

    def evaluate(self, expression: str) -> Any:
        """The value of `expression` in the page (JSON-able)."""
        result = self.browser.call("Runtime.evaluate", self.session, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluate: {result['exceptionDetails']}")
        return result["result"].get("value")

    def dom(self) -> str:
        return str(self.evaluate("document.documentElement.outerHTML"))

    def screenshot(self, path: Path) -> None:
        """The whole page (not only the viewport) as a PNG, as wide as the viewport."""
        size = self.evaluate("[window.innerWidth, document.documentElement.scrollHeight]")
        shot = self.browser.call("Page.captureScreenshot", self.session, format="png", captureBeyondViewport=True,
                                 clip={"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1})
        path.write_bytes(base64.b64decode(shot["data"]))


def _above(fd: int, lowest: int) -> int:
    """`fd` moved to a number at least `lowest` (the old one closed)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, lowest)
    os.close(fd)
    return moved
