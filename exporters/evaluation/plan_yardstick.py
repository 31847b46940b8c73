"""The plan yardstick: requests labelled by eye with the facts a right plan needs, and its count of right plans.

`tests/fixtures/plan_labels/labels.jsonl` (its README holds the labelling criteria): per request the categories a
right plan needs, the precision tool and operands where one is needed, whether it is a trap, and what makes a plan
wrong. `eval_metrics.plan_verdict` says whether one plan is right against a row; here are the rows, the canonical
names of renamed categories (from the taxonomy the quick-start specs use), and `score_records` /
`right_in_store`, which count the right plans among the accepted plan records (bench/yield.py, `mashbill eval`).
"""

from __future__ import annotations

import json
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from mashbill.exporters.evaluation.eval_metrics import WRONG_KINDS, plan_verdict

ROOT = Path(__file__).resolve().parents[2]
PATH = ROOT / "tests" / "fixtures" / "plan_labels" / "labels.jsonl"
TAXONOMY = ROOT / "specs" / "library" / "shared" / "taxonomy" / "moe-experts@1.yaml"
FACTS = ("categories", "also_ok", "tool", "operands")


def load_rows(half: str = "all", path: Path = PATH) -> list[dict]:
    """The yardstick's rows of one half (`report`, `tune` or `all`), in file order."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if half == "all" or r["split"] == half]


def gold_facts(row: dict) -> dict:
    """The facts `plan_verdict` reads, from a yardstick row."""
    return {k: row[k] for k in FACTS if k in row}


@lru_cache(maxsize=1)
def renames() -> dict[str, str]:
    """Shown name -> canonical name for every rename the taxonomy may show (creative_writing -> creative_writer)."""
    from mashbill.specs.loader import load_taxonomy

    tax = load_taxonomy(TAXONOMY)
    return {alias: name for name, aliases in tax.variation.renames.items() for alias in aliases}


def score_records(records: Iterable, rows: list[dict]) -> dict:
    """Accepted plan records (`status == "accepted"`) whose request is a yardstick row, scored against it:
    {accepted, right, precision, wrong_by: {reason kind: count}, verdicts: {record id: [reasons]}}."""
    gold = {r["query"]: gold_facts(r) for r in rows}
    accepted = right = 0
    wrong_by: Counter = Counter()
    verdicts = {}
    for rec in records:
        q = (rec.input or {}).get("query")
        if rec.status != "accepted" or q not in gold:
            continue
        accepted += 1
        why = plan_verdict(rec.output, gold[q], renames())
        verdicts[rec.id] = why
        right += not why
        wrong_by.update({next((k for k in WRONG_KINDS if w.startswith(k)), "tool") for w in why})
    return {"accepted": accepted, "right": right, "precision": right / accepted if accepted else 0.0,
            "wrong_by": dict(sorted(wrong_by.items())), "verdicts": verdicts}


def right_in_store(store_path, *, spec_hash: str | None = None, half: str = "all") -> dict:
    """`score_records` over the accepted plan records of a store (one spec's, with `spec_hash`)."""
    from mashbill.factory.store import Store

    with Store.open(store_path, read_only=True, create=False) as store:
        hashes = [spec_hash] if spec_hash else [h for _, _, h, _ in store.stored_specs(["plan"])]
        records = [r for h in hashes for r in store.records(h, status="accepted")]
    return score_records(records, load_rows(half))
