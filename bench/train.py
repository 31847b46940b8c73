"""Trainer benchmarks, measured side by side in one run.

    .venv/bin/python bench/train.py [--records 260000] [--steps 3] [--skip-train] [--quick]

--quick (a smoke run of every part: 5,000 records, 1 step, 8 long-prompt records) checks that the script
works end to end; its figures are not results.

1. preflight_s: `mashbill train check` of a config whose max_seq_len differs from its snapshot's, on a
   snapshot of --records reference-shaped records (mashbill.validators.data.synthetic: ~2,500-token system
   prompts, 5% correction samples), so every record is re-checked with the validators' fast span engine.
   The snapshot is written with the snapshot module's own hashing (cached under ~/.cache/mashbill/bench/).
   Target: under 60 s on 2 cores for 260,000 records.
2. sft/dpo/classify_s_per_step: --steps training steps of each method (SmolLM2-135M LoRA, batch 2, short
   prompts; MiniLM classifier, batch 16), from the trainer's own runtime.
3. logits_to_keep: SFT on long-prompt records (~2,500-token prompts, short targets), batch 1, with and
   without logits_to_keep, each in its own process: s/step and peak RSS side by side (sdpa attention in both,
   so that eager attention's per-layer matrices do not hide the vocabulary projection's cost).
   logits_to_keep_mem_ratio = peak RSS without / with; logits_to_keep_step_ratio = s/step without / with.

The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["HF_HUB_OFFLINE"] = "1"

SMOL = "embedded:smollm2-135m-instruct"


def _profile(max_seq_len: int, loss: str = "assistant-only") -> tuple[dict, str]:
    from mashbill.validators.tokenizers.tokenizer import tokenizer_sha256
    from mashbill.curation.snapshots.training_template import training_template
    from mashbill.hashing import sha256_text
    from mashbill.validators.tokenizers.tokenizer import CHATML_GENERATION, load_tokenizer

    tmpl = training_template(CHATML_GENERATION, loss)
    return {"tokenizer": SMOL, "chat_template": "chatml", "max_seq_len": max_seq_len, "truncation_side": "right",
            "loss": loss, "chat_template_sha256": sha256_text(CHATML_GENERATION),
            "tokenizer_sha256": tokenizer_sha256(load_tokenizer(SMOL)), "training_template": "training_template.jinja",
            "training_template_sha256": sha256_text(tmpl)}, tmpl


def write_snapshot(folder: Path, name: str, kind: str, splits: dict[str, list[dict]] | None = None, *,
                   chunks=None, max_seq_len: int = 4096, loss: str = "assistant-only",
                   classes: dict | None = None) -> Path:
    """A snapshot folder with the snapshot module's schema, hashes and manifest. `chunks` yields (split, rows)
    for big snapshots (streamed through a ParquetWriter)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mashbill.curation.snapshots.snapshot import (FORMAT, MANIFEST, SCHEMA, SPLITS, integrity_of, manifest_bytes,
                                            snapshot_id_of)
    from mashbill.hashing import sha256_file

    tmp = folder.with_name(".tmp-" + folder.name)
    (tmp / "data").mkdir(parents=True, exist_ok=True)
    counts = {s: 0 for s in SPLITS}
    kinds = {s: {} for s in SPLITS}
    writers = {s: pq.ParquetWriter(tmp / "data" / f"{s}.parquet", SCHEMA, compression="zstd") for s in SPLITS}
    for split, rows in (chunks if chunks is not None else ((s, r) for s, r in (splits or {}).items())):
        if rows:
            writers[split].write_table(pa.Table.from_pylist(rows, schema=SCHEMA))
            counts[split] += len(rows)
            for r in rows:
                kinds[split][r["row_kind"]] = kinds[split].get(r["row_kind"], 0) + 1
    for w in writers.values():
        w.close()
    profile, tmpl = _profile(max_seq_len, loss)
    (tmp / "training_template.jinja").write_text(tmpl, encoding="utf-8")
    files = {p.relative_to(tmp).as_posix(): sha256_file(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
    m = {"format": FORMAT, "name": name, "version": "1", "ref": f"{name}@1", "kind": kind, "specs": [],
         "trainer_profile": profile, "classes": classes or {}, "splits": {"counts": counts, "row_kinds": kinds},
         "files": files, "snapshot_id": snapshot_id_of(files, [])}
    m["integrity"] = integrity_of(m)
    (tmp / MANIFEST).write_bytes(manifest_bytes(m))
    os.rename(tmp, folder)
    return folder


def _row(i: int, prompt, completion, *, kind="sft", rejected=None, turns=None, classes=()):
    return {"example_id": f"ex{i:07d}", "record_id": f"r{i:07d}", "row_kind": kind, "spec": "bench@1",
            "source": "bench", "rule": None, "query": prompt[-1]["content"], "lang": "en", "labels": "{}",
            "cell": "c", "class_labels": list(classes), "prompt": list(prompt), "completion": completion,
            "rejected": rejected, "rejected_codes": [], "turns": list(turns) if turns else None, "group": f"g{i}",
            "copy": 0, "n_tokens": None}


def synth_rows(start: int, n: int, short: bool = False):
    from mashbill.validators.data.synthetic import FRAMINGS, make_record

    out = []
    for i in range(start, start + n):
        rec = make_record(0, i)
        msgs = list(rec.messages)
        if short:
            msgs[0] = {"role": "system", "content": FRAMINGS[i % len(FRAMINGS)]}
        prompt, target = msgs[:2], msgs[-1]["content"]
        corr = len(msgs) == 5
        out.append(_row(i, prompt, target, kind="correction" if corr else "sft", turns=msgs if corr else None))
    return out


def big_snapshot(n: int) -> Path:
    from mashbill.paths import cache_dir

    import json
    import shutil

    root = cache_dir("bench", "train")
    folder = root / f"synth{n}@1"
    if (folder / "manifest.json").is_file():
        cached = json.loads((folder / "manifest.json").read_text())["trainer_profile"].get("tokenizer_sha256")
        if cached == _profile(4096, "last-turn")[0]["tokenizer_sha256"]:
            return folder
        # built with a tokenizer that hashes differently today: the preflight would (rightly) refuse it
        shutil.rmtree(folder)
    root.mkdir(parents=True, exist_ok=True)

    def chunks():
        step = min(5000, n)
        for start in range(0, n, step):
            rows = synth_rows(start, min(step, n - start))
            yield ("train" if start < n * 0.98 else "eval"), rows
    t0 = time.perf_counter()
    # 5% correction samples: the snapshot's loss is last-turn, as a freeze of such data requires
    write_snapshot(folder, f"synth{n}", "plan", chunks=chunks(), max_seq_len=4096, loss="last-turn")
    print(f"built a {n}-record snapshot in {time.perf_counter() - t0:.0f} s: {folder}", flush=True)
    return folder


def _config(tmp: Path, name: str, **fields) -> Path:
    import yaml

    from mashbill.factory.store import Store

    if not (tmp / "store").is_dir():  # the ladder records each stage in the config's store
        Store.open(tmp / "store").close()
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "store": str(tmp / "store"), **fields}), encoding="utf-8")
    return path


