"""Shared fixtures: real DuckDB files in tmp_path, the real embedded model, the tiny test specs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_SPECS = ROOT / "tests" / "fixtures" / "specs"
MASHBILL = [sys.executable, "-m", "mashbill"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
def tiny_specs(tmp_path) -> Path:
    """A private copy of the tiny test specs, safe to edit."""
    dst = tmp_path / "specs"
    shutil.copytree(FIXTURE_SPECS, dst)
    return dst


def run_cli(*args: str, cwd: Path | None = None, check: bool = False, timeout: int = 600, env=None):
    """Run the real `mashbill` CLI in a subprocess (as a user would)."""
    proc = subprocess.run([*MASHBILL, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"mashbill {' '.join(map(str, args))} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def minilm(tmp_path_factory):
    """The real all-MiniLM-L6-v2 encoder; its ONNX graph is built once per session into a private folder."""
    from mashbill.factory.embeddings import Encoder

    return Encoder.load(build_dir=tmp_path_factory.mktemp("encoders"))
