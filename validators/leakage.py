"""Leakage: no training record may be (nearly) the same as an item of the eval split or of a registered holdout
set (benchmark queries the user names in the spec's ``holdout`` list or with ``--holdout``).

A record leaks (``LEAK001``, with the matched item) when, after normalisation, it equals a holdout item, contains
a holdout item of at least 25 characters verbatim, or its estimated Jaccard similarity (character 5-grams,
MinHash/LSH as in dedup) reaches the threshold.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from mashbill.factory.records import Verdict
from mashbill.validators.dedup import candidate_pairs, estimate, normalize, signatures
from mashbill.validators.errors import ValidationInputError

_TEXT_FIELDS = ("query", "prompt", "question", "input", "instruction", "text")


@dataclass(frozen=True)
class HoldoutItem:
    source: str  # "file:row" or "eval:<record id>"
    text: str


def _text_of(obj) -> str | None:
    if isinstance(obj, str):
        return obj
    if isinstance(obj, dict):
        for f in _TEXT_FIELDS:
            v = obj.get(f)
            if isinstance(v, str) and v.strip():
                return v
        if isinstance(obj.get("messages"), list):
            users = [m.get("content") for m in obj["messages"] if isinstance(m, dict) and m.get("role") == "user"]
            if users and isinstance(users[0], str):
                return users[0]
        if isinstance(obj.get("turns"), list) and obj["turns"]:
            t = obj["turns"][-1]
            return t if isinstance(t, str) else _text_of(t)
    return None


def load_holdout(path: str | Path) -> list[HoldoutItem]:
    """Benchmark queries from a .txt (one per line), .jsonl or .json file (rows with query/prompt/question/...,
    or a benchmark file with a test_cases list)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ValidationInputError(f"{p}: cannot read holdout file ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationInputError(f"{p}: holdout file is not UTF-8 (byte {exc.start})") from None
    items: list[HoldoutItem] = []
    if p.suffix == ".txt":
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                items.append(HoldoutItem(f"{p.name}:{n}", line.strip()))
    elif p.suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValidationInputError(f"{p}:{n}: holdout row is not JSON ({exc.msg})") from None
            t = _text_of(obj)
            if t is None:
                raise ValidationInputError(f"{p}:{n}: holdout row has no query/prompt/question/input text")
            items.append(HoldoutItem(f"{p.name}:{n}", t))
    elif p.suffix == ".json":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationInputError(f"{p}: holdout file is not JSON ({exc.msg}, line {exc.lineno})") from None
        rows = obj.get("test_cases") if isinstance(obj, dict) else obj
        if not isinstance(rows, list):
            raise ValidationInputError(f"{p}: expected a JSON list or an object with test_cases")
        for n, row in enumerate(rows, 1):
            t = _text_of(row)
            if t is not None:
                name = row.get("id") if isinstance(row, dict) and isinstance(row.get("id"), str) else n
                items.append(HoldoutItem(f"{p.name}:{name}", t))
    else:
        raise ValidationInputError(f"{p}: holdout files must be .txt, .jsonl or .json")
    if not items:
        raise ValidationInputError(f"{p}: holdout file holds no queries")
    return items


def leakage(keys: list[str], texts: list[str], holdout: list[HoldoutItem], cfg, dedup_cfg) -> tuple[dict, dict]:
    """LEAK001 verdicts per key, and a summary."""
    verdicts: dict[str, list[Verdict]] = {}
    if not holdout or not keys:
        return verdicts, {"holdout_items": len(holdout), "leaked": 0}
    norms = [normalize(t) for t in texts]
    hnorm = [normalize(h.text) for h in holdout]
    found: dict[int, tuple[int, str]] = {}
    exact = {}
    for j, h in enumerate(hnorm):
        exact.setdefault(h, j)
    for i, t in enumerate(norms):
        if t in exact:
            found[i] = (exact[t], "identical after normalisation")
    long_items = [(j, h) for j, h in enumerate(hnorm) if len(h) >= 25]
    if long_items and len(long_items) <= 5000:
        rx = re.compile("|".join(re.escape(h) for _, h in sorted(long_items, key=lambda x: -len(x[1]))))
        index = {h: j for j, h in long_items}
        for i, t in enumerate(norms):
            if i not in found:
                m = rx.search(t)
                if m:
                    found[i] = (index[m.group(0)], "contains the holdout item")
    sig = signatures(norms + hnorm, shingle=dedup_cfg.shingle, num_perm=dedup_cfg.num_perm)
    pairs = candidate_pairs(sig, dedup_cfg.bands)
    n = len(norms)
    if len(pairs):
        cross = pairs[(pairs[:, 0] < n) & (pairs[:, 1] >= n)]
        if len(cross):
            est = estimate(sig, cross)
            for (i, j), s in zip(cross, est):
                if s >= cfg.threshold and int(i) not in found:
                    found[int(i)] = (int(j) - n, f"estimated Jaccard {s:.2f}")
    for i, (j, how) in sorted(found.items()):
        item = holdout[j]
        snippet = item.text if len(item.text) <= 80 else item.text[:77] + "..."
        verdicts.setdefault(keys[i], []).append(
            Verdict(cfg.code, cfg.severity, f"leaks {item.source} ({how}): {snippet!r}", "validate"))
    return verdicts, {"holdout_items": len(holdout), "leaked": len(found)}
