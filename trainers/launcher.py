"""Device placement: the device comes from LOCAL_RANK before anything allocates on it.

The reference's launcher called `torch.cuda.set_device(local_rank)` after loading the model, so all eight
ranks of a node put their copy on GPU 0 (8 copies of the model on one GCD, then a QLoRA detour to make them
fit). Here `place()` runs first and returns a `Placement`; the model loaders take that placement as an
argument, so a model cannot be loaded before the device is set (tests/trainers/test_launcher.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mashbill.memory import return_freed_memory


@dataclass(frozen=True)
class Placement:
    device: str  # "cpu", "cuda:3" (ROCm devices are "cuda" in torch too)
    local_rank: int  # -1 outside a distributed launch
    world_size: int
    backend: str  # "cpu" | "cuda" | "rocm"

    @property
    def is_main(self) -> bool:
        return self.local_rank in (-1, 0)


def place(env: dict | None = None, threads: int | None = None, *, return_memory: bool = False) -> Placement:
    """Set this process's device from LOCAL_RANK (torchrun, srun with our launcher) before any model load. On the
    CPU, `return_memory` also pins the allocator (`return_freed_memory`): the causal-LM trainers ask for it."""
    env = os.environ if env is None else env
    import torch

    if threads:
        torch.set_num_threads(threads)
    local_rank = int(env.get("LOCAL_RANK", "-1"))
    world = int(env.get("WORLD_SIZE", "1"))
    if torch.cuda.is_available():
        index = max(local_rank, 0)
        if index >= torch.cuda.device_count():
            from mashbill.errors import MashbillError

            raise MashbillError(f"LOCAL_RANK {local_rank} but only {torch.cuda.device_count()} visible device(s) "
                                f"(ROCR_VISIBLE_DEVICES={env.get('ROCR_VISIBLE_DEVICES')!r}, "
                                f"CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES')!r})")
        torch.cuda.set_device(index)
        backend = "rocm" if getattr(torch.version, "hip", None) else "cuda"
        return Placement(f"cuda:{index}", local_rank, world, backend)
    if return_memory:
        return_freed_memory()
    return Placement("cpu", local_rank, world, "cpu")


def device_facts(placement: Placement) -> dict:
    """What a run record says about where it ran: device name, driver/runtime versions."""
    import platform

    import torch

    facts = {"device": placement.device, "backend": placement.backend, "local_rank": placement.local_rank,
             "world_size": placement.world_size, "torch_cuda": torch.version.cuda,
             "torch_hip": getattr(torch.version, "hip", None), "host": platform.node(),
             "cpu_threads": torch.get_num_threads()}
    if placement.device.startswith("cuda"):
        facts["device_name"] = torch.cuda.get_device_name(torch.cuda.current_device())
    else:
        facts["device_name"] = platform.processor() or platform.machine()
    return facts
