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
