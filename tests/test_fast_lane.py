"""The fast lane's marks: scripts/slow_tests.py reads a --durations=0 run into tests/durations.json, and
tests/conftest.py puts every test measured at SLOW_S seconds or more in the slow lane."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

from tests.conftest import ROOT, SLOW_S


def _script():
    spec = importlib.util.spec_from_file_location("slow_tests", ROOT / "scripts" / "slow_tests.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_setup_call_and_teardown_are_summed_per_test():
    log = """============================= slowest durations =============================
12.50s call     tests/a/test_x.py::test_one[p-1]
2.00s setup    tests/a/test_x.py::test_one[p-1]
0.40s call     tests/b/test_y.py::test_two
1.00s setup    tests/b/test_y.py::test_two@quickstart
0.50s call     tests/c/test_z.py::test_three[a@b]
0.30s teardown tests/a/test_x.py::test_one[p-1]
(2 durations < 0.005s hidden.  Use -vv to show these durations.)
1 passed in 3.0s"""
    assert _script().durations(log) == {"tests/a/test_x.py::test_one[p-1]": 14.8, "tests/b/test_y.py::test_two": 1.4,
                                        "tests/c/test_z.py::test_three[a@b]": 0.5}


def test_a_measured_slow_test_is_left_out_of_the_fast_lane(tmp_path):
    """Against pytest itself: a test listed at SLOW_S or more is deselected by -m "not slow", one listed under it
    is not (the conftest reads the committed file; this checks the file's tests are the ones it marks)."""
    measured = json.loads((ROOT / "tests" / "durations.json").read_text(encoding="utf-8"))
    slow = sorted(n for n, s in measured.items() if s >= SLOW_S and n.startswith("tests/cli/test_spec_cli.py"))
    fast = sorted(n for n, s in measured.items() if s < SLOW_S and n.startswith("tests/cli/test_spec_cli.py"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-m", "not slow", "-p",
                           "no:cacheprovider", "tests/cli/test_spec_cli.py"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    collected = {line.strip() for line in proc.stdout.splitlines() if "::" in line}
    assert fast and slow and set(fast) <= collected and not set(slow) & collected


def test_tests_that_share_a_costly_fixture_run_on_one_xdist_worker(tmp_path):
    """The suite's own grouping hook under real pytest-xdist (scripts/test.sh's options): two tests in two files
    that use `quickstart` run on the same worker and build the session fixture once; on pytest 9.2 with
    pytest-xdist 3.8 this fails (the group never reaches the scheduler, pytest-dev/pytest-xdist#1386)."""
    (tmp_path / "conftest.py").write_text(f"""import os, sys
import pytest
sys.path.insert(0, {str(ROOT)!r})
from tests.conftest import pytest_collection_modifyitems  # noqa: F401,E402  (the suite's grouping hook)


@pytest.fixture(scope="session")
def quickstart():
    with open({str(tmp_path / "built")!r}, "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
""", encoding="utf-8")
    for name in ("a", "b"):
        (tmp_path / f"test_{name}.py").write_text(
            "def test_grouped(quickstart):\n    pass\n\n\n"
            + "".join(f"def test_plain_{i}():\n    pass\n\n\n" for i in range(4)), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2", "--dist",
                           "loadgroup", "--no-loadscope-reorder", str(tmp_path)], cwd=tmp_path, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    grouped = [line.split()[0] for line in proc.stdout.splitlines()
               if line.startswith("[gw") and "::test_grouped@quickstart" in line]
    assert len(grouped) == 2 and len(set(grouped)) == 1, proc.stdout
    assert len((tmp_path / "built").read_text().split()) == 1  # the costly fixture was built once
