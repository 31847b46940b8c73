"""`mashbill generate SPEC`: run a spec's pending inputs through its teacher into the store."""

from __future__ import annotations

import sys

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from mashbill.cli._common import (EXIT_GUARD_STOP, RunProgress, base_url_option, console, echo_json, json_option,
                                  out, print_summary, sigterm_as_interrupt, store_option)
from mashbill.errors import MashbillError


def _shard(value: str | None) -> tuple[int, int] | None:
    from mashbill.factory.shards import parse_shard

    try:
        return parse_shard(value, strict=True)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


class LiveProgress(RunProgress):
    """The run progress bar plus live accounting: records/s, latency p50, retries, accept rate, cost."""

    def __init__(self, label: str, enabled: bool = True):
        super().__init__(label, enabled)
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("ok {task.fields[ok]} rej {task.fields[rej]} fail {task.fields[fail]}"),
                                 TextColumn("{task.fields[live]}"), TimeElapsedColumn(), TextColumn("eta"),
                                 TimeRemainingColumn(), console=console, disable=not enabled or self.plain is not None,
                                 transient=False)

    def __call__(self, summary, advanced: int) -> None:
        if self._plain(summary, advanced):
            return
        if self.task is None:
            self.task = self.progress.add_task(self.label, total=summary.requested, ok=0, rej=0, fail=0, live="")
        live = ""
        if summary.accounting is not None:
            snap = summary.accounting.snapshot()
            parts = [f"{snap['records_per_s']:.2f} rec/s"]
            if snap["latency_s"]["p50"] is not None:
                parts.append(f"p50 {snap['latency_s']['p50']:.2f}s")
            if snap["retries"]:
                parts.append(f"retries {snap['retries']}")
            if snap["accept_rate"] is not None:
                parts.append(f"acc {snap['accept_rate']:.0%}")
            if snap["cost"] is not None:
                parts.append(f"cost {snap['cost']:.2f}")
            live = " | ".join(parts)
        self.progress.update(self.task, advance=advanced, ok=summary.accepted, rej=summary.rejected,
                             fail=summary.failed, live=live)


def print_accounting(summary) -> None:
    d = summary.as_dict()
    if "calls" not in d:
        return
    lat = d["latency_s"]
    line = f"teacher calls {d['calls']} (retries {d['retries']}, errors {d['errors']}, probes {d['probe_calls']})"
    if lat["p50"] is not None:
        line += f"; latency p50/p90/p99 {lat['p50']:.2f}/{lat['p90']:.2f}/{lat['p99']:.2f}s"
    line += f"; {d['records_per_s']:.2f} records/s"
    if d["accept_rate"] is not None:
        line += f"; accept rate {d['accept_rate']:.0%}"
    if d["cost"] is not None:
        line += f"; cost {d['cost']:.4f}"
    out.print(line)


def teacher_kwargs(rs, *, threads=None, grammar=None, base_url=None, concurrency=None) -> dict:
    """Backend options from the spec's runtime knobs and the command line (never part of the spec hash)."""
    backend = rs.spec.teacher.backend
    if backend == "llama_cpp":
        kwargs = {"threads": threads or rs.spec.runtime.threads}
        if grammar:
            kwargs["grammar_engine"] = grammar
        return kwargs
    runtime = rs.spec.runtime
    if concurrency:
        runtime = runtime.model_copy(update={"concurrency": concurrency})
    kwargs = {"runtime": runtime}
    if backend == "openai" and base_url:
        kwargs["base_url"] = base_url
    return kwargs


