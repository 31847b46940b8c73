"""The embedded teacher's default thread count (issue 26): the cores this process may use less the busy ones, at
least one. On a 2-core machine at load 6-14, two llama.cpp threads spent most of their time waiting on each other
(35 minutes for the quick start's plans where one thread took 10)."""

from __future__ import annotations

import os

from mashbill.factory.teachers.llama_cpp import free_cores


def test_an_idle_machine_gets_every_core_as_before():
    assert free_cores(2, 0.0, 0.0, 2) == 2
    assert free_cores(16, 0.3, 0.2, 16) == 16


def test_a_busy_machine_gets_the_free_cores_and_never_fewer_than_one():
    assert free_cores(2, 1.1, 1.2, 2) == 1
    assert free_cores(2, 6.0, 2.0, 2) == 1
    assert free_cores(16, 10.2, 10.0, 16) == 6
    assert free_cores(1, 0.0, 0.0, 1) == 1


def test_the_load_of_the_step_this_process_just_finished_does_not_count():
    """The quick start's plan step starts right after its complexity step: the 1-minute load average still
    shows that step, the cores busy now do not."""
    assert free_cores(2, 1.8, 0.1, 2) == 2


def test_an_allocation_on_a_big_busy_node_keeps_its_own_cores():
    """SLURM gave this job 4 of 64 cores; other jobs keep 30 busy elsewhere."""
    assert free_cores(4, 30.0, 30.0, 64) == 4


def test_the_default_reads_this_process_affinity_and_the_load_average():
    cores = len(os.sched_getaffinity(0))
    got = free_cores()
    assert 1 <= got <= cores
