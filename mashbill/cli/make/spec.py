"""`mashbill spec ls | show | check | lock | examples`: inspect and guard versioned specs, make example banks."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.table import Table

from mashbill.cli._common import EXIT_FINDINGS, EXIT_OK, Group, echo_json, json_option, out, store_option
from mashbill.errors import MashbillError, SpecError


def _spec_roots(paths: tuple[str, ...], archived: bool = True) -> list[tuple[Path, Path]]:
    """(spec file, the folder that holds its lock file when none exists yet above it). Superseded versions
    (archive/) are checked and locked, never listed."""
    from mashbill.specs import LIBRARY, find_spec_files

    if not paths:
        return [(f, LIBRARY) for f in find_spec_files(LIBRARY, archived=archived)]
    found: list[tuple[Path, Path]] = []
    for p in map(Path, paths):
        found.extend((f, p) for f in find_spec_files(p, archived=archived)) if p.is_dir() else found.append((p, p.parent))
    return found


def _spec_paths(paths: tuple[str, ...], archived: bool = True) -> list[Path]:
    return [f for f, _ in _spec_roots(paths, archived)]


@click.group(cls=Group)
def command():
    """Inspect and check specs (versioned, content-hashed dataset recipes)."""


@command.command("ls")
@click.argument("paths", nargs=-1)
@json_option(help='Print [{"spec", "kind", "seeds", "hash", "path"} or {"path", "error"}] as JSON.')
def ls(paths, as_json):
    """List specs (default: the shipped library) with kind, seeds and hash; superseded versions (archive/) are
    not listed, but `name@version` still finds them."""
    from mashbill.specs import load_spec

    rows = []
    for p in _spec_paths(paths, archived=False):
        try:
            rs = load_spec(p)
            rows.append({"spec": rs.ref, "kind": rs.spec.kind, "seeds": len(rs.seeds), "hash": rs.hash, "path": str(p)})
        except SpecError as exc:
            rows.append({"path": str(p), "error": str(exc)})
    if as_json:
        echo_json(rows)
        return
    table = Table("spec", "kind", "seeds", "hash", "path")
    for r in rows:
        if "error" in r:
            table.add_row(Path(r["path"]).stem, "[red]error[/red]", "", "", r["error"])
        else:
            table.add_row(r["spec"], r["kind"], str(r["seeds"]), r["hash"][:12], r["path"])
    out.print(table)


@command.command("show")
@click.argument("name")
@click.option("--prompt", "show_prompt", is_flag=True, help="Also render the first seed's teacher and training prompts.")
@json_option(help='Print {"spec", "kind", "hash", "path", "seeds", "languages", "teacher", "trainer_profile", '
                  '"files"} as JSON.')
def show(name, show_prompt, as_json):
    """Show a resolved spec: files and their hashes, teacher, trainer profile.

    \b
    Example:
      mashbill spec show plan-moe --prompt
    """
    from mashbill.specs import find_spec, load_spec, render_prompt

    rs = load_spec(find_spec(name))
    s = rs.spec
    if as_json:
        echo_json({"spec": rs.ref, "kind": s.kind, "hash": rs.hash, "path": str(rs.path), "seeds": len(rs.seeds),
                   "languages": list(s.languages), "teacher": s.teacher.model_dump(mode="json"),
                   "trainer_profile": s.trainer_profile.model_dump(mode="json"),
                   "files": {role: {"path": str(rs.file_paths[role]) if role in rs.file_paths else None,
                                    "sha256": digest} for role, digest in rs.files.items()}})
        return
    out.print(f"[bold]{rs.ref}[/bold]  kind={s.kind}  hash={rs.hash}")
    out.print(f"path: {rs.path}")
    if s.description:
        out.print(s.description.strip())
    out.print(f"seeds: {len(rs.seeds)}   languages: {', '.join(s.languages)}")
    out.print(f"teacher: {s.teacher.backend} {s.teacher.model} sampling={s.teacher.sampling.model_dump()}")
    out.print(f"trainer profile: {s.trainer_profile.model_dump()}")
    table = Table("role", "file", "sha256")
    for role, digest in rs.files.items():
        table.add_row(role, str(rs.file_paths.get(role, "(a queries spec, read from the store)")), digest[:16])
    out.print(table)
    example = rs.seeds[0] if rs.seeds else None
    if s.kind == "queries":  # a synthesis call's input: the first cell's first call
        from mashbill.factory.generate.synth import cell_inputs, plan_cells

        example = cell_inputs(rs, plan_cells(rs)[0], 0)
    if show_prompt and example is not None:
        from mashbill.factory.records import record_id

        rid = record_id(rs.hash, example)
        if s.examples is not None:  # the bank rows nearest to the seed (MiniLM), as generate shows them
            from mashbill.factory.generate.examples import Retriever

            p = Retriever(rs).prompt(example, rid)
        else:
            p = render_prompt(rs, example, rid)
        for label, msgs in (("teacher", p.teacher_messages), ("training", p.training_messages)):
            for m in msgs:
                out.rule(f"{label} / {m['role']}")
                out.print(m["content"], markup=False, highlight=False)


@command.command("check")
@click.argument("paths", nargs=-1)
@json_option(help='Print [{"path", "spec", "hash", "problems"}] as JSON (exit code as without it).')
def check(paths, as_json):
    """Load every spec, resolve its files, validate its schema, compare its hash with specs.lock, and
    check that its trainer profile's tokenizer exists.

    Fails when a spec's content changed but its version did not (bump the version, then
    `mashbill spec lock`). Default: the shipped library.
    """
    from mashbill.factory.generate.repair import check_repair
    from mashbill.specs import load_spec
    from mashbill.specs.lock import lock_problem

    problems = 0
    files = _spec_paths(paths)
    say = (lambda line: None) if as_json else click.echo
    results = []
    for p in files:
        try:
            rs = load_spec(p)
            check_repair(rs)
        except SpecError as exc:
            where = "" if Path(exc.path).resolve() == p.resolve() else f" (in spec {p})"
            say(f"FAIL {exc}{where}")
            results.append({"path": str(p), "spec": None, "hash": None, "problems": [f"{exc}{where}"]})
            problems += 1
            continue
        found = [x for x in (lock_problem(rs), tokenizer_problem(rs)) if x]
        for problem in found:
            say(f"FAIL spec {rs.ref} ({p}): {problem}")
        results.append({"path": str(p), "spec": rs.ref, "hash": rs.hash, "problems": found})
        problems += len(found)
        if not found:
            say(f"ok   spec {rs.ref}  {rs.hash[:12]}")
    say(f"{len(files)} spec(s), {problems} problem(s)")
    if as_json:
        echo_json(results)
    sys.exit(EXIT_FINDINGS if problems else EXIT_OK)


def tokenizer_problem(rs) -> str | None:
    """A trainer profile's tokenizer that cannot be found (checked here, not first at validate time)."""
    from mashbill.validators.tokenizers.tokenizer import resolve_tokenizer_path

    try:
        resolve_tokenizer_path(rs.spec.trainer_profile.tokenizer, rs.home)
    except MashbillError as exc:
        return f"trainer_profile.tokenizer: {exc}"
    return None