def run_generate(spec_name: str, store_path, *, limit=None, shard=None, threads=None, grammar=None,
                 progress: bool = True, validate: bool = True, args: dict | None = None,
                 base_url: str | None = None, concurrency: int | None = None, allow_unlocked: bool = False,
                 on_start=None, calls_per_quota: float | None = None):
    from mashbill.factory.generate.generate import generate
    from mashbill.factory.store import Store
    from mashbill.factory.teachers import make_teacher
    from mashbill.specs import find_spec, load_spec
    from mashbill.specs.lock import lock_problem

    from mashbill.factory.generate.repair import check_repair

    rs = load_spec(find_spec(spec_name))
    check_repair(rs)  # a bad repair section: file, line and field, before the teacher is touched
    problem = lock_problem(rs)
    if problem:
        if not allow_unlocked:
            raise MashbillError(f"{rs.ref} ({rs.path}): {problem}; or pass --allow-unlocked to generate from a "
                                "draft (recorded on the run)")
        args = {**(args or {}), "allow_unlocked": True, "unlocked": problem}
    if base_url and rs.spec.teacher.backend != "openai":
        raise MashbillError(f"--base-url is for teachers with backend 'openai'; {rs.ref} uses "
                            f"'{rs.spec.teacher.backend}'")
    checks = []
    if validate:
        from mashbill.validators.checker import RecordChecker  # the spec's rules, per record, as it is stored

        checker = RecordChecker.for_spec(rs)
        checks = [checker.factory_check()] if checker.ruleset is not None else []
    from mashbill.factory.router.outcomes import model_views

    summaries = []
    with Store.open(store_path) as store:
        work = None
        if rs.spec.kind == "queries":  # query synthesis: the screen (length, language, dedup, holdout) decides
            from mashbill.validators.queries.queries import synth_work

            work, checks = synth_work(rs, store, calls_per_quota=calls_per_quota), []
        # an outcome spec runs each of its models through the same loop (its view adds the model to every input)
        for model_name, view in model_views(rs):
            teacher = make_teacher(view.spec.teacher, **teacher_kwargs(view, threads=threads, grammar=grammar,
                                                                       base_url=base_url, concurrency=concurrency))
            try:
                if hasattr(teacher, "check_schema"):  # the preflight: fails before any bulk work
                    teacher.check_schema(rs.output_schema)
                label = rs.ref if view is rs else f"{rs.ref} {model_name}"
                with LiveProgress(label, enabled=progress) as bar:
                    def on_progress(summary, advanced, bar=bar):
                        if on_start is not None and advanced == 0:
                            on_start()  # the run row exists now
                        bar(summary, advanced)

                    summaries.append(generate(view, store, teacher, limit=limit, shard=shard, checks=checks,
                                              on_progress=on_progress, args=args, work=work))
            finally:
                teacher.close()
            if summaries[-1].status != "completed":
                break
        if rs.spec.kind == "outcome" and all(s.status == "completed" for s in summaries):
            from mashbill.factory.router.outcomes import materialize

            materialize(store, rs)
    # one summary per model for an outcome spec, else the run's summary
    return summaries if rs.spec.kind == "outcome" else summaries[0]


@click.command()
@click.argument("spec")
@store_option
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N inputs (after sharding).")
@click.option("--shard", help="Deterministic slice by record id: i/n, e.g. 0/4.")
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads for the embedded teacher.")
@click.option("--grammar", type=click.Choice(["llguidance", "gbnf"]), envvar="MASHBILL_GRAMMAR", show_envvar=True,
              help="Constrained-decoding engine (llama.cpp) [default: llguidance].")
@base_url_option
@click.option("--concurrency", type=click.IntRange(min=1), help="Requests in flight (openai backend); "
                                                                "overrides runtime.concurrency.")
@click.option("--allow-unlocked", is_flag=True, help="Generate from a spec that does not match specs.lock (a draft); "
                                                    "recorded on the run.")
@click.option("--calls-per-quota", type=click.FloatRange(min=1), help="Queries specs: the call budget per cell "
              "(overrides synthesis.calls_per_quota; not part of the spec hash, like --limit): raise it to go on "
              "filling cells a weak teacher left short. Calls already made are kept.")
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
@json_option(help="Print the run summary as JSON (one document per run; a list for an outcome spec's models).")
def command(spec, store_path, limit, shard, threads, grammar, base_url, concurrency, allow_unlocked, calls_per_quota,
            no_progress, as_json):
    """Generate records for SPEC (a name, name@version or path) into the store.

    Re-running skips finished records and retries failed ones; a run killed at any moment
    resumes without losing or duplicating a stored record (a killed run is marked interrupted by
    the next command that opens the store for writing). SPEC must match specs.lock, as
    `mashbill spec check` requires, unless --allow-unlocked. An openai teacher is checked first
    (server reachable, model served, structured output enforced); the spec's guards may abort
    the run (gold probes, accept rate, circuit breaker): exit code 2 for a failed preflight,
    3 for a run a guard stopped.

    \b
    Examples:
      mashbill generate quickstart-plan --limit 10 --store ./mashbill-data
      mashbill generate plan-moe --shard 0/4 --store shard_0 --base-url http://127.0.0.1:8000/v1
    """
    arm = sigterm_as_interrupt(deferred=True)
    try:
        summary = run_generate(spec, store_path, limit=limit, shard=_shard(shard), threads=threads,
                               grammar=grammar, progress=not no_progress and not as_json,
                               args={"limit": limit, "shard": shard, "concurrency": concurrency,
                                     "calls_per_quota": calls_per_quota},
                               base_url=base_url, concurrency=concurrency, allow_unlocked=allow_unlocked,
                               on_start=arm, calls_per_quota=calls_per_quota)
    except KeyboardInterrupt:
        raise MashbillError("interrupted; the batches already stored are kept, re-run the same command to resume")
    summaries = summary if isinstance(summary, list) else [summary]
    if as_json:
        echo_json([s.as_dict() for s in summaries] if isinstance(summary, list) else summary.as_dict())
    for summary in summaries:
        if not as_json:
            print_summary(summary)
            print_accounting(summary)
        if summary.status == "aborted_preflight":
            raise MashbillError(summary.stop_reason or "preflight failed")
        if summary.status == "aborted":
            click.echo(f"stopped: {summary.stop_reason}", err=True)
            sys.exit(EXIT_GUARD_STOP)
