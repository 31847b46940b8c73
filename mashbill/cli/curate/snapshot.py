"""`mashbill snapshot`: freeze validated records into immutable snapshots; verify, list, diff and pull them."""

from __future__ import annotations

import json
from pathlib import Path

import click

from mashbill.cli._common import EXIT_FINDINGS, Group, console, echo_json, json_option, out, store_option


def _root(store_path: Path, snapshots_dir: Path | None) -> Path:
    return snapshots_dir if snapshots_dir is not None else store_path / "snapshots"


def dir_option(f):
    return click.option("--dir", "snapshots_dir", type=click.Path(file_okay=False, path_type=Path),
                        help="Snapshots folder (default: STORE/snapshots).")(f)


def exit_on_findings(altered: bool) -> None:
    if altered:
        raise SystemExit(EXIT_FINDINGS)  # an altered or unreadable snapshot is a finding, like release verify


@click.group(cls=Group)
def command():
    """Immutable, verifiable snapshots of validated (and reviewed) records, for trainers.

    \b
    Example:
      mashbill snapshot freeze quickstart-plan --name qs-plan --version 1
      mashbill snapshot verify qs-plan@1
      mashbill snapshot pull qs-plan@1 --format messages --out ./qs-plan
    """


@command.command()
@click.argument("spec")
@click.option("--name", required=True, help="Snapshot name (lower-case letters, digits, . _ -).")
@click.option("--version", "version", required=True, help="Snapshot version; a name@version is written once.")
@store_option
@click.option("--dir", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Snapshots folder to write into (default: STORE/snapshots).")
@click.option("--no-tokens", is_flag=True, help="Skip counting tokens with the trainer profile's tokenizer.")
@json_option(help="Print the manifest as JSON.")
def freeze(spec, name, version, store_path, out_dir, no_tokens, as_json):
    """Freeze SPEC's validated records into NAME@VERSION: select, balance, split, write, hash.

    Refuses (and writes nothing) when the selection is empty, NAME@VERSION exists, some accepted
    record was never validated, or the spec's quotas cannot be met.

    \b
    Example:
      mashbill snapshot freeze plan-moe --name plan --version 1 --store ./mashbill-data
    """
    from mashbill.curation.snapshots.snapshot import freeze as do_freeze

    res = do_freeze(spec, store_path=store_path, name=name, version=version, out_dir=out_dir, tokens=not no_tokens)
    if as_json:
        echo_json(res.manifest)
        return
    print_manifest(res.manifest, res.path)


def print_manifest(m: dict, path: Path) -> None:
    c = m["splits"]["counts"]
    out.print(f"snapshot [bold]{m['ref']}[/bold]  id {m['snapshot_id'][:16]}  ({m['kind']})  {path}")
    out.print(f"  train {c['train']}  eval {c['eval']}  test {c['test']}  left out {m['rejects']['total']}"
              + (f"  oversampled {m['cells']['oversampled']}" if m["cells"]["oversampled"] else ""))
    if m["rejects"]["by_code"]:
        out.print("  left out by code: " + ", ".join(f"{k} {v}" for k, v in m["rejects"]["by_code"].items()))
    if m.get("preference"):
        p = m["preference"]["pairs"]
        out.print(f"  pairs: rule {p.get('rule', 0)}, teacher {p.get('teacher', 0)}, human {p.get('human', 0)}"
                  + (f", judge {p['judge']}" if "judge" in p else "")
                  + f"; correction samples {m['preference']['correction_samples']}")
        pm = m["preference"]
        if "judge_pairs_judged" in pm:
            out.print(f"  judge pairs: {pm['judge_pairs_judged']} judged in both orders, {pm['judge_inconsistent']} "
                      f"inconsistent (PREF006), {pm['judge_below_margin']} below the margin (PREF007), "
                      f"{pm['judge_errors']} judge error(s) (PREF008)")
    if m.get("judge"):
        out.print(f"  judge scores: {m['judge']['scored']} (mean {m['judge']['mean_score']}) in judge.parquet")
    below = m["cells"]["below_quota"]
    if below:
        console.print(f"[yellow]warning[/yellow]: {len(below)} cell(s) below quota (shipped as they are): " +
                      ", ".join(f"{k} {v['kept']}/{v['kept'] + v['short']}" for k, v in sorted(below.items())))


@command.command()
@click.argument("ref")
@store_option
@dir_option
@json_option(help='Print {"ref", "snapshot_id", "path", "verified", "files"} (or "error") as JSON.')
def verify(ref, store_path, snapshots_dir, as_json):
    """Re-hash every file of REF (NAME@VERSION or a folder); exit 1 naming any file that changed (2 when REF
    cannot be found or is not the snapshot its name says)."""
    from mashbill.curation.snapshots.snapshot import IntegrityError, resolve_snapshot, verify as do_verify

    path = resolve_snapshot(ref, _root(store_path, snapshots_dir))
    try:
        m = do_verify(path)
    except IntegrityError as exc:
        if as_json:
            echo_json({"ref": ref, "path": str(path), "verified": False, "error": str(exc)})
        else:
            click.echo(f"error: {exc}", err=True)
        exit_on_findings(True)
    if as_json:
        echo_json({"ref": m["ref"], "snapshot_id": m["snapshot_id"], "path": str(path), "verified": True,
                   "files": len(m["files"])})
        return
    out.print(f"ok  snapshot {m['ref']}  id {m['snapshot_id'][:16]}  {len(m['files'])} files verified")


@command.command(name="ls")
@store_option
@dir_option
@click.option("--verify", "check", is_flag=True, help="Also re-hash every snapshot.")
@json_option(help="Print the snapshots as a JSON list.")
def ls_cmd(store_path, snapshots_dir, check, as_json):
    """List the snapshots (folders with a manifest; interrupted freezes are ignored).

    Exit code 1 when --verify finds an altered snapshot or a manifest cannot be read.
    """
    from mashbill.curation.snapshots.snapshot import SnapshotError, incomplete_dirs, ls, verify as do_verify

    root = _root(store_path, snapshots_dir)
    items = ls(root)
    if check:
        for it in items:
            try:
                do_verify(Path(it["path"]))
                it["verified"] = True
            except SnapshotError as exc:
                it["verified"] = False
                it["error"] = str(exc)
    if as_json:
        echo_json(items)
    elif not items:
        out.print(f"no snapshots under {root}")
    else:
        for it in items:
            if "counts" in it and it.get("counts"):
                c = it["counts"]
                status = "" if "verified" not in it else ("  verified" if it["verified"] else "  ALTERED")
                out.print(f"{it['ref']:<32} {it['snapshot_id'][:12]}  {it['kind']:<11} train {c['train']:>6} "
                          f"eval {c['eval']:>5} test {c['test']:>5}  {it['frozen_at']}{status}")
            else:
                out.print(f"{it['ref']:<32} unreadable: {it.get('error')}")
    junk = incomplete_dirs(root)
    if junk:
        console.print(f"{len(junk)} incomplete folder(s) ignored (interrupted freezes): "
                      + ", ".join(d.name for d in junk))
    exit_on_findings(any(it.get("verified") is False or "error" in it for it in items))


@command.command()
@click.argument("a")
@click.argument("b")
@store_option
@dir_option
@json_option(help="Print the difference as JSON.")
def diff(a, b, store_path, snapshots_dir, as_json):
    """What changed from snapshot A to B: records added and removed, label shifts, spec changes."""
    from mashbill.curation.snapshots.snapshot import diff as do_diff, resolve_snapshot

    root = _root(store_path, snapshots_dir)
    d = do_diff(resolve_snapshot(a, root), resolve_snapshot(b, root))
    if as_json:
        echo_json(d)
        return
    out.print(f"{d['a']['ref']} ({d['a']['snapshot_id'][:12]}) -> {d['b']['ref']} ({d['b']['snapshot_id'][:12]})"
              + ("  identical content" if d["identical"] else ""))
    out.print(f"  records added {len(d['added'])}, removed {len(d['removed'])}, relabelled {len(d['relabelled'])}, "
              f"moved between splits {len(d['moved_split'])}, output changed {len(d['changed_output'])}")
    for kind in ("added", "removed"):
        for r in d[kind][:5]:
            out.print(f"    {'+' if kind == 'added' else '-'} {r['record_id'][:12]} [{r['split']}] {r['cell']}  "
                      f"{(r['query'] or '')[:60]}")
    for r in d["relabelled"][:5]:
        out.print(f"    ~ {r['record_id'][:12]} {r['from']} -> {r['to']}")
    for s, shifts in d["cell_shifts"].items():
        if shifts:
            out.print(f"  {s}: " + ", ".join(f"{c} {n:+d}" for c, n in shifts.items()))
    for sc in d["spec_changes"]:
        out.print(f"  spec {sc['name']}: {sc['a']} -> {sc['b']}"
                  + (f" (files changed: {', '.join(sc['files_changed'])})" if sc["files_changed"] else ""))
    if d["verdict_shifts"]:
        out.print("  verdict codes: " + ", ".join(f"{c} {n:+d}" for c, n in d["verdict_shifts"].items()))


@command.command()
@click.argument("ref")
@click.option("--format", "fmt", type=click.Choice(["messages", "prompt-completion", "preference", "classification",
                                                    "router", "outcomes", "transitions", "triplets"]),
              default="messages", show_default=True,
              help="Router snapshots (outcomes, transitions, triplets) take their own formats; messages means "
                   "their default.")
@store_option
@dir_option
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write one JSONL file per split here (train.jsonl, eval.jsonl, test.jsonl), the training "
                   "template, and the TRL config arguments (sft_config.json or dpo_config.json).")
