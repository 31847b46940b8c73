"""`mashbill export onnx|gguf`: one run folder in, one verified export folder out (written whole or not at all).

Every input is checked before any conversion (the run's lineage, its snapshot's hashes, the base model);
the export is built in a temporary folder and renamed into place after the manifest is written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mashbill.exporters import manifest as mf
from mashbill.exporters.runs import ExportError, load_run, snapshot_for
from mashbill.files import staged_dir

DEFAULT_ROOT = Path("./mashbill-exports")


def default_out(run_path: Path, kind: str) -> Path:
    return DEFAULT_ROOT / f"{Path(run_path).resolve().name}-{kind}"


def export_onnx(run_path: str | Path, *, out: str | Path | None = None, snapshot: str | Path | None = None,
                store: str | Path | None = None, max_length: int = 64, latency_samples: int = 300,
                threads: tuple[int, ...] = (1, 2)) -> tuple[Path, dict]:
    from mashbill.exporters.onnx.onnx_export import export_classifier, load_classifier
    from mashbill.exporters.onnx.parity import onnx_report

    run = load_run(run_path)
    if run.method != "classify":
        raise ExportError(f"{run.path / 'lineage.json'}: field 'method' is {run.method!r}; ONNX export takes a "
                          "classify run (use `mashbill export gguf` for sft/dpo runs)")
    if (run.lineage.get("trainer_profile") or {}).get("format") == "pairs":
        # parity and the predictor take one text per request; a reward model scores (request, plan) pairs
        raise ExportError(f"{run.path / 'lineage.json'}: field 'trainer_profile.format' is 'pairs' (a plan-vs-correct "
                          "reward model); ONNX export takes single-text classifiers only")
    snap = snapshot_for(run, snapshot, store=store)
    lineage = mf.lineage_of(run, snap)
    final = Path(out) if out else default_out(run.path, "onnx")
    with staged_dir(final) as tmp:
        paths = export_classifier(run, tmp, lineage, max_length=max_length)
        model, tokenizer = load_classifier(run)
        report = onnx_report(model, tokenizer, paths, snap, max_length=max_length, latency_samples=latency_samples,
                             threads=threads)
        (tmp / "parity.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tok_files = {f"tokenizer/{p.name}": p for p in sorted((tmp / "tokenizer").iterdir()) if p.is_file()}
        arts = {"onnx_fp32": paths["fp32"], "onnx_int8": paths["int8"], "parity": tmp / "parity.json", **tok_files}
        m = mf.build("onnx", run, snap, tmp, arts, "onnx_int8", {"parity": report})
        mf.write(tmp, m)
    return final, m


def export_gguf(run_path: str | Path, *, out: str | Path | None = None, snapshot: str | Path | None = None,
                store: str | Path | None = None, quants: tuple[str, ...] = ("q8_0", "q4_k_m"),
                verify_limit: int | None = None, threads: int = 2, max_tokens: int = 256,
                keep_f16: bool = True, on_row=None) -> tuple[Path, dict]:
    """LoRA run -> merged -> f16/quantized GGUFs, verified on at most `verify_limit` rows (`on_row(file, done,
    total)` after each verified answer)."""
    from mashbill.exporters.gguf.gguf_export import QUANTS, convert_f16, merge_adapter, quantize
    from mashbill.exporters.gguf.gguf_meta import copy_with_metadata
    from mashbill.exporters.gguf.gguf_verify import SPLIT_ORDER, eval_rows, verify_files
    from mashbill.exporters.gguf.modelfile import modelfile

    for q in quants:
        if q not in QUANTS:
            raise ExportError(f"unknown quantization {q!r}; expected one of {', '.join(QUANTS)}")
    run = load_run(run_path)
    if run.method == "classify":
        raise ExportError(f"{run.path / 'lineage.json'}: field 'method' is 'classify'; GGUF export takes an sft or "
                          "dpo run (use `mashbill export onnx` for classifiers)")
    snap = snapshot_for(run, snapshot, store=store)
    lineage = mf.lineage_of(run, snap)
    rows = next((r for s in SPLIT_ORDER if (r := eval_rows(snap, 1, s))), [])
    system = next((m["content"] for m in rows[0]["prompt"] if m["role"] == "system"), None) if rows else None
    from mashbill.specs import load_spec

    schema = load_spec(snap.spec_path()).output_schema
    final = Path(out) if out else default_out(run.path, "gguf")
    with staged_dir(final) as tmp:
        work = tmp / ".work"
        merged = merge_adapter(run, work / "merged")
        raw = work / "raw.f16.gguf"
        convert_f16(merged, raw, name=f"{run.adapter_dir} merged into {run.base_model}")
        shutil.rmtree(merged)
        f16 = tmp / "model.f16.gguf"
        meta = {"mashbill.lineage": json.dumps(lineage, sort_keys=True),
                "mashbill.output_schema": json.dumps(schema, sort_keys=True)}
        if system:
            meta["mashbill.system_prompt"] = system
        copy_with_metadata(raw, f16, meta)
        raw.unlink()
        files = {"f16": f16}
        for q in quants:
            files[q] = tmp / f"model.{q}.gguf"
            quantize(f16, files[q], q, threads=threads)
        shutil.rmtree(work)
        report = verify_files(files, snap, limit=verify_limit, threads=threads, max_tokens=max_tokens,
                              on_row=on_row)
        (tmp / "verify.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        primary = quants[-1] if quants else "f16"
        (tmp / "Modelfile").write_text(modelfile(files[primary]), encoding="utf-8")
        if not keep_f16 and quants:
            f16.unlink()
            del files["f16"]
        arts = {f"gguf_{k}": p for k, p in files.items()}
        arts.update({"verify": tmp / "verify.json", "modelfile": tmp / "Modelfile"})
        m = mf.build("gguf", run, snap, tmp, arts, f"gguf_{primary}",
                     {"verify": {k: v for k, v in report.items() if k != "files"} |
                      {"files": {n: {k: v for k, v in s.items() if k != "answers"} for n, s in report["files"].items()}}})
        mf.write(tmp, m)
    return final, m
