"""Run accounting: requests, retries, tokens, latency percentiles, accept rate, ETA and cost.

One `Accounting` per run. The generate loop feeds it every teacher result (probes included, since
they cost the same); `snapshot()` is what the live display shows, what `progress` events store
while the run goes, and what the run's row keeps at the end. It is also where the run summary
(`factory.generate.generate.RunSummary`) reads its record counts, tokens and teacher seconds: one set of counters.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from mashbill.factory.stats import percentiles
from mashbill.factory.teachers.base import TeacherResult

# Latencies kept for the percentiles; older ones are dropped in blocks (a long run stays bounded).
_MAX_LATENCIES = 100_000


@dataclass
class Accounting:
    requested: int  # records this run was asked to produce
    prices: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    done: int = 0  # records finished this run (accepted + rejected + failed)
    accepted: int = 0
    rejected: int = 0
    failed: int = 0
    calls: int = 0  # requests sent to the teacher, retries and probes included
    retries: int = 0  # calls beyond the first per result
    errors: int = 0  # calls that ended in an error
    probe_calls: int = 0
    # records' tokens and teacher seconds; the probes' are kept apart, and the snapshot (and cost) adds both
    tokens_in: int = 0
    tokens_cached: int = 0
    tokens_out: int = 0
    teacher_s: float = 0.0
    probe_tokens: list[int] = field(default_factory=lambda: [0, 0, 0])  # in, cached, out
    probe_teacher_s: float = 0.0
    # repair with the verdict (factory.generate.repair): turns that asked a repair, records accepted after one, and per code
    # how often a repair of it was asked and how often the next attempt no longer had it
    repair_turns: int = 0
    sample_turns: int = 0  # answers that led to another best-of-n or vote sample
    repaired: int = 0
    repair_tried: Counter = field(default_factory=Counter)
    repair_fixed: Counter = field(default_factory=Counter)
    _latencies: list[float] = field(default_factory=list, repr=False)

    def observe(self, result: TeacherResult, status: str | None) -> None:
        """Count one teacher result; `status` is the record's status, None for a probe."""
        n = len(result.attempts)
        self.calls += n
        self.retries += max(0, n - 1)
        if status is None:
            self.probe_calls += n
        for a in result.attempts:
            if status is None:
                self.probe_tokens[0] += a.prompt_tokens or 0
                self.probe_tokens[1] += a.cached_tokens or 0
                self.probe_tokens[2] += a.completion_tokens or 0
                self.probe_teacher_s += a.latency_s
            else:
                self.tokens_in += a.prompt_tokens or 0
                self.tokens_cached += a.cached_tokens or 0
                self.tokens_out += a.completion_tokens or 0
                self.teacher_s += a.latency_s
            if a.error is None:
                self._latencies.append(a.latency_s)
            else:
                self.errors += 1
        if len(self._latencies) > _MAX_LATENCIES:
            del self._latencies[: _MAX_LATENCIES // 10]
        if status is not None and status != "turn":
            self.done += 1
            if status == "accepted":
                self.accepted += 1
            elif status == "rejected":
                self.rejected += 1
            else:
                self.failed += 1

    def observe_turn(self, result: TeacherResult, next_step: str = "repair") -> None:
        """Count a turn of a record's chain that is not its last (factory.generate.chains): its calls and tokens, no
        record; `next_step` is what it led to (a repair or another sample)."""
        if next_step == "repair":
            self.repair_turns += 1
        else:
            self.sample_turns += 1
        self.observe(result, "turn")

    def observe_repair(self, code: str, fixed: bool) -> None:
        self.repair_tried[code] += 1
        self.repair_fixed[code] += bool(fixed)

    def repair_rates(self) -> dict[str, dict]:
        """Per code: repairs asked, fixed (the next attempt no longer had it) and the success rate."""
        return {c: {"tried": n, "fixed": self.repair_fixed[c], "rate": round(self.repair_fixed[c] / n, 4)}
                for c, n in sorted(self.repair_tried.items())}

    # ------------------------------------------------------------ derived figures

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def latency_percentiles(self) -> dict[str, float | None]:
        pct = percentiles(self._latencies, (50, 90, 99))
        return {k: None if pct[k] is None else round(float(pct[k]), 4) for k in ("p50", "p90", "p99")}

    def cost(self, wall_s: float | None = None) -> float | None:
        """Token prices and GPU-hours from the spec's `teacher.prices`; None when it gives none."""
        p = self.prices
        if not p:
            return None
        wall_s = self.elapsed_s if wall_s is None else wall_s
        cached_rate = p.get("cached_input_per_1m", p.get("input_per_1m", 0.0))
        t_in, t_cached, t_out = self.all_tokens()
        cost = ((t_in - t_cached) * p.get("input_per_1m", 0.0)
                + t_cached * cached_rate + t_out * p.get("output_per_1m", 0.0)) / 1e6
        cost += wall_s / 3600 * p.get("gpu_hour", 0.0) * p.get("gpus", 1.0)
        return round(cost, 6)

    def all_tokens(self) -> tuple[int, int, int]:
        """Tokens in, cached and out of every call, probes included (they cost the same)."""
        return (self.tokens_in + self.probe_tokens[0], self.tokens_cached + self.probe_tokens[1],
                self.tokens_out + self.probe_tokens[2])

    def snapshot(self, wall_s: float | None = None) -> dict:
        wall_s = self.elapsed_s if wall_s is None else wall_s
        t_in, t_cached, t_out = self.all_tokens()
        answered = self.accepted + self.rejected
        rps = self.done / wall_s if wall_s > 0 else 0.0
        remaining = max(0, self.requested - self.done)
        return {
            "requested": self.requested, "done": self.done, "accepted": self.accepted, "rejected": self.rejected,
            "failed": self.failed, "calls": self.calls, "retries": self.retries, "errors": self.errors,
            "probe_calls": self.probe_calls, "tokens_in": t_in, "tokens_cached": t_cached,
            "tokens_out": t_out, "teacher_s": round(self.teacher_s + self.probe_teacher_s, 3),
            "latency_s": self.latency_percentiles(),
            "accept_rate": round(self.accepted / answered, 4) if answered else None,
            "records_per_s": round(rps, 4),
            "tokens_out_per_s": round(t_out / wall_s, 2) if wall_s > 0 else 0.0,
            "eta_s": round(remaining / rps, 1) if rps > 0 else None,
            "wall_s": round(wall_s, 3), "cost": self.cost(wall_s),
            "teacher_s_per_accepted": round((self.teacher_s + self.probe_teacher_s) / self.accepted, 3)
            if self.accepted else None,
            "tokens_per_accepted": round((t_in + t_out) / self.accepted, 1) if self.accepted else None,
            **({"repair": {"turns": self.repair_turns, "repaired": self.repaired, "by_code": self.repair_rates()}}
               if self.repair_turns or self.repair_tried else {}),
            **({"sample_turns": self.sample_turns} if self.sample_turns else {}),
        }
