"""One command in a child process, measured as the benches report it: wall seconds, and CPU seconds and peak RSS
from os.wait4's rusage (the child with the workers it waited for; the peak is the largest single process's), with
what it printed. Each bench that times a command beside another uses this, so their figures mean the same; and the
findings of a `mashbill validate --json` report, which such benches compare (`validation_findings`)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Measured:
    wall_s: float
    cpu_s: float
    peak_mb: float
    code: int  # the exit code (negative: killed by that signal)
    stdout: bytes  # b"" when not captured
    stderr: bytes

    def tail(self, chars: int = 2000) -> str:
        """The end of what it wrote to stderr, for a bench's one-line failure."""
        return self.stderr.decode(errors="replace").strip()[-chars:]


def run_measured(cmd: list, *, env: dict | None = None, cwd=None, capture: bool = True) -> Measured:
    """Run cmd to its end and measure it; its output is kept in temporary files (a pipe could fill and stall it),
    or, without `capture`, goes where this process's goes."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([str(c) for c in cmd], stdout=out if capture else None,
                                stderr=err if capture else None, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        return Measured(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
                        os.waitstatus_to_exitcode(status), out.read(), err.read())


SPAN_WORK = ("fast_s", "pieces_tokenized")  # how the span engine did its work, not what it found


def validation_findings(stdout: bytes) -> tuple[dict, dict]:
    """A `mashbill validate --json` report without what measures the run (its wall seconds, the span audit's), and
    apart from it the span engine's own work (`SPAN_WORK`: its seconds, and the pieces it tokenized, which a cache
    refill or a cut policy changes). Two runs that found the same have equal reports."""
    report = json.loads(stdout)
    report.pop("wall_s")
    span = report.get("span") or {}
    span.get("audit", {}).pop("wall_s", None)
    return report, {k: span.pop(k) for k in SPAN_WORK if k in span}
