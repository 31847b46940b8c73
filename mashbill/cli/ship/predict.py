"""`mashbill predict ARTIFACT TEXT|FILE`: run an exported student on the CPU, one JSON line per input."""

from __future__ import annotations

import json
from pathlib import Path

import click

from mashbill.cli._common import echo_json, json_option
from mashbill.errors import MashbillError


def read_inputs(arg: str) -> list[str]:
    """A file of inputs (.jsonl rows with "text" or "query", else one per line), or the text itself."""
    p = Path(arg)
    if not p.is_file():
        if not arg.strip():
            raise MashbillError("INPUTS is an empty request; give a text or a .txt/.jsonl file of them")
        return [arg]
    data = p.read_bytes()
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise MashbillError(f"{p}:{line}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    texts = []
    for n, line in enumerate(content.splitlines(), 1):
        if not line.strip():
            continue
        if p.suffix == ".jsonl":
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise MashbillError(f"{p}:{n}: not JSON ({exc.msg})") from None
            text = row.get("text", row.get("query")) if isinstance(row, dict) else None
            if not isinstance(text, str):
                raise MashbillError(f"{p}:{n}: field 'text' (or 'query'): expected a string")
            if not text.strip():
                raise MashbillError(f"{p}:{n}: field 'text' (or 'query'): an empty request")
            texts.append(text)
        else:
            texts.append(line)
    if not texts:
        raise MashbillError(f"{p}: holds no inputs")
    return texts


@click.command()
@click.argument("artifact", type=click.Path(path_type=Path))
@click.argument("inputs")
@click.option("--threads", default=1, show_default=True, help="CPU threads for the model (onnxruntime or llama.cpp).")
@json_option(help="Print one JSON list of the answers instead of one JSON line per input.")
def command(artifact, inputs, threads, as_json):
    """Run ARTIFACT (a .onnx or .gguf file, or an export folder) on INPUTS (a text, or a .txt/.jsonl file).

    ONNX classifiers print the label(s) and logits; GGUF planners print the schema-constrained JSON answer.

    \b
    Example:
      mashbill predict ./mashbill-exports/router-onnx "Was ist 7 hoch 5?"
      mashbill predict ./mashbill-exports/planner-gguf/model.q4_k_m.gguf queries.jsonl
    """
    from mashbill.exporters.manifest import verified_artifact
    from mashbill.exporters.predict import load_predictor

    texts = read_inputs(inputs)
    pred = load_predictor(verified_artifact(artifact)[0], threads=threads)
    try:
        rows = pred.predict(texts)
        if as_json:
            echo_json(list(rows))
            return
        for row in rows:
            click.echo(json.dumps(row, ensure_ascii=False))
    finally:
        if hasattr(pred, "close"):
            pred.close()
