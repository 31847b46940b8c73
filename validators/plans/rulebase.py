"""What every rule set file shares (the routing rule set in ``ruleset.py``, the complexity rule set in
``complexity_rules.py``): a rule entry (id, code, severity) and the ``checks:`` section (dedup, leakage, PII)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mashbill.specs.model import Strict

CODE_RE = r"^[A-Z]{2,8}[0-9]{3}$"


class RuleEntry(Strict):
    id: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    code: str = Field(pattern=CODE_RE)
    severity: Literal["reject", "penalty", "flag"]
    description: str = ""
    enabled: bool = True


class DedupConfig(Strict):
    field: Literal["query", "prompt", "example"] = "query"
    exact_code: str = Field("DUP001", pattern=CODE_RE)
    exact_severity: Literal["reject", "penalty", "flag"] = "reject"
    near_code: str = Field("DUP002", pattern=CODE_RE)
    near_severity: Literal["reject", "penalty", "flag"] = "penalty"
    shingle: int = Field(5, ge=1, le=16)  # the clustering's defaults (validators.data.dedup reads them here)
    num_perm: int = Field(128, ge=16, le=1024)
    bands: int = Field(16, ge=1)
    threshold: float = Field(0.8, gt=0, le=1)

    @model_validator(mode="after")
    def _bands_divide(self):
        if self.num_perm % self.bands:
            raise ValueError(f"num_perm ({self.num_perm}) must be a multiple of bands ({self.bands})")
        return self


class LeakageConfig(Strict):
    code: str = Field("LEAK001", pattern=CODE_RE)
    severity: Literal["reject", "penalty", "flag"] = "reject"
    threshold: float = Field(0.7, gt=0, le=1)


class PiiConfig(Strict):
    redact: bool = False
    severity: Literal["reject", "penalty", "flag"] = "flag"


class Checks(Strict):
    dedup: DedupConfig = DedupConfig()
    leakage: LeakageConfig = LeakageConfig()
    pii: PiiConfig = PiiConfig()
