"""The embedded teacher's default thread count (issue 26): the cores this process may use less the busy ones, at
least one. On a 2-core machine at load 6-14, two llama.cpp threads spent most of their time waiting on each other
(35 minutes for the quick start's plans where one thread took 10)."""

from __future__ import annotations

import os

from mashbill.factory.teachers.llama_cpp import free_cores


def test_an_idle_machine_gets_every_core_as_before():
    assert free_cores(2, 0.0) == 2
    assert free_cores(16, 0.3) == 16


def test_a_busy_machine_gets_the_free_cores_and_never_fewer_than_one():
    assert free_cores(2, 1.1) == 1
    assert free_cores(2, 6.0) == 1
    assert free_cores(16, 10.2) == 6
    assert free_cores(1, 0.0) == 1


def test_the_default_reads_this_process_affinity_and_the_load_average():
    cores = len(os.sched_getaffinity(0))
    got = free_cores()
    assert 1 <= got <= cores
