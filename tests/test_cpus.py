"""The CPUs a process may use: its affinity where the system has one (a SLURM allocation, taskset)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mashbill.cpus import usable_cpus


def test_usable_cpus_follow_the_process_affinity():
    if not hasattr(os, "sched_setaffinity"):
        assert usable_cpus() == (os.cpu_count() or 1)
        pytest.skip("no CPU affinity on this system")
    assert usable_cpus() == len(os.sched_getaffinity(0)) >= 1
    one = min(os.sched_getaffinity(0))
    # a child pinned to one CPU, as a one-core SLURM allocation pins a job
    out = subprocess.run([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{one}}}); "
                          "from mashbill.cpus import usable_cpus; print(usable_cpus())"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "1"
