"""The teacher interface: requests in, results out, every attempt accounted for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Protocol

from mashbill.factory.records import TeacherCall
from mashbill.hashing import sha256_json


@dataclass(frozen=True)
class TeacherRequest:
    record_id: str
    messages: tuple[dict, ...]
    schema: dict | None
    sampling: dict  # temperature, top_p, top_k, max_tokens, seed, repeat_penalty

    @property
    def payload_hash(self) -> str:
        payload = {"messages": list(self.messages), "schema": self.schema, "sampling": self.sampling}
        return sha256_json(payload)


def attempt(req: TeacherRequest, teacher: "Teacher", latency_s: float, prompt_tokens: int | None = None,
            cached_tokens: int | None = None, completion_tokens: int | None = None, finish_reason: str | None = None,
            error: str | None = None, *, n: int = 1) -> TeacherCall:
    """Attempt `n` at `req`, in the form the store keeps it (one teacher_calls row)."""
    return TeacherCall(req.record_id, req.payload_hash, n, teacher.backend, teacher.model, latency_s, prompt_tokens,
                       cached_tokens, completion_tokens, finish_reason, error)


@dataclass
class TeacherResult:
    request: TeacherRequest
    text: str | None  # None only when every attempt failed (then `error` says why)
    finish_reason: str | None
    attempts: list[TeacherCall] = field(default_factory=list)
    error: str | None = None

    @property
    def prompt_tokens(self) -> int:
        return sum(a.prompt_tokens or 0 for a in self.attempts)

    @property
    def completion_tokens(self) -> int:
        return sum(a.completion_tokens or 0 for a in self.attempts)

    @property
    def latency_s(self) -> float:
        return sum(a.latency_s for a in self.attempts)


class Teacher(Protocol):
    backend: str
    model: str

    def info(self) -> dict:
        """Reproducibility facts: model identifier, file hash or revision, server-reported name."""

    def generate(self, requests: Iterable[TeacherRequest]) -> Iterator[TeacherResult]:
        """Yield one result per request, in any order."""

    def close(self) -> None: ...
