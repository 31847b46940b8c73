"""Validators: every check a record must pass before a GPU hour is spent on it. Every verdict code, its severity and
the module that emits it: `mashbill codes`. Heavy libraries (transformers, great_expectations) are imported inside
the functions that need them.

- ``checker``: One record checker, built from a resolved spec: the output schema, the rule set with its tool ...
- ``complexity/``: The complexity rule set over complexity labels.
- ``data/``: Dataset-level checks: duplicates, leakage, personal data, expectations, foreign input files.
- ``errors``: User-facing errors of the validators (the CLI prints them as one line).
- ``plans/``: The routing rule set over planner plans: its rules, triggers, argument and fidelity checks.
- ``prefilter``: Many patterns, one pass: Hyperscan names the patterns that may match a text, and only those ...
- ``queries/``: The screens a synthesized query passes before it joins the pool.
- ``run``: Running all checks over a set of rows, and the report they produce.
- ``run_store``: Validating a spec's stored records: read from the store a batch at a time, each record's own ...
- ``spans/``: Token-span coverage: does each training target survive the trainer's window, token for token?
- ``tokenizers/``: The trainer's tokenizer, offline, and the GGUF tokenizer rebuilt exactly as llama.cpp's.
"""

from __future__ import annotations

from mashbill.factory.codes import CODES as _REGISTRY

# code -> (default severity, what it means), for the codes the validators emit outside the rule set; every code the
# project emits is registered in mashbill.factory.codes (`mashbill codes` lists them)
CODES: dict[str, tuple[str, str]] = {c.code: (c.severity, c.meaning) for c in _REGISTRY.values()
                                     if c.source == "validate"}
