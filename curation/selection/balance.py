"""Balancing quotas per label cell: cut what is over, report what is short, oversample only on request."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

from mashbill.errors import MashbillError
from mashbill.specs.model import Quotas

BALANCE_CUT = "BAL001"


def _order(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class Balance:
    kept: list[str]  # in hash order within a cell that was cut, as given within one that was not
    cut: list[str]
    cells: dict[str, dict] = field(default_factory=dict)  # cell -> available, target, kept, short, oversampled

    @property
    def below_quota(self) -> dict[str, dict]:
        return {c: v for c, v in self.cells.items() if v["short"] > 0}


def target_of(cell: str, quotas: Quotas) -> int | None:
    if cell in quotas.cells:
        return quotas.cells[cell]
    return quotas.per_cell


def apply_quotas(keys: Sequence[str], cells: Sequence[str], dims: list[str], quotas: Quotas, spec_ref: str
                 ) -> Balance:
    """Cut cells above their target; refuse quotas that cannot be met. Nothing is duplicated here."""
    for name in quotas.cells:
        if len(name.split("/")) != len(dims):
            raise MashbillError(f"{spec_ref}: curation.quotas.cells names '{name}', which is not a cell of the "
                                f"dimensions {'/'.join(dims)} (one value per dimension, joined with '/')")
    by_cell: dict[str, list[str]] = defaultdict(list)
    for k, c in zip(keys, cells):
        by_cell[c].append(k)
    problems = []
    for name in sorted(quotas.cells):
        if not by_cell.get(name) and quotas.cells[name] > 0:
            problems.append(f"cell {name} has no record at all (quota {quotas.cells[name]})")
    for cell in sorted(by_cell):
        n = len(by_cell[cell])
        if n < quotas.min_per_cell and not quotas.oversample:
            problems.append(f"cell {cell} has {n} record(s), below min_per_cell {quotas.min_per_cell}")
    if problems:
        raise MashbillError(f"{spec_ref}: the balancing quotas cannot be met: " + "; ".join(problems[:8]) +
                            (f"; and {len(problems) - 8} more" if len(problems) > 8 else "") +
                            ". Generate more records for those cells, lower the quotas or set "
                            "curation.quotas.oversample. Nothing was written.")
    kept, cut, report = [], [], {}
    for cell in sorted(set(by_cell) | {c for c, t in quotas.cells.items() if t > 0}):
        members = by_cell.get(cell, [])
        target = target_of(cell, quotas)
        if target is not None and target < len(members):  # a cell over its target keeps the first in hash order
            members = sorted(members, key=_order)
        take = members if target is None else members[:target]
        kept.extend(take)
        cut.extend(members[len(take):])
        want = max(target or 0, quotas.min_per_cell)
        report[cell] = {"available": len(members), "target": target, "kept": len(take),
                        "short": max(0, want - len(take)), "oversampled": 0}
    return Balance(kept, cut, report)


def oversample(balance: Balance, train_keys_by_cell: dict[str, list[str]], quotas: Quotas, spec_ref: str
               ) -> dict[str, int]:
    """Extra copies (key -> number of copies) of train records for cells short of their target."""
    copies: dict[str, int] = {}
    if not quotas.oversample:
        return copies
    problems = []
    for cell, info in balance.cells.items():
        short = info["short"]
        if short <= 0:
            continue
        pool = sorted(train_keys_by_cell.get(cell, []), key=_order)
        if not pool:
            if info["kept"] < quotas.min_per_cell or cell in quotas.cells:
                problems.append(f"cell {cell} has no train record to repeat")
            continue
        for i in range(short):
            k = pool[i % len(pool)]
            copies[k] = copies.get(k, 0) + 1
        info["oversampled"] = short
        info["short"] = 0
    if problems:
        raise MashbillError(f"{spec_ref}: the balancing quotas cannot be met by oversampling: " + "; ".join(problems)
                            + ". Nothing was written.")
    return copies
