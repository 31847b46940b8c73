"""`snapshot pull --out` writes what plain TRL needs beside the rows (issue 26): with TRL's default max_length of
1024 the quick start's 2,370-token example silently lost its whole target. scripts/plain_trl.py (shown in
docs/snapshots.md) reads only the pulled files and trains SFT and DPO with real TRL on SmolLM2-135M."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import invoke
from tests.trainers.conftest import smol_base, snaps  # noqa: F401  (session fixtures: snapshots, base model)

pytest.importorskip("trl")
ROOT = Path(__file__).resolve().parents[2]


def _pull(snapshot: Path, fmt: str, out: Path) -> dict:
    res = invoke("snapshot", "pull", str(snapshot), "--format", fmt, "--out", str(out), "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _train(pull: Path, base: Path, out: Path) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "plain_trl.py"), str(pull), str(base), str(out),
                           "--max-steps", "2"], capture_output=True, text=True, env=env, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "train_result.json").read_text())


def test_pull_writes_the_sft_settings_the_snapshot_needs(snaps, tmp_path):
    out = tmp_path / "sft"
    written = _pull(snaps.plan, "messages", out)["written"]
    assert str(out / "sft_config.json") in written
    manifest = json.loads((snaps.plan / "manifest.json").read_text())
    settings = json.loads((out / "sft_config.json").read_text())
    assert settings == {"max_length": manifest["trainer_profile"]["max_seq_len"], "truncation_mode": "keep_start",
                        "assistant_only_loss": True, "chat_template_path": str((out / "chat_template.jinja").resolve())}
    pc = _pull(snaps.plan, "prompt-completion", tmp_path / "pc")
    assert json.loads((tmp_path / "pc" / "sft_config.json").read_text())["completion_only_loss"] is True
    assert not any(p.endswith("dpo_config.json") for p in pc["written"])


def test_plain_trl_trains_sft_from_the_pulled_files_alone(snaps, smol_base, tmp_path):
    _pull(snaps.plan, "messages", tmp_path / "pull")
    result = _train(tmp_path / "pull", smol_base.path, tmp_path / "run")
    assert result["steps"] == 2 and result["loss"] > 0
    assert (tmp_path / "run" / "adapter" / "adapter_config.json").is_file()


def test_plain_trl_trains_dpo_from_the_pulled_files_alone(snaps, smol_base, tmp_path):
    pulled = _pull(snaps.pref, "preference", tmp_path / "pull")
    settings = json.loads((tmp_path / "pull" / "dpo_config.json").read_text())
    manifest = json.loads((snaps.pref / "manifest.json").read_text())
    assert settings["max_length"] == manifest["trainer_profile"]["max_seq_len"] != 1024
    assert str(tmp_path / "pull" / "dpo_config.json") in pulled["written"]
    result = _train(tmp_path / "pull", smol_base.path, tmp_path / "run")
    assert result["steps"] == 2 and result["loss"] > 0
