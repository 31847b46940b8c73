"""Repair with the verdict: a rejected record whose every reject code its spec's `repair` section names is asked again.

`mode: continue`: the conversation goes on (the prompt, the teacher's answer, then a user turn stating each reject
verdict in plain words, code and detail, in the request's language: ``factory.generate.repair_text``); `mode:
restart`: the request is asked afresh with the verdicts in plain words after it and the rejected answer left out (a
small teacher copies an answer it is shown). The teacher answers under the same schema constraint, up to
`max_attempts` repairs. It runs inside the one generate loop (``factory.generate.generate``, through
``factory.generate.chains``), right after the answer it repairs, so an embedded teacher still holds the shared prefix in its
KV cache. This module holds the section's check, the guard and the verdict helpers.

Every attempt is a ``record_attempts`` row (attempt number, the attempt it repairs, its verdicts, feedback, tokens,
seconds); the record row holds the last attempt, the one that counts, and nothing is overwritten. An attempt is
committed before its repair is asked, and a chain's last attempt together with its record, so a run killed in the
middle of a chain resumes it from the last stored attempt: no attempt is lost and none is asked twice (only the one
in flight at the kill is asked again).

A guard watches each code's fix rate over its last `guard.window` repairs; below `guard.min_fix_rate` it stops the
run (exit 3) or, with `action: skip`, stops asking repairs for that code.
"""

from __future__ import annotations

from collections import deque

from mashbill.errors import SpecError
from mashbill.factory.codes import not_repairable
from mashbill.factory.generate.guards import GuardEvent


def check_repair(rs) -> None:
    """A repair section naming an unknown or non-repairable code: SpecError with the spec's file, line and field."""
    repair = rs.spec.repair
    if repair is None:
        return
    for i, code in enumerate(repair.codes):
        why = not_repairable(code)
        if why:
            from mashbill.specs.yamlio import line_for, load_yaml

            _, lines = load_yaml(rs.path)
            raise SpecError(str(rs.path), why, line=line_for(lines, ("repair", "codes", i)), field=f"repair.codes.{i}")


def reject_codes(verdicts) -> list[str]:
    return [v.code for v in verdicts if v.severity == "reject"]


class RepairGuard:
    """Per code, the fixes of its last `window` repairs; trips once per code below `min_fix_rate`."""

    def __init__(self, cfg, codes):
        self.cfg = cfg
        self.active = set(codes)
        self.recent: dict[str, deque] = {}
        self.stopped: str | None = None

    def observe(self, code: str, fixed: bool) -> GuardEvent | None:
        window = self.recent.setdefault(code, deque(maxlen=self.cfg.window))
        window.append(fixed)
        if code not in self.active or len(window) < self.cfg.window:
            return None
        rate = sum(window) / len(window)
        if rate >= self.cfg.min_fix_rate:
            return None
        self.active.discard(code)
        detail = {"code": code, "fix_rate": round(rate, 4), "window": self.cfg.window,
                  "min_fix_rate": self.cfg.min_fix_rate, "action": self.cfg.action}
        if self.cfg.action == "skip":
            return GuardEvent("repair_guard", detail)
        self.stopped = (f"repair guard: the teacher fixed {code} in {rate:.0%} of its last {self.cfg.window} repairs, "
                        f"below repair.guard.min_fix_rate {self.cfg.min_fix_rate:.0%}; it is not asked again")
        return GuardEvent("repair_guard", detail, stop=self.stopped)


