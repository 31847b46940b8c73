"""Validators: every check a record must pass before a GPU hour is spent on it.

Each check returns verdicts (``mashbill.factory.records.Verdict``) with a stable code, a severity
(``reject``, ``penalty``, ``flag``) and a short detail; nothing is dropped silently. The codes:

- ``SCHEMA001`` output does not match the spec's output schema; ``SCHEMA002`` output missing or not JSON.
- ``PLAN001``-``PLAN008`` plan contract, ``HR001``-``HR008`` routing rules: see the rule set
  (``specs/library/shared/rules/moe-routing@1.yaml``) and ``routing.py``, one entry per rule.
- ``SPAN001`` target partly cut, ``SPAN002`` fully cut, ``SPAN003`` prompt alone fills the window, ``SPAN004`` left
  truncation drops the start of the prompt, ``SPAN005`` the loss covers no token, ``SPAN006`` assistant turn not
  found in the rendered chat, ``SPAN007`` the chat template refused the conversation, ``SPAN008`` an assistant turn is
  empty or whitespace-only, ``SPAN010`` a correction sample's wrong turn is trained (``spans.py``).
- ``DUP001`` exact duplicate, ``DUP002`` near duplicate (``dedup.py``); ``LEAK001`` matches a holdout or eval item
  (``leakage.py``); ``PII001``-``PII004`` e-mail, phone, IBAN, personal name (``pii.py``).
- ``FMT001``-``FMT003`` unreadable, incomplete or foreign rows of an input file (``inputs.py``).

Dataset-level expectations (a Great Expectations suite per kind) are in ``expectations.py``; ``run.py`` runs it all
and builds the report; ``mashbill validate`` is the command line. Heavy libraries (transformers, great_expectations)
are imported inside the functions that need them.
"""

from __future__ import annotations

CODES: dict[str, tuple[str, str]] = {
    # code: (default severity, what it means)
    "SCHEMA001": ("reject", "output does not match the spec's output schema"),
    "SCHEMA002": ("reject", "output missing or not JSON"),
    "SPAN001": ("reject", "target partly beyond max_seq_len"),
    "SPAN002": ("reject", "target entirely beyond max_seq_len"),
    "SPAN003": ("reject", "prompt alone fills the window"),
    "SPAN004": ("flag", "left truncation drops the start of the prompt"),
    "SPAN005": ("reject", "the loss covers no token"),
    "SPAN006": ("reject", "assistant turn not found in the rendered chat"),
    "SPAN007": ("reject", "the chat template refused the conversation"),
    "SPAN008": ("reject", "an assistant turn is empty or whitespace-only"),
    "SPAN010": ("reject", "a correction sample's wrong assistant turn is trained"),
    "DUP001": ("reject", "exact duplicate after normalisation"),
    "DUP002": ("penalty", "near duplicate (MinHash/LSH cluster member that is not kept)"),
    "LEAK001": ("reject", "matches an item of a holdout set or the eval split"),
    "PII001": ("flag", "e-mail address"),
    "PII002": ("flag", "phone number"),
    "PII003": ("flag", "IBAN"),
    "PII004": ("flag", "personal name"),
    "FMT001": ("reject", "row is not UTF-8, not JSON or not an object"),
    "FMT002": ("reject", "row lacks a required field or has the wrong type"),
    "FMT003": ("reject", "row belongs to another format"),
}


def record_checks(rs, stage: str = "generate"):
    """Checks for the factory's ``generate(checks=...)``: the output schema is checked there already; this adds the
    spec's routing rules (plan specs with a ``rules`` file), per record, with verdicts of the given stage."""
    from dataclasses import replace

    if rs.spec.kind != "plan" or not rs.spec.rules:
        return []
    from mashbill.validators.plans import Shown
    from mashbill.validators.routing import check_plan
    from mashbill.validators.ruleset import load_ruleset
    from mashbill.validators.triggers import triggers_for

    ruleset = load_ruleset(rs.file_paths["rules"])
    trig = triggers_for(ruleset)

    def routing_rules(record):
        meta = record.meta or {}
        names = meta.get("taxonomy_shown")
        shown = Shown(frozenset(names) if isinstance(names, list) else None, dict(meta.get("taxonomy_renamed") or {}))
        query = (record.input or {}).get("query") or ""
        if record.output is None or not query:
            return []
        return [replace(v, stage=stage) for v in check_plan(ruleset, query, record.output, shown, rs.catalog,
                                                            trig.analyze(query))]

    return [routing_rules]
