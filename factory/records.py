"""The record: small, typed and immutable. Verdicts sit beside it, not inside it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from mashbill.hashing import canonical_json, sha256_text

Status = Literal["accepted", "rejected", "failed"]
Severity = Literal["reject", "penalty", "flag"]


def record_id(spec_hash: str, inputs: dict) -> str:
    return sha256_text(f"{spec_hash}\n{canonical_json(inputs)}")


def sft_key(messages, completion: str, shared: dict[tuple[str, str], str] | None = None) -> str:
    """The key a snapshot gives a training example of a prompt and its completion (canonical JSON text): the sha256 of
    the canonical JSON array ["sft", messages, completion]. Kept with each record when it is written (`records.sft_key`)
    so that a freeze reads it instead of hashing every record's prompt. `shared` holds each system message's canonical
    JSON, encoded once for all the records that share it (the same long system prompt): the bytes hashed are the
    same, since a JSON array is its items' encodings joined by commas."""
    parts = []
    for m in messages:
        if shared is not None and m.get("role") == "system" and len(m) == 2 and isinstance(m.get("content"), str):
            k = (m["role"], m["content"])
            part = shared.get(k)
            if part is None:
                part = shared[k] = canonical_json(m)
        else:
            part = canonical_json(m)
        parts.append(part)
    return sha256_text('["sft",[' + ",".join(parts) + "]," + canonical_json(completion) + "]")


@dataclass(frozen=True, slots=True)
class Verdict:
    code: str  # stable reason code, e.g. "PARSE001"
    severity: Severity
    detail: str = ""
    stage: str = "generate"


def verdict_dicts(verdicts) -> list[dict]:
    """Verdicts as JSON-ready dicts (a stored attempt's, a kept record check's); ``Verdict(**d)`` reads one back."""
    return [{"code": v.code, "severity": v.severity, "detail": v.detail, "stage": v.stage} for v in verdicts]


def parse_verdict(exc: json.JSONDecodeError) -> Verdict:
    """PARSE001 for text that is not JSON, worded one way wherever teacher or reviewer text is parsed."""
    return Verdict("PARSE001", "reject", f"not JSON: {exc.msg} at char {exc.pos}")


def schema_verdicts(validator, value: Any, limit: int) -> list[Verdict]:
    """SCHEMA001 for each of the first `limit` output-schema errors (a jsonschema validator), in path order, each
    naming where in the output it is ("(root)" for the whole value)."""
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))[:limit]
    return [Verdict("SCHEMA001", "reject", f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:200]}")
            for e in errors]


@dataclass(frozen=True, slots=True)
class SpecRef:
    name: str
    version: int
    hash: str


@dataclass(frozen=True, slots=True)
class Record:
    id: str
    kind: str
    input: dict
    output: Any  # the parsed output; None only when the raw text did not parse (then a PARSE verdict exists)
    raw: str | None
    spec: SpecRef
    status: Status
    messages: tuple[dict, ...]  # the training example's prompt, without the target
    meta: dict = field(default_factory=dict)

    @property
    def training_messages(self) -> list[dict]:
        """The full training example: the student's prompt plus the teacher's answer as the target."""
        target = canonical_json(self.output) if self.output is not None else (self.raw or "")
        return [*self.messages, {"role": "assistant", "content": target}]


@dataclass(frozen=True, slots=True)
class TeacherCall:
    record_id: str
    payload_hash: str
    attempt: int
    backend: str
    model: str
    latency_s: float
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    turn: int = 1  # the turn of the record's conversation it answered (2, 3 ...: repairs, factory.generate.repair)
