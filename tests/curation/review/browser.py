"""Headless Chromium driven through the DevTools protocol over a pipe (no websocket library, no playwright).

Chromium started with `--remote-debugging-pipe` reads NUL-terminated JSON commands on fd 3 and writes
replies and events on fd 4. That is all a page check needs: open a tab, navigate, evaluate JavaScript.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, binary: str, profile: Path):
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()
        args = " ".join(f"'{a}'" for a in [binary, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
                                             "about:blank"])
        self.proc = subprocess.Popen(["bash", "-c", f"exec {args} 3<&{cmd_r} 4>&{res_w}"], pass_fds=(cmd_r, res_w),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(res_w)
        self._buf = b""
        self._next = 0
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next += 1
        msg = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _read(self) -> dict:
        while b"\0" not in self._buf:
            chunk = os.read(self._res_r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return json.loads(raw)

    def goto(self, url: str) -> None:
        self.call("Page.navigate", {"url": url}, self.session)

    def eval(self, expression: str):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, self.session)
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout_s: float = 45.0):
        """Evaluate until the value is truthy; return it, or the last value when the page never got there."""
        deadline = time.monotonic() + timeout_s
        value = None
        while time.monotonic() < deadline:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.25)
        return value

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._cmd_w)
        os.close(self._res_r)
