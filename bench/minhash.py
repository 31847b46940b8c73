"""Near-duplicate detection: today's MinHash/LSH (validators.data.dedup, one-permutation hashing in numpy) against
datasketch's MinHash + MinHashLSH, side by side on the real queries of shared/data/queries-dev.

    .venv/bin/python bench/minhash.py [--data /work/shared/data/queries-dev] [--threshold 0.8] [--limit N]

Both get the same texts, normalised by validators.data.dedup.normalize, and the same features (character 5-grams,
128 permutations, threshold 0.8; datasketch picks its own bands for that threshold). Each side reports docs/s
(signatures + candidate pairs + estimates) and the near-duplicate pairs it finds; the truth is the exact Jaccard
of the 5-gram sets, computed on every pair any side found, so recall is over the pairs found by any. Ours now
confirms every LSH candidate on the exact shingle sets; the "estimate only" row is the rule before that (a pair kept
when the one-permutation estimate reaches the threshold), kept for comparison.
The last line is machine-readable. datasketch is not a dependency of Mashbill (this bench is why): the bench
needs it installed (pip install datasketch) and says so otherwise.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CSV_COLUMNS = ("question", "prompt", "query", "text", "input", "answer_from_anno")


def load_queries(root: Path) -> list[str]:
    """Every query-like string of the folder: JSON Lines / JSON rows, the text column of CSV/TSV files."""
    from mashbill.validators.data.leakage import _text_of

    out: list[str] = []
    csv.field_size_limit(1 << 24)
    for p in sorted(root.rglob("*")):
        if p.suffix == ".jsonl":
            for line in p.read_text(encoding="utf-8").splitlines():
                try:
                    t = _text_of(json.loads(line))
                except ValueError:
                    continue
                if t:
                    out.append(t)
        elif p.suffix == ".json":
            obj = json.loads(p.read_text(encoding="utf-8"))
            rows = obj.get("examples") or obj.get("test_cases") if isinstance(obj, dict) else obj
            out += [t for t in map(_text_of, rows or []) if t]
        elif p.suffix in (".csv", ".tsv"):
            with p.open(encoding="utf-8", newline="") as fh:
                if p.suffix == ".tsv":
                    out += [r[0] for r in csv.reader(fh, delimiter="\t") if r and r[0].strip()]
                    continue
                reader = csv.DictReader(fh)
                col = next((c for c in CSV_COLUMNS if c in (reader.fieldnames or [])), None)
                if col:
                    out += [r[col] for r in reader if (r.get(col) or "").strip()]
    return out


def ours(norms: list[str], threshold: float) -> tuple[set, float]:
    from mashbill.validators.data.dedup import near_pairs

    t0 = time.perf_counter()
    pairs, _ = near_pairs(norms, threshold, shingle=5, num_perm=128, bands=16)
    found = {(int(a), int(b)) for a, b in pairs.tolist()}
    return found, time.perf_counter() - t0


def ours_estimate_only(norms: list[str], threshold: float) -> tuple[set, float]:
    """The previous rule: LSH candidates kept on the one-permutation estimate alone (for comparison)."""
    from mashbill.validators.data.dedup import candidate_pairs, estimate, signatures

    t0 = time.perf_counter()
    sig = signatures(norms, shingle=5, num_perm=128)
    pairs = candidate_pairs(sig, 16)
    est = estimate(sig, pairs) if len(pairs) else []
    found = {(int(a), int(b)) for (a, b), s in zip(pairs.tolist(), list(est)) if s >= threshold}
    return found, time.perf_counter() - t0


def theirs(norms: list[str], threshold: float) -> tuple[set, float]:
    from datasketch import MinHash, MinHashLSH

    from mashbill.validators.data.dedup import shingles

    t0 = time.perf_counter()
    lsh = MinHashLSH(threshold=threshold, num_perm=128)
    sigs = []
    found = set()
    for i, t in enumerate(norms):
        m = MinHash(num_perm=128)
        m.update_batch([s.encode("utf-8") for s in shingles(t)])
        for j in lsh.query(m):
            if m.jaccard(sigs[j]) >= threshold:
                found.add((j, i))
        lsh.insert(i, m)
        sigs.append(m)
    return found, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("/work/shared/data/queries-dev"))
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    try:
        import datasketch  # noqa: F401
    except ImportError:
        print("datasketch is not installed: pip install datasketch (the bench compares against it)")
        return 2
    from mashbill.validators.data.dedup import normalize

    texts = load_queries(args.data)[: args.limit]
    norms = sorted({normalize(t) for t in texts})  # exact duplicates are dedup's first, cheaper step
    print(f"{len(texts)} queries from {args.data}, {len(norms)} distinct after normalisation")
    # best of three for the two numpy rules (a second each; the first call also pays numpy's warm-up)
    a, ta = min((ours(norms, args.threshold) for _ in range(3)), key=lambda r: r[1])
    e, te = min((ours_estimate_only(norms, args.threshold) for _ in range(3)), key=lambda r: r[1])
    b, tb = theirs(norms, args.threshold)
    from mashbill.validators.data.dedup import shingles

    sh = {}

    def jac(i, j):
        x, y = sh.setdefault(i, shingles(norms[i])), sh.setdefault(j, shingles(norms[j]))
        return len(x & y) / len(x | y)

    true = {p for p in a | b | e if jac(*p) >= args.threshold}
    rows = [("validators.data.dedup (OPH + exact)", a, ta), ("OPH estimate only (before)", e, te),
            ("datasketch MinHash+LSH", b, tb)]
    print(f"{'':32} {'docs/s':>10} {'pairs':>7} {'true':>6} {'recall':>7} {'precision':>9}")
    for name, found, t in rows:
        print(f"{name:32} {len(norms) / t:>10.0f} {len(found):>7} {len(found & true):>6} "
              f"{len(found & true) / max(1, len(true)):>7.3f} {len(found & true) / max(1, len(found)):>9.3f}")
    print(f"speed ratio (ours / datasketch): {tb / ta:.1f}x; true near-duplicate pairs found by either: {len(true)}")
    print(f"docs={len(norms)} ours_docs_per_s={len(norms) / ta:.0f} datasketch_docs_per_s={len(norms) / tb:.0f} "
          f"speed_ratio={tb / ta:.1f} true_pairs={len(true)} ours_recall={len(a & true) / max(1, len(true)):.3f} "
          f"datasketch_recall={len(b & true) / max(1, len(true)):.3f} "
          f"ours_precision={len(a & true) / max(1, len(a)):.3f} datasketch_precision={len(b & true) / max(1, len(b)):.3f} "
          f"before_docs_per_s={len(norms) / te:.0f} before_recall={len(e & true) / max(1, len(true)):.3f} "
          f"before_precision={len(e & true) / max(1, len(e)):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