def bench_preflight(n: int, tmp: Path) -> tuple[float, int]:
    from mashbill.trainers.config import load_config
    from mashbill.trainers.preflight import run_preflight

    snap = big_snapshot(n)
    cfg, path = load_config(_config(tmp, "pf", method="sft", snapshot=str(snap), base_model=SMOL,
                                    profile={"max_seq_len": 6144}))
    import resource

    def cpu():  # this process and its workers
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + kids.ru_utime + kids.ru_stime

    t0, c0 = time.perf_counter(), cpu()
    pf = run_preflight(cfg, path.parent)
    return time.perf_counter() - t0, cpu() - c0, pf.rechecked


def small_snapshots(tmp: Path, n_long: int = 16) -> dict[str, Path]:
    rows = synth_rows(0, 40, short=True)
    # the synthetic corpus holds 5% correction samples, so these snapshots train under a last-turn loss
    sft = write_snapshot(tmp / "bsft@1", "bsft", "plan", {"train": rows[:32], "eval": [], "test": []},
                         loss="last-turn")
    pairs = [_row(i, r["prompt"], r["completion"], kind="preference",
                  rejected=json.dumps(json.loads(r["completion"])[:1] + [{"task": "x", "category": "general"}]))
             for i, r in enumerate(rows) if r["row_kind"] == "sft"]
    dpo = write_snapshot(tmp / "bdpo@1", "bdpo", "preference", {"train": pairs[:32], "eval": [], "test": []},
                         loss="last-turn")
    names = ["trivial", "moderate", "complex", "memory_recall"]
    cx = [_row(i, r["prompt"], "{}", classes=[names[min(2, len(json.loads(r["completion"])) - 1)]])
          for i, r in enumerate(synth_rows(100, 200, short=True))]
    cls = write_snapshot(tmp / "bcx@1", "bcx", "complexity", {"train": cx[:160], "eval": cx[160:], "test": []},
                         classes={"names": names, "problem_type": "single_label_classification"})
    long_ = write_snapshot(tmp / "blong@1", "blong", "plan", {"train": synth_rows(1000, n_long), "eval": [], "test": []},
                           loss="last-turn")
    return {"sft": sft, "dpo": dpo, "classify": cls, "long": long_}


