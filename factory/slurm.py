"""SLURM job scripts for a sharded run on GPU nodes: one vLLM server and one shard per array task.

`render_slurm(...)` returns three scripts:
- `generate.sbatch`: an array job (one task per node). Each task sets the ROCm environment of the
  AMD MI250X nodes (8 GCDs), starts `vllm serve` with tensor parallelism by model size and prefix
  caching, waits until it serves the model, runs `mashbill generate SPEC --shard i/N` into its own
  store, and stops the server. SIGTERM before the wall-clock limit reaches mashbill, which marks
  the run interrupted; re-submitting resumes (finished records are read from each shard's store).
- `merge.sbatch`: `mashbill merge` of all shard stores, checking that every shard is there.
- `submit.sh`: submits the array, then the merge with `--dependency=afterok:<array job id>`.

`MASHBILL_SERVER_CMD` (environment, at job time) replaces the vLLM command: the tests use it to run
the array tasks on a CPU machine against a local stand-in server.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone

@dataclass(frozen=True)
class Site:
    """A cluster's defaults, written once for the generate array and the training chain (and their CLI options)."""
    partition: str
    image: str
    binds: str
    gcds_per_node: int


# LUMI-G: MI250X nodes of 8 GCDs, the multitorch container, the file systems a job sees.
LUMI = Site(partition="standard-g", image="lumi-multitorch-latest.sif", binds="/pfs,/scratch,/projappl,/flash",
            gcds_per_node=8)

# The environment every GPU task gets on LUMI-G (MI250X: 8 GCDs per node), as the reference's jobs set it.
ROCM_ENV = {
    "ROCR_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
    "HIP_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
    "NCCL_SOCKET_IFNAME": "hsn0",
    "NCCL_NET_GDR_LEVEL": "3",
    "MASTER_PORT": "29500",
    "OMP_NUM_THREADS": "7",
    "PYTORCH_HIP_ALLOC_CONF": "max_split_size_mb:128,garbage_collection_threshold:0.6",
}

_SIZE_RE = re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)\s*[bB](?![a-zA-Z])")


def model_size_b(model: str) -> float | None:
    """Billions of parameters from a model name ('Llama-3.3-70B-Instruct' -> 70); None when it does not say."""
    sizes = [float(m.group(1)) for m in _SIZE_RE.finditer(model.rsplit("/", 1)[-1])]
    return max(sizes) if sizes else None


def tensor_parallel_for(size_b: float | None) -> int:
    """TP by model size: >= 70B -> 8 GCDs, 30-35B (up to 70B) -> 4, smaller -> 2 (the reference's rule)."""
    if size_b is None or size_b >= 70:
        return LUMI.gcds_per_node
    if size_b >= 30:
        return 4
    return 2


@dataclass(frozen=True)
class SlurmOptions:
    spec: str  # what the array tasks pass to `mashbill generate` (an absolute path or a library name)
    spec_ref: str
    spec_hash: str
    model: str
    nodes: int
    store_root: str
    account: str | None = None
    partition: str = LUMI.partition
    merge_partition: str = "small"
    time: str = "24:00:00"
    merge_time: str = "01:00:00"
    tp: int = LUMI.gcds_per_node
    image: str = LUMI.image
    binds: str = LUMI.binds
    port: int = 8000
    max_model_len: int = 4096
    concurrency: int = 48
    mashbill: str = "mashbill"
    server_wait_s: int = 1800
    revision: str | None = None
    vllm_args: tuple[str, ...] = ()  # extra `vllm serve` arguments, e.g. --enable-prompt-tokens-details
    validate_jobs: int = 8  # processes for each shard's own record checks after generate; 0: the merge job checks all


def _q(value) -> str:
    return shlex.quote(str(value))


