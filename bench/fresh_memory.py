"""What touching memory costs on this machine: pages the process reuses against pages the system hands it afresh.

On the 2-core VM this project measures on, memory a process frees is reported back to the hypervisor after about
two seconds (virtio-balloon free page reporting), and touching it again costs that much more than memory
reused at once. Every stage that allocates gigabytes (merge, freeze, validate) pays it, so a stage's system time
is mostly pages touched afresh, and lowering peak memory is what speeds it up (issue 29, bench/RESULTS.md).

    .venv/bin/python bench/fresh_memory.py [--gb 1] [--idle 6]

Allocates and fills GB of memory, frees it, and again: at once (reused), then after IDLE seconds (fresh).
Last line: fresh_s_per_gb= reused_s_per_gb= ratio= idle_s= load=
"""

from __future__ import annotations

import argparse
import os
import resource
import time


def touch(n_bytes: int) -> tuple[float, float]:
    """Wall and system seconds to allocate n_bytes and write every page (numpy fills them), then free them."""
    import numpy as np

    t0 = time.perf_counter()
    s0 = resource.getrusage(resource.RUSAGE_SELF).ru_stime
    block = np.ones(n_bytes // 8)
    wall = time.perf_counter() - t0
    sys_s = resource.getrusage(resource.RUSAGE_SELF).ru_stime - s0
    del block
    return wall, sys_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--idle", type=float, default=6.0, help="seconds between freeing and touching again")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    n = int(args.gb * (1 << 30))
    fresh, reused = [], []
    for _ in range(args.rounds):
        time.sleep(args.idle)
        fresh.append(touch(n))  # after the idle wait: pages the system handed back
        reused.append(touch(n))  # at once: the pages just freed
    for label, runs in (("fresh", fresh), ("reused", reused)):
        print(f"{label:7s} " + "  ".join(f"{w:6.2f} s ({s:5.2f} sys)" for w, s in runs) + f"  for {args.gb:g} GB")
    f = sorted(w for w, _ in fresh)[len(fresh) // 2] / args.gb
    r = sorted(w for w, _ in reused)[len(reused) // 2] / args.gb
    print(f"fresh_s_per_gb={f:.3f} reused_s_per_gb={r:.3f} ratio={f / r:.1f} idle_s={args.idle:g} "
          f"load={os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
