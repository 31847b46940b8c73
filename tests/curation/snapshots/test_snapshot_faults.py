"""Snapshots under faults: a full disk during freeze (case 7), temporaries of killed freezes (case 16), renamed
folders and deleted manifests (cases 11 and 13). The one-line CLI errors are in tests/test_bad_input.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from mashbill.curation.snapshots.pull import load_snapshot
from mashbill.curation.snapshots.snapshot import IntegrityError, SnapshotError, freeze, incomplete_dirs, verify
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from tests.conftest import MASHBILL, small_disk
from tests.curation.conftest import add_records


@pytest.fixture
def plan_store(lib, tmp_path):
    path = lib.write("plan-t")
    with Store.open(tmp_path / "store") as store:
        add_records(store, load_spec(path))
    return path, tmp_path / "store"


def test_disk_full_during_freeze_is_one_line_and_leaves_nothing(plan_store):
    spec, store = plan_store
    proc = subprocess.run([*MASHBILL, "snapshot", "freeze", str(spec), "--name", "plans", "--version", "1",
                           "--store", str(store), "--no-tokens"], capture_output=True, text=True, timeout=300,
                          preexec_fn=small_disk(8192))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: cannot write snapshot plans@1") and "File too large" in line
    assert "nothing was written" in line
    assert list((store / "snapshots").iterdir()) == []  # not even a temporary folder
    res = freeze(spec, store_path=store, name="plans", version="1", tokens=False)  # with room, it works
    assert verify(res.path)["ref"] == "plans@1"


def test_a_killed_freeze_leaves_a_temporary_the_next_freeze_removes(plan_store, tmp_path):
    spec, store = plan_store
    root = store / "snapshots"
    root.mkdir()
    # a freeze process that dies after making its temporary folder (what kill -9 mid-freeze leaves)
    code = ("import os, sys; d = os.path.join(sys.argv[1], f'.tmp-plans@1-{os.getpid()}-0123abcd'); "
            "os.makedirs(os.path.join(d, 'data')); open(os.path.join(d, 'data', 'train.parquet'), 'w').close(); "
            "os._exit(9)")
    subprocess.run([sys.executable, "-c", code, str(root)])
    live = root / f".tmp-plans@2-{os.getpid()}-89abcdef"  # a freeze still running (this process): kept
    live.mkdir()
    [dead] = [d for d in incomplete_dirs(root) if d != live]
    freeze(spec, store_path=store, name="plans", version="1", tokens=False)
    assert not dead.exists() and live.exists()
    assert sorted(d.name for d in root.iterdir()) == sorted(["plans@1", live.name])


def test_a_renamed_snapshot_is_refused_under_its_new_name(plan_store):
    spec, store = plan_store
    res = freeze(spec, store_path=store, name="plans", version="1", tokens=False)
    renamed = res.path.with_name("plans@99")
    shutil.copytree(res.path, renamed)
    other = res.path.with_name("othername@1")
    shutil.copytree(res.path, other)
    for path, ref in ((renamed, "plans@99"), (other, "othername@1")):
        with pytest.raises(IntegrityError, match=f"holds snapshot plans@1, but the folder is named {ref}"):
            verify(path)
        with pytest.raises(IntegrityError, match="renamed"):
            load_snapshot(ref, root=store / "snapshots")
    assert verify(res.path)["ref"] == "plans@1"


def test_a_deleted_manifest_is_named(plan_store):
    spec, store = plan_store
    res = freeze(spec, store_path=store, name="plans", version="1", tokens=False)
    (res.path / "manifest.json").unlink()
    with pytest.raises(SnapshotError, match=r"plans@1 has no manifest\.json"):
        load_snapshot("plans@1", root=store / "snapshots")
