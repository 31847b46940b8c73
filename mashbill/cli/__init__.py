"""The `mashbill` command line: one entry point, one module per subcommand, loaded lazily.

Domain errors (MashbillError) and a damaged store become one line on stderr and exit code 2; tracebacks
are for bugs.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from mashbill import __version__
from mashbill.errors import MashbillError

# subcommand name -> module under mashbill.cli that defines `command` (a click command or group)
SUBCOMMANDS = {
    "spec": "spec",
    "generate": "generate",
    "quickstart": "quickstart",
    "sql": "sql",
    "dump": "dump",
    "export": "export",
    "release": "release",
    "predict": "predict",
    "validate": "validate",
    "merge": "merge",
    "slurm": "slurm",
    "snapshot": "snapshot",
    "report": "report",
    "review": "review",
    "judge": "judge",
    "codes": "codes",
    "router": "router",
    "train": "train",
}


class LazyGroup(click.Group):
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
            sys.exit(2)
        except Exception as exc:
            if type(exc).__module__.lstrip("_") == "duckdb":  # a damaged store found mid-command
                from mashbill.factory.store import storage_failure

                line = storage_failure(exc)
                if line:
                    click.echo(f"error: {line}", err=True)
                    sys.exit(2)
            raise


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="mashbill")
def main() -> None:
    """Mashbill: versioned specs in, validated and versioned datasets out.

    \b
    Quick start:  mashbill quickstart
    Examples:     mashbill spec ls
                  mashbill generate plan-moe --limit 20 --store ./mashbill-data
                  mashbill sql "SELECT kind, status, count(*) FROM records GROUP BY ALL"
    """

