"""`mashbill generate SPEC`: run a spec's pending inputs through its teacher into the store."""

from __future__ import annotations

import json
import re

import click

from mashbill.cli._common import RunProgress, out, print_summary, sigterm_as_interrupt, store_option
from mashbill.errors import MashbillError


def parse_shard(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    m = re.fullmatch(r"(\d+)/(\d+)", value)
    if not m or int(m.group(2)) < 1 or int(m.group(1)) >= int(m.group(2)):
        raise click.BadParameter(f"expected i/n with 0 <= i < n, found {value!r}")
    return int(m.group(1)), int(m.group(2))


def run_generate(spec_name: str, store_path, *, limit=None, shard=None, threads=None, grammar=None,
                 progress: bool = True, validate: bool = True, args: dict | None = None):
    from mashbill.factory.generate import generate
    from mashbill.factory.store import Store
    from mashbill.factory.teachers import make_teacher
    from mashbill.specs import find_spec, load_spec

    rs = load_spec(find_spec(spec_name))
    checks = []
    if validate:
        try:
            from mashbill.validators.checks import generation_checks  # validators plug in when present
            checks = generation_checks(rs)
        except ImportError:
            checks = []
    with Store.open(store_path) as store:
        kwargs = {"threads": threads or rs.spec.runtime.threads}
        if grammar and rs.spec.teacher.backend == "llama_cpp":
            kwargs["grammar_engine"] = grammar
        teacher = make_teacher(rs.spec.teacher, **kwargs)
        try:
            if hasattr(teacher, "check_schema"):
                teacher.check_schema(rs.output_schema)
            with RunProgress(rs.ref, enabled=progress) as bar:
                summary = generate(rs, store, teacher, limit=limit, shard=shard, checks=checks, on_progress=bar,
                                   args=args)
        finally:
            teacher.close()
    return summary


@click.command()
@click.argument("spec")
@store_option
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N inputs (after sharding).")
@click.option("--shard", help="Deterministic slice by record id: i/n, e.g. 0/4.")
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads for the embedded teacher.")
@click.option("--grammar", type=click.Choice(["llguidance", "gbnf"]), help="Constrained-decoding engine (llama.cpp).")
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def command(spec, store_path, limit, shard, threads, grammar, no_progress, as_json):
    """Generate records for SPEC (a name, name@version or path) into the store.

    Re-running skips finished records and retries failed ones; a run killed at any moment
    resumes without losing or duplicating a stored record.

    \b
    Example:
      mashbill generate quickstart-plan --limit 10 --store ./mashbill-data
    """
    sigterm_as_interrupt()
    try:
        summary = run_generate(spec, store_path, limit=limit, shard=parse_shard(shard), threads=threads,
                               grammar=grammar, progress=not no_progress and not as_json,
                               args={"limit": limit, "shard": shard})
    except KeyboardInterrupt:
        raise MashbillError("interrupted; the batches already stored are kept, re-run the same command to resume")
    if as_json:
        out.print_json(json.dumps(summary.as_dict()))
    else:
        print_summary(summary)
