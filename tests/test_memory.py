"""mashbill.memory: the glibc calls that give freed memory back, and their answer where the C library is another."""

import platform

import pytest

from mashbill import memory


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_trim_hands_freed_small_objects_back_to_the_system():
    # the freeze's case: millions of small objects freed at once leave their pages in glibc's heap; bytearrays of
    # 1,000 bytes are served by malloc (not Python's arena allocator) below glibc's mmap threshold
    held = [bytearray(1000) for _ in range(400_000)]
    keep = held[::1000]  # a few survivors high in the heap keep it from shrinking on its own
    del held
    before = _rss_mb()
    assert memory.trim_freed_memory() is True
    after = _rss_mb()
    assert before - after > 150, (before, after)  # ~400 MB were freed
    del keep


def test_without_glibc_neither_call_does_anything(monkeypatch):
    monkeypatch.setattr(platform, "libc_ver", lambda *a, **k: ("musl", "1.2"))
    assert memory.trim_freed_memory() is False
    assert memory.return_freed_memory() is False


def test_a_bulk_phase_collects_cycles_less_often_and_restores_the_collector():
    import gc
    import weakref

    class Node:
        pass

    before = gc.get_threshold()
    seen = []

    @memory.fewer_collections(threshold=50_000)
    def phase():
        seen.append((gc.get_threshold(), gc.get_freeze_count()))
        # a reference cycle made in the phase is still collected once the youngest generation fills
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        filler = [[] for _ in range(60_000)]  # net allocations past the threshold
        assert gone() is None
        del filler
        # 20,000 allocations do not reach it (at Python's 700 they would)
        c, d = Node(), Node()
        c.other, d.other = d, c
        kept = weakref.ref(c)
        del c, d
        filler = [[] for _ in range(20_000)]
        assert kept() is not None
        del filler

    phase()
    assert seen[0][0] == (50_000, *before[1:]) and seen[0][1] > 0  # what was alive on entry is frozen
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0

    with pytest.raises(RuntimeError):
        with memory.fewer_collections():
            raise RuntimeError("restored on the way out too")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_a_nested_bulk_phase_leaves_the_outer_phase_frozen():
    import gc

    before = gc.get_threshold()
    with memory.fewer_collections(threshold=50_000):
        frozen = gc.get_freeze_count()
        with memory.fewer_collections(threshold=80_000):
            assert gc.get_threshold()[0] == 80_000
        # the inner phase's exit kept what the outer one froze (an unfreeze there would have thawed it all)
        assert gc.get_threshold()[0] == 50_000 and gc.get_freeze_count() >= frozen > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_a_batch_loop_collects_between_items_only_and_turns_the_collector_back_on():
    import gc
    import weakref

    class Node:
        pass

    def cycle():  # a cycle made while a batch is made, unreachable once made
        a, b = Node(), Node()
        a.other, b.other = b, a
        return weakref.ref(a)

    def batches(n):
        for _ in range(n):
            yield cycle()

    assert gc.isenabled()
    seen = []
    for gone in memory.collected_between(batches(3)):
        filler = [[] for _ in range(200_000)]  # far past any threshold: no collection while an item is used
        del filler
        assert gone() is not None and not gc.isenabled()
        seen.append(gone)
    assert gc.isenabled() and len(seen) == 3
    assert all(ref() is None for ref in seen)  # each cycle collected between two items (the last one after it)

    with pytest.raises(RuntimeError):  # a loop left by an exception turns the collector back on
        for _ in memory.collected_between(batches(2)):
            raise RuntimeError("left")
    assert gc.isenabled()
    for _ in memory.collected_between(batches(5)):  # and one left by break
        break
    assert gc.isenabled()
