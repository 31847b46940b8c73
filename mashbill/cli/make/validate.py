"""`mashbill validate`: every check on a spec's stored records, or on a dataset file Mashbill did not make."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mashbill.cli._common import EXIT_FINDINGS, EXIT_OK, echo_json, json_option, store_option
from mashbill.errors import MashbillError

FORMATS = ("messages", "prompt-completion", "alpaca", "preference")
LOSSES = ("assistant-only", "completion-only", "last-turn")


@click.command("validate")
@click.argument("target")
@store_option(help="Store folder (spec mode).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), help="Validate TARGET as a dataset file of this format.")
@click.option("--spec", "profile_spec", help="File mode: take the trainer profile, rules, tool catalog, taxonomy, "
                                             "worked examples and holdout sets from this spec (command-line options "
                                             "still win). Without it, each row's system prompt gives the taxonomy.")
@click.option("--tokenizer", help="HF tokenizer folder, .gguf file or embedded:NAME (default: the spec's).")
@click.option("--chat-template", help="'chatml' (with generation markers), a .jinja file or template text "
                                      "(default: the tokenizer's own).")
@click.option("--max-seq-len", type=click.IntRange(16), help="The trainer's window in tokens.")
@click.option("--truncation-side", type=click.Choice(["right", "left"]), help="Which end the trainer cuts.")
@click.option("--loss", type=click.Choice(LOSSES), help="Which tokens the loss covers (default: the spec's; for "
                                                         "files assistant-only for messages, else completion-only).")
@click.option("--holdout", multiple=True, type=click.Path(dir_okay=False),
              help="Benchmark queries no training record may match (.txt/.jsonl/.json); repeatable.")
@click.option("--eval", "eval_files", multiple=True, type=click.Path(dir_okay=False),
              help="File mode: the eval split (same format); training rows must not leak into it.")
@click.option("--rules", "rules_file", type=click.Path(dir_okay=False), help="Rule set file: routing, or complexity "
                                                                              "(kind: complexity; default: the spec's, "
                                                                              "else moe-routing@8).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), help="Write the JSON report here.")
@click.option("--redact-to", type=click.Path(dir_okay=False),
              help="File mode: also write a copy with e-mails, phone numbers, IBANs and names replaced.")
@click.option("--audit-sample", type=click.IntRange(0), default=200, show_default=True,
              help="Examples (stratified by shape) re-checked with a full render+tokenize and a second tokenizer "
                   "(llama.cpp's for a GGUF); any difference fails the run.")
@click.option("--all", "include_all", is_flag=True, help="Spec mode: also records rejected at generation.")
@click.option("--jobs", type=click.IntRange(1), default=1, show_default=True,
              help="Spec mode: check each record's rules, token spans and personal data in this many worker "
                   "processes; duplicates, leakage, the span audit and the expectations run once over all. The "
                   "verdicts are the same for any number.")
@click.option("--per-record", is_flag=True,
              help="Spec mode: run only each record's own checks (rules, token spans, personal data) and keep "
                   "them in the store, marking no record validated: for shard stores, on the nodes that made them. "
                   "A validation of the store they are merged into reads the kept checks (same spec, Mashbill, "
                   "options and tokenizer) and runs only the checks that need every record; the verdicts are "
                   "the same.")
@click.option("--recheck", is_flag=True, help="Spec mode: check every record here, reading no kept checks.")
@click.option("--no-write", is_flag=True, help="Spec mode: do not write verdicts (or kept checks) to the store.")
@click.option("--no-spans", is_flag=True, help="Skip the token-span check.")
@click.option("--no-rules", is_flag=True, help="File mode: skip the routing rules.")
@click.option("--no-dedup", is_flag=True, help="Skip duplicate detection.")
@click.option("--no-pii", is_flag=True, help="Skip the personal-data scan.")
@click.option("--no-expectations", is_flag=True, help="Skip the Great Expectations suite.")
@click.option("--quiet", "-q", is_flag=True, help="Only the summary table.")
@json_option(help="Print the report (as --report writes it) as JSON on stdout instead of the table.")
def command(target, store_path, fmt, profile_spec, tokenizer, chat_template, max_seq_len, truncation_side, loss,
            holdout, eval_files, rules_file, report_path, redact_to, audit_sample, include_all, jobs, per_record,
            recheck, no_write, no_spans, no_rules, no_dedup, no_pii, no_expectations, quiet, as_json):
    """Validate a spec's stored records, or a dataset file.

    \b
    Stored records (verdicts are written to the store, replacing earlier 'validate' ones):
      mashbill validate plan-moe --store ./mashbill-data
    Each shard store where it was made, then the merged store (there, only the checks that need every record):
      mashbill validate plan-moe --store ./stores/shard_0 --per-record
      mashbill validate plan-moe --store ./stores/merged
    A dataset file with a trainer profile:
      mashbill validate planner_chat.jsonl --format messages \\
          --tokenizer ~/.cache/mashbill/vocab/ggml-vocab-qwen2.gguf --chat-template chatml \\
          --max-seq-len 1536 --report report.json

    Prints counts per verdict code with examples and exits 1 when any record has a reject-severity verdict
    (SPAN002: the target lies beyond max_seq_len, HR001: arithmetic without a precision tool, ...).
    """
    from mashbill.specs.model import TrainerProfile
    from mashbill.validators.data.inputs import DEFAULT_LOSS
    from mashbill.validators.errors import ValidationInputError
    from mashbill.validators.run import Options

    progress = None if quiet or as_json else (lambda msg: click.echo(f"  checking {msg} ...", err=True))
    opts = Options(audit_sample=audit_sample, spans=not no_spans, apply_rules=not no_rules, dedup=not no_dedup,
                   pii=not no_pii,
                   expectations=not no_expectations, holdout=list(holdout), eval_files=list(eval_files),
                   progress=progress)
    if rules_file:
        from mashbill.validators.plans.ruleset import load_rules

        opts.rules = load_rules(rules_file)
    file_mode = fmt is not None or (Path(target).suffix in (".jsonl", ".json") and Path(target).is_file())
    if file_mode:
        if fmt is None:
            raise ValidationInputError(f"{target}: pass --format ({', '.join(FORMATS)}) to validate a dataset file")
        for flag, given in (("--jobs", jobs > 1), ("--per-record", per_record), ("--recheck", recheck)):
            if given:
                raise ValidationInputError(f"{target}: {flag} works on a spec's stored records, not on a dataset "
                                           "file")
        spec_profile = None
        if profile_spec:
            from mashbill.specs import find_spec, load_spec

            rs = load_spec(find_spec(profile_spec))
            opts.spec = rs
            spec_profile = rs.spec.trainer_profile
            opts.base_dir = rs.home
            opts.holdout += [str(p) for k, p in rs.file_paths.items() if k.startswith("holdout.")]
            if opts.rules is None and "rules" in rs.file_paths:
                from mashbill.validators.plans.ruleset import load_rules

                opts.rules = load_rules(rs.file_paths["rules"])
        if not no_spans:
            tok = tokenizer or (spec_profile.tokenizer if spec_profile else None)
            msl = max_seq_len or (spec_profile.max_seq_len if spec_profile else None)
            if tok is None or msl is None:
                raise ValidationInputError("file mode needs --tokenizer and --max-seq-len (or --spec SPEC for its "
                                           "trainer profile), or --no-spans")
            opts.profile = TrainerProfile(
                tokenizer=tok, max_seq_len=msl,
                chat_template=chat_template or (spec_profile.chat_template if spec_profile else None),
                truncation_side=truncation_side or (spec_profile.truncation_side if spec_profile else "right"),
                loss=loss or (spec_profile.loss if spec_profile is not None and fmt == "messages" else DEFAULT_LOSS[fmt]))
        from mashbill.validators.run import validate_file

        report = validate_file(target, fmt, opts)
        if redact_to:
            from mashbill.validators.data.pii import redact_file

            written, changed = redact_file(target, redact_to)
            report.sections["redacted"] = {"file": str(redact_to), "rows": written, "rows_changed": changed}
    else:
        if redact_to:
            raise ValidationInputError("--redact-to works on files; stored records are never modified")
        from mashbill.factory.store import Store
        from mashbill.specs import find_spec, load_spec
        from mashbill.validators.run_store import validate_spec_records

        rs = load_spec(find_spec(target), seed_rows=False)  # records are found by the hash; no check reads seeds
        tp = rs.spec.trainer_profile
        opts.base_dir = rs.home
        opts.holdout += [str(p) for k, p in rs.file_paths.items() if k.startswith("holdout.")]
        if not no_spans:
            opts.profile = TrainerProfile(tokenizer=tokenizer or tp.tokenizer, max_seq_len=max_seq_len or tp.max_seq_len,
                                          chat_template=chat_template or tp.chat_template,
                                          truncation_side=truncation_side or tp.truncation_side, loss=loss or tp.loss)
        with Store.open(store_path, read_only=no_write, create=False) as store:
            report = validate_spec_records(rs, store, opts, include_all=include_all, write=not no_write, jobs=jobs,
                                           per_record=per_record, recheck=recheck)
    if report_path:
        report.write(report_path)
    if as_json:
        echo_json(report.to_dict())
    else:
        _print(report, report_path)
    sys.exit(EXIT_FINDINGS if report.has_rejects else EXIT_OK)


def _print(report, report_path) -> None:
    d = report.to_dict()
    own = d.get("per_record", {})
    if "kept" in own:
        click.echo(f"checked {d['records']} record(s) of {d['source']} one by one (rules, token spans, personal "
                   f"data); {own['kept']} kept for the validation after the merge, none marked validated")
    else:
        click.echo(f"validated {d['records']} record(s) of {d['source']}"
                   + (f" ({own['from_kept']} with their kept own checks)" if own else ""))
    span = d.get("span")
    if span:
        t = span["tokens"]
        click.echo(f"  tokens: p50 {t['p50']}  p95 {t['p95']}  p99 {t['p99']}  max {t['max']}   window "
                   f"{span['max_seq_len']} ({span['truncation_side']} truncation, loss {span['loss']})")
        m = span["margin"]
        click.echo(f"  margin: p50 {m['p50']}  min {m['min']}   targets cut: "
                   f"{span['share_cut'] * 100:.1f}%   [{span['cut_policy']} cuts, audit "
                   f"{span['audit']['audited']} ok{_cross(span['audit'].get('cross_check'))}]")
    rules = d.get("rules")
    if rules:
        src = ", ".join(f"{k} {v}" for k, v in rules.get("taxonomy_from", {}).items())
        click.echo(f"  rules: {rules.get('rule_set') or 'none'}" + (f" (taxonomy from {src})" if src else ""))
        for s in rules.get("skipped", []):
            click.echo(f"    skipped: {s}")
    for sec, label in (("dedup", "duplicates"), ("leakage", "leakage"), ("pii", "personal data")):
        if sec in d:
            click.echo(f"  {label}: " + ", ".join(f"{k} {v}" for k, v in d[sec].items() if not isinstance(v, list)))
    exp = d.get("expectations")
    if exp:
        failed = [r for r in exp["results"] if not r["success"]]
        click.echo(f"  expectations ({exp['suite']}): {exp['evaluated'] - exp['failed']}/{exp['evaluated']} met"
                   + "".join(f"\n    unmet: {r['why']}" + (f" (observed {r['observed_value']:.3g})"
                                                            if isinstance(r.get("observed_value"), float) else "")
                             for r in failed))
    for w in d["warnings"]:
        click.echo(f"  warning: {w}", err=True)
    counts, by_rec, sev, ex = d["counts"], d["records_by_code"], d["severity"], d["examples"]
    if counts:
        click.echo(f"  {'code':<10}{'severity':<9}{'verdicts':>9}{'records':>9}  example")
        for code, n in counts.items():
            first = ex.get(code, [{}])[0]
            detail = f"{first.get('record', '')}: {first.get('detail', '')}"
            if len(detail) > 110:
                detail = detail[:107] + "..."
            click.echo(f"  {code:<10}{sev[code]:<9}{n:>9}{by_rec[code]:>9}  {detail}")
    else:
        click.echo("  no findings")
    verdict = "FAIL" if not d["ok"] else "ok"
    click.echo(f"{verdict}: {d['rejected_records']} of {d['records']} record(s) rejected"
               + (f"; report: {report_path}" if report_path else ""))


def _cross(cross: dict | None) -> str:
    if not cross:
        return ""
    if cross.get("tokenizer") is None:
        return f", cross-check skipped: {cross.get('skipped')}"
    return f", {cross['compared']} cross-checked with {cross['tokenizer']}"


__all__ = ["command", "MashbillError"]
