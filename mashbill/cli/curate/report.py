"""`mashbill report STORE_OR_SNAPSHOT`: one self-contained HTML file with plots, plus a terminal summary."""

from __future__ import annotations

from pathlib import Path

import click

from mashbill.cli._common import echo_json, json_option, out, store_option


@click.command()
@click.argument("target")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              help="HTML file to write (default: STORE/report.html, or NAME@VERSION.report.html for a snapshot).")
@store_option
@json_option(help='Print {"report", "title", "summary", "verdicts"} as JSON instead of the terminal summary.')
def command(target, out_file, store_path, as_json):
    """Write an HTML report for TARGET: a store folder, a snapshot folder, or NAME@VERSION (under
    STORE/snapshots). Plots: label cells per split, languages, token lengths against max_seq_len,
    verdict codes, accept rate over the run, teacher latency and review progress; per queries spec
    the pool against its quotas (distinct n-grams, nearest-seed distance, filter codes, holdout hits)
    and per judged spec the judge (scores, unparseable judgments, kappa against reviewers, judge
    errors, order-inconsistent pairs). Nothing in the file is fetched from the network.

    \b
    Example:
      mashbill report ./mashbill-data --out report.html
      mashbill report plan@1 --store ./mashbill-data
    """
    from mashbill.curation.reports.report import build_report, summary_lines

    path, data = build_report(target, out_file, snapshots_root=store_path / "snapshots")
    if as_json:
        echo_json({"report": str(path), "title": data["title"], "summary": data["summary"],
                   "verdicts": data.get("verdicts") or {}})
        return
    for line in summary_lines(data):
        out.print(line, highlight=False)
    out.print(f"report: {path}")
