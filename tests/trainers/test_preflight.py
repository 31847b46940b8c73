"""The preflight refuses, in one line naming both values and before any model is loaded, a run that cannot
learn what was validated; the CLI exits 2 and writes no run folder (docs: README "Train")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mashbill.trainers.config import load_config
from mashbill.trainers.deepspeed import DeepSpeedConfigError, check_deepspeed
from mashbill.trainers.preflight import PreflightError, run_preflight
from mashbill.trainers.slurm import ZERO2, ZERO3
from tests.conftest import run_cli

SMOL = "embedded:smollm2-135m-instruct"


def _pf(path):
    cfg, p = load_config(path)
    return run_preflight(cfg, p.parent)


def test_a_config_that_matches_the_snapshot_passes_without_a_recheck(snaps, tmp_path):
    pf = _pf(snaps.config(tmp_path, "ok", method="sft", snapshot="tplan@1", base_model=SMOL))
    assert pf.format == "messages" and pf.rechecked == 0 and pf.profile["max_seq_len"] == 512
    assert pf.profile["loss"] == "assistant-only"


def test_a_window_that_cuts_targets_is_refused(snaps, tmp_path):
    """The reference's 1,536-token window cut every target of 259,829 examples for 3 epochs."""
    cfg = snaps.config(tmp_path, "cut", method="sft", snapshot="tplan@1", base_model=SMOL,
                       profile={"max_seq_len": 40})
    with pytest.raises(PreflightError) as exc:
        _pf(cfg)
    msg = str(exc.value)
    assert "\n" not in msg and "max_seq_len 40 (config) vs 512 (snapshot)" in msg
    import re

    m = re.search(r"(\d+) of (\d+) example\(s\) would lose their target", msg)
    assert m and m.group(1) == m.group(2) and int(m.group(1)) >= 18 and "SPAN00" in msg
    proc = run_cli("train", "sft", cfg, "--out", tmp_path / "run", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "would lose their target" in proc.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "run.work").exists()


def test_a_smaller_window_that_still_fits_passes_after_rechecking_every_example(snaps, tmp_path):
    longest = json.loads((snaps.plan / "manifest.json").read_text())["tokens"]["max"]
    pf = _pf(snaps.config(tmp_path, "fits", method="sft", snapshot="tplan@1", base_model=SMOL,
                          profile={"max_seq_len": longest + 1}))
    assert pf.rechecked >= 18 and "no target cut" in pf.notes[-1]
    with pytest.raises(PreflightError, match="SPAN001"):
        _pf(snaps.config(tmp_path, "fits2", method="sft", snapshot="tplan@1", base_model=SMOL,
                         profile={"max_seq_len": longest - 2}))


def test_a_changed_truncation_side_rechecks_every_example(snaps, tmp_path):
    pf = _pf(snaps.config(tmp_path, "left", method="sft", snapshot="tplan@1", base_model=SMOL,
                          profile={"truncation_side": "left"}))
    assert pf.rechecked >= 18 and "truncation_side left (config) vs right (snapshot)" in pf.notes[-1]
    assert pf.profile["truncation_side"] == "left"


def test_the_recheck_takes_one_worker_per_cpu_this_process_may_use_at_most_four(snaps, tmp_path, monkeypatch):
    """A big snapshot is rechecked in forked workers: as many as the CPUs the process may use (its affinity: a
    one-core SLURM allocation gets one, not four), at most MAX_WORKERS, each example once whatever their number."""
    import multiprocessing

    from mashbill import cpus
    from mashbill.trainers import preflight

    monkeypatch.setattr(preflight, "PARALLEL_FROM", 1)  # the test snapshot is small
    fork = multiprocessing.get_context("fork")
    real_pool, started = fork.Pool, []
    monkeypatch.setattr(fork, "Pool", lambda n: started.append(n) or real_pool(n))
    rechecked = set()
    for usable, pools in ((1, []), (2, [2]), (6, [preflight.MAX_WORKERS])):
        monkeypatch.setattr(cpus, "usable_cpus", lambda: usable)
        started.clear()
        pf = _pf(snaps.config(tmp_path, f"left{usable}", method="sft", snapshot="tplan@1", base_model=SMOL,
                              profile={"truncation_side": "left"}))
        assert started == pools, usable
        rechecked.add(pf.rechecked)
    assert len(rechecked) == 1 and rechecked.pop() >= 18


def test_missing_and_tampered_snapshots_are_refused(snaps, tmp_path):
    with pytest.raises(PreflightError, match="no snapshot tplan@9"):
        _pf(snaps.config(tmp_path, "missing", method="sft", snapshot="tplan@9", base_model=SMOL))
    copy = tmp_path / "tplan@1"
    shutil.copytree(snaps.plan, copy)
    data = copy / "data" / "train.parquet"
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data.write_bytes(bytes(raw))
    with pytest.raises(PreflightError, match="data/train.parquet: sha256 differs"):
        _pf(snaps.config(tmp_path, "tampered", method="sft", snapshot=str(copy), base_model=SMOL))


def test_a_tokenizer_that_does_not_match_is_refused(snaps, tmp_path):
    from mashbill.paths import vocab_dir

    vocab = vocab_dir() / "ggml-vocab-llama-bpe.gguf"
    if not vocab.is_file():
        pytest.skip("scripts/setup.sh extracts the vocab-only GGUFs")
    with pytest.raises(PreflightError, match=r"tokenizer .*ggml-vocab-llama-bpe.gguf \(sha256 \w{12}\) is not the "
                                             r"snapshot's embedded:smollm2-135m-instruct"):
        _pf(snaps.config(tmp_path, "tok", method="sft", snapshot="tplan@1", base_model=SMOL,
                         profile={"tokenizer": str(vocab)}))


