"""Outcome tables: which model answered which query correctly, at what cost, latency and token count.

An outcome spec (kind `outcome`) lists several models under `outcome.models`. Each model runs through
the one generate loop (`factory.generate.generate.generate`) over the same queries: its view of the spec adds
`model: <name>` to every seed input, so a record id is a hash of (spec hash, query, model), and resume,
shards and the store work exactly as for any spec. `materialize` then turns those records (reference
check, cost from the model's prices, latency and tokens from the teacher calls) into rows of the store's
`router_outcomes` table, the same form `factory.router.outcome_import` gives imported RouteLLM-style tables.
Queries live once in `router_queries`, keyed by a stable query id.
"""

from __future__ import annotations

import dataclasses
import json
import re
import unicodedata
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Sequence

import pyarrow as pa

from mashbill.factory.store import Store
from mashbill.hashing import sha256_text
from mashbill.specs import ResolvedSpec

OUTCOME_SCHEMA = pa.schema([
    ("query_id", pa.string()), ("model", pa.string()), ("source", pa.string()), ("record_id", pa.string()),
    ("correct", pa.bool_()), ("score", pa.float64()), ("judge", pa.string()), ("cost", pa.float64()),
    ("latency_s", pa.float64()), ("tokens_in", pa.int32()), ("tokens_out", pa.int32()),
])
QUERY_SCHEMA = pa.schema([("query_id", pa.string()), ("text", pa.string()), ("source", pa.string()),
                          ("meta", pa.string())])


def normalise_query(text: str) -> str:
    """NFKC and collapsed whitespace: the same question from two files gets the same id.

    An identity, not a similarity: case and punctuation stay, because a query id is stored and the texts behind
    one id must be the same question. What counts as "the same query" for dedup, leakage and split groups is
    `validators.data.dedup.normalize` (the router split ties ids whose texts it finds near-duplicate)."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def query_id(text: str) -> str:
    return "q" + sha256_text(normalise_query(text))[:20]


def model_views(rs: ResolvedSpec) -> list[tuple[str, ResolvedSpec]]:
    """(model name, the spec as that model's run sees it): same hash, that model's teacher, inputs + model."""
    if rs.spec.kind != "outcome" or rs.spec.outcome is None:
        return [(rs.spec.teacher.model, rs)]
    views = []
    for m in rs.spec.outcome.models:
        spec = rs.spec.model_copy(update={"teacher": m.teacher})
        seeds = tuple({**s, "model": m.name} for s in rs.seeds)
        views.append((m.name, dataclasses.replace(rs, spec=spec, seeds=seeds)))
    return views


# ---------------------------------------------------------------- reference checks

_NUM = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def _last_number(text: str) -> float | None:
    if "####" in text:  # GSM8K gold: the number after ####
        text = text.rsplit("####", 1)[1]
    found = _NUM.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def check_answer(check: str, answer, reference) -> bool:
    """Is `answer` right by `reference`? number: last number equal; choice: same letter A-J; exact: same text."""
    if answer is None or reference is None:
        return False
    a, r = str(answer), str(reference)
    if check == "number":
        x, y = _last_number(a), _last_number(r)
        return x is not None and y is not None and abs(x - y) < 1e-6 * max(1.0, abs(y))
    if check == "choice":
        ma, mr = re.search(r"\b([A-J])\b", a.upper()), re.search(r"\b([A-J])\b", r.upper())
        return bool(ma and mr and ma.group(1) == mr.group(1))
    return normalise_query(a).casefold() == normalise_query(r).casefold()


def cost_of(prices: dict, tokens_in: int | None, tokens_out: int | None) -> float | None:
    if not prices or ("input_per_1m" not in prices and "output_per_1m" not in prices):
        return None
    return ((tokens_in or 0) * prices.get("input_per_1m", 0.0) + (tokens_out or 0) * prices.get("output_per_1m", 0.0)) / 1e6


# ---------------------------------------------------------------- the store tables


@dataclass
class OutcomeImport:
    source: str
    rows_read: int = 0
    rows_kept: int = 0
    queries: int = 0
    rows_new: int = 0  # outcomes not stored before (a re-import of the same file replaces its rows: 0 new)
    problems: list[dict] = field(default_factory=list)  # {"where": "file:row", "code", "detail"}
    import_id: str = ""

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.problems:
            out[p["code"]] = out.get(p["code"], 0) + 1
        return dict(sorted(out.items()))

    def as_dict(self) -> dict:
        return {"source": self.source, "import_id": self.import_id, "rows_read": self.rows_read,
                "rows_kept": self.rows_kept, "rows_new": self.rows_new, "queries": self.queries,
                "left_out": self.counts(),
                "problems": self.problems[:20]}


def write_outcomes(store: Store, queries: Sequence[dict], outcomes: Sequence[dict], imp: OutcomeImport) -> None:
    """Upsert queries (first text wins) and outcome rows (a re-import replaces its own rows) in one transaction."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    qt = pa.Table.from_pylist([{**q, "meta": json.dumps(q.get("meta") or {}, sort_keys=True)} for q in queries],
                              schema=QUERY_SCHEMA)
    ot = pa.Table.from_pylist(list(outcomes), schema=OUTCOME_SCHEMA)
    imp.import_id = now.strftime("%Y%m%dT%H%M%S") + "-o" + uuid.uuid4().hex[:8]
    with store.transaction() as con:
        con.register("_q", qt)
        con.execute("INSERT INTO router_queries SELECT query_id, any_value(text), any_value(source), "
                    "any_value(meta)::JSON, ? FROM _q WHERE query_id NOT IN (SELECT query_id FROM router_queries) "
                    "GROUP BY query_id", [now])
        con.unregister("_q")
        con.register("_o", ot)
        imp.rows_new = con.execute("SELECT count(*) FROM _o WHERE (query_id, model, source) NOT IN "
                                   "(SELECT query_id, model, source FROM router_outcomes)").fetchone()[0]
        con.execute("DELETE FROM router_outcomes WHERE (query_id, model, source) IN "
                    "(SELECT query_id, model, source FROM _o)")
        con.execute("INSERT INTO router_outcomes SELECT *, ? FROM _o", [now])
        con.unregister("_o")
        con.execute("INSERT INTO router_imports VALUES (?, ?, ?, ?, ?, ?)",
                    [imp.import_id, imp.source, now, imp.rows_read, imp.rows_kept, json.dumps(imp.problems)])


