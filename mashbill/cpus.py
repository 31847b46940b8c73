"""The CPUs this process may use: its affinity (as SLURM, taskset and containers set it), else the machine's."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1
