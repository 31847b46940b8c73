"""`mashbill slurm generate SPEC --nodes N`: render the SLURM scripts for a sharded multi-node run."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import click

from mashbill.cli._common import Group, echo_json, json_option, out, store_option
from mashbill.errors import MashbillError
from mashbill.factory.slurm import LUMI


@click.group(cls=Group)
def command():
    """SLURM job scripts for GPU clusters (LUMI-G's AMD MI250X nodes by default)."""


@command.command("generate", short_help="Render the SLURM scripts that generate SPEC with a vLLM server "
                                            "per node, then merge the shard stores.")
@click.argument("spec")
@click.option("--nodes", type=click.IntRange(min=1), required=True, help="Nodes = shards = array tasks.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where to write the scripts [default: ./slurm-<spec name>].")
@click.option("--store-root", type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the shard stores, logs and the merged store [default: <out>/stores].")
@click.option("--account", help="SLURM account (project), e.g. project_465000000.")
@click.option("--partition", default=LUMI.partition, show_default=True, help="SLURM partition of the GPU array tasks.")
@click.option("--merge-partition", default="small", show_default=True,
              help="SLURM partition of the CPU job that merges the shard stores.")
@click.option("--time", "time_limit", default="24:00:00", show_default=True, help="Wall-clock limit per array task.")
@click.option("--model-size-b", type=float, help="Model size in billions, when the model name does not say.")
@click.option("--tp", type=click.IntRange(1, 8), help="Tensor parallel size [default: by model size: >=70B 8, "
                                                      ">=30B 4, else 2].")
@click.option("--image", default=LUMI.image, show_default=True, help="Singularity image with vLLM.")
@click.option("--port", default=8000, show_default=True, help="Port of the vLLM server on each node.")
@click.option("--max-model-len", type=int, help="vLLM --max-model-len [default: the spec's teacher.n_ctx].")
@click.option("--concurrency", type=click.IntRange(min=1), default=48, show_default=True,
              help="Requests in flight per shard.")
@click.option("--mashbill", "mashbill_cmd", help="The mashbill executable on the nodes [default: this one].")
@click.option("--vllm-arg", "vllm_args", multiple=True,
              help="An extra `vllm serve` argument (repeatable), e.g. --vllm-arg=--enable-prompt-tokens-details.")
@click.option("--validate-jobs", type=click.IntRange(min=0), default=8, show_default=True,
              help="Processes for each array task's own record checks (`validate --per-record`) after its shard is "
                   "generated; the merge job then runs only the checks that need every record. 0: the merge job "
                   "checks every record itself.")
@json_option(help='Print {"written": [files], "stores", "merged", "tp", "submit"} as JSON.')
def generate(spec, nodes, out_dir, store_root, account, partition, merge_partition, time_limit, model_size_b, tp,
             image, port, max_model_len, concurrency, mashbill_cmd, vllm_args, validate_jobs, as_json):
    """Render generate.sbatch (an array job: a vLLM server and one shard per node, then each record's own
    checks there), merge.sbatch (the merge, then the validation of the merged store) and submit.sh (the
    array, then the merge with --dependency=afterok) for SPEC, whose teacher must use the openai backend
    (the vLLM server started per node).

    \b
    Example:
      mashbill slurm generate plan-moe --nodes 8 --account project_465000000
      bash slurm-plan-moe/submit.sh
    """
    from mashbill.factory.slurm import SlurmOptions, model_size_b as size_of, render_slurm, tensor_parallel_for
    from mashbill.specs import find_spec, load_spec

    path = find_spec(spec)
    rs = load_spec(path)
    teacher = rs.spec.teacher
    if teacher.backend != "openai":
        raise MashbillError(f"{rs.ref} uses teacher.backend '{teacher.backend}'; the SLURM job starts a vLLM server "
                            "per node and talks to it, so the spec's teacher needs backend: openai and the model "
                            "name vLLM should serve")
    from mashbill.specs.lock import lock_problem

    problem = lock_problem(rs)
    if problem:  # found here, not in every array task: each task's `mashbill generate` would refuse it
        raise MashbillError(f"{rs.ref} ({path}): {problem}; the array tasks run `mashbill generate`, which "
                            "refuses a spec that does not match its lock")
    size = model_size_b if model_size_b is not None else size_of(teacher.model)
    if tp is None and size is None and not as_json:
        out.print(f"[yellow]the model name {teacher.model!r} does not say its size; using TP 8 (set --model-size-b "
                  "or --tp)[/yellow]")
    out_dir = (out_dir or Path(f"slurm-{rs.name}")).resolve()
    store_root = (store_root or out_dir / "stores").resolve()
    spec_arg = str(path.resolve()) if Path(spec).suffix in (".yaml", ".yml") else spec
    running = Path(sys.argv[0])
    exe = mashbill_cmd or (str(running.resolve()) if running.name == "mashbill" and running.is_file() else None) \
        or shutil.which("mashbill") or "mashbill"
    opts = SlurmOptions(spec=spec_arg, spec_ref=rs.ref, spec_hash=rs.hash, model=teacher.model, nodes=nodes,
                        store_root=str(store_root), account=account, partition=partition,
                        merge_partition=merge_partition, time=time_limit, tp=tp or tensor_parallel_for(size),
                        image=image, port=port, max_model_len=max_model_len or teacher.n_ctx,
                        concurrency=concurrency, mashbill=str(exe), revision=teacher.revision,
                        vllm_args=tuple(vllm_args), validate_jobs=validate_jobs)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_slurm(opts).items():
        f = out_dir / name
        f.write_text(text, encoding="utf-8")
        f.chmod(f.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP)
        written.append(str(f))
    if as_json:
        echo_json({"written": written, "stores": f"{store_root}/shard_<i>", "merged": f"{store_root}/merged",
                   "tp": opts.tp, "submit": str(out_dir / "submit.sh")})
        return
    out.print(f"wrote {out_dir}/generate.sbatch ({nodes} array tasks, TP {opts.tp}), merge.sbatch, submit.sh")
    out.print(f"stores: {store_root}/shard_<i>, merged: {store_root}/merged")
    out.print(f"submit: bash {os.path.relpath(out_dir / 'submit.sh')}")


@command.command("train", short_help="Render the SLURM scripts that train a CONFIG (chained jobs, ZeRO "
                                      "presets).")
@click.argument("config")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where to write the scripts [default: ./slurm-train-<config name>].")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path),
              help="The run folder on the cluster [default: ./mashbill-runs/<config name>].")
@store_option(default=None, help="Store holding the snapshot [default: the config's store, ./mashbill-data unless "
                                "it names another].")
@click.option("--nodes", type=click.IntRange(min=1), default=1, show_default=True, help="Nodes (8 GCDs each).")
@click.option("--jobs", type=click.IntRange(min=1), default=6, show_default=True,
              help="Jobs in the chain (afterany), each resuming from the newest checkpoint.")
@click.option("--account", help="SLURM account (project), e.g. project_465000000.")
@click.option("--partition", default=LUMI.partition, show_default=True, help="SLURM partition of the training jobs.")
@click.option("--time", "time_limit", default="48:00:00", show_default=True, help="Wall-clock limit per job.")
@click.option("--image", default=LUMI.image, show_default=True,
              help="Singularity image with PyTorch.")
@click.option("--mashbill", "mashbill_cmd", help="The mashbill executable on the nodes [default: this one].")
@json_option(help='Print {"written": [files], "warnings", "submit"} as JSON.')
def train(config, out_dir, run_dir, store_path, nodes, jobs, account, partition, time_limit, image, mashbill_cmd,
          as_json):
    """Render train.sbatch (8 tasks per node, LOCAL_RANK per GCD, ROCm environment, ZeRO presets) and
    submit.sh (JOBS chained with --dependency=afterany) for a training CONFIG, after its preflight passes.

    \b
    Example:
      mashbill slurm train ./planner-sft.yaml --nodes 2 --jobs 6 --account project_465000000
      bash slurm-train-planner-sft/submit.sh
    """
    from mashbill.trainers.config import load_config
    from mashbill.trainers.slurm import write_train_chain

    cfg, _ = load_config(config, store=store_path)
    out_dir = (out_dir or Path(f"slurm-train-{cfg.name}")).resolve()
    running = Path(sys.argv[0])
    exe = mashbill_cmd or (str(running.resolve()) if running.name == "mashbill" and running.is_file() else None) \
        or shutil.which("mashbill") or "mashbill"
    written, warnings = write_train_chain(config, out_dir=out_dir, run_dir=run_dir, store=store_path, nodes=nodes,
                                          jobs=jobs, account=account, partition=partition, time=time_limit,
                                          image=image, mashbill=str(exe))
    if as_json:
        echo_json({"written": [str(p) for p in written.values()], "warnings": list(warnings),
                   "submit": str(out_dir / "submit.sh")})
        return
    for w in warnings:
        out.print(f"[yellow]warning: {w}[/yellow]")
    out.print(f"wrote {out_dir}/train.sbatch ({nodes} node(s) x 8 GCDs), submit.sh ({jobs} jobs, afterany), "
              "zero2.json, zero3.json")
    out.print(f"submit: bash {os.path.relpath(out_dir / 'submit.sh')}")
