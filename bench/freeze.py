"""`snapshot freeze` throughput on a large synthetic store (issue 11: goal >= 200,000 rows/s at 260,000 records).

    python bench/freeze.py [--records 260000] [--repeat 1]

The store is built once (accepted plan records of the library's quickstart-plan@2 spec, one validation
run over all of them, a few review decisions) and cached under ~/.cache/mashbill/bench/; a rerun reuses it.
Each repeat freezes it with tokens=False into a fresh folder and times the whole `freeze` call (open the
store, select, balance, split, write Parquet, manifest). Queries are random pseudo-word sentences, and every
500th is a near duplicate of the one before, so grouping and the split have real work. Last line: machine-readable.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from mashbill.factory.records import Record, SpecRef, TeacherCall, Verdict
from mashbill.factory.store import Store
from mashbill.specs import find_spec, load_spec

SPEC = "quickstart-plan@2"
CATS = ["math", "coding", "legal", "research", "general", "medical"]
TOOLS = [("calculate", "expression"), ("day_of_week", "date"), ("convert_units", "quantity")]
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


SYLLABLES = ("ka ri to me su na lo vi de pa ge mu ba zo fi ne ru sa ti ko la we ha ju ye xo qi ce do gu "
             "ma ni po se bu le ta vo").split()
VOCAB = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in ("", "n", "s", "r")]


def _query(i: int) -> str:
    # 6-11 pseudo-words drawn per record, so queries are as unrelated as real ones; every 500th is a near copy
    # of the one before (one word added), so near-duplicate grouping has real clusters to find
    j = i - 1 if i % 500 == 1 else i
    rng = random.Random(j)
    words = [rng.choice(VOCAB) for _ in range(rng.randint(6, 11))]
    return " ".join(words + (["please"] if i % 500 == 1 else [])).capitalize() + "?"


def _plan(i: int) -> list[dict]:
    cat = CATS[i % len(CATS)]
    plan = [{"task": f"Answer {WORDS[i % 26]} {i}", "category": cat}]
    if i % 3 == 0:
        tool, arg = TOOLS[i % len(TOOLS)]
        plan.append({"task": f"Compute step {i}", "category": "precision_tools", "mcp_tool": tool,
                     "mcp_args": {arg: str(i)}})
    return plan


def build(path: Path, n: int) -> None:
    rs = load_spec(find_spec(SPEC))
    ref = SpecRef(rs.spec.name, rs.spec.version, rs.hash)
    tmp = path.with_name(path.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    with Store.open(tmp) as store:
        run = store.begin_run(spec_name=rs.spec.name, spec_version=rs.spec.version, spec_hash=rs.hash,
                              kind="plan", backend="llama_cpp", model="bench", model_sha256="0" * 64,
                              model_info={}, sampling=rs.spec.teacher.sampling.model_dump())
        results: dict[str, list] = {}
        batch = 20_000
        for start in range(0, n, batch):
            records, calls = [], []
            for i in range(start, min(n, start + batch)):
                lang = "de" if i % 4 == 0 else "en"
                q = _query(i)
                rid = hashlib.sha256(f"{rs.hash}:{i}".encode()).hexdigest()
                msgs = ({"role": "system", "content": "You plan."}, {"role": "user", "content": q})
                records.append(Record(rid, "plan", {"query": q, "lang": lang, "type": "bench"}, _plan(i), None, ref,
                                      "accepted", msgs, {"lang": lang, "framing": "A"}))
                calls.append(TeacherCall(rid, rid[:16], 1, "llama_cpp", "bench", 0.1 + (i % 100) / 1000, 300, 0,
                                         40, "stop"))
                results[rid] = [Verdict("HR001", "reject", "bench", "validate")] if i % 97 == 0 else []
            store.write_batch(run, records, {}, calls)
        store.finish_run(run, "completed", {"requested": n, "accepted": n})
        store.record_validation(spec_hash=rs.hash, source="store", results=results, counts={})
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=260_000)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    from mashbill.curation.snapshot import freeze

    cache = Path(os.environ.get("MASHBILL_BENCH_DIR", Path.home() / ".cache" / "mashbill" / "bench"))
    store = cache / f"freeze-v2-{args.records}"
    if not (store / "mashbill.duckdb").is_file():
        t0 = time.perf_counter()
        build(store, args.records)
        print(f"built {store} with {args.records} records in {time.perf_counter() - t0:.1f}s", flush=True)
    spec = find_spec(SPEC)
    best = None
    for k in range(args.repeat):
        out = Path(tempfile.mkdtemp(prefix="mashbill-freeze-bench-"))
        try:
            t0 = time.perf_counter()
            res = freeze(spec, store_path=store, name="bench", version="1", out_dir=out, tokens=False)
            wall = time.perf_counter() - t0
        finally:
            shutil.rmtree(out, ignore_errors=True)
        rows = sum(res.manifest["splits"]["counts"].values()) + res.manifest["rejects"]["total"]
        print(f"run {k + 1}: {res.manifest['selection']['records']} records, {rows} rows written in {wall:.2f}s "
              f"({args.records / wall:,.0f} records/s)", flush=True)
        best = wall if best is None else min(best, wall)
    load = os.getloadavg()[0]
    print(f"records={args.records} freeze_s={best:.2f} freeze_rows_per_s={args.records / best:.0f} "
          f"goal_rows_per_s=200000 load1={load:.2f}")


if __name__ == "__main__":
    sys.exit(main())
