"""Superseded spec versions live in specs/library/archive/<kind>/: still found by name@V, checked and locked with
their unchanged hashes, never listed by `spec ls` nor taken as a name's latest version."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from click.testing import CliRunner

from mashbill.cli import main
from mashbill.specs import LIBRARY, find_spec, find_spec_files, load_spec
from mashbill.specs.loader import ARCHIVE


def _versions(files):
    out = defaultdict(list)
    for f in files:
        name, _, v = f.stem.partition("@")
        out[name].append(int(v))
    return out


def test_the_live_library_holds_the_latest_version_per_name_and_the_archive_the_rest():
    """Live: each name's latest version, and the version the quick start runs where the latest is an opt-in yield
    version (docs/yield.md). Everything else is in archive/."""
    from mashbill.cli.make.quickstart import QUICKSTART_SPECS, quickstart_spec

    live = find_spec_files(LIBRARY)
    every = find_spec_files(LIBRARY, archived=True)
    archived = [f for f in every if ARCHIVE in f.relative_to(LIBRARY).parts]
    assert archived and all(f not in live for f in archived)
    quick = {p.stem for p in (quickstart_spec(n) for n in (*QUICKSTART_SPECS, "quickstart-preference"))}
    # a version a live preference spec takes its pairs from stays live too (plan-moe@6 for plan-preference@6,
    # while plan-moe@8 runs the newer rule set)
    for f in live:
        src = load_spec(f).spec.curation.preference.source_spec
        if src:
            quick.add(Path(src).stem)
    assert all(ARCHIVE not in find_spec(q).parts for q in quick), "the quick start runs a live version"
    live_v, all_v = _versions(live), _versions(every)
    for name, versions in live_v.items():
        assert max(versions) == max(all_v[name]), f"{name}@{max(versions)} is live but a higher version is archived"
        extra = {f"{name}@{v}" for v in versions if v != max(versions)} - quick
        assert not extra, f"superseded versions {sorted(extra)} belong in archive/"


def test_an_archived_version_resolves_by_name_and_version_with_its_locked_hash():
    lock = json.loads((LIBRARY / "specs.lock").read_text(encoding="utf-8"))
    archived = [f for f in find_spec_files(LIBRARY, archived=True) if ARCHIVE in f.parts]
    for f in archived:
        assert find_spec(f.stem) == f
        rs = load_spec(f)
        assert rs.hash == lock[f.stem], f"{f.stem}: its hash changed when it was archived"
        # references resolve from its kind's folder, as before it moved
        assert rs.home == LIBRARY / f.parent.name
    # the name alone takes the live (highest) version, never an archived one
    name = archived[0].stem.partition("@")[0]
    assert ARCHIVE not in find_spec(name).parts


def test_spec_ls_lists_live_versions_and_check_covers_the_archive():
    runner = CliRunner()
    ls = runner.invoke(main, ["spec", "ls", "--json"])
    assert ls.exit_code == 0, ls.output
    listed = {r["spec"] for r in json.loads(ls.output)}
    archived = {f.stem for f in find_spec_files(LIBRARY, archived=True) if ARCHIVE in f.parts}
    assert listed and not listed & archived
    check = runner.invoke(main, ["spec", "check", "--json"])
    assert check.exit_code == 0, check.output
    checked = {r["spec"] for r in json.loads(check.output)}
    assert archived <= checked and listed <= checked
    assert all(re.fullmatch(r"[a-z0-9-]+@\d+", s) for s in checked)


def test_an_archived_preference_spec_still_finds_its_archived_source_spec():
    """A preference spec names its plan spec by a path beside it (../quickstart/quickstart-plan@N.yaml); once both
    are archived, the path is read from the kind folder and the plan spec found in the archive by its file name."""
    from mashbill.curation.preference.preference import source_spec_of

    archived = [f for f in find_spec_files(LIBRARY, archived=True)
                if ARCHIVE in f.parts and f.parent.name == "preference"]
    assert archived
    for f in archived:
        rs = load_spec(f)
        src = source_spec_of(rs)
        assert src.ref == rs.spec.curation.preference.source_spec.rpartition("/")[2].removesuffix(".yaml")