def run_steps(cfg_path: Path, steps: int) -> dict:
    from mashbill.trainers.run import train

    res = train(cfg_path, stage=f"steps:{steps}", out=cfg_path.with_suffix(".run"), log=lambda *_: None)
    return {"s_per_step": res.metrics["s_per_step"], "peak_mb": res.stages[-1]["peak_memory_mb"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=260_000)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--threads", type=int, help="torch threads per training run [default: all cores]")
    ap.add_argument("--quick", action="store_true", help="smoke run: 5,000 records, 1 step (figures are not results)")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # CONFIG:STEPS, one measured run in its own process
    a = ap.parse_args()
    if a.quick:
        a.records, a.steps = min(a.records, 5000), 1
    if a.child:
        cfg, steps = a.child.rsplit(":", 1)
        print(json.dumps(run_steps(Path(cfg), int(steps))))
        return
    with tempfile.TemporaryDirectory(prefix="mb-bench-train-") as d:
        tmp = Path(d)
        pf_s, pf_cpu, pf_n = bench_preflight(a.records, tmp)
        # CPU seconds too: on a shared machine the wall time says more about the neighbours than about us
        print(f"preflight of {pf_n} examples under a changed max_seq_len: {pf_s:.1f} s wall, {pf_cpu:.1f} s CPU "
              f"({pf_n / pf_s:.0f} examples/s wall, {pf_n / pf_cpu:.0f} per CPU second)", flush=True)
        out = {"preflight_s": f"{pf_s:.1f}", "preflight_records": pf_n, "preflight_cpu_s": f"{pf_cpu:.1f}"}
        if a.skip_train:
            print(" ".join(f"{k}={v}" for k, v in out.items()))
            return
        snaps = small_snapshots(tmp, n_long=8 if a.quick else 16)
        lora = {"r": 8, "alpha": 16, "dropout": 0.0}
        extra = {"threads": a.threads} if a.threads else {}
        sched = {"batch_size": 2, "learning_rate": 1e-4, "save_steps": 1000}
        cfgs = {
            "sft": _config(tmp, "sft", **extra, method="sft", snapshot=str(snaps["sft"]), base_model=SMOL, lora=lora,
                           schedule=sched),
            "dpo": _config(tmp, "dpo", **extra, method="dpo", snapshot=str(snaps["dpo"]), base_model=SMOL, lora=lora,
                           schedule=sched),
            "classify": _config(tmp, "cx", **extra, method="classify", snapshot=str(snaps["classify"]),
                                base_model="embedded:all-minilm-l6-v2", schedule={**sched, "batch_size": 16}),
            "keep": _config(tmp, "keep", **extra, method="sft", snapshot=str(snaps["long"]), base_model=SMOL, lora=lora,
                            schedule={**sched, "batch_size": 1}, logits_to_keep=True, attn_implementation="sdpa"),
            "full": _config(tmp, "full", **extra, method="sft", snapshot=str(snaps["long"]), base_model=SMOL, lora=lora,
                            schedule={**sched, "batch_size": 1}, logits_to_keep=False, attn_implementation="sdpa"),
        }
        got = {}
        for key, cfg in cfgs.items():
            proc = subprocess.run([sys.executable, __file__, "--child", f"{cfg}:{a.steps}"], capture_output=True,
                                  text=True)
            if proc.returncode != 0:
                sys.exit(f"{key} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
            got[key] = json.loads(proc.stdout.strip().splitlines()[-1])
            print(f"{key:<9} {got[key]['s_per_step']:.2f} s/step, peak RSS {got[key]['peak_mb']:.0f} MB", flush=True)
        k, f = got["keep"], got["full"]
        print(f"logits_to_keep on ~2,500-token prompts: {f['s_per_step'] / k['s_per_step']:.2f}x faster per step, "
              f"peak RSS {k['peak_mb']:.0f} MB vs {f['peak_mb']:.0f} MB")
        out.update({"sft_s_per_step": f"{got['sft']['s_per_step']:.2f}",
                    "dpo_s_per_step": f"{got['dpo']['s_per_step']:.2f}",
                    "classify_s_per_step": f"{got['classify']['s_per_step']:.3f}",
                    "keep_s_per_step": f"{k['s_per_step']:.2f}", "nokeep_s_per_step": f"{f['s_per_step']:.2f}",
                    "keep_peak_mb": f"{k['peak_mb']:.0f}", "nokeep_peak_mb": f"{f['peak_mb']:.0f}",
                    "logits_to_keep_mem_ratio": f"{f['peak_mb'] / k['peak_mb']:.2f}",
                    "logits_to_keep_step_ratio": f"{f['s_per_step'] / k['s_per_step']:.2f}"})
        print(" ".join(f"{k}={v}" for k, v in out.items()))


if __name__ == "__main__":
    main()
