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

# The fast lane (`scripts/test.sh --fast`, -m "not slow") leaves out every test that needs one of these: the quick
# start, a real llama.cpp server, a trained or exported student, the dequantized SmolLM2 or a real Argilla server
# each cost minutes. Tests that are slow for another reason carry @pytest.mark.slow themselves.
SLOW_FIXTURES = {"quickstart", "rehearsal", "llama_server", "classify_run", "lora_run", "onnx_export", "gguf_export", "smol_base",
                 "argilla"}


# Measured durations (setup + call + teardown, seconds) of a whole quiet run: `python scripts/slow_tests.py LOG`
# writes them from `scripts/test.sh --durations=0` output. A test that took SLOW_S or more is in the slow lane too,
# so the fast lane stays fast without a mark in every file; a test not measured yet runs in the fast lane.
DURATIONS = ROOT / "tests" / "durations.json"
SLOW_S = 1.0


def measured_slow() -> set[str]:
    import json

    if not DURATIONS.is_file():
        return set()
    return {node for node, s in json.loads(DURATIONS.read_text(encoding="utf-8")).items() if s >= SLOW_S}


# The suite runs on two pytest-xdist workers (scripts/test.sh: -n 2 --dist loadgroup). A session fixture is built
# once per worker that uses it, so every test that needs one of these costly ones goes to one worker as a group
# (the first group named in this order wins for a test that uses two). Under xdist the grouped tests are collected
# first, in this order, so that the quick start's chain (the longest) starts at once on a worker of its own.
XDIST_GROUPS = (("quickstart", {"quickstart"}),
                ("exporters", {"plan_snapshot", "classify_run", "lora_run", "onnx_export", "gguf_export"}),
                ("argilla", {"argilla"}),
                ("llama_server", {"llama_server"}),
                ("trainers", {"smol_base", "snaps"}),
                ("rehearsal", {"rehearsal"}))


def xdist_group(fixturenames) -> str | None:
    names = set(fixturenames)
    return next((group for group, fixtures in XDIST_GROUPS if fixtures & names), None)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the xdist_group marks into the node ids
def pytest_collection_modifyitems(config, items):
    slow = measured_slow()
    rank = {group: i for i, (group, _) in enumerate(XDIST_GROUPS)}
    order = {}
    for i, item in enumerate(items):
        names = getattr(item, "fixturenames", ())
        if SLOW_FIXTURES & set(names) or item.nodeid in slow:
            item.add_marker(pytest.mark.slow)
        group = xdist_group(names)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
        order[item.nodeid] = (rank.get(group, len(rank)), i)
    if hasattr(config, "workerinput"):  # an xdist worker: every worker sorts alike, so the collections agree
        items.sort(key=lambda item: order[item.nodeid])


@pytest.fixture
def tiny_specs(tmp_path) -> Path:
    """A private copy of the tiny test specs, safe to edit."""
    dst = tmp_path / "specs"
    shutil.copytree(FIXTURE_SPECS, dst)
    return dst


def small_disk(limit: int):
    """A preexec_fn for a child whose every write past `limit` bytes per file fails in the kernel (EFBIG, as on
    a full disk): RLIMIT_FSIZE with SIGXFSZ ignored, so the write fails instead of killing the child. No root
    needed, unlike mounting a small filesystem."""
    import resource
    import signal

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def run_cli(*args: str, cwd: Path | None = None, check: bool = False, timeout: int = 600, env=None):
    """Run the real `mashbill` CLI in a subprocess (as a user would)."""
    proc = subprocess.run([*MASHBILL, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"mashbill {' '.join(map(str, args))} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_line_error(proc, *needles) -> str:
    """A CLI subprocess refused its input as the convention says: exit 2 and exactly one `error: ` line on stderr,
    holding each of `needles`; returns that line."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture(scope="session")
def minilm(tmp_path_factory):
    """The real all-MiniLM-L6-v2 encoder; its ONNX graph is built once per session into a private folder."""
    from mashbill.factory.encoders.embeddings import Encoder

    return Encoder.load(build_dir=tmp_path_factory.mktemp("encoders"))


@pytest.fixture(scope="session")
def quickstart(tmp_path_factory):
    """One `mashbill quickstart --no-progress` per test session (it is the slowest command we have): the folder it
    ran in (store in ./mashbill-data) and the finished process. tests/cli/test_quickstart_cli.py and
    tests/cli/test_quickstart_chain.py share it. MASHBILL_TEST_QUICKSTART=FOLDER (local use only, CI never sets
    it) starts from a copy of an earlier quick start's store, so the run is a resume that asks the teacher
    nothing."""
    folder = tmp_path_factory.mktemp("quickstart")
    earlier = os.environ.get("MASHBILL_TEST_QUICKSTART")
    if earlier:
        shutil.copytree(Path(earlier) / "mashbill-data", folder / "mashbill-data")
    proc = run_cli("quickstart", "--no-progress", cwd=folder, timeout=3000)
    assert proc.returncode == 0, proc.stderr
    return folder, proc

