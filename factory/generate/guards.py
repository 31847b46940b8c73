"""Guards that keep a run from burning teacher time on a broken teacher.

Each guard watches the stream of finished records and says something only when it matters: a
`GuardEvent` with a kind (stored in the run's `events` table), a detail, and optionally a reason
to stop the run or a pause. The generate loop feeds them and acts; nothing here calls a teacher.

| guard | spec setting | event kinds |
|---|---|---|
| preflight probes | `guards.preflight` | `preflight_passed`, `preflight_failed` |
| rolling accept rate | `guards.accept_rate` | `accept_rate_low` (stops) |
| periodic probe re-check | `guards.probe_recheck` | `probe_recheck`, `probe_recheck_failed` (stops) |
| latency watchdog | `guards.latency` | `latency_alert`, `latency_recovered` |
| circuit breaker | `guards.circuit_breaker` | `circuit_open`, `circuit_half_open`, `circuit_closed`, `circuit_stop` |
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from mashbill.specs.model import (AcceptRateGuard, CircuitBreakerGuard, Guards, LatencyGuard, Probe)


@dataclass
class GuardEvent:
    kind: str
    detail: dict = field(default_factory=dict)
    stop: str | None = None  # a reason: the run stops after the current batch is stored
    pause_s: float = 0.0  # wait this long before sending more work (circuit breaker cooldown)


# ---------------------------------------------------------------- probes


def plan_tasks(output: Any) -> list[dict]:
    """The task objects of a plan: a bare array, a {"tasks": [...]} wrapper or a single task object."""
    if isinstance(output, list):
        return [t for t in output if isinstance(t, dict)]
    if isinstance(output, dict):
        if isinstance(output.get("tasks"), list):
            return [t for t in output["tasks"] if isinstance(t, dict)]
        if "category" in output or "task" in output:
            return [output]
    return []


def probe_verdict(probe: Probe, status: str, output: Any, reject_codes: list[str]) -> tuple[bool, str]:
    """Pass = the record would be accepted, and every expectation the probe gives is met."""
    if status == "failed":
        return False, "teacher did not answer"
    if status != "accepted":
        return False, "rejected: " + ", ".join(reject_codes)
    tasks = plan_tasks(output)
    if probe.categories:
        found = [t.get("category") for t in tasks]
        if not set(found) & set(probe.categories):
            return False, f"expected a category in {probe.categories}, found {found}"
    if probe.tools:
        found = [t.get("mcp_tool") for t in tasks if t.get("mcp_tool")]
        if not set(found) & set(probe.tools):
            return False, f"expected a tool in {probe.tools}, found {found or 'none'}"
    for name, allowed in probe.fields.items():
        value = output.get(name) if isinstance(output, dict) else None
        if value not in allowed:
            return False, f"expected {name} in {allowed}, found {value!r}"
    return True, "ok"


# ---------------------------------------------------------------- rolling monitors


class AcceptRateMonitor:
    """Accept rate over the last `window` answered records (unparseable output counts as a reject)."""

    def __init__(self, cfg: AcceptRateGuard):
        self.cfg = cfg
        self.recent: deque[bool] = deque(maxlen=cfg.window)
        self.tripped = False

    def observe(self, status: str) -> GuardEvent | None:
        if status not in ("accepted", "rejected"):
            return None  # the teacher never answered: the circuit breaker's business
        self.recent.append(status == "accepted")
        if self.tripped or len(self.recent) < self.cfg.window or self.cfg.min_rate <= 0:
            return None
        rate = sum(self.recent) / len(self.recent)
        if rate < self.cfg.min_rate:
            self.tripped = True
            return GuardEvent("accept_rate_low", {"rate": round(rate, 4), "window": self.cfg.window,
                                                  "min_rate": self.cfg.min_rate},
                              stop=f"accept rate {rate:.2f} over the last {self.cfg.window} answered records is "
                                   f"below guards.accept_rate.min_rate {self.cfg.min_rate}")
        return None


class LatencyWatchdog:
    """Median latency of the last `window` answers against the median of the `baseline` answers before them."""

    def __init__(self, cfg: LatencyGuard):
        self.cfg = cfg
        self.history: deque[float] = deque(maxlen=cfg.baseline + cfg.window)
        self.alerting = False

    def observe(self, latency_s: float) -> GuardEvent | None:
        self.history.append(latency_s)
        if len(self.history) < self.history.maxlen:
            return None
        values = list(self.history)
        baseline = statistics.median(values[: self.cfg.baseline])
        recent = statistics.median(values[self.cfg.baseline:])
        limit = self.cfg.multiple * baseline
        detail = {"recent_median_s": round(recent, 4), "baseline_median_s": round(baseline, 4),
                  "multiple": self.cfg.multiple}
        if not self.alerting and recent > limit:
            self.alerting = True
            stop = None
            if self.cfg.action == "stop":
                stop = (f"latency watchdog: median {recent:.2f}s over the last {self.cfg.window} answers is above "
                        f"{self.cfg.multiple}x the rolling baseline ({baseline:.2f}s)")
            return GuardEvent("latency_alert", detail, stop=stop)
        if self.alerting and recent <= limit:
            self.alerting = False
            return GuardEvent("latency_recovered", detail)
        return None


class CircuitBreaker:
    """closed -> (N consecutive failures) open -> (cooldown) half-open -> one answer closes, one failure re-opens."""

    def __init__(self, cfg: CircuitBreakerGuard):
        self.cfg = cfg
        self.state = "closed"
        self.consecutive = 0
        self.trips = 0

    def observe(self, status: str) -> GuardEvent | None:
        if status != "failed":
            self.consecutive = 0
            if self.state == "half_open":
                self.state = "closed"
                return GuardEvent("circuit_closed", {"trips": self.trips})
            return None
        self.consecutive += 1
        if self.state == "open" or self.consecutive < (1 if self.state == "half_open" else self.cfg.consecutive_failures):
            return None
        self.trips += 1
        self.state = "open"
        detail = {"consecutive_failures": self.consecutive, "trips": self.trips, "max_trips": self.cfg.max_trips,
                  "cooldown_s": self.cfg.cooldown_s}
        if self.trips >= self.cfg.max_trips:
            return GuardEvent("circuit_stop", detail,
                              stop=f"circuit breaker: {self.trips} trip(s) after {self.cfg.consecutive_failures} "
                                   f"consecutive teacher failures; failed records are retried by the next run")
        return GuardEvent("circuit_open", detail, pause_s=self.cfg.cooldown_s)

    def half_open(self) -> GuardEvent:
        self.state = "half_open"
        return GuardEvent("circuit_half_open", {"trips": self.trips})


class GuardSet:
    """The rolling guards of one run, fed one finished record at a time."""

    def __init__(self, guards: Guards):
        self.guards = guards
        self.accept_rate = AcceptRateMonitor(guards.accept_rate)
        self.latency = LatencyWatchdog(guards.latency)
        self.breaker = CircuitBreaker(guards.circuit_breaker)
        self._next_recheck = guards.probe_recheck.every or None

    def observe(self, status: str, latency_s: float | None) -> list[GuardEvent]:
        events = [self.breaker.observe(status), self.accept_rate.observe(status)]
        if latency_s is not None and status != "failed":
            events.append(self.latency.observe(latency_s))
        return [e for e in events if e is not None]

    def recheck_due(self, accepted: int) -> bool:
        """True once each time the accepted count passes a multiple of `probe_recheck.every`."""
        if self._next_recheck is None or not self.guards.preflight.probes or accepted < self._next_recheck:
            return False
        every = self.guards.probe_recheck.every
        self._next_recheck = (accepted // every + 1) * every
        return True
