"""The CPUs a process may use: its affinity where the system has one (a SLURM allocation, taskset)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mashbill.cpus import usable_cpus, worker_count


def _pinned_to_one_cpu(expression: str) -> str:
    """What `expression` (over mashbill.cpus) prints in a child pinned to one CPU, as a one-core SLURM allocation
    pins a job."""
    one = min(os.sched_getaffinity(0))
    return subprocess.run([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{one}}}); "
                           f"from mashbill.cpus import *; print({expression})"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_usable_cpus_follow_the_process_affinity():
    if not hasattr(os, "sched_setaffinity"):
        assert usable_cpus() == (os.cpu_count() or 1)
        pytest.skip("no CPU affinity on this system")
    assert usable_cpus() == len(os.sched_getaffinity(0)) >= 1
    assert _pinned_to_one_cpu("usable_cpus()") == "1"


def test_a_job_takes_one_worker_below_its_threshold_else_the_usable_cpus_at_most_its_cap():
    usable = usable_cpus()
    assert worker_count(9, 10, 4) == 1
    assert worker_count(10, 10, 4) == min(usable, 4)
    assert worker_count(10**6, 10, 1) == 1
    if hasattr(os, "sched_setaffinity"):
        assert _pinned_to_one_cpu("worker_count(10**6, 10, 4)") == "1"
