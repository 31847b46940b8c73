"""The validation ladder: config -> forward -> batch -> steps:N -> [epoch] -> full.

Each stage that runs writes a run record to the store (an event of kind `train_stage`: device, driver and
library versions, peak memory, throughput, finite loss and gradients, snapshot id and manifest hash,
config hash). A stage refuses to start while the one below it has not passed for the same config hash and
snapshot id, so a GPU hour is spent only after the cheap checks passed. `mashbill train ... --stage S`
climbs: it runs the cheaper stages that have not passed yet first, and stops at the first that fails.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from mashbill.errors import MashbillError

ORDER = ("config", "forward", "batch", "steps", "epoch", "full")
EVENT = "train_stage"
_STEPS = re.compile(r"^steps:(\d+)$")


class LadderError(MashbillError):
    """A stage was asked for before the stage below it passed."""


@dataclass(frozen=True)
class Stage:
    name: str  # one of ORDER
    steps: int | None = None  # steps:N

    @property
    def label(self) -> str:
        return f"steps:{self.steps}" if self.name == "steps" else self.name

    @property
    def rank(self) -> int:
        return ORDER.index(self.name)

    @property
    def trains(self) -> bool:
        return self.name in ("steps", "epoch", "full")


def parse_stage(text: str) -> Stage:
    m = _STEPS.match(text)
    if m:
        n = int(m.group(1))
        if n < 1:
            raise LadderError(f"--stage {text}: N must be at least 1")
        return Stage("steps", n)
    if text in ORDER and text != "steps":
        return Stage(text)
    raise LadderError(f"--stage {text!r}: expected one of config, forward, batch, steps:N, epoch, full")


def below(stage: Stage) -> list[Stage]:
    """The stages that must pass before `stage`, cheapest first. Any steps:N counts for steps (climbing runs
    steps:1). `epoch` is an optional rung: `full` needs steps, not a whole epoch first (on a 3-epoch run
    that would be a third of the run)."""
    names = [n for n in ORDER[:stage.rank] if not (stage.name == "full" and n == "epoch")]
    return [Stage("steps", 1) if n == "steps" else Stage(n) for n in names]


def passed(store, config_sha256: str, snapshot_id: str) -> set[str]:
    """Names of the stages that passed for this config and snapshot."""
    return {d.get("stage_name") for _, d in store.events_of(EVENT)
            if d.get("config_sha256") == config_sha256 and d.get("snapshot_id") == snapshot_id and d.get("passed") is True}


def missing_below(store, stage: Stage, config_sha256: str, snapshot_id: str) -> list[Stage]:
    done = passed(store, config_sha256, snapshot_id)
    return [s for s in below(stage) if s.name not in done]


def require(store, stage: Stage, config_sha256: str, snapshot_id: str) -> None:
    """Refuse `stage` while a cheaper one has not passed for this config and snapshot."""
    missing = missing_below(store, stage, config_sha256, snapshot_id)
    if missing:
        raise LadderError(f"stage {stage.label} refused: stage {missing[0].label} has not passed for config "
                          f"{config_sha256[:12]} on snapshot {snapshot_id[:12]} (run --stage {missing[0].label} "
                          "first, or let --stage climb)")


def record(store, stage: Stage, detail: dict) -> str:
    """Store one stage's run record; returns its run id."""
    run_id = detail.get("run_id") or uuid.uuid4().hex
    store.add_event(run_id, EVENT, {**detail, "run_id": run_id, "stage": stage.label, "stage_name": stage.name})
    return run_id


def history(store, config_sha256: str | None = None) -> list[dict]:
    return [{"ts": str(ts), **d} for ts, d in store.events_of(EVENT)
            if not config_sha256 or d.get("config_sha256") == config_sha256]


def store_path_of(store_arg: str, cwd: Path | None = None) -> Path:
    p = Path(store_arg)
    return p if p.is_absolute() else (cwd or Path.cwd()) / p
