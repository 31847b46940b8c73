"""`mashbill train`: preflight, validation ladder and thin TRL/PEFT trainers over frozen snapshots."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mashbill.cli._common import EXIT_FINDINGS, Group, console, echo_json, json_option, out, store_option

STAGE_HELP = ("Ladder stage: config | forward | batch | steps:N | epoch | full. Cheaper stages that have not "
              "passed for this config and snapshot run first.")


@click.group(cls=Group)
def command():
    """Train on a frozen snapshot: classify (encoder classifier), sft (LoRA SFT), dpo (LoRA DPO).

    Every command starts with the preflight (`train check`): no model is loaded and nothing is written
    when the snapshot, tokenizer, template, window or DeepSpeed JSON would make the run unable to learn.
    Exit codes: 0 ok, 1 a stage ran and failed (recorded), 2 refused (bad config, snapshot or stage order).

    \b
    Example (after `mashbill quickstart`):
      mashbill train check quickstart-sft
      mashbill train sft quickstart-sft --stage steps:3
      mashbill train dpo quickstart-dpo --stage steps:2
      mashbill train classify quickstart-classify --stage steps:60
    """


_store = store_option(default=None, help="Store holding the snapshot and the ladder records [default: the config's "
                                         "store, ./mashbill-data unless it names another].")


@command.command()
@click.argument("config")
@_store
@json_option(help='Print {"config", "method", "snapshot", "snapshot_id", "format", "profile", "rechecked", "notes"} '
                  'as JSON.')
def check(config, store_path, as_json):
    """The preflight alone: verify the snapshot, compare the profile, re-check every record's target
    under a changed profile, validate the DeepSpeed JSON. Seconds; no model load.

    \b
    Example:
      mashbill train check quickstart-sft
      mashbill train check ./my-run.yaml --store ./mashbill-data
    """
    from mashbill.trainers.config import load_config
    from mashbill.trainers.preflight import run_preflight

    cfg, path = load_config(config, store=store_path)
    pf = run_preflight(cfg, path.parent)
    if as_json:
        echo_json({"config": cfg.name, "method": cfg.method, "snapshot": pf.manifest["ref"],
                   "snapshot_id": pf.manifest["snapshot_id"], "format": pf.format, "profile": pf.profile,
                   "rechecked": pf.rechecked, "notes": list(pf.notes), "seconds": pf.seconds})
        return
    for note in pf.notes:
        out.print(f"note: {note}")
    out.print(f"ok: {cfg.name} ({cfg.method}) on snapshot {pf.manifest['ref']} id {pf.manifest['snapshot_id'][:12]}, format "
              f"{pf.format}, max_seq_len {pf.profile.get('max_seq_len')}, loss {pf.profile.get('loss')}"
              + (f", {pf.rechecked} example(s) re-checked" if pf.rechecked else "") + f" ({pf.seconds:.1f} s)")


def _method_command(method: str):
    @click.argument("config")
    @click.option("--stage", default="steps:1", show_default=True, help=STAGE_HELP)
    @click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
                  help="Run folder [default: ./mashbill-runs/<config name>].")
    @click.option("--resume", is_flag=True, help="Continue from the newest checkpoint in <run>.work/.")
    @click.option("--no-climb", is_flag=True, help="Refuse instead of running cheaper stages that have not passed.")
    @_store
    @json_option(help='Print {"run", "metrics"} as JSON (progress goes to stderr).')
    def cmd(config, stage, out_dir, resume, no_climb, store_path, as_json):
        from mashbill.trainers.run import StageFailed, train

        try:
            res = train(config, method=method, stage=stage, out=out_dir, resume=resume, climb=not no_climb,
                        store=store_path, log=console.print if as_json else out.print)
        except StageFailed as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_FINDINGS)
        if as_json:
            echo_json({"run": str(res.out.resolve()) if res.out is not None else None, "metrics": res.metrics})
            return
        if res.out is not None:
            out.print(f"run folder: {res.out.resolve()}")
            ev = res.metrics.get("eval") or {}
            if "eval_accuracy" in ev:
                out.print(f"eval accuracy {ev['eval_accuracy']:.3f} on {ev['eval_examples']} {ev['eval_split']} "
                          f"example(s); majority class {ev['majority_accuracy']:.3f}")
    return cmd


_DOCS = {
    "classify": """Train an encoder classifier (all-MiniLM-L6-v2 by default) on a snapshot's classification
    pull: complexity (single-label) or routing/plan categories (multi-label, multi-hot); with `format: pairs`
    on a preference snapshot, a plan-vs-correct reward model over (request, plan) pairs.

    \b
    Example:
      mashbill train classify quickstart-classify --stage steps:60
    """,
    "sft": """LoRA SFT with TRL on a snapshot's messages (assistant-only or last-turn loss) or
    prompt-completion pull, with the snapshot's template and max_seq_len.

    \b
    Example:
      mashbill train sft quickstart-sft --stage steps:3
    """,
    "dpo": """LoRA DPO with TRL on a preference snapshot (the adapter-disabled base is the reference).

    \b
    Example:
      mashbill train dpo quickstart-dpo --stage steps:2
    """,
}

_SHORT = {"classify": "Train an encoder classifier (complexity, categories, or a plan reward model) on a snapshot.",
          "sft": None, "dpo": None}

for _m in ("classify", "sft", "dpo"):
    _f = _method_command(_m)
    _f.__doc__ = _DOCS[_m]
    command.command(_m, short_help=_SHORT[_m])(_f)


@command.command()
@click.argument("config")
@_store
@json_option(help="Print the ladder's run records as a JSON list.")
def stages(config, store_path, as_json):
    """The ladder's run records for CONFIG (newest last).

    \b
    Example:
      mashbill train stages quickstart-sft
    """
    from mashbill.factory.store import Store
    from mashbill.trainers import ladder
    from mashbill.trainers.config import load_config

    cfg, _ = load_config(config, store=store_path)
    with Store.open(ladder.store_path_of(cfg.store), read_only=True) as store:
        rows = ladder.history(store, cfg.sha256)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        out.print(f"no stage has run for {cfg.name} (config {cfg.sha256[:12]})")
    for r in rows:
        out.print(f"{r['ts'][:19]}  {r['stage']:<10} {'passed' if r.get('passed') else 'FAILED':<7} "
                  f"{r.get('snapshot')}  {r.get('device', '-')}  loss {r.get('loss', r.get('loss_last'))}")
