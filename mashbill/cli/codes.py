"""`mashbill codes`: every verdict code the project emits, its default severity and meaning."""

from __future__ import annotations

from pathlib import Path

import click

from mashbill.cli._common import echo_json, json_option
from mashbill.errors import MashbillError


@click.command("codes")
@click.argument("prefix", required=False)
@json_option(help="Print the codes as a JSON list.")
@click.option("--markdown", is_flag=True, help="Print the markdown table of docs/codes.md.")
@click.option("--update-doc", type=click.Path(dir_okay=False, exists=True),
              help="Rewrite the code table between the markers of this markdown file (docs/codes.md).")
def command(prefix, as_json, markdown, update_doc):
    """List every verdict code (optionally those starting with PREFIX).

    \b
    Examples:
      mashbill codes            # the table
      mashbill codes HR         # the routing rules' codes
      mashbill codes --json
    A code is registered with one line in mashbill/factory/codes.py.
    """
    from mashbill.factory.codes import CODES, markdown_table, doc_with_table

    if update_doc:
        p = Path(update_doc)
        try:
            text = doc_with_table(p.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise MashbillError(f"{p}: {exc}") from None
        p.write_text(text, encoding="utf-8")
        click.echo(f"wrote the code table ({len(CODES)} codes) into {p}")
        return
    codes = [c for c in CODES.values() if not prefix or c.code.startswith(prefix.upper())]
    if prefix and not codes:
        raise MashbillError(f"no code starts with {prefix!r}")
    if as_json:
        echo_json([c.__dict__ for c in codes])
    elif markdown:
        click.echo(markdown_table())
    else:
        for c in codes:
            click.echo(f"{c.code:<11}{c.severity:<9}{c.source:<10}{c.meaning}")