def render_slurm(o: SlurmOptions) -> dict[str, str]:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = (f"# Rendered by `mashbill slurm generate` on {stamp} for {o.spec_ref} (spec hash {o.spec_hash[:16]}).\n"
              "# Re-render instead of editing: the shard count, TP and paths must agree across the scripts.\n")
    account = f"#SBATCH --account={o.account}\n" if o.account else ""
    env = "".join(f"export {k}={_q(v)}\n" for k, v in ROCM_ENV.items())
    revision = f" --revision {_q(o.revision)}" if o.revision else ""
    vllm_cmd = (f"singularity exec --rocm --bind {_q(o.binds)} {_q(o.image)} vllm serve {_q(o.model)}{revision} "
                f"--served-model-name {_q(o.model)} --tensor-parallel-size {o.tp} --max-model-len {o.max_model_len} "
                f"--enable-prefix-caching --host 127.0.0.1 --port \"$PORT\""
                + "".join(f" {_q(a)}" for a in o.vllm_args))
    logs = f"{o.store_root}/logs"

    validate_shard = ""
    if o.validate_jobs:
        validate_shard = f"""if [ "$rc" = 0 ]; then
  # Each record's own checks (rules, token spans, personal data) here, kept in the shard store; the merge job's
  # validation reads them and runs only the checks that need every record. Exit 1 means findings, not a failure.
  run_mashbill validate {_q(o.spec)} --store "$STORE" --per-record --jobs {o.validate_jobs} -q
  echo "shard $SHARD/$NSHARDS: mashbill validate --per-record exited with $rc"
  if [ "$rc" = 1 ]; then rc=0; fi
fi
"""

    generate = f"""#!/bin/bash
{header}#SBATCH --job-name=mb-gen-{o.spec_ref.split('@')[0][:20]}
{account}#SBATCH --partition={o.partition}
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node={LUMI.gcds_per_node}
#SBATCH --cpus-per-task=56
#SBATCH --mem=480G
#SBATCH --time={o.time}
#SBATCH --array=0-{o.nodes - 1}
#SBATCH --signal=B:TERM@180
#SBATCH --output={logs}/generate_%A_%a.out
set -euo pipefail

# ROCm environment for the MI250X nodes (8 GCDs per node).
{env}
SHARD=${{SLURM_ARRAY_TASK_ID:?run as a SLURM array task (sbatch generate.sbatch)}}
NSHARDS={o.nodes}
STORE_ROOT={_q(o.store_root)}
STORE="$STORE_ROOT/shard_$SHARD"
export PORT={o.port}
MASHBILL={_q(o.mashbill)}
mkdir -p "$STORE_ROOT/logs"
SERVER_LOG="$STORE_ROOT/logs/server_${{SLURM_ARRAY_JOB_ID:-local}}_$SHARD.log"

# One vLLM server per node, tensor parallel {o.tp} for {o.model}, prefix caching on.
# Compute nodes may have no internet: point HF_HOME at a filled cache (or make teacher.model a local path).
if [ -n "${{MASHBILL_SERVER_CMD:-}}" ]; then
  bash -c "exec $MASHBILL_SERVER_CMD" >"$SERVER_LOG" 2>&1 &
else
  {vllm_cmd} >"$SERVER_LOG" 2>&1 &
fi
SERVER_PID=$!
GEN_PID=
on_term() {{  # mashbill first (it marks the run interrupted); the server goes in the EXIT trap
  if [ -n "$GEN_PID" ]; then kill -TERM "$GEN_PID" 2>/dev/null || true; else exit 143; fi
}}
run_mashbill() {{  # in the background, so that on_term reaches it at once; its exit status in rc
  "$MASHBILL" "$@" &
  GEN_PID=$!
  set +e
  wait "$GEN_PID"; rc=$?
  if kill -0 "$GEN_PID" 2>/dev/null; then wait "$GEN_PID"; rc=$?; fi  # woken by SIGTERM: let mashbill finish
  set -e
}}
trap on_term TERM INT
trap 'kill -TERM "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true' EXIT

echo "shard $SHARD/$NSHARDS: waiting for the teacher server on port $PORT"
ready=0
for _ in $(seq 1 {max(1, o.server_wait_s // 5)}); do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "the teacher server exited before it was ready; see $SERVER_LOG" >&2
    exit 1
  fi
  if curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null; then ready=1; break; fi
  sleep 5
done
if [ "$ready" != 1 ]; then echo "the teacher server was not ready after {o.server_wait_s}s; see $SERVER_LOG" >&2; exit 1; fi

# The shard: a deterministic slice by record id; resumable (finished records are read from its store).
run_mashbill generate {_q(o.spec)} --shard "$SHARD/$NSHARDS" --store "$STORE" \\
  --base-url "http://127.0.0.1:$PORT/v1" --concurrency {o.concurrency} --no-progress
echo "shard $SHARD/$NSHARDS: mashbill generate exited with $rc"
{validate_shard}exit $rc
"""

    shards = " ".join(f'"$STORE_ROOT/shard_{i}"' for i in range(o.nodes))
    merge = f"""#!/bin/bash
{header}#SBATCH --job-name=mb-merge-{o.spec_ref.split('@')[0][:18]}
{account}#SBATCH --partition={o.merge_partition}
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=4
#SBATCH --mem=32G
#SBATCH --time={o.merge_time}
#SBATCH --output={logs}/merge_%j.out
set -euo pipefail

STORE_ROOT={_q(o.store_root)}
MASHBILL={_q(o.mashbill)}
# Fails when a shard is missing or two shards disagree on a record id.
"$MASHBILL" merge "$STORE_ROOT/merged" {shards} --require-complete
# Every check on the merged records: each record's own checks are read from those the array tasks kept (records
# without them are checked here), the checks that need every record run here. Exit 1 means findings (rejected
# records, in the report), not a failure.
rc=0
"$MASHBILL" validate {_q(o.spec)} --store "$STORE_ROOT/merged" --jobs 4 --report "$STORE_ROOT/validation.json" \\
  -q || rc=$?
if [ "$rc" -gt 1 ]; then exit "$rc"; fi
"""

    submit = f"""#!/bin/bash
{header}# Submits the {o.nodes}-node array, then the merge once every array task has succeeded.
# Re-running it after a failure or a time-out resumes every shard where it stopped.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p {_q(logs)}
GEN_JOB=$(sbatch --parsable generate.sbatch)
GEN_JOB=${{GEN_JOB%%;*}}
MERGE_JOB=$(sbatch --parsable --dependency=afterok:$GEN_JOB merge.sbatch)
echo "generate array job: $GEN_JOB ({o.nodes} tasks); merge job: ${{MERGE_JOB%%;*}} (after all succeed)"
"""
    return {"generate.sbatch": generate, "merge.sbatch": merge, "submit.sh": submit}
