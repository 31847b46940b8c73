"""Re-validate a reviewer's corrected output through the same checks generation and validation use.

A correction is the text of the `correction` question. It counts only when it differs from the
teacher's output (the question starts pre-filled with it). It must parse as JSON (PARSE001), match
the spec's output schema (SCHEMA001) and pass the one record checker's rules
(`mashbill.validators.checker.RecordChecker`, with the codes `mashbill validate` stores).
A reject-severity finding makes it invalid: it is stored with its issues and
`correction_valid = false`, and curation does not use it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import jsonschema

from mashbill import jsontext
from mashbill.factory.records import Record, Verdict, parse_verdict, schema_verdicts
from mashbill.specs import ResolvedSpec

RuleCheck = Callable[[Record, Any], list[Verdict]]


@dataclass(frozen=True)
class CorrectionCheck:
    given: bool  # a correction that differs from the teacher's output
    value: Any = None  # the parsed correction (None when not given or not JSON)
    valid: bool | None = None  # None when not given
    issues: tuple[dict, ...] = ()  # {"code", "severity", "detail"} per finding


def rule_checker(rs: ResolvedSpec) -> RuleCheck | None:
    """The spec's rules over a candidate output (stage "review"); None for specs without a rule set."""
    from mashbill.validators.checker import RecordChecker

    checker = RecordChecker.for_spec(rs)
    if checker.ruleset is None:
        return None

    def check(record: Record, value: Any) -> list[Verdict]:
        return checker.check(record.input or {}, value, record.meta, schema=False, stage="review")

    return check


class CorrectionValidator:
    def __init__(self, rs: ResolvedSpec):
        self.schema = jsonschema.validators.validator_for(rs.output_schema)(rs.output_schema)
        self.rules = rule_checker(rs)

    def check(self, record: Record, text: Any) -> CorrectionCheck:
        if text is None or (isinstance(text, str) and not text.strip()):
            return CorrectionCheck(False)
        if not isinstance(text, str):
            text = json.dumps(text, ensure_ascii=False)
        try:
            value = jsontext.loads(text)
        except json.JSONDecodeError as exc:
            return CorrectionCheck(True, None, False, (_issue(parse_verdict(exc)),))
        if value == record.output:
            return CorrectionCheck(False)
        found = schema_verdicts(self.schema, value, 5)
        if self.rules is not None and not found:
            found += self.rules(record, value)
        valid = not any(v.severity == "reject" for v in found)
        return CorrectionCheck(True, value, valid, tuple(_issue(v) for v in found))


def _issue(v: Verdict) -> dict:
    """A verdict as the review dataset's issue (a JSON object beside the correction)."""
    return {"code": v.code, "severity": v.severity, "detail": v.detail}
