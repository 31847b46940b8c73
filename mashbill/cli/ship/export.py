"""`mashbill export onnx|gguf RUN`: a training run folder -> CPU artifacts with parity or verification reports.

(Record dumps to Parquet are `mashbill dump SPEC`.)
"""

from __future__ import annotations

from pathlib import Path

import click

from mashbill.cli._common import (Group, PlainProgress, console, echo_json, json_option, out, plain_progress_wanted,
                                  store_option)


def _common(f):
    f = json_option(help="Print the export manifest as JSON.")(f)
    f = store_option(default=None, help="Store whose snapshots/ holds the run's snapshot [default: the snapshot "
                                        "folder the run's lineage records].")(f)
    f = click.option("--snapshot", "snapshot", default=None,
                     help="The run's snapshot: a folder or NAME@VERSION (default: the one in lineage.json).")(f)
    f = click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="Export folder to create (default: ./mashbill-exports/RUN-KIND).")(f)
    return click.argument("run", type=click.Path(path_type=Path))(f)


class VerifyProgress:
    """Verification progress, one line per answer (`verify q8_0: 3/20 rows`) plus, when stderr is not a terminal,
    a plain line at a steady interval while a slow row decodes."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.plain = PlainProgress("export gguf", unit="rows") if plain_progress_wanted(enabled) else None
        self.started = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.plain is not None and self.started:
            self.plain.__exit__(*exc)

    def __call__(self, name: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.plain is not None:
            self.plain.label = f"export gguf, verify {name}"
            if not self.started:  # lines begin with the verification: refused input stays one line on stderr
                self.started = True
                self.plain.__enter__()
            self.plain.update(done, total)
        else:
            console.print(f"verify {name}: {done}/{total} rows", soft_wrap=True)


@click.group(cls=Group)
def command():
    """Export a trained student for CPUs: ONNX INT8 (classifiers) or GGUF Q8_0/Q4_K_M (LoRA planners).

    Each export folder holds the artifacts, their parity or verification report and export.json (spec
    hashes -> snapshot id -> run -> artifacts with sha256), and is written whole or not at all.

    \b
    Example:
      mashbill export onnx ./mashbill-runs/router --store ./mashbill-data
      mashbill export gguf ./mashbill-runs/planner --store ./mashbill-data
    """


def _report(path: Path, m: dict, as_json: bool) -> None:
    if as_json:
        echo_json(m)
        return
    out.print(f"[bold]{path}[/bold]  ({m['kind']}, run {m['run']['run_id']}, snapshot {m['snapshot']['ref']} "
              f"{m['snapshot']['snapshot_id'][:12]})")
    for name, a in m["artifacts"].items():
        out.print(f"  {name:<12} {a['path']:<34} {a['bytes']:>11,d} B  sha256 {a['sha256'][:16]}")


@command.command(short_help="Classifier RUN -> ONNX + INT8 ONNX, with parity and latency in parity.json.")
@_common
@click.option("--max-length", default=64, show_default=True, help="Tokens per request (truncation).")
@click.option("--latency-samples", default=300, show_default=True, help="Timed requests per graph and thread count.")
def onnx(run, out_dir, snapshot, store_path, as_json, max_length, latency_samples):
    """Classifier RUN -> model.onnx (opset 18, dynamic batch/sequence) + model.int8.onnx, with parity on the
    snapshot's eval split (agreement, accuracy drop, max logit difference) and latency at 1 and 2 threads
    (p50/p95/p99, tokenization included) in parity.json.

    \b
    Example:
      mashbill export onnx ./mashbill-runs/router --store ./mashbill-data --out ./exports/router-onnx
    """
    from mashbill.exporters.build import export_onnx

    path, m = export_onnx(run, out=out_dir, snapshot=snapshot, store=store_path, max_length=max_length,
                          latency_samples=latency_samples)
    _report(path, m, as_json)
    if not as_json:
        p = m["reports"]["parity"]
        i8, lat = p["parity"]["int8"], p["latency"]["int8_threads1"]
        out.print(f"  int8: agreement {i8['agreement']:.4f}, accuracy drop {i8['accuracy_drop_points']} points, "
                  f"max logit diff {i8['max_abs_logit_diff']}; 1 thread p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms")


@command.command(short_help="LoRA RUN -> GGUF f16, Q8_0 and Q4_K_M, verified in verify.json, plus an Ollama "
                                    "Modelfile.")
@_common
@click.option("--quant", "quants", multiple=True, default=("q8_0", "q4_k_m"), show_default=True,
              type=click.Choice(["q8_0", "q4_k_m"]), help="Quantizations to write (repeat the option).")
@click.option("--verify-rows", "--verify-limit", "verify_limit", type=click.IntRange(min=1), default=None,
              help="Verify each file on the first N eval rows only (default: all; one row can take minutes on a "
                   "busy CPU).")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="CPU threads for quantizing and verifying [default: the cores free now: affinity less load].")
@click.option("--max-tokens", default=256, show_default=True, help="Token budget per verified answer.")
@click.option("--no-progress", is_flag=True, help="No progress lines while verifying.")
def gguf(run, out_dir, snapshot, store_path, as_json, quants, verify_limit, threads, max_tokens, no_progress):
    """LoRA RUN -> merged model -> model.f16.gguf -> model.q8_0.gguf, model.q4_k_m.gguf, verified on the
    snapshot's eval split with schema-constrained decoding (schema-valid rate, rule-pass rate, exact match,
    answer flips between files) in verify.json, plus an Ollama Modelfile.

    \b
    Example:
      mashbill export gguf ./mashbill-runs/planner --store ./mashbill-data --verify-rows 20
    """
    from mashbill.exporters.build import export_gguf
    from mashbill.factory.teachers.llama_cpp import free_cores

    with VerifyProgress(enabled=not no_progress and not as_json) as progress:
        path, m = export_gguf(run, out=out_dir, snapshot=snapshot, store=store_path, quants=tuple(quants),
                              verify_limit=verify_limit, threads=threads or free_cores(), max_tokens=max_tokens,
                              on_row=progress)
    _report(path, m, as_json)
    if not as_json:
        v = m["reports"]["verify"]
        for name, s in v["files"].items():
            out.print(f"  {name:<7} schema-valid {s['schema_valid_rate']:.2f}  rule-pass {s['rule_pass_rate']:.2f}  "
                      f"exact {s['exact_match']:.2f}  {s['tokens_per_s']} tok/s")
        for pair, f in v["flips"].items():
            out.print(f"  {pair}: {f['answers_differ']}/{f['n']} answers differ, {f['right_to_wrong']} right->wrong, "
                      f"{f['wrong_to_right']} wrong->right")
