"""Shared CLI helpers: the one CLI convention (store option, --json, exit codes), progress display and the run
summary table.

The convention (models: simonw's llm and sqlite-utils): every command that reads or writes a store takes
`--store` (env MASHBILL_STORE, default ./mashbill-data); environment variables are read only through click's
`envvar=` and shown in `--help`; every command that prints results takes `--json`; `--out` is always the path of
what the command writes; exit codes are the four below.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

DEFAULT_STORE = "./mashbill-data"
STORE_ENV = "MASHBILL_STORE"

# exit codes, the same for every command (listed in `mashbill --help`)
EXIT_OK = 0
EXIT_FINDINGS = 1  # the command ran and found something: rejects, an altered file, a failed check or stage
EXIT_BAD_INPUT = 2  # refused: bad input, a bad spec or store, a failed preflight (one line on stderr)
EXIT_GUARD_STOP = 3  # a guard stopped a run (gold probes, accept rate, circuit breaker)

console = Console(stderr=True)
out = Console(soft_wrap=True)  # paths and ids printed whole, never folded at 80 columns in a pipe


def store_option(f=None, *, default: str | None = DEFAULT_STORE, help: str | None = None):
    """`--store` (env MASHBILL_STORE): `@store_option`, or `@store_option(default=None, help=...)` for a command
    whose store otherwise comes from elsewhere (a training config, a run's lineage)."""
    def deco(f):
        return click.option("--store", "store_path", type=click.Path(file_okay=False, path_type=Path),
                            envvar=STORE_ENV, show_envvar=True, default=default, show_default=default is not None,
                            help=help or "Store folder (a DuckDB file plus Parquet exports).")(f)
    return deco(f) if f is not None else deco


def json_option(f=None, *, help: str = "Print the result as JSON on stdout (nothing else goes to stdout)."):
    """`--json` (parameter `as_json`), for every command that prints results."""
    def deco(f):
        return click.option("--json", "as_json", is_flag=True, help=help)(f)
    return deco(f) if f is not None else deco


def base_url_option(f):
    """`--base-url` (env MASHBILL_TEACHER_URL): an OpenAI-compatible server, overriding the spec's teacher.base_url."""
    return click.option("--base-url", envvar="MASHBILL_TEACHER_URL", show_envvar=True,
                        help="OpenAI-compatible server URL, overriding teacher.base_url (not part of the spec "
                             "hash).")(f)


def echo_json(data) -> None:
    """One JSON document on stdout, plain (no colour, no folding), for `--json`."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def sigterm_as_interrupt(deferred: bool = False):
    """SLURM and kill send SIGTERM: treat it like Ctrl-C so the run is marked interrupted cleanly.

    With `deferred`, a SIGTERM that arrives before the returned `arm()` is called (the run row does not exist
    yet) is held until then, so the run it stops is recorded as interrupted; a second SIGTERM acts at once.
    """
    state = {"armed": not deferred, "pending": False}

    def handler(signum, frame):
        if state["armed"] or state["pending"]:
            raise KeyboardInterrupt
        state["pending"] = True

    def arm() -> None:
        if not state["armed"]:
            state["armed"] = True
            if state["pending"]:
                raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)
    return arm


def short_help(cmd: click.Command) -> str:
    """A command's one-line description: its `short_help`, else the first sentence of its help, whole."""
    if cmd.short_help:
        return cmd.short_help
    words = []
    for word in (cmd.help or "").split("\n\n", 1)[0].split():
        words.append(word)
        if word.endswith("."):
            break
    return " ".join(words)


class Group(click.Group):
    """A click group whose command list shows each description whole (wrapped, never cut at the terminal width
    with '...'); its subgroups are of this class too."""

    group_class = type

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, short_help(cmd)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


PROGRESS_EVERY_S = 30.0  # a plain progress line this often when stderr is not a terminal (CI, SLURM, | tee)


def _clock(seconds: float) -> str:
    s = round(seconds)  # (start + 300) - start is 299.99999... for about 1 start in 100: that is still 0:05:00
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class PlainProgress:
    """Progress for logs: when stderr is not a terminal, one whole line (never cut) at the start, every
    `every` seconds while the step runs (even when no item finished: a slow row still shows the step is alive),
    and at the end: items done of total, accept rate, rate and ETA."""

    def __init__(self, label: str, *, every: float = PROGRESS_EVERY_S, unit: str = "records", write=None):
        self.label, self.every, self.unit = label, every, unit
        self.write = write or (lambda line: print(line, file=sys.stderr, flush=True))
        self.done = 0
        self.total: int | None = None
        self.accepted: int | None = None
        self.judged = 0
        self.start = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def update(self, done: int, total: int | None = None, accepted: int | None = None, judged: int | None = None):
        with self._lock:
            self.done = done
            self.total = total if total is not None else self.total
            self.accepted = accepted
            self.judged = judged if judged is not None else done

    def line(self, now: float | None = None) -> str:
        with self._lock:
            elapsed = max((now if now is not None else time.monotonic()) - self.start, 1e-9)
            parts = [f"{self.label}: {self.done}" + (f"/{self.total}" if self.total is not None else "")
                     + f" {self.unit}"]
            if self.accepted is not None and self.judged:
                parts.append(f"accept {self.accepted / self.judged:.0%}")
            rate = self.done / elapsed
            parts.append(f"{rate * 60:.2f} {self.unit}/min")
            parts.append(f"elapsed {_clock(elapsed)}")
            if self.total is not None and self.done and self.done < self.total:
                parts.append(f"eta {_clock((self.total - self.done) / rate)}")
            return ", ".join(parts)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.write(self.line())

    def __enter__(self):
        self.write(f"{self.label}: started")
        self._thread = threading.Thread(target=self._run, name="mashbill-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.write(self.line() + ("" if exc[0] is None else " (stopped)"))


def plain_progress_wanted(enabled: bool) -> bool:
    """Plain lines instead of a live bar: progress is on and stderr is not a terminal."""
    return enabled and not console.is_terminal


class RunProgress:
    """A progress bar with ETA and a live accept/reject count on a terminal; plain lines (`PlainProgress`)
    at a steady interval when stderr goes to a log or a pipe."""

    def __init__(self, label: str, enabled: bool = True):
        self.enabled = enabled
        self.plain = PlainProgress(label) if plain_progress_wanted(enabled) else None
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("ok {task.fields[ok]} rej {task.fields[rej]} fail {task.fields[fail]}"),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                 console=console, disable=not enabled or self.plain is not None, transient=False)
        self.task = None
        self.label = label
        self.done = 0

    def __enter__(self):
        if self.plain is not None:
            self.plain.__enter__()
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        self.progress.__exit__(*exc)
        if self.plain is not None:
            self.plain.__exit__(*exc)

    def _plain(self, summary, advanced: int) -> bool:
        if self.plain is None:
            return False
        self.done += advanced
        judged = summary.accepted + summary.rejected + summary.failed
        self.plain.update(self.done, summary.requested, summary.accepted, judged)
        return True

    def __call__(self, summary, advanced: int) -> None:
        if self._plain(summary, advanced):
            return
        if self.task is None:
            self.task = self.progress.add_task(self.label, total=summary.requested, ok=0, rej=0, fail=0)
        self.progress.update(self.task, advance=advanced, ok=summary.accepted, rej=summary.rejected,
                             fail=summary.failed)


def code_counts(records: dict[str, int], verdicts: dict[str, int] | None = None) -> str:
    """`PLAN003 5, PLAN011 1 (2 verdicts)`: records per code, with the verdicts where a record carries several."""
    verdicts = verdicts or {}
    return ", ".join(f"{c} {n}" + (f" ({verdicts[c]} verdicts)" if verdicts.get(c, n) != n else "")
                     for c, n in records.items())


def print_summary(summary) -> None:
    d = summary.as_dict()
    table = Table(title=f"{d['spec']}  run {d['run_id']}  ({d['status']})", show_header=False)
    table.add_row("store", d["store"])
    table.add_row("records (selected / already done / requested)",
                  f"{d['selected']} / {d['skipped']} / {d['requested']}")
    table.add_row("accepted", str(d["accepted"]))
    table.add_row("rejected records", str(d["rejected"]))
    if d["reject_codes"]:
        table.add_row("  records per reject code", code_counts(d["reject_codes"], d.get("reject_verdicts")))
    table.add_row("failed (retried on the next run)", str(d["failed"]))
    table.add_row("tokens in (of which prefix-cached) / out", f"{d['tokens_in']} ({d['tokens_cached']}) / {d['tokens_out']}")
    table.add_row("teacher seconds / wall seconds", f"{d['teacher_s']:.1f} / {d['wall_s']:.1f}")
    out.print(table)
    for note in d.get("notes", ()):
        out.print(f"note: {note}")
