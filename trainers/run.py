"""One training command: preflight, device, ladder stages, run folder, run records.

    from mashbill.trainers.run import train
    result = train("quickstart-sft", stage="steps:3")

Order matters and is fixed here: the preflight (no model) refuses bad runs before anything is loaded or
written; the device is set from LOCAL_RANK before any model loads; each ladder stage stores its run record;
only a training stage (steps:N, epoch, full) writes the run folder.
"""

from __future__ import annotations

import math
import resource
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from mashbill.errors import MashbillError
from mashbill.trainers import ladder
from mashbill.trainers.config import load_config
from mashbill.trainers.preflight import Preflight, run_preflight
from mashbill.trainers.runfolder import default_out, lineage, versions, work_dir, write_run


class StageFailed(MashbillError):
    """A ladder stage ran and failed its checks (non-finite loss or gradients); recorded in the store."""


@dataclass
class RunResult:
    preflight: Preflight
    stages: list[dict] = field(default_factory=list)  # the run records written, in order
    out: Path | None = None  # the run folder (training stages only)
    metrics: dict = field(default_factory=dict)


def _peak_memory_mb(placement) -> float:
    if placement.device.startswith("cuda"):
        import torch

        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _record(store_path: Path, stage, pf: Preflight, placement, detail: dict) -> dict:
    from mashbill.factory.store import Store
    from mashbill.trainers.launcher import device_facts

    snap = pf.snapshot_ref
    doc = {"config_name": pf.config.name, "config_sha256": pf.config.sha256, "method": pf.config.method,
           "snapshot_id": snap["id"], "snapshot": f"{snap['name']}@{snap['version']}",
           "manifest_sha256": snap["manifest_sha256"], "versions": versions(),
           **(device_facts(placement) if placement is not None else {}), **detail}
    doc.update(stage=stage.label, stage_name=stage.name)
    with Store.open(store_path) as store:
        doc["run_id"] = ladder.record(store, stage, doc)
    return doc


def _schedule(cfg, stage) -> tuple[int, float]:
    if stage.name == "steps":
        return stage.steps, 1.0
    if stage.name == "epoch":
        return -1, 1.0
    return cfg.schedule.max_steps, cfg.schedule.epochs


def newest_checkpoint(work: Path) -> Path | None:
    """The newest complete checkpoint (one with trainer_state.json, written at the end of a save)."""
    ckpts = [p for p in (work / "checkpoints").glob("checkpoint-*") if (p / "trainer_state.json").is_file()]
    return max(ckpts, key=lambda p: int(p.name.rsplit("-", 1)[1]), default=None)


def _finite(values) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


def _probe(trainer, placement, backward: bool) -> dict:
    """One batch through the model (forward) and back (batch): finite loss and gradients."""
    import torch

    model = trainer.model
    batch = next(iter(trainer.get_train_dataloader()))
    inputs = trainer._prepare_inputs(batch)
    t0 = time.perf_counter()
    if backward:
        model.train()
        if trainer.args.gradient_checkpointing:  # Trainer.train() turns it on; this probe does not go through it
            kwargs = trainer.args.gradient_checkpointing_kwargs
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        loss = trainer.compute_loss(model, inputs)
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.requires_grad and p.grad is not None]
        grads_finite = bool(grads) and all(bool(torch.isfinite(g).all()) for g in grads)
        model.zero_grad(set_to_none=True)
    else:
        model.eval()
        with torch.no_grad():
            loss = trainer.compute_loss(model, inputs)
        grads_finite = None
    value = float(loss.detach())
    n = int(inputs["input_ids"].numel()) if "input_ids" in inputs else None
    secs = time.perf_counter() - t0
    return {"loss": value, "loss_finite": math.isfinite(value), "grads_finite": grads_finite,
            "batch_tokens": n, "seconds": secs, "tokens_per_s": (n / secs) if n and secs else None,
            "peak_memory_mb": _peak_memory_mb(placement)}


def _metrics(trainer, out) -> dict:
    logs = trainer.state.log_history
    losses = [{"step": e["step"], "loss": e["loss"], "grad_norm": e.get("grad_norm"),
               "learning_rate": e.get("learning_rate")} for e in logs if "loss" in e]
    summary = next((e for e in reversed(logs) if "train_runtime" in e), {})
    steps = trainer.state.global_step
    return {"losses": losses, "global_step": steps, "train_runtime_s": summary.get("train_runtime"),
            "s_per_step": (summary["train_runtime"] / max(1, steps)) if summary.get("train_runtime") else None,
            "train_loss": summary.get("train_loss"), **({"train_output": out.metrics} if out is not None else {})}


def _load_parts(pf: Preflight):
    """(base model, tokenizer, datasets) for the method; the model itself is loaded by the method's build."""
    import os

    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoTokenizer

    from mashbill.curation.snapshots.pull import load_snapshot
    from mashbill.trainers.base_model import resolve

    base = resolve(pf.config.base_model)
    tok = AutoTokenizer.from_pretrained(str(base.path), local_files_only=True)
    if pf.config.method != "classify":
        tok.chat_template = pf.chat_template  # the snapshot's training template, as validated
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
    if pf.format == "pairs":
        from mashbill.trainers.methods.reward_pairs import load_pairs

        return base, tok, load_pairs(pf.snapshot)
    data = load_snapshot(pf.snapshot, pf.format)
    return base, tok, data


def _builder(method: str):
    if method == "sft":
        from mashbill.trainers.methods.sft import build
    elif method == "dpo":
        from mashbill.trainers.methods.dpo import build
    else:
        from mashbill.trainers.methods.classify import build
    return build


