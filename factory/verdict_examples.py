"""A few example records per verdict code (the store's `Store.verdict_examples`), so a report can show why records
were rejected: the verdict's stage, severity and detail beside the record's input and the teacher's output."""

from __future__ import annotations

import json

# The first verdict of each (code, record), then the first `per_code` records of each code, oldest first: stable
# from one report to the next while the store only grows.
_SQL = """
WITH firsts AS (
    SELECT code, record_id, stage, severity, detail, created_at FROM verdicts
    QUALIFY row_number() OVER (PARTITION BY code, record_id ORDER BY created_at, stage, detail) = 1
), ranked AS (
    SELECT *, row_number() OVER (PARTITION BY code ORDER BY created_at, record_id) AS n,
           count(*) OVER (PARTITION BY code) AS records
    FROM firsts
)
SELECT f.code, f.records, f.stage, f.severity, f.detail, r.record_id, r.spec_name, r.spec_version, r.status,
       r.input, r.output, left(r.raw, ?)
FROM ranked f JOIN records r USING (record_id)
WHERE f.n <= ?
ORDER BY f.code, f.n
"""


def verdict_examples(con, per_code: int = 3, max_chars: int = 2000) -> dict[str, dict]:
    """code -> {"records": records with that code, "examples": [{record_id, spec, status, stage, severity, detail,
    input, output}]}; `output` is the parsed output, or the teacher's raw text when it did not parse."""
    out: dict[str, dict] = {}
    for (code, records, stage, severity, detail, rid, name, version, status, inp, outp,
         raw) in con.execute(_SQL, [max_chars, per_code]).fetchall():
        entry = out.setdefault(code, {"records": records, "examples": []})
        entry["examples"].append({
            "record_id": rid, "spec": f"{name}@{version}", "status": status, "stage": stage, "severity": severity,
            "detail": detail, "input": json.loads(inp),
            "output": json.loads(outp) if outp is not None else raw,
        })
    return out
