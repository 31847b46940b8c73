"""The cluster hand-off: a SLURM job chain that trains one config on LUMI-G's MI250X nodes.

`render_train(opts)` returns:
- `train.sbatch`: one job of the chain. 8 tasks per node (one per GCD); each task exports LOCAL_RANK from
  SLURM_LOCALID before mashbill starts, so the launcher sets the device before the model loads. ROCm
  environment of DOMAIN §10, bf16, eager attention, no bitsandbytes (no ROCm build), DeepSpeed ZeRO-2 for
  LoRA (ZeRO-3 preset beside it). It runs `mashbill train METHOD CONFIG --stage full --resume`: the first
  job climbs the cheap ladder stages on the real hardware, every later job resumes from the newest
  checkpoint, and a job that finds the run folder complete exits at once.
- `submit.sh`: submits N jobs, each `--dependency=afterany:<previous>` (a job killed at its time limit
  still lets the next one resume).
- `zero2.json`, `zero3.json`: DeepSpeed presets with no optimizer or scheduler block (the training
  arguments' own are used; see trainers.deepspeed) and "auto" sizes.

`MASHBILL_SRUN` and `MASHBILL_CONTAINER` (environment, at job time) replace `srun ...` and `singularity exec
...`: the tests run a job on a CPU machine with both empty.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from mashbill.factory.slurm import LUMI, ROCM_ENV

GCDS_PER_NODE = LUMI.gcds_per_node
ZERO2 = {
    "zero_optimization": {"stage": 2, "allgather_partitions": True, "allgather_bucket_size": 2e8,
                          "overlap_comm": True, "reduce_scatter": True, "reduce_bucket_size": 2e8,
                          "contiguous_gradients": True},
    "bf16": {"enabled": "auto"}, "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
    "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
}
ZERO3 = {
    "zero_optimization": {"stage": 3, "overlap_comm": True, "contiguous_gradients": True,
                          "stage3_param_persistence_threshold": 1e7,
                          "stage3_gather_16bit_weights_on_model_save": True},
    "bf16": {"enabled": "auto"}, "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
    "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
}
TRAIN_ENV = {**ROCM_ENV, "MASHBILL_NO_BITSANDBYTES": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@dataclass(frozen=True)
class TrainSlurmOptions:
    config: str  # absolute path of the training config
    config_name: str
    method: str
    run_dir: str  # the run folder (absolute)
    store: str  # the store holding the snapshot and the ladder records (absolute)
    nodes: int = 1
    jobs: int = 6
    account: str | None = None
    partition: str = LUMI.partition
    time: str = "48:00:00"
    image: str = LUMI.image
    binds: str = LUMI.binds
    mashbill: str = "mashbill"
    cpus_per_task: int = 7
    mem: str = "480G"


def _q(v) -> str:
    return shlex.quote(str(v))


def render_train(o: TrainSlurmOptions) -> dict[str, str]:
    env = "\n".join(f"export {k}={_q(v)}" for k, v in TRAIN_ENV.items())
    account = f"#SBATCH --account={o.account}\n" if o.account else ""
    tasks = o.nodes * GCDS_PER_NODE
    sbatch = f"""#!/bin/bash
#SBATCH --job-name=mb-train-{o.config_name}
#SBATCH --partition={o.partition}
{account}#SBATCH --nodes={o.nodes}
#SBATCH --ntasks-per-node={GCDS_PER_NODE}
#SBATCH --gpus-per-node={GCDS_PER_NODE}
#SBATCH --cpus-per-task={o.cpus_per_task}
#SBATCH --mem={o.mem}
#SBATCH --time={o.time}
#SBATCH --signal=B:TERM@300
#SBATCH --output={o.run_dir}.logs/%x-%j.out
# One job of a chain written by `mashbill slurm train`; each resumes from the newest checkpoint.
set -euo pipefail
RUN={_q(o.run_dir)}
CONFIG={_q(o.config)}
STORE={_q(o.store)}
mkdir -p "$RUN.logs"
if [ -f "$RUN/lineage.json" ] && grep -q '"stage": "full"' "$RUN/lineage.json"; then
  echo "run $RUN is complete; nothing to do"
  exit 0
