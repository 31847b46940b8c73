"""docs/cli.md: every command's `--help`, rendered from the click commands themselves (as `mashbill codes` renders
docs/codes.md from the registry), so the reference cannot drift from what the commands accept.

    python -m mashbill.cli.reference docs/cli.md      # rewrite it; tests/cli/test_reference.py checks it is current
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

HEADER = """# Command reference

Generated from each command's `--help` by `python -m mashbill.cli.reference docs/cli.md`; a test fails when it
is stale. The convention every command follows (store, environment, `--json`, `--out`, exit codes) is in the
README and at the end of `mashbill --help`.
"""


def _walk(cmd: click.Command, path: list[str], ctx: click.Context | None):
    """(command path, its help text) for cmd and, depth first in name order, every subcommand."""
    sub_ctx = click.Context(cmd, info_name=path[-1], parent=ctx, terminal_width=100, max_content_width=100)
    yield path, cmd.get_help(sub_ctx)
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(sub_ctx):
            child = cmd.get_command(sub_ctx, name)
            if child is not None and not child.hidden:
                yield from _walk(child, path + [name], sub_ctx)


def render() -> str:
    from mashbill.cli import main

    parts = [HEADER]
    for path, text in _walk(main, ["mashbill"], None):
        depth = min(len(path) + 1, 4)
        parts.append(f"{'#' * depth} `{' '.join(path)}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    from mashbill.cli._common import EXIT_BAD_INPUT

    if len(sys.argv) != 2:
        print("usage: python -m mashbill.cli.reference docs/cli.md", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)
    Path(sys.argv[1]).write_text(render(), encoding="utf-8")