@command.command("lock")
@click.argument("paths", nargs=-1)
@json_option(help='Print {"locked": [{"spec", "hash", "lock"}], "refused": [spec]} as JSON.')
def lock(paths, as_json):
    """Record name@version -> hash for new specs in specs.lock (never overwrites a locked version).

    Refuses (exit 1) a spec that `spec check` fails for another reason than the lock: a trainer profile
    tokenizer that does not exist.
    """
    from mashbill.specs import load_spec
    from mashbill.specs.lock import LOCK_NAME, find_lock, read_lock, write_lock

    say = (lambda line: None) if as_json else click.echo
    refused, locked = [], []
    for p, root in _spec_roots(paths):
        rs = load_spec(p)
        lock_path = find_lock(rs.path) or Path(root) / LOCK_NAME
        entries = read_lock(lock_path)
        problem = tokenizer_problem(rs)
        if problem:
            say(f"refused {rs.ref} ({p}): {problem}")
            refused.append(rs.ref)
            continue
        if rs.ref in entries and entries[rs.ref] != rs.hash:
            say(f"refused spec {rs.ref}: locked with another hash; bump its version instead")
            refused.append(rs.ref)
            continue
        if rs.ref not in entries:
            entries[rs.ref] = rs.hash
            write_lock(lock_path, entries)
            locked.append({"spec": rs.ref, "hash": rs.hash, "lock": str(lock_path)})
            say(f"locked  spec {rs.ref}  {rs.hash[:12]}  in {lock_path}")
    if as_json:
        echo_json({"locked": locked, "refused": refused})
    sys.exit(EXIT_FINDINGS if refused else EXIT_OK)


@command.command("examples")
@click.argument("spec")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="The bank file to write (JSONL; name it NAME@VERSION.jsonl).")
@click.option("--prefix", default=None, help="Row id prefix (default: the spec's name).")
@store_option
@json_option(help='Print {"spec", "path", "usable", "train", "left_out_eval_test"} as JSON.')
def examples(spec, out_path, prefix, store_path, as_json):
    """Write SPEC's usable records (accepted and validated, or accepted/corrected in review) as an example bank
    for a spec's `examples: {bank, k}` section: the train side of the snapshot split only.

    \b
    Example:  mashbill spec examples quickstart-plan@7 --out bank.jsonl --store ./mashbill-data
    """
    from mashbill.curation.examples_bank import bank_rows, write_bank
    from mashbill.factory.store import Store
    from mashbill.specs import find_spec, load_spec

    rs = load_spec(find_spec(spec))
    with Store.open(store_path, create=False) as store:
        rows, counts = bank_rows(rs, store, prefix=prefix)
    path = write_bank(rows, out_path)
    if as_json:
        echo_json({"spec": rs.ref, "path": str(path), **counts})
        return
    out.print(f"{path}: {counts['train']} row(s) from {counts['usable']} usable record(s) of {rs.ref} "
              f"({counts['left_out_eval_test']} on the eval/test side left out)")
