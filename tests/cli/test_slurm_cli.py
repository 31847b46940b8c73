"""`mashbill slurm generate`: the scripts for a sharded run, written to --out and listed as JSON.
(The array tasks and the merge run end to end: tests/factory/test_slurm.py.)"""

from __future__ import annotations

import json

from tests.cli.conftest import error_lines, invoke


def test_scripts_are_written_to_out(write_spec, tmp_path):
    spec = write_spec(n=4)
    res = invoke("slurm", "generate", spec, "--nodes", 3, "--out", tmp_path / "job", "--json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    names = sorted(p.rsplit("/", 1)[1] for p in got["written"])
    assert names == ["generate.sbatch", "merge.sbatch", "submit.sh"]
    assert all((tmp_path / "job" / n).is_file() for n in names) and got["submit"] == str(tmp_path / "job" / "submit.sh")
    assert "--array=0-2" in (tmp_path / "job" / "generate.sbatch").read_text(encoding="utf-8")


def test_an_embedded_teacher_is_refused(cli_store, tmp_path):
    res = invoke("slurm", "generate", cli_store.spec, "--nodes", 2, "--out", tmp_path / "job")
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and "backend: openai" in res.stderr, res.output
    assert not (tmp_path / "job").exists()


def test_a_queries_spec_gets_its_scripts(tmp_path):
    """Each array task fills its share of every quota (`generate --shard`); merge.sbatch's `mashbill merge` drops
    the cross-shard duplicates (tests/factory/generate/test_synth_shards.py runs both)."""
    from tests.factory.synth_specs import write_queries_spec

    spec = write_queries_spec(tmp_path / "lib", teacher={"backend": "openai", "model": "m",
                                                         "base_url": "http://127.0.0.1:9/v1"})
    assert invoke("spec", "lock", spec).exit_code == 0
    res = invoke("slurm", "generate", spec, "--nodes", 2, "--out", tmp_path / "job")
    assert res.exit_code == 0, res.output
    assert "--array=0-1" in (tmp_path / "job" / "generate.sbatch").read_text(encoding="utf-8")
    assert '"$MASHBILL" merge' in (tmp_path / "job" / "merge.sbatch").read_text(encoding="utf-8")
