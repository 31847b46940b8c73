"""The CPUs this process may use: its affinity (as SLURM, taskset and containers set it), else the machine's."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def worker_count(items: int, parallel_from: int, most: int) -> int:
    """How many worker processes a job of `items` items takes: one below `parallel_from` (a worker's start would
    outweigh its share), else the CPUs this process may use, at most `most` (each worker holds its own model or
    tokenizer)."""
    return min(usable_cpus(), most) if items >= parallel_from else 1
