"""`mashbill release check|tag|verify`: the release gate, tags with sha256, and tag verification."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mashbill.cli._common import EXIT_FINDINGS, EXIT_OK, Group, echo_json, json_option

def _root(f):
    return click.option("--dir", "root", type=click.Path(file_okay=False, path_type=Path),
                        default=Path("./mashbill-releases"), show_default=True,
                        help="Release folder (tags/ and checks/).")(f)


@click.group(cls=Group)
def command():
    """Decide, tag and verify releases of exported students.

    \b
    Example:
      mashbill release check ./exports/router-v2 --incumbent ./exports/router-v1 --guards guards.yaml
      mashbill release tag router-prod ./exports/router-v2
      mashbill release verify router-prod
    """


@command.command()
@click.argument("candidates", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--incumbent", required=True, type=click.Path(path_type=Path), help="The artifact in production.")
@click.option("--guards", "guards", type=click.Path(path_type=Path),
              help="YAML with 'heldout' and 'guards' lists of {id, text, expect}.")
@click.option("--eval", "eval_sets", multiple=True,
              help="A labelled set of `mashbill eval` (a .jsonl file, snapshot:FOLDER[:SPLIT], "
                   "yardstick:complexity[:HALF]) as held-out items, instead of or beside --guards. Repeatable.")
@click.option("--threads", default=1, show_default=True,
              help="CPU threads per artifact while scoring the guards and held-out rows.")
@json_option(help="Print the release record as JSON.")
@_root
def check(candidates, incumbent, guards, eval_sets, threads, as_json, root):
    """Veto any CANDIDATE that fails a guard the incumbent passes; rank the rest (and the incumbent) by held-out
    accuracy, within 0.5 points by overall accuracy. Writes a release record under DIR/checks/.
    Exit 0 when a candidate wins, 1 when the incumbent stays; the last lines say which and what decided it (a
    guard, the held-out or the overall accuracies, or a full tie). Every export is re-hashed against its
    export.json first. Tag only a promoted candidate: `release check ... && release tag NAME CANDIDATE`.
    """
    from mashbill.exporters.release import check as do_check

    path, rec = do_check(list(candidates), incumbent, guards, root=root, threads=threads, eval_sets=eval_sets)
    d = rec["decision"]
    if as_json:
        echo_json(rec)
    else:
        for v in d["vetoed"]:
            click.echo(f"vetoed: {v['artifact']} fails guard(s) the incumbent passes: {', '.join(v['guards_lost'])}")
        for r in d["ranking"]:
            click.echo(f"{r['name']:<11} held-out {r['heldout_accuracy']:6.2f}  overall {r['overall_accuracy']:6.2f}  "
                      f"{r['artifact']}")
        click.echo(("promote " if d["promote"] else "keep the incumbent ") + d["winner_artifact"])
        click.echo(f"decided by {d['decided_by']}")
        click.echo(f"release record: {path}")
    sys.exit(EXIT_OK if d["promote"] else EXIT_FINDINGS)


@command.command()
@click.argument("name")
@click.argument("artifact", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Move an existing tag.")
@_root
@json_option(help="Print the tag record as JSON.")
def tag(name, artifact, force, root, as_json):
    """Record NAME -> ARTIFACT (a file, or an export folder's primary artifact) with its sha256."""
    from mashbill.exporters.release import tag as do_tag

    rec = do_tag(name, artifact, root=root, force=force)
    if as_json:
        echo_json(rec)
        return
    click.echo(f"{name} -> {rec['artifact']}  sha256 {rec['sha256']}")


@command.command()
@click.argument("name")
@_root
@json_option(help='Print the tag record as JSON, with "verified": true or false (and "error").')
def verify(name, root, as_json):
    """Re-hash the file under tag NAME (and its export's other files); exit 1 naming the file that changed."""
    from mashbill.exporters.release import TamperedError, verify_tag

    try:
        rec = verify_tag(name, root=root)
    except TamperedError as exc:
        if as_json:
            echo_json({"tag": name, "verified": False, "error": str(exc)})
        else:
            click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FINDINGS)
    if as_json:
        echo_json({**rec, "verified": True})
        return
    click.echo(f"{name}: {rec['artifact']} matches sha256 {rec['sha256']}")
