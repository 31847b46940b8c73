"""docs/cli.md is the rendering of every command's --help (mashbill.cli.reference), and it is current."""

from __future__ import annotations

from pathlib import Path

from mashbill.cli.reference import render

ROOT = Path(__file__).resolve().parents[2]


def test_cli_reference_is_current():
    text = render()
    # every subcommand of the entry point is in it, with its own help
    for name in ("generate", "validate", "snapshot freeze", "train classify", "export gguf", "release check"):
        assert f"`mashbill {name}`" in text, name
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == text, \
        "docs/cli.md is stale: run `.venv/bin/python -m mashbill.cli.reference docs/cli.md`"