@json_option(help='Print {"splits": {SPLIT: {"rows", "columns"}}, "written": [files]} as JSON.')
def pull(ref, fmt, store_path, snapshots_dir, out_dir, as_json):
    """Verify REF, then load it in a trainer's format (TRL conversational, prompt/completion, preference,
    classification); with --out, write it as JSONL per split.

    \b
    Example:
      mashbill snapshot pull plan@1 --format prompt-completion --out ./plan-sft
    Python:
      from mashbill.curation.snapshots.pull import load_snapshot
      ds = load_snapshot("plan@1", format="messages", store="./mashbill-data")
    """
    from mashbill.curation.snapshots.pull import load_snapshot

    dd = load_snapshot(ref, fmt, root=_root(store_path, snapshots_dir))
    say = (lambda *a: None) if as_json else out.print
    written = []
    for split, ds in dd.items():
        say(f"{split:<6} {ds.num_rows:>7} rows  columns {', '.join(ds.column_names)}")
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        for split, ds in dd.items():
            target = out_dir / f"{split}.jsonl"
            tmp = out_dir / f".{split}.jsonl.tmp"
            ds.to_json(str(tmp), force_ascii=False, lines=True)
            tmp.replace(target)
            written.append(str(target))
        say(f"wrote {out_dir}/{{train,eval,test}}.jsonl")
        # what a trainer needs beside the rows: the template to render with and the classifier's label mapping
        if getattr(dd, "chat_template", None):  # router snapshots have none
            (out_dir / "chat_template.jinja").write_text(dd.chat_template, encoding="utf-8")
            written.append(str(out_dir / "chat_template.jinja"))
            say(f"wrote {out_dir}/chat_template.jinja (the snapshot's training template)")
        from mashbill.curation.snapshots.pull import SETTINGS_FILES, trl_settings

        template = out_dir / "chat_template.jinja" if getattr(dd, "chat_template", None) else None
        settings = trl_settings(getattr(dd, "manifest", {}) or {}, fmt, template)
        if settings is not None:
            target = out_dir / SETTINGS_FILES[fmt]
            target.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
            written.append(str(target))
            say(f"wrote {target} (TRL {'DPOConfig' if fmt == 'preference' else 'SFTConfig'} arguments: "
                f"max_length {settings['max_length']}, loss, template)")
        if getattr(dd, "label_info", None):
            (out_dir / "labels.json").write_text(json.dumps(dd.label_info, indent=2), encoding="utf-8")
            written.append(str(out_dir / "labels.json"))
            say(f"wrote {out_dir}/labels.json (id2label, label2id, problem_type)")
    if as_json:
        echo_json({"splits": {s: {"rows": ds.num_rows, "columns": ds.column_names} for s, ds in dd.items()},
                   "written": written})


