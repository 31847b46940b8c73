"""`mashbill slurm train` runs the preflight here before writing any script (README "Cluster hand-off"): a
config whose window cuts every target is refused in one line, exit 2, and no script folder is written; a
config that passes is written with the MI250X warnings (eager attention, bf16, a DeepSpeed JSON)."""

from __future__ import annotations

from tests.cli.conftest import error_lines, invoke


def test_slurm_train_refuses_what_the_preflight_refuses_and_writes_nothing(snaps, tmp_path):
    cfg = snaps.config(tmp_path, "cut-on-lumi", method="sft", snapshot="tplan@1",
                       base_model="embedded:smollm2-135m-instruct", profile={"max_seq_len": 40})
    res = invoke("slurm", "train", cfg, "--out", tmp_path / "job", "--account", "project_465000000")
    assert res.exit_code == 2, res.output
    [line] = error_lines(res)
    assert "max_seq_len 40 (config) vs 512 (snapshot)" in line and "would lose their target" in line
    assert not (tmp_path / "job").exists()


def test_slurm_train_warns_about_what_the_mi250x_stack_needs(snaps, tmp_path):
    cfg = snaps.config(tmp_path, "sdpa-fp32", method="sft", snapshot="tplan@1",
                       base_model="embedded:smollm2-135m-instruct", attn_implementation="sdpa")
    res = invoke("slurm", "train", cfg, "--out", tmp_path / "job", "--account", "project_465000000")
    assert res.exit_code == 0, res.output
    text = res.output
    assert "precision fp32; MI250X runs train in bf16" in text
    assert "attn_implementation sdpa" in text and "no deepspeed JSON" in text
    assert (tmp_path / "job" / "train.sbatch").is_file() and (tmp_path / "job" / "zero2.json").is_file()