def materialize(store: Store, rs: ResolvedSpec) -> OutcomeImport:
    """Outcome rows from an outcome spec's stored records: reference check, cost, latency, tokens."""
    cfg = rs.spec.outcome
    if cfg is None:
        raise ValueError(f"{rs.ref} is not an outcome spec")
    prices = {m.name: dict(m.teacher.prices) for m in cfg.models}
    rows = store.con.execute(
        "SELECT r.record_id, r.status, r.input, r.output, c.latency_s, c.prompt_tokens, c.completion_tokens "
        "FROM records r LEFT JOIN (SELECT record_id, latency_s, prompt_tokens, completion_tokens, "
        "row_number() OVER (PARTITION BY record_id ORDER BY attempt DESC, created_at DESC) AS k "
        "FROM teacher_calls) c ON c.record_id = r.record_id AND c.k = 1 "
        "WHERE r.spec_hash = ? ORDER BY r.record_id", [rs.hash]).fetchall()
    imp = OutcomeImport(f"spec:{rs.ref}", rows_read=len(rows))
    queries, outcomes = {}, []
    for rid, status, inp, output, latency, t_in, t_out in rows:
        inputs = json.loads(inp)
        model = inputs.get("model")
        if status == "failed":  # never answered: retried by the next run, no outcome yet
            imp.problems.append({"where": f"record {rid[:16]}", "code": "OUT005",
                                 "detail": f"model {model}: the teacher never answered (status failed)"})
            continue
        if model not in prices:
            imp.problems.append({"where": f"record {rid[:16]}", "code": "OUT002",
                                 "detail": f"unknown model {model!r} (spec lists {sorted(prices)})"})
            continue
        out = json.loads(output) if output else None
        answer = out.get(cfg.answer) if isinstance(out, dict) else None
        qid = inputs.get("query_id") or query_id(inputs["query"])
        queries.setdefault(qid, {"query_id": qid, "text": inputs["query"], "source": imp.source,
                                 "meta": {k: v for k, v in inputs.items()
                                          if k not in ("query", "model", cfg.reference, "query_id")}})
        outcomes.append({"query_id": qid, "model": model, "source": imp.source, "record_id": rid,
                         "correct": status == "accepted" and check_answer(cfg.check, answer, inputs.get(cfg.reference)),
                         "score": None, "judge": f"reference:{cfg.check}", "cost": cost_of(prices[model], t_in, t_out),
                         "latency_s": latency, "tokens_in": t_in, "tokens_out": t_out})
    imp.rows_kept, imp.queries = len(outcomes), len(queries)
    write_outcomes(store, list(queries.values()), outcomes, imp)
    return imp