@command.command(short_help="Teacher samples for a preference SPEC, so the next freeze can pair a passing plan "
                             "with a failing one.")
@click.argument("spec")
@store_option
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N seed queries.")
@click.option("--threads", type=click.IntRange(min=1),
              help="CPU threads for an embedded teacher [default: the cores free now: affinity less load].")
@json_option(help='Print {"spec", "run_id", "queries", "samples", "passing", "failing"} as JSON.')
def sample(spec, store_path, limit, threads, as_json):
    """Teacher samples for a preference SPEC: samples_per_query plans per query (one seed each), stored and
    checked with the rules, so the next freeze can pair a passing sample with a failing one.

    \b
    Example:
      mashbill snapshot sample plan-preference --limit 20
    """
    from mashbill.curation.preference.preference import sample_candidates
    from mashbill.factory.store import Store
    from mashbill.factory.teachers import make_teacher
    from mashbill.specs import find_spec, load_spec

    rs = load_spec(find_spec(spec))
    with Store.open(store_path) as store:
        teacher = make_teacher(rs.spec.teacher, threads=threads or rs.spec.runtime.threads)
        try:
            s = sample_candidates(rs, store, teacher, limit=limit)
        finally:
            teacher.close()
    if as_json:
        echo_json({"spec": rs.ref, "run_id": s.run_id, "queries": s.queries, "samples": s.samples,
                   "passing": s.passing, "failing": s.failing})
        return
    out.print(f"spec {rs.ref}: {s.samples} sample(s) for {s.queries} quer(ies); {s.passing} pass every rule, "
              f"{s.failing} fail one or more (run {s.run_id})")