def test_assistant_only_loss_needs_generation_markers(snaps, tmp_path):
    plain = tmp_path / "plain.jinja"  # SmolLM2's own ChatML: renders the same, but has no markers
    plain.write_text("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
                     "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
                     "}}{% endif %}")
    with pytest.raises(PreflightError, match=r"loss assistant-only needs a chat template with \{% generation %\}"):
        _pf(snaps.config(tmp_path, "nomarkers", method="sft", snapshot="tplan@1", base_model=SMOL,
                         profile={"chat_template": str(plain)}))
    # the same template is fine for completion-only loss on the prompt-completion pull
    pf = _pf(snaps.config(tmp_path, "pc", method="sft", snapshot="tplan@1", base_model=SMOL, format="prompt-completion",
                          profile={"chat_template": str(plain), "loss": "completion-only"}))
    assert pf.format == "prompt-completion" and pf.rechecked > 0


def test_a_template_that_would_train_the_wrong_turn_is_refused(snaps, tmp_path):
    every_turn = snaps.root / "shared" / "templates" / "chatml-generation@1.jinja"
    with pytest.raises(PreflightError, match="would train the wrong first plan"):
        _pf(snaps.config(tmp_path, "wrongturn", method="sft", snapshot="tpref@1", base_model=SMOL,
                         profile={"chat_template": str(every_turn), "loss": "assistant-only"}))
    # the snapshot's own training template (last turn only) passes
    assert _pf(snaps.config(tmp_path, "lastturn", method="sft", snapshot="tpref@1", base_model=SMOL)).rechecked == 0


def test_dpo_needs_a_preference_snapshot(snaps, tmp_path):
    with pytest.raises(PreflightError, match="method dpo needs a preference snapshot; tplan@1 is kind plan"):
        _pf(snaps.config(tmp_path, "dpo-plan", method="dpo", snapshot="tplan@1", base_model=SMOL))


# ---------------------------------------------------------------- DeepSpeed


def _ds(tmp_path, snaps, data, **cfg_fields):
    path = tmp_path / "ds.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    cfg = snaps.config(tmp_path, "ds", method="sft", snapshot="tplan@1", base_model=SMOL, deepspeed=str(path),
                       **cfg_fields)
    return cfg, path


def test_a_deepspeed_scheduler_that_would_replace_the_configs_is_refused(snaps, tmp_path):
    """The reference's ZeRO-2 JSON carried WarmupDecayLR; the HF Trainer silently used it instead of cosine."""
    cfg, _ = _ds(tmp_path, snaps, {**ZERO2, "scheduler": {"type": "WarmupDecayLR", "params": {
        "warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto", "total_num_steps": "auto"}}},
        schedule={"lr_scheduler": "cosine"})
    with pytest.raises(PreflightError, match="scheduler WarmupDecayLR would silently replace the config's "
                                             "lr_scheduler cosine"):
        _pf(cfg)
    proc = run_cli("train", "check", cfg, cwd=tmp_path)
    assert proc.returncode == 2 and "silently replace" in proc.stderr


def test_deepspeed_blocks_that_agree_or_say_auto_pass(snaps, tmp_path):
    cfg, path = _ds(tmp_path, snaps, {**ZERO2, "scheduler": {"type": "WarmupDecayLR", "params": {
        "warmup_max_lr": "auto", "warmup_num_steps": "auto", "total_num_steps": "auto"}},
        "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}}},
        schedule={"lr_scheduler": "linear"})
    assert _pf(cfg).format == "messages"
    c, _ = load_config(cfg)
    for preset in (ZERO2, ZERO3):
        path.write_text(json.dumps(preset))
        check_deepspeed(path, c)


@pytest.mark.parametrize("data, match", [
    ('{"zero_optimization": {"stage": 2,}', r"ds.json line 1: not valid JSON"),
    ({"zero_optimization": {"stage": 7}}, r"zero_optimization.stage: Input should be 0, 1, 2, 3"),
    ({"zero_optimization": {"stage": 2, "overlap_com": True}}, r"zero_optimization.overlap_com: Extra inputs"),
    ({"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, r"optimizer.params.lr 0.001 differs from the "
                                                               r"config's 0.0002"),
    ({"optimizer": {"type": "Lamb"}}, r"optimizer Lamb would silently replace the config's optimizer adamw_torch"),
    ({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 100}}}, r"scheduler WarmupLR would silently"),
])
def test_malformed_or_overriding_deepspeed_json_is_refused(snaps, tmp_path, data, match):
    cfg, path = _ds(tmp_path, snaps, data)
    c, _ = load_config(cfg)
    with pytest.raises(DeepSpeedConfigError, match=match):
        check_deepspeed(path, c)


def test_bad_config_files_are_one_line_refusals(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmethod: sft\nsnapshot: a@1\nbase_model: m\nschedule: {batch_sise: 4}\n")
    proc = run_cli("train", "check", bad, cwd=tmp_path)
    assert proc.returncode == 2 and "field schedule.batch_sise: Extra inputs are not permitted" in proc.stderr
    proc = run_cli("train", "sft", bad.with_name("nope.yaml"), cwd=tmp_path)
    assert proc.returncode == 2 and "training config not found" in proc.stderr
    ok = tmp_path / "ok.yaml"
    ok.write_text("name: x\nmethod: dpo\nsnapshot: a@1\nbase_model: m\n")
    proc = run_cli("train", "sft", ok, cwd=tmp_path)
    assert proc.returncode == 2 and "run it with `mashbill train dpo`" in proc.stderr
