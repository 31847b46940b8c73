"""`mashbill snapshot`: freeze validated records into immutable snapshots; verify, list, diff and pull them."""

from __future__ import annotations

import json
from pathlib import Path

import click

from mashbill.cli._common import console, out, store_option


def _root(store_path: Path, snapshots_dir: Path | None) -> Path:
    return snapshots_dir if snapshots_dir is not None else store_path / "snapshots"


def dir_option(f):
    return click.option("--dir", "snapshots_dir", type=click.Path(file_okay=False, path_type=Path),
                        help="Snapshots folder (default: STORE/snapshots).")(f)


@click.group()
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
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Snapshots folder to write into (default: STORE/snapshots).")
@click.option("--no-tokens", is_flag=True, help="Skip counting tokens with the trainer profile's tokenizer.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
def freeze(spec, name, version, store_path, out_dir, no_tokens, as_json):
    """Freeze SPEC's validated records into NAME@VERSION: select, balance, split, write, hash.

    Refuses (and writes nothing) when the selection is empty, NAME@VERSION exists, some accepted
    record was never validated, or the spec's quotas cannot be met.

    \b
    Example:
      mashbill snapshot freeze plan-moe --name plan --version 1 --store ./mashbill-data
    """
    from mashbill.curation.snapshot import freeze as do_freeze

    res = do_freeze(spec, store_path=store_path, name=name, version=version, out_dir=out_dir, tokens=not no_tokens)
    if as_json:
        out.print_json(json.dumps(res.manifest))
        return
    print_manifest(res.manifest, res.path)


def print_manifest(m: dict, path: Path) -> None:
    c = m["splits"]["counts"]
    out.print(f"[bold]{m['ref']}[/bold]  id {m['snapshot_id'][:16]}  ({m['kind']})  {path}")
    out.print(f"  train {c['train']}  eval {c['eval']}  test {c['test']}  left out {m['rejects']['total']}"
              + (f"  oversampled {m['cells']['oversampled']}" if m["cells"]["oversampled"] else ""))
    if m["rejects"]["by_code"]:
        out.print("  left out by code: " + ", ".join(f"{k} {v}" for k, v in m["rejects"]["by_code"].items()))
    if m.get("preference"):
        p = m["preference"]["pairs"]
        out.print(f"  pairs: rule {p.get('rule', 0)}, teacher {p.get('teacher', 0)}, human {p.get('human', 0)}; "
                  f"correction samples {m['preference']['correction_samples']}")
    below = m["cells"]["below_quota"]
    if below:
        console.print(f"[yellow]warning[/yellow]: {len(below)} cell(s) below quota (shipped as they are): " +
                      ", ".join(f"{k} {v['kept']}/{v['kept'] + v['short']}" for k, v in sorted(below.items())))


@command.command()
@click.argument("ref")
@store_option
@dir_option
def verify(ref, store_path, snapshots_dir):
    """Re-hash every file of REF (NAME@VERSION or a folder); exit 2 naming any file that changed."""
    from mashbill.curation.snapshot import resolve_snapshot, verify as do_verify

    path = resolve_snapshot(ref, _root(store_path, snapshots_dir))
    m = do_verify(path)
    out.print(f"ok  {m['ref']}  id {m['snapshot_id'][:16]}  {len(m['files'])} files verified")


@command.command(name="ls")
@store_option
@dir_option
@click.option("--verify", "check", is_flag=True, help="Also re-hash every snapshot.")
@click.option("--json", "as_json", is_flag=True)
def ls_cmd(store_path, snapshots_dir, check, as_json):
    """List the snapshots (folders with a manifest; interrupted freezes are ignored).

    Exit code 1 when --verify finds an altered snapshot or a manifest cannot be read.
    """
    from mashbill.curation.snapshot import SnapshotError, incomplete_dirs, ls, verify as do_verify

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
        out.print_json(json.dumps(items))
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
    if any(it.get("verified") is False or "error" in it for it in items):
        raise SystemExit(1)  # findings: an altered or unreadable snapshot


@command.command()
@click.argument("a")
@click.argument("b")
@store_option
@dir_option
@click.option("--json", "as_json", is_flag=True)
def diff(a, b, store_path, snapshots_dir, as_json):
    """What changed from snapshot A to B: records added and removed, label shifts, spec changes."""
    from mashbill.curation.snapshot import diff as do_diff, resolve_snapshot

    root = _root(store_path, snapshots_dir)
    d = do_diff(resolve_snapshot(a, root), resolve_snapshot(b, root))
    if as_json:
        out.print_json(json.dumps(d))
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
              help="Write one JSONL file per split here (train.jsonl, eval.jsonl, test.jsonl).")
def pull(ref, fmt, store_path, snapshots_dir, out_dir):
    """Verify REF, then load it in a trainer's format (TRL conversational, prompt/completion, preference,
    classification); with --out, write it as JSONL per split.

    \b
    Example:
      mashbill snapshot pull plan@1 --format prompt-completion --out ./plan-sft
    Python:
      from mashbill.curation.pull import load_snapshot
      ds = load_snapshot("plan@1", format="messages", store="./mashbill-data")
    """
    from mashbill.curation.pull import load_snapshot

    dd = load_snapshot(ref, fmt, root=_root(store_path, snapshots_dir))
    for split, ds in dd.items():
        out.print(f"{split:<6} {ds.num_rows:>7} rows  columns {', '.join(ds.column_names)}")
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        for split, ds in dd.items():
            target = out_dir / f"{split}.jsonl"
            tmp = out_dir / f".{split}.jsonl.tmp"
            ds.to_json(str(tmp), force_ascii=False, lines=True)
            tmp.replace(target)
        out.print(f"wrote {out_dir}/{{train,eval,test}}.jsonl")
        # what a trainer needs beside the rows: the template to render with and the classifier's label mapping
        if getattr(dd, "chat_template", None):  # router snapshots have none
            (out_dir / "chat_template.jinja").write_text(dd.chat_template, encoding="utf-8")
            out.print(f"wrote {out_dir}/chat_template.jinja (the snapshot's training template)")
        if getattr(dd, "label_info", None):
            (out_dir / "labels.json").write_text(json.dumps(dd.label_info, indent=2), encoding="utf-8")
            out.print(f"wrote {out_dir}/labels.json (id2label, label2id, problem_type)")


@command.command()
@click.argument("spec")
@store_option
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N seed queries.")
@click.option("--threads", type=click.IntRange(min=1))
def sample(spec, store_path, limit, threads):
    """Teacher samples for a preference SPEC: samples_per_query plans per query (one seed each), stored and
    checked with the rules, so the next freeze can pair a passing sample with a failing one.

    \b
    Example:
      mashbill snapshot sample plan-preference --limit 20
    """
    from mashbill.curation.preference import sample_candidates
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
    out.print(f"{rs.ref}: {s.samples} sample(s) for {s.queries} quer(ies); {s.passing} pass every rule, "
              f"{s.failing} fail one or more (run {s.run_id})")