def train(config_ref: str | Path, *, method: str | None = None, stage: str = "steps:1", out: str | Path | None = None,
          resume: bool = False, climb: bool = True, store: str | Path | None = None, log=print) -> RunResult:
    """Run the ladder up to `stage` for the config; see the module docstring."""
    cfg, cfg_path = load_config(config_ref, method=method, store=store)
    target = ladder.parse_stage(stage)
    pf = run_preflight(cfg, cfg_path.parent)  # refuses before any model load, writes nothing
    for note in pf.notes:
        log(f"preflight: {note}")
    log(f"preflight passed in {pf.seconds:.1f} s: {pf.manifest['ref']} ({pf.format}), max_seq_len "
        f"{pf.profile.get('max_seq_len')}, loss {pf.profile.get('loss')}")
    store_path = ladder.store_path_of(cfg.store)
    from mashbill.factory.store import Store

    with Store.open(store_path, read_only=True) as store:
        missing = ladder.missing_below(store, target, cfg.sha256, pf.manifest["snapshot_id"])
    if missing and not climb:
        with Store.open(store_path, read_only=True) as store:
            ladder.require(store, target, cfg.sha256, pf.manifest["snapshot_id"])
    todo = missing + [target]
    result = RunResult(pf)
    placement = None
    if todo[0].name == "config":
        result.stages.append(_record(store_path, todo.pop(0), pf, None, {
            "passed": True, "preflight_s": pf.seconds, "rechecked": pf.rechecked, "notes": pf.notes}))
        log("stage config passed")
    if not todo:
        return result
    from mashbill.trainers.launcher import place

    # before anything allocates on a device; SFT and DPO hold long sequences, whose freed tensors must leave
    placement = place(threads=cfg.threads, return_memory=cfg.causal_lm)
    base, tok, data = _load_parts(pf)
    build = _builder(cfg.method)
    out_dir = Path(out) if out is not None else default_out(cfg.name)
    work = work_dir(out_dir)
    from transformers import set_seed

    probe_trainer = None  # forward and batch share one trainer: neither changes the weights
    for st in todo:
        max_steps, epochs = _schedule(cfg, st)
        if not st.trains and probe_trainer is not None:
            trainer = probe_trainer
        else:
            if probe_trainer is not None:  # done probing: free its model before the training one loads
                probe_trainer = trainer = None
                import gc

                gc.collect()
            set_seed(cfg.schedule.seed)  # a new head or LoRA init is the same in every process (resume compares)
            trainer, save = build(pf, placement, base, data, tok, st, work, max_steps=max(max_steps, 1)
                                  if not st.trains else max_steps, epochs=epochs)
        if not st.trains:
            probe_trainer = trainer
            probe = _probe(trainer, placement, backward=st.name == "batch")
            ok = probe["loss_finite"] and probe["grads_finite"] is not False
            rec = _record(store_path, st, pf, placement, {"passed": ok, **probe})
            result.stages.append(rec)
            log(f"stage {st.label} {'passed' if ok else 'FAILED'}: loss {probe['loss']:.4f}, "
                f"{probe['seconds']:.1f} s, peak {probe['peak_memory_mb']:.0f} MB")
            if not ok:
                raise StageFailed(f"stage {st.label} failed: loss {probe['loss']} grads finite "
                                  f"{probe['grads_finite']} (recorded as run {rec['run_id']})")
            continue
        ckpt = newest_checkpoint(work) if resume else None
        if resume:
            log(f"resuming from {ckpt}" if ckpt else "no checkpoint to resume from; starting fresh")
        t0 = time.perf_counter()
        out_obj = trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
        secs = time.perf_counter() - t0
        metrics = _metrics(trainer, out_obj)
        if hasattr(trainer, "mashbill_evaluate"):
            metrics["eval"] = trainer.mashbill_evaluate()
        elif trainer.eval_dataset is not None:
            metrics["eval"] = {k: v for k, v in trainer.evaluate().items() if isinstance(v, (int, float))}
        losses = [e["loss"] for e in metrics["losses"]]
        grads = [e["grad_norm"] for e in metrics["losses"] if e["grad_norm"] is not None]
        ok = bool(losses) and _finite(losses) and _finite(grads)
        run_id = uuid.uuid4().hex
        detail = {"run_id": run_id, "passed": ok, "steps": metrics["global_step"], "seconds": secs,
                  "s_per_step": metrics["s_per_step"], "loss_first": losses[0] if losses else None,
                  "loss_last": losses[-1] if losses else None, "loss_finite": _finite(losses),
                  "grads_finite": _finite(grads), "peak_memory_mb": _peak_memory_mb(placement),
                  "resumed_from": str(ckpt) if ckpt else None, "run_folder": str(out_dir.resolve())}
        if ok:
            profile = {**pf.profile, "format": pf.format}
            doc = lineage(run_id=run_id, pf=pf, base=base, stage=st.label, profile=profile)
            write_run(out_dir, config_dump={**cfg.model_dump(mode="json"), "resolved": {
                "snapshot_path": str(pf.snapshot.resolve()), "format": pf.format, "profile": profile}},
                lineage_doc=doc, metrics=metrics, save_weights=save)
            result.out = out_dir
            import shutil

            shutil.rmtree(work, ignore_errors=True)  # complete: the checkpoints are no longer needed
        rec = _record(store_path, st, pf, placement, detail)
        result.stages.append(rec)
        result.metrics = metrics
        log(f"stage {st.label} {'passed' if ok else 'FAILED'}: {metrics['global_step']} step(s), loss "
            f"{losses[0] if losses else float('nan'):.4f} -> {losses[-1] if losses else float('nan'):.4f}, "
            f"{metrics['s_per_step'] or 0:.2f} s/step")
        if not ok:
            raise StageFailed(f"stage {st.label} failed: non-finite loss or gradients (run {run_id})")
    return result
