"""`mashbill eval TARGET --on SET...`: a student on labelled sets, beside the teacher's answers and a baseline."""

from __future__ import annotations

from pathlib import Path

import click

from mashbill.cli._common import echo_json, json_option, store_option


@click.command(name="eval")
@click.argument("target", type=click.Path(path_type=Path))
@click.option("--on", "sets", multiple=True, required=True,
              help="A labelled set: a .jsonl file (query + label, labels or plan facts), "
                   "snapshot:NAME@V[:SPLIT] (default split test) or yardstick:complexity|plan[:HALF] (default report). "
                   "Repeat for several.")
@store_option(help="Store folder: the teacher's stored answers for the same requests, and the snapshots under "
                   "it (snapshot:NAME@V, the target's snapshot).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N rows of each set.")
@click.option("--threads", default=1, show_default=True, help="CPU threads for the student.")
@click.option("--max-tokens", default=256, show_default=True, help="GGUF planners: new tokens per answer.")
@json_option(help="Print the evaluation (what eval.json holds, predictions left out) as JSON.")
def command(target, sets, store_path, limit, threads, max_tokens, as_json):
    """Evaluate TARGET (a classify run folder, an export folder, or an .onnx/.gguf file) on each --on SET.

    Classifiers: accuracy, per-class precision/recall, macro-F1, a confusion matrix and the calibration error
    (ECE). GGUF planners: schema-valid and rule-pass rates (the rules of the target's snapshot's spec) and, where
    the set holds gold plan facts, categories, tool and operands right; on yardstick:plan the share of plans
    right against the hand-labelled facts and why the others are not. Beside them, on the same rows: the
    teacher's stored answers (where --store holds them) and a baseline (the majority class; the complexity
    rules' reference heuristic for complexity labels). Every set is checked before anything runs: a label the
    target does not know, an empty set, or a planner set on a classifier (and the reverse) is one line, exit 2,
    nothing written. Writes eval.json (each set's sha256 and figures) and eval.html (the confusion matrix drawn)
    beside TARGET: into the run folder, or the artifact's export folder.

    \b
    Examples:
      mashbill eval ./mashbill-runs/quickstart-classify --on yardstick:complexity
      mashbill eval ./mashbill-exports/quickstart-classify-onnx --on my-labels.jsonl --on snapshot:quickstart-complexity@1
      mashbill eval ./mashbill-exports/quickstart-sft-gguf --on plans.jsonl --limit 5
      mashbill eval ./mashbill-exports/quickstart-sft-gguf --on yardstick:plan --store ./mashbill-data
    """
    from mashbill.exporters.evaluation.evaluate import run_eval

    doc = run_eval(target, list(sets), store=store_path, threads=threads, limit=limit, max_tokens=max_tokens)
    if as_json:
        echo_json({**doc, "sets": {k: {x: y for x, y in v.items() if x != "predictions"}
                                   for k, v in doc["sets"].items()}})
        return
    for name, res in doc["sets"].items():
        st = res["student"]
        figs = " ".join(f"{k}={st[k]}" for k in ("accuracy", "macro_f1", "ece", "schema_valid_rate", "rule_pass_rate",
                                                  "categories_right", "tool_right", "operands_right") if k in st)
        click.echo(f"{name} ({res['rows']} rows, sha256 {res['sha256'][:12]}): student {figs}")
        t = res.get("teacher") or {}
        if t.get("rows"):
            click.echo(f"  teacher ({t['rows']} rows in the store): " +
                       " ".join(f"{k}={t[k]}" for k in ("accuracy", "macro_f1", "schema_valid_rate",
                                                        "rule_pass_rate", "categories_right") if k in t))
        else:
            click.echo("  teacher: no stored answer for these requests")
        for b, m in (res.get("baselines") or {}).items():
            click.echo(f"  baseline {b}: " + " ".join(f"{k}={m[k]}" for k in ("accuracy", "macro_f1",
                                                                            "categories_right") if k in m))
        conf = st.get("confusion")
        if conf and conf.get("matrix"):
            click.echo("  confusion (rows gold, columns predicted: " + ", ".join(conf["classes"]) + ")")
            for c, row in zip(conf["classes"], conf["matrix"]):
                click.echo(f"    {c:<14}" + " ".join(f"{v:4d}" for v in row))
    for p in doc.get("written", ()):
        click.echo(f"wrote {p}")
