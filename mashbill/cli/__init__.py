"""The `mashbill` command line: one entry point, one module per subcommand, loaded lazily. Domain errors
(MashbillError) and a damaged store become one line on stderr and exit code 2; tracebacks are for bugs. The
convention every command follows is in mashbill/cli/_common.py and in EPILOG below.

- ``_common``: Shared CLI helpers: the one CLI convention (store option, --json, exit codes), progress display ...
- ``codes``: `mashbill codes`: every verdict code the project emits, its default severity and meaning.
- ``curate/``: Commands over stored data: snapshots, reports, review, router datasets, cleanlab, dump, SQL.
- ``make/``: Commands that make data: specs, generate, judge, validate, merge, SLURM, the quick start.
- ``reference``: docs/cli.md: every command's `--help`, rendered from the click commands themselves (as ...
- ``ship/``: Commands over students: train, export, eval, predict, release.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from mashbill import __version__
from mashbill.cli._common import EXIT_BAD_INPUT, Group
from mashbill.errors import MashbillError

# subcommand name -> module under mashbill.cli that defines `command` (a click command or group)
SUBCOMMANDS = {
    "spec": "make.spec",
    "generate": "make.generate",
    "quickstart": "make.quickstart",
    "sql": "curate.sql",
    "dump": "curate.dump",
    "export": "ship.export",
    "release": "ship.release",
    "predict": "ship.predict",
    "eval": "ship.eval",
    "cleanlab": "curate.label_issues",
    "validate": "make.validate",
    "merge": "make.merge",
    "slurm": "make.slurm",
    "snapshot": "curate.snapshot",
    "report": "curate.report",
    "review": "curate.review",
    "judge": "make.judge",
    "codes": "codes",
    "router": "curate.router",
    "train": "ship.train",
}


class LazyGroup(Group):
    def list_commands(self, ctx):
        return sorted(name for name, mod in SUBCOMMANDS.items() if importlib.util.find_spec(f"mashbill.cli.{mod}"))

    def get_command(self, ctx, name):
        if name not in SUBCOMMANDS or importlib.util.find_spec(f"mashbill.cli.{SUBCOMMANDS[name]}") is None:
            return None
        return importlib.import_module(f"mashbill.cli.{SUBCOMMANDS[name]}").command

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except MashbillError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except Exception as exc:
            if type(exc).__module__.lstrip("_") == "duckdb":  # a damaged store found mid-command
                from mashbill.factory.store import storage_failure

                line = storage_failure(exc)
                if line:
                    click.echo(f"error: {line}", err=True)
                    sys.exit(EXIT_BAD_INPUT)
            raise


EPILOG = """\b
Exit codes (every command):
  0  ok
  1  findings: rejected records, an altered snapshot or tag, a failed check or training stage
  2  bad input: a bad argument, spec, file or store (one line on stderr, naming file, line and field)
  3  guard stop: a guard stopped a generate run (gold probes, accept rate, circuit breaker)
\b
Environment (CACHE, STORE_MEMORY and PREFILTER are settings; each other is an option's, as its --help says):
  MASHBILL_STORE        --store of every command that reads or writes a store [./mashbill-data]
  MASHBILL_CACHE        where built things are cached: wheels, vocab, models, encoders [~/.cache/mashbill]
  MASHBILL_STORE_MEMORY DuckDB's memory limit for one store connection, e.g. 1GB [80% of RAM]
  MASHBILL_PREFILTER    0: run every rule pattern, without the Hyperscan prefilter [1]
  MASHBILL_TEACHER_URL  generate/judge --base-url (an OpenAI-compatible server)
  MASHBILL_GRAMMAR      generate --grammar (llguidance or gbnf)
  MASHBILL_REVIEW_HOME  review --home;  MASHBILL_REVIEW_PORT  review serve/push --port
  ARGILLA_API_URL, ARGILLA_API_KEY, ARGILLA_WORKSPACE  review --api-url, --api-key, --workspace
\b
Output: commands that print results take --json (one JSON document on stdout); --out is always the path
of what the command writes."""


@click.group(cls=LazyGroup, epilog=EPILOG)
@click.version_option(__version__, prog_name="mashbill")
def main() -> None:
    """Mashbill: versioned specs in, validated and versioned datasets out.

    \b
    Quick start:  mashbill quickstart
    Examples:     mashbill spec ls
                  mashbill generate plan-moe --limit 20 --store ./mashbill-data
                  mashbill sql "SELECT kind, status, count(*) FROM records GROUP BY ALL"
    """

