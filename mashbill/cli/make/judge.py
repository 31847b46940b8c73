"""`mashbill judge SPEC`: the spec's judge (a second teacher) scores accepted records or ranks sample pairs."""

from __future__ import annotations

import click

from mashbill.cli._common import (base_url_option, echo_json, json_option, out, print_summary, sigterm_as_interrupt,
                                  store_option)
from mashbill.errors import MashbillError


@click.command()
@click.argument("spec")
@store_option
@click.option("--pairs", is_flag=True, help="Rank pairs of samples of one query (both orders) instead of scoring.")
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N records (or queries with --pairs).")
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads for an embedded judge.")
@base_url_option
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
@json_option(help="Print the summary as JSON.")
def command(spec, store_path, pairs, limit, threads, base_url, no_progress, as_json):
    """Judge SPEC's accepted records with the teacher named in its `judge:` section.

    Every judgment is stored (kind judge / judge_pair, views judge_scores and judge_pairs) with the
    judge's model and prompt hash; an answer that does not parse is stored as failed (JUDGE001) and
    asked again by the next run. Scores below judge.threshold become a penalty or reject verdict
    (judge.code) on the judged record. With --pairs, samples of one query (a preference spec's
    teacher samples) are compared in both orders; `snapshot freeze` pairs them (source judge).

    \b
    Examples:
      mashbill judge quickstart-plan-grown --limit 20
      mashbill judge PREFERENCE-SPEC --pairs   # its samples (snapshot sample) and a judge.pair_prompt
    """
    from mashbill.cli.make.generate import LiveProgress
    from mashbill.factory.generate.judge import judge_of, run_judge
    from mashbill.factory.store import Store
    from mashbill.factory.teachers import make_teacher
    from mashbill.specs import find_spec, load_spec

    sigterm_as_interrupt()
    rs = load_spec(find_spec(spec))
    judge = judge_of(rs)
    if base_url and judge.teacher.backend != "openai":  # as generate refuses it: never ignored without a word
        raise MashbillError(f"--base-url is for judges with backend 'openai'; the judge of {rs.ref} uses "
                            f"'{judge.teacher.backend}'")
    with Store.open(store_path) as store:
        kwargs = {"threads": threads or rs.spec.runtime.threads} if judge.teacher.backend == "llama_cpp" else \
            {"runtime": rs.spec.runtime}
        if base_url:
            kwargs["base_url"] = base_url
        teacher = make_teacher(judge.teacher, **kwargs)
        try:
            with LiveProgress(f"{rs.ref} judge", enabled=not no_progress and not as_json) as bar:
                summary = run_judge(rs, store, teacher, mode="pairs" if pairs else "score", limit=limit,
                                    on_progress=bar, args={"limit": limit, "pairs": pairs})
        except KeyboardInterrupt:
            raise MashbillError("interrupted; the judgments already stored are kept, re-run to resume")
        finally:
            teacher.close()
    if as_json:
        echo_json(summary.as_dict())
    else:
        print_summary(summary)
        for code, n in summary.findings.items():
            out.print(f"{n} judged record(s) scored below judge.threshold: {code} ({rs.spec.judge.below})")
