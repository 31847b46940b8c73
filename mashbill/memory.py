"""Give freed memory back to the system (glibc only): the peak RSS of a long process is what a 16 GB laptop or a
4 GiB rehearsal budget sees; and collect Python's reference cycles less often in a bulk phase. Below every layer, so
the validation, the freeze and the trainers ask alike."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")

# glibc's mallopt parameter (malloc.h); the value is the size from which an allocation gets its own mapping
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 64 * 1024


def _glibc():
    import ctypes
    import ctypes.util
    import platform

    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def return_freed_memory() -> bool:
    """Pin glibc's mmap threshold so that every tensor of 64 KiB or more gets its own mapping, returned to the
    system when freed. Left dynamic, glibc raises the threshold after each large free and serves the next large
    tensors from its heap, which it keeps: the quick-start DPO probe peaked at 9.3 GB that way and at 5.9 GB with
    the threshold pinned (bench/RESULTS.md, issue 26). It costs CPU: each such allocation is a fresh mapping
    (about 10% on 2,000-token LoRA steps, 20-50% on loops of 1 MB tensors), so only the causal-LM trainers ask
    for it, and it lasts for the process. False where the C library is not glibc."""
    import ctypes

    libc = _glibc()
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def trim_freed_memory() -> bool:
    """Hand the free pages of glibc's heap back to the system now (malloc_trim). Millions of small Python objects
    freed at the end of a phase leave their pages in the heap, where the Arrow pool (mimalloc) that allocates the
    next phase's columns cannot use them: the freeze's near-duplicate grouping left ~260 MB so at 176,000 records
    (issue 29). Costs milliseconds. False where the C library is not glibc."""
    trim = getattr(_glibc(), "malloc_trim", None)
    if trim is None:
        return False
    trim(0)
    return True


# young objects allocated (net) between two collections of the youngest generation in a bulk phase (Python's 700)
BULK_GC_THRESHOLD = 100_000


@contextmanager
def fewer_collections(threshold: int = BULK_GC_THRESHOLD):
    """Python's cycle collector, run less often for a phase that keeps hundreds of thousands of objects alive (a
    validation's verdicts and kept rows): at the default 700 allocations its passes over the older generations
    took 63 of 265 s validating 439,521 complexity records (bench/RESULTS.md, issue 29). The objects alive on entry
    (modules, spec, tokenizer) are frozen, so no pass scans them, and the youngest generation is collected every
    `threshold` allocations. Cycles are still collected (switching the collector off left ~7 unreachable objects a
    record). Usable as a decorator; the settings before are restored on exit. Objects frozen before entry (by an
    outer phase or the application) stay frozen: `gc.unfreeze` cannot tell them apart, so a phase entered with
    some frozen leaves what it froze frozen too."""
    before = gc.get_threshold()
    outer = gc.get_freeze_count()
    gc.freeze()
    gc.set_threshold(threshold, before[1], before[2])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if not outer:
            gc.unfreeze()


def collected_between(items: Iterable[T]) -> Iterator[T]:
    """The items of a batch loop, with Python's cycle collector run once between two items (its youngest two
    generations) and not at all while one is made or used. A batch's temporaries die by reference counting; what
    the collector has to find is its few cycles and what it scans is what the batch keeps, once: at a collection
    every 100,000 allocations it scanned each batch's records again and again (13.4 of 164 CPU-s validating 439,521
    complexity records, bench/RESULTS.md, issue 29). The collector is on again once the loop ends or is left."""
    was = gc.isenabled()
    gc.disable()
    try:
        for item in items:
            yield item
            gc.collect(1)
    finally:
        if was:
            gc.enable()
