"""Fit the learned genuine check (bench/lab/query_genuine.py) from the fixtures, reproducibly; write its weights.

    .venv/bin/python bench/fit_genuine.py [--data /work/shared/data/queries-dev] [--out PATH]

Positives: the real queries of queries-dev (tests/validators/vhelpers.real_queries: its JSON Lines rows and MGSM, EN
and DE, <= 300 characters) whose sha256 first byte is even (`query_genuine.fit_half`), and the labelled
yardstick's tune-half genuine rows; negatives: the tune half's non-genuine rows. The threshold is the one that
keeps 90% of the tune half's genuine rows, scored out of fold (5 folds by a hash of the text). The report half,
the grown samples and the odd half of queries-dev are never read here. Last line: `n= threshold= sha256=`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "lab"))
from synth_quality import FIXTURE, real_queries  # noqa: E402

from query_genuine import CLASSIFIERS, fit, fit_half, training_digest, write_weights  # noqa: E402

KEEP_TUNE_GENUINE = 0.9
REAL_WEIGHT = 0.25  # the real queries' share of the weight; the tune half's genuine and non-genuine rows 0.5 each
L2 = 0.1
FOLDS = 5


def fold(text: str) -> int:
    return hashlib.sha256(text.encode("utf-8")).digest()[1] % FOLDS


def training_set(data: Path) -> tuple[list[str], list[int], list[float]]:
    """Texts, labels and weights: real queries weigh REAL_WEIGHT together (they outnumber the yardstick 6 to 1
    and, weighted like it, teach the genre of benchmarks rather than what garble looks like)."""
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
    tune = [r for r in rows if r["half"] == "tune"]
    real = sorted({t for t, _ in real_queries(data) if fit_half(t)})
    pos = sum(r["genuine"] for r in tune)
    weight = [REAL_WEIGHT / len(real)] * len(real) + [0.5 / pos if r["genuine"] else 0.5 / (len(tune) - pos)
                                                      for r in tune]
    return real + [r["query"] for r in tune], [1] * len(real) + [int(r["genuine"]) for r in tune], weight


def main() -> None:
    import numpy as np

    from mashbill.factory.encoders.embeddings import Encoder

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("/work/shared/data/queries-dev"))
    ap.add_argument("--out", type=Path, default=CLASSIFIERS / "genuine@1.json")
    args = ap.parse_args()
    texts, y, weight = training_set(args.data)
    digest = training_digest(texts, y, weight)
    enc = Encoder.load(threads=1)
    x = enc.encode(texts).astype(np.float64)
    y, weight = np.array(y), np.array(weight)
    n_real = len(texts) - 260
    # the threshold from out-of-fold scores (in-sample ones flatter the fit): 5 folds by a hash of the text
    folds = np.array([fold(t) for t in texts])
    oof = np.zeros(len(texts))
    for f in range(FOLDS):
        w, b = fit(x[folds != f], y[folds != f], l2=L2, weight=weight[folds != f])
        oof[folds == f] = 1 / (1 + np.exp(-(x[folds == f] @ w.astype(np.float64) + b)))
    tune_p, tune_y = oof[n_real:], y[n_real:]
    threshold = round(float(np.quantile(tune_p[tune_y == 1], 1 - KEEP_TUNE_GENUINE)), 3)
    w, b = fit(x, y, l2=L2, weight=weight)
    prov = (f"bench/fit_genuine.py: logistic regression (l2 {L2}) on {enc.name} embeddings of {n_real} "
            f"queries-dev queries (even sha256 half, weight {REAL_WEIGHT}) and the synth-labelled tune half "
            f"({int(tune_y.sum())} genuine, {int((1 - tune_y).sum())} not); the threshold keeps "
            f"{KEEP_TUNE_GENUINE:.0%} of the tune genuine out of fold")
    sha = write_weights(args.out, w, b, threshold, prov, enc.revision, digest)
    print(f"fit on {len(texts)} texts ({n_real} real, 260 tune); threshold {threshold}; out of fold it drops "
          f"{(tune_p[tune_y == 0] < threshold).mean():.2f} of the tune non-genuine and "
          f"{(oof[:n_real] < threshold).mean():.3f} of the fitted real queries; wrote {args.out}")
    print(f"n={len(texts)} threshold={threshold} sha256={sha}")


if __name__ == "__main__":
    main()
