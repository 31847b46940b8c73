"""`mashbill cleanlab SPEC...`: cleanlab over a classifier spec's stored labels; LBL001 flags on suspects."""

from __future__ import annotations

import click

from mashbill.cli._common import echo_json, json_option, store_option


@click.command(name="cleanlab")
@click.argument("specs", nargs=-1, required=True)
@store_option
@click.option("--folds", type=click.IntRange(2), default=5, show_default=True,
              help="Cross-validation folds for the out-of-fold probabilities.")
@click.option("--no-write", is_flag=True, help="Report the suspects without storing flags.")
@json_option(help="Print the result (counts and the flagged record ids) as JSON.")
def command(specs, store_path, folds, no_write, as_json):
    """Find suspect labels among the stored records of SPEC (a single-label classifier spec such as complexity;
    several SPECs are pooled) and flag each with LBL001.

    Out-of-fold probabilities from MiniLM embeddings (onnxruntime, no GPU) and a logistic regression go to
    cleanlab's find_label_issues; every record whose output parses to one of the schema's classes takes part,
    accepted or rejected by a rule. The flags replace the previous pass's; they never reject a record by
    themselves: `mashbill review push SPEC --select label-issues` sends them to reviewers, `mashbill report`
    counts them.

    \b
    Example:
      mashbill cleanlab complexity-moe --store ./mashbill-data
      mashbill review push complexity-moe --select label-issues
    """
    from mashbill.curation.label_issues import flag_store
    from mashbill.factory.store import Store
    from mashbill.specs import load_spec

    resolved = [load_spec(s) for s in specs]
    with Store.open(store_path, create=False) as store:
        res = flag_store(store, resolved, folds=folds, write=not no_write)
    if as_json:
        echo_json(res)
        return
    click.echo(f"{res['flagged']} of {res['records']} labelled records flagged {'(not stored) ' if no_write else ''}"
               f"as label issues (LBL001), {res['folds']}-fold; per label: "
               + ", ".join(f"{k} {v}" for k, v in res["per_label"].items()))
