"""Rule checks on plans that curation builds itself (edited plans, teacher samples, corrections).

An adapter over the validators: the rule set is the spec's versioned rule file loaded by
`mashbill.validators.ruleset.load_ruleset`, and every plan goes through
`mashbill.validators.routing.check_plan` with the taxonomy that was shown for its record, exactly as
`mashbill validate` checks stored records. Schema errors come first, from the spec's output schema.
"""

from __future__ import annotations

from typing import Any, Sequence

import jsonschema

from mashbill.factory.records import Verdict
from mashbill.specs import ResolvedSpec

FAILING = ("reject", "penalty")


def failing_codes(verdicts: Sequence[Verdict]) -> list[str]:
    return sorted({v.code for v in verdicts if v.severity in FAILING})


def score(verdicts: Sequence[Verdict]) -> int:
    """Higher is better: 0 for a clean plan, -2 per reject finding, -1 per penalty."""
    return -sum(2 if v.severity == "reject" else 1 for v in verdicts if v.severity in FAILING)


def shown_for(meta: dict):
    from mashbill.validators.plans import Shown

    if isinstance(meta.get("taxonomy_shown"), list):
        return Shown(frozenset(meta["taxonomy_shown"]), dict(meta.get("taxonomy_renamed") or {}))
    return Shown(None)


class PlanChecker:
    """Every per-record rule of a spec, run on (input, output, meta) as if it were a stored record."""

    def __init__(self, rs: ResolvedSpec):
        self.rs = rs
        self.schema = jsonschema.validators.validator_for(rs.output_schema)(rs.output_schema)
        self.ruleset = None
        self.engine = "schema-only"
        if "rules" in rs.file_paths:
            from mashbill.validators.ruleset import load_ruleset
            from mashbill.validators.triggers import triggers_for

            self.ruleset = load_ruleset(rs.file_paths["rules"])
            self.triggers = triggers_for(self.ruleset)
            self.engine = f"validators:{self.ruleset.name}@{self.ruleset.version}"

    def rule_codes(self) -> dict[str, str]:
        """Rule id -> code."""
        return {r.id: r.code for r in self.ruleset.rules} if self.ruleset is not None else {}

    def check(self, inputs: dict, output: Any, meta: dict) -> list[Verdict]:
        verdicts = []
        for err in sorted(self.schema.iter_errors(output), key=lambda e: list(e.path))[:3]:
            where = "/".join(map(str, err.absolute_path)) or "(root)"
            verdicts.append(Verdict("SCHEMA001", "reject", f"{where}: {err.message[:200]}", "validate"))
        if verdicts or self.ruleset is None:
            return verdicts
        from mashbill.validators.routing import check_plan

        query = inputs.get("query") or ""
        return check_plan(self.ruleset, query, output, shown_for(meta), self.rs.catalog,
                          self.triggers.analyze(query))
