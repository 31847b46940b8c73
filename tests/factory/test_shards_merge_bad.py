"""Bad input to `mashbill merge` at scale (issue 29): a shard store of another spec, a shard still `running`, a
merge target that exists and is not a store, a disk that fills during the merge. Each is one line, exit 2, and
leaves no half-made output store. (A disk that fills during freeze: tests/curation/snapshots/test_snapshot_faults.py; a
missing shard store: tests/cli/test_merge_cli.py; records outside their shard: test_shards_merge.py.)"""

from __future__ import annotations

import subprocess

import pytest

from mashbill.cli.make.generate import run_generate
from mashbill.factory.store import Store
from tests.conftest import MASHBILL, small_disk
from tests.factory.rehearsal import seed_rows, write_seeds, write_spec
from tests.factory.replay_server import ReplayServer, build_corpus
from tests.factory.teacher_helpers import sql


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Two shard stores 0/2 and 1/2 of a replay spec, and a store of another spec under the same name@version."""
    root = tmp_path_factory.mktemp("shards")
    corpus = build_corpus()
    spec = write_spec(root / "a", "complexity", write_seeds(root / "a.jsonl", seed_rows("complexity", 60, corpus)))
    other = write_spec(root / "b", "complexity", write_seeds(root / "b.jsonl", seed_rows("complexity", 40, corpus)))
    with ReplayServer(corpus) as server:
        for i in range(2):
            run_generate(str(spec), root / f"s{i}", shard=(i, 2), progress=False, base_url=server.url)
        run_generate(str(other), root / "other", shard=(1, 2), progress=False, base_url=server.url)
    return {"root": root, "spec": spec, "corpus": corpus}


def merge(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*MASHBILL, "merge", *map(str, args)], capture_output=True, text=True, timeout=300, **kw)


def one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    return line


def test_a_shard_store_of_another_spec_is_one_line_and_merges_nothing(shards, tmp_path):
    root = shards["root"]
    line = one_line(merge(tmp_path / "out", root / "s0", root / "other"))
    assert str(root / "other") in line and "replay-complexity@1" in line and "another spec" in line
    assert not (tmp_path / "out").exists()
    # into an existing store that holds the other spec: refused too, and the store is as it was
    assert merge(tmp_path / "kept", root / "other").returncode == 0
    before = sql(tmp_path / "kept", "SELECT count(*) FROM records")
    line = one_line(merge(tmp_path / "kept", root / "s0"))
    assert "the output store" in line
    assert sql(tmp_path / "kept", "SELECT count(*) FROM records") == before


def test_a_shard_still_running_is_one_line_until_it_is_resumed(shards, tmp_path):
    """A generate killed with SIGKILL leaves its run `running`: merge refuses it; the resumed run merges whole."""
    corpus = shards["corpus"]
    spec = write_spec(tmp_path / "k", "complexity", write_seeds(tmp_path / "k.jsonl",
                                                                seed_rows("complexity", 400, corpus)),
                      runtime={"batch_size": 8, "concurrency": 1})
    store = tmp_path / "killed"
    with ReplayServer(corpus) as server:
        proc = subprocess.Popen([*MASHBILL, "generate", str(spec), "--store", str(store), "--base-url", server.url,
                                 "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while sum(server.served.values()) < 40 and proc.poll() is None:
            server.answered.wait(5)
            server.answered.clear()
        proc.kill()
        proc.wait()
        assert proc.returncode == -9  # killed mid-run, not finished
        line = one_line(merge(tmp_path / "out", store))
        assert str(store) in line and "still running" in line and "replay-complexity@1" in line
        assert not (tmp_path / "out").exists()
        resumed = run_generate(str(spec), store, progress=False, base_url=server.url)
    assert resumed.requested + resumed.skipped == 400
    assert merge(tmp_path / "out", store).returncode == 0
    assert sql(tmp_path / "out", "SELECT count(*), count(DISTINCT record_id) FROM records") == [(400, 400)]


def test_a_shard_held_by_a_live_writer_is_one_line(shards, tmp_path):
    root = shards["root"]
    with Store.open(root / "s1"):  # a generate still writing holds the store's write lock
        line = one_line(merge(tmp_path / "out", root / "s0", root / "s1"))
    assert str(root / "s1") in line and "locked by another process" in line
    assert not (tmp_path / "out").exists()


def test_a_merge_target_that_exists_and_is_not_a_store_is_one_line(shards, tmp_path):
    root = shards["root"]
    target = tmp_path / "results"
    target.mkdir()
    (target / "notes.txt").write_text("mine\n")
    line = one_line(merge(target, root / "s0", root / "s1"))
    assert str(target) in line and "is not a mashbill store" in line and "notes.txt" in line
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]
    # an earlier merge's store is a valid target: merging again adds nothing
    assert merge(tmp_path / "m", root / "s0").returncode == 0
    assert merge(tmp_path / "m", root / "s0", root / "s1").returncode == 0
    assert sql(tmp_path / "m", "SELECT count(*) FROM records") == [(60,)]


def test_a_disk_that_fills_during_the_merge_is_one_line_and_leaves_nothing(shards, tmp_path):
    root = shards["root"]
    line = one_line(merge(tmp_path / "out", root / "s0", root / "s1", preexec_fn=small_disk(200_000)))
    assert "File too large" in line and "nothing of it was stored" in line
    assert not (tmp_path / "out").exists()
    assert merge(tmp_path / "out", root / "s0", root / "s1").returncode == 0  # with room, it works
