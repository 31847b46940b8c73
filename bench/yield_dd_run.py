"""Run inside NeMo Data Designer's own environment (bench/yield.py --dd runs it with --dd-python): one structured
column over our rendered prompts, against an OpenAI-compatible server, with DD's correction loop.

    ~/.cache/mashbill-dd-venv/bin/python bench/yield_dd_run.py --requests REQ.jsonl --schema SCHEMA.json \
        --url http://127.0.0.1:PORT/v1 --model smollm2 --out DIR [--correction-steps 2] [--temperature 0.2] ...

REQ.jsonl: one {"i", "system", "user"} per request (our prompt, rendered by bench/yield_dd.py). DD's
`LLMStructuredColumnConfig` asks with `system_prompt="{{ system }}"`, `prompt="{{ user }}"` and our JSON Schema as
`output_format` (DD adds its own schema instructions to the user turn and parses a ```json fence or bare JSON);
With --constrained the schema also goes to the server in DD's `extra_body` (llama-cpp-python's
`response_format: json_object + schema`), so decoding is constrained as ours is.
`RunConfig.max_conversation_correction_steps` = --correction-steps, `max_conversation_restarts` = 0 (so a
request costs at most 1 + correction-steps calls, as ours does), one request in flight. Writes DIR/dd_rows.jsonl
(one {"i", "output", "trace"} per row DD kept; a row DD dropped is absent) and prints one JSON line with the
wall time and DD's version. Imports only Data Designer and the standard library: it never sees mashbill.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", required=True)
    ap.add_argument("--schema", required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--out", required=True)
    ap.add_argument("--correction-steps", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=0.2)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--constrained", action="store_true",
                    help="also send the schema for the server to enforce (extra_body response_format, as "
                         "llama-cpp-python's server takes it); default: DD's own prompted schema only")
    args = ap.parse_args()

    stage = "import data_designer"
    try:
        import pandas as pd
        from data_designer.config import (ChatCompletionInferenceParams, DataDesignerConfigBuilder,
                                          DataFrameSeedSource, LLMStructuredColumnConfig, ModelConfig, ModelProvider,
                                          RunConfig, TraceType)
        from data_designer.config.version import get_library_version
        from data_designer.interface import DataDesigner

        stage = "configure"
        rows = [json.loads(ln) for ln in Path(args.requests).read_text(encoding="utf-8").splitlines() if ln.strip()]
        schema = json.loads(Path(args.schema).read_text(encoding="utf-8"))
        provider = ModelProvider(name="llama-cpp", endpoint=args.url, provider_type="openai", api_key="none",
                                 extra_body={"seed": args.seed})
        extra = {"response_format": {"type": "json_object", "schema": schema}} if args.constrained else None
        params = ChatCompletionInferenceParams(temperature=args.temperature, top_p=args.top_p,
                                               max_tokens=args.max_tokens, max_parallel_requests=1, timeout=600,
                                               extra_body=extra)
        model = ModelConfig(alias="teacher", model=args.model, provider="llama-cpp", inference_parameters=params)
        builder = DataDesignerConfigBuilder(model_configs=[model])
        builder.with_seed_dataset(DataFrameSeedSource(df=pd.DataFrame(rows)))
        builder.add_column(LLMStructuredColumnConfig(name="answer", model_alias="teacher", system_prompt="{{ system }}",
                                                     prompt="{{ user }}", output_format=schema,
                                                     with_trace=TraceType.ALL_MESSAGES))
        out = Path(args.out)
        dd = DataDesigner(artifact_path=out / "artifacts", model_providers=[provider])
        dd.set_run_config(RunConfig(max_conversation_correction_steps=args.correction_steps,
                                    max_conversation_restarts=0, disable_early_shutdown=True,
                                    otel_metrics_port=None))
        stage = "create"
        t0 = time.perf_counter()
        result = dd.create(builder, num_records=len(rows), dataset_name="yield-dd")
        wall = time.perf_counter() - t0
        stage = "read back"
        df = result.load_dataset()
        with open(out / "dd_rows.jsonl", "w", encoding="utf-8") as fh:
            for rec in df.to_dict(orient="records"):
                answer = rec.get("answer")
                trace = rec.get("answer__trace")
                fh.write(json.dumps({"i": int(rec["i"]), "output": _plain(answer), "trace": _plain(trace)},
                                    ensure_ascii=False) + "\n")
    except BaseException as exc:  # noqa: BLE001 - the bench reports where DD stopped, whatever stopped it
        print(json.dumps({"ok": False, "stage": stage, "error": f"{type(exc).__name__}: {exc}"[:2000]}))
        return 1
    print(json.dumps({"ok": True, "rows": len(df), "requests": len(rows), "wall_s": wall,
                      "version": get_library_version()}))
    return 0


def _plain(value):
    """A DataFrame cell as JSON-able data: numpy arrays and scalars to lists and numbers, JSON text to objects."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


if __name__ == "__main__":
    sys.exit(main())
