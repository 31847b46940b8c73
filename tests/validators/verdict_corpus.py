"""The verdicts of the record checker on fixed corpora, as a compact table, and the table recorded before issue 29's
speed work (``fixtures/verdicts/``). ``test_checker_identical.py`` holds the checker of today to that recording:
per case, per record, the codes, severities and details (a digest of the details; the codes in clear).

    .venv/bin/python tests/validators/verdict_corpus.py --write   # re-record (only on purpose: a rule change)

Cases (every record depends only on its seed and index):
- ``synthetic``: bench/validate.py's corpus (seed 0), the latest rule set, the taxonomy from record metadata.
- ``crossed``: the same plans against another record's query (drift, parroting, fidelity misses), latest rules.
- ``file-@4``, ``file-@3``: file mode with older rule sets (taxonomy and worked examples from the system prompt;
  ``@3`` compares words by prefix, ``@4`` by root).
- ``real``: real queries of shared/data/queries-dev (GSM8K, DuckDuckGo tool queries, MT-Bench EN/DE, NQ-open),
  each with a synthetic plan, a plan that restates it and one that stops half-way (only where the corpora are on disk).
- ``dedup``: exact and near duplicates of the synthetic and real queries (the dedup pass of ``validate``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from vhelpers import FIXTURES, QUERIES_DEV  # noqa: E402

RECORDED = FIXTURES / "verdicts" / "checker-verdicts.json.gz"
N_SYNTHETIC = 3000
N_OTHER = 800
N_REAL_PER_SOURCE = 300


def _row(verdicts) -> str:
    """One record's verdicts: its codes with severities in clear, then a digest of the details."""
    codes = ",".join(f"{v.code}:{v.severity}" for v in verdicts)
    digest = hashlib.sha1("\n".join(v.detail for v in verdicts).encode("utf-8")).hexdigest()[:10]
    return f"{codes}|{digest}"


def _table(items, check) -> dict[str, str]:
    out = {}
    for key, args in items:
        vs = check(*args)
        if vs:
            out[key] = _row(vs)
    return out


def real_queries() -> list[str]:
    """Up to N_REAL_PER_SOURCE queries from each of five queries-dev sources ([] where they are not on disk)."""
    if QUERIES_DEV is None:
        return []
    d = QUERIES_DEV

    def jsonl(rel: str) -> list[dict]:
        p = d / rel
        if not p.is_file():
            return []
        return [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]

    sources = [[r["question"] for r in jsonl("gsm8k/test.jsonl")],
               [r["query"] for r in jsonl("ddg_goodies_tool_queries/ddg_goodies_tool_queries.jsonl")],
               [r["turns"][0] for r in jsonl("fastchat_mt_bench/question.jsonl")],
               [r["turns"][0] for r in jsonl("mt_bench_x_de/question.jsonl")],
               [r["question"] for r in jsonl("nq_open/NQ-open.dev.jsonl")]]
    return [q for src in sources for q in src[:N_REAL_PER_SOURCE] if isinstance(q, str) and q.strip()]


def verdict_tables() -> dict[str, dict[str, str]]:
    """Every case's table: record key -> its verdicts (records without verdicts left out)."""
    from mashbill.specs.loader import LIBRARY, find_spec, load_catalog, load_spec
    from mashbill.validators.checker import RecordChecker, spec_examples
    from mashbill.validators.data.dedup import dedup
    from mashbill.validators.data.synthetic import _plan, corpus
    from mashbill.validators.plans.ruleset import load_ruleset

    rules = load_ruleset()
    catalog = load_catalog(LIBRARY / "shared" / "tools" / "precision-tools@2.yaml")
    schema = json.loads((LIBRARY / "shared" / "schemas" / "plan@1.json").read_text(encoding="utf-8"))
    examples = spec_examples(load_spec(find_spec("plan-moe")))
    checker = RecordChecker(ruleset=rules, schema=schema, catalog=catalog, examples=examples, origin="bench")
    recs = corpus(N_SYNTHETIC, seed=0)

    def meta(r) -> dict:
        return {"taxonomy_shown": list(r.taxonomy_shown), "taxonomy_renamed": r.taxonomy_renamed}

    tables = {"synthetic": _table(((r.id, (r.query, r.plan, meta(r))) for r in recs), checker.check)}
    other = recs[:N_OTHER]
    tables["crossed"] = _table(((r.id, (other[(i + 7) % len(other)].query, r.plan, meta(r)))
                                for i, r in enumerate(other)), checker.check)
    for version in (4, 3):
        fc = RecordChecker.for_file(load_ruleset(LIBRARY / "shared" / "rules" / f"moe-routing@{version}.yaml"))
        # no metadata: the taxonomy and worked examples come from the row's own system prompt
        tables[f"file-@{version}"] = _table(((r.id, (r.query, r.plan, r.messages[0]["content"])) for r in other),
                                            lambda q, p, s, fc=fc: fc.check(q, p, None, system=s))
    real = real_queries()
    if real:
        rng = random.Random(29)
        names = recs[0].taxonomy_shown
        items = []
        for i, q in enumerate(real):
            items.append((f"real-{i}-plan", (q, _plan(rng, q, names, 3), {"taxonomy_shown": list(names)})))
            items.append((f"real-{i}-restated", (q, [{"id": "t1", "task": q, "category": "general"}],
                                                 {"taxonomy_shown": list(names)})))
            words = q.split()
            head = " ".join(words[:max(1, len(words) // 2)])  # cut mid-sentence: task-complete's case
            items.append((f"real-{i}-cut", (q, [{"id": "t1", "task": head, "category": "general"}],
                                            {"taxonomy_shown": list(names)})))
        tables["real"] = _table(items, checker.check)
    keys = [r.id for r in recs] + [f"real-{i}" for i in range(len(real))]
    res = dedup(keys, [r.query for r in recs] + real, rules.checks.dedup)
    tables["dedup"] = {k: _row(vs) for k, vs in sorted(res.verdicts.items()) if vs}
    return tables


def recorded() -> dict[str, dict[str, str]]:
    return json.loads(gzip.decompress(RECORDED.read_bytes()).decode("utf-8"))


def write() -> None:
    tables = verdict_tables()
    RECORDED.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(tables, sort_keys=True, separators=(",", ":")).encode("utf-8")
    RECORDED.write_bytes(gzip.compress(data, mtime=0))
    print({k: len(v) for k, v in tables.items()}, f"{RECORDED.stat().st_size} bytes")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        sys.exit("usage: verdict_corpus.py --write")
