"""Validators: every check a record must pass before a GPU hour is spent on it.

Each check returns verdicts (``mashbill.factory.records.Verdict``) with a stable code, a severity
(``reject``, ``penalty``, ``flag``) and a short detail; nothing is dropped silently. The codes:

- ``SCHEMA001`` output does not match the spec's output schema; ``SCHEMA002`` output missing or not JSON.
- ``PLAN001``-``PLAN009`` plan contract, ``HR001``-``HR008`` routing rules, ``FIT001`` category fit: see the rule set
  (``specs/library/shared/rules/moe-routing@6.yaml``) and ``routing.py``, one entry per rule.
- ``SPAN001`` target partly cut, ``SPAN002`` fully cut, ``SPAN003`` prompt alone fills the window, ``SPAN004`` left
  truncation drops the start of the prompt, ``SPAN005`` the loss covers no token, ``SPAN006`` assistant turn not
  found in the rendered chat, ``SPAN007`` the chat template refused the conversation, ``SPAN008`` an assistant turn is
  empty or whitespace-only, ``SPAN010`` a correction sample's wrong turn is trained, ``SPAN011`` the span audit's
  second tokenizer tokenizes the example differently (``spans.py``, ``span_audit.py``).
- ``DUP001`` exact duplicate, ``DUP002`` near duplicate (``dedup.py``); ``LEAK001`` matches a holdout or eval item
  (``leakage.py``); ``PII001``-``PII004`` e-mail, phone, IBAN, personal name (``pii.py``).
- ``FMT001``-``FMT003`` unreadable, incomplete or foreign rows of an input file (``inputs.py``).
- ``ARG001``-``ARG004`` argument fidelity (``fidelity.py``), ``COPY001``/``DRIFT001`` parroting and drift
  (``drift.py``): rules of the rule set too.
- ``CPLX001``-``CPLX009`` complexity labels against the reference estimator's overrides and heuristic: the
  complexity rule set (``specs/library/shared/rules/moe-complexity@1.yaml``, ``complexity_rules.py``) and
  ``complexity.py``, one entry per rule.

Every plan (and complexity label) is checked by ``checker.RecordChecker`` (built from a resolved spec), wherever it is
checked. Every code
is registered in ``mashbill.factory.codes``.

Dataset-level expectations (a Great Expectations suite per kind) are in ``expectations.py``; ``run.py`` runs it all
and builds the report; ``mashbill validate`` is the command line. Heavy libraries (transformers, great_expectations)
are imported inside the functions that need them.
"""

from __future__ import annotations

from mashbill.factory.codes import CODES as _REGISTRY

# code -> (default severity, what it means), for the codes the validators emit outside the rule set; every code the
# project emits is registered in mashbill.factory.codes (`mashbill codes` lists them)
CODES: dict[str, tuple[str, str]] = {c.code: (c.severity, c.meaning) for c in _REGISTRY.values()
                                     if c.source == "validate"}