fi
{env}
export MASTER_ADDR=$(scontrol show hostnames "${{SLURM_JOB_NODELIST:-localhost}}" 2>/dev/null | head -n 1 || echo localhost)
SRUN=${{MASHBILL_SRUN-srun --ntasks={tasks} --ntasks-per-node={GCDS_PER_NODE} --cpu-bind=cores}}
CONTAINER=${{MASHBILL_CONTAINER-singularity exec --bind {o.binds} {o.image}}}
# LOCAL_RANK/RANK/WORLD_SIZE come from SLURM per task, before Python starts: the device is set from
# LOCAL_RANK before the model loads (the reference's 8-copies-on-one-GCD bug).
$SRUN $CONTAINER bash -c 'export LOCAL_RANK=${{SLURM_LOCALID:-0}} RANK=${{SLURM_PROCID:-0}} WORLD_SIZE=${{SLURM_NTASKS:-1}}
  exec {_q(o.mashbill)} train {o.method} "$0" --stage full --resume --out "$1" --store "$2"' "$CONFIG" "$RUN" "$STORE"
"""
    submit = f"""#!/bin/bash
# Submit {o.jobs} chained training jobs for {o.config_name}: each starts after the previous one ends
# (afterany: also after a time-limit kill) and resumes from the newest checkpoint.
set -euo pipefail
cd "$(dirname "$0")"
PREV=$(sbatch --parsable train.sbatch)
echo "job 1: $PREV"
for i in $(seq 2 {o.jobs}); do
  PREV=$(sbatch --parsable --dependency=afterany:$PREV train.sbatch)
  echo "job $i: $PREV"
done
"""
    return {"train.sbatch": sbatch, "submit.sh": submit,
            "zero2.json": json.dumps(ZERO2, indent=2) + "\n", "zero3.json": json.dumps(ZERO3, indent=2) + "\n"}


def write_train_chain(config: str, *, out_dir, run_dir=None, store=None, nodes: int = 1, jobs: int = 6,
                      account: str | None = None, partition: str = LUMI.partition, time: str = "48:00:00",
                      image: str = LUMI.image, mashbill: str = "mashbill") -> tuple[dict, list[str]]:
    """Write the chain for CONFIG into out_dir after its preflight passed here; returns (paths, warnings)."""
    import stat
    from pathlib import Path

    from mashbill.trainers.config import load_config
    from mashbill.trainers.ladder import store_path_of
    from mashbill.trainers.preflight import run_preflight

    cfg, path = load_config(config, store=store)
    run_preflight(cfg, path.parent)  # refuse here, not after a day in the queue
    warnings = []
    if cfg.precision != "bf16":
        warnings.append(f"config {cfg.name}: precision {cfg.precision}; MI250X runs train in bf16")
    if cfg.attn_implementation != "eager":
        warnings.append(f"config {cfg.name}: attn_implementation {cfg.attn_implementation}; eager is what runs "
                        "reliably on ROCm here")
    if cfg.method != "classify" and not cfg.deepspeed:
        warnings.append(f"config {cfg.name}: no deepspeed JSON; set `deepspeed: {Path(out_dir).resolve()}/zero2.json` "
                        "(ZeRO-2 for LoRA)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    opts = TrainSlurmOptions(config=str(path.resolve()), config_name=cfg.name, method=cfg.method,
                             run_dir=str(Path(run_dir or Path("mashbill-runs") / cfg.name).resolve()),
                             store=str(store_path_of(cfg.store).resolve()), nodes=nodes, jobs=jobs, account=account,
                             partition=partition, time=time, image=image, mashbill=mashbill)
    written = {}
    for name, text in render_train(opts).items():
        f = out / name
        f.write_text(text, encoding="utf-8")
        if name.endswith((".sh", ".sbatch")):
            f.chmod(f.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP)
        written[name] = f
    return written, warnings
