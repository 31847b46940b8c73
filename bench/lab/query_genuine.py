"""Does a synthesized query look like a real user's request? A logistic regression on MiniLM embeddings,
measured and left out of the screen (no spec, no reject code).

The shipped sentence encoder (`factory.encoders.embeddings.Encoder`, all-MiniLM-L6-v2 through onnxruntime) turns the
query into 384 numbers; a linear model (float32 weights and a bias, fitted by `fit` in a few lines of numpy)
turns those into the probability that the query is a genuine request. Positives: real queries of
shared/data/queries-dev (English and German, the even half of a sha256 of the text) and the genuine rows of
the labelled yardstick's tune half; negatives: the tune half's non-genuine rows (garbled, echoes, needing
context, ...). Nothing of the yardstick's report half, of the grown samples or of the odd half of queries-dev
is fitted on: they are the held-out checks (`bench/synth_quality.py`). `bench/fit_genuine.py` writes the
weights file (`specs/library/shared/classifiers/genuine@1.json`: provenance, the training set's digest, the
threshold), and `load_weights` checks a given sha256, so a screen that used it could pin the file.

The finding (README, "How many kept queries are genuine"): on the report half it lifts the genuine share of
what the screen keeps from 0.457 to 0.479 while dropping twice as many genuine queries, and it drops 1 of the
15 garbled rows of the @4 sample: MiniLM embeds the topic, and the 135M teacher's garble is on topic (the
cell alone ranks the tune half nearly as well, AUC 0.72 against 0.78 out of fold). So no screen runs it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from pathlib import Path

CLASSIFIERS = Path(__file__).resolve().parent / "classifiers"


def fit_half(text: str) -> bool:
    """The queries-dev half that may be fitted on: the first byte of sha256(text) is even, as the yardstick's
    halves (the odd half stays held out)."""
    return hashlib.sha256(text.encode("utf-8")).digest()[0] % 2 == 0


def fit(x, y, *, l2: float = 1.0, steps: int = 400, weight=None):
    """Weighted logistic regression, L2 on the weights; Newton steps in float64 so the result is the same on
    every run. `weight` per row (default: each class weighs half). Returns (w float32, b float)."""
    import numpy as np

    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    if weight is None:
        sw = np.where(y > 0, 0.5 / max(y.sum(), 1), 0.5 / max((1 - y).sum(), 1))
    else:
        sw = np.asarray(weight, np.float64) / np.sum(weight)
    xb = np.hstack([x, np.ones((len(x), 1))])
    theta = np.zeros(xb.shape[1])
    reg = np.full(xb.shape[1], l2 / len(x))
    reg[-1] = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(xb @ theta)))
        grad = xb.T @ (sw * (p - y)) + reg * theta
        hess = (xb * (sw * p * (1 - p))[:, None]).T @ xb + np.diag(reg + 1e-9)
        step = np.linalg.solve(hess, grad)
        theta -= step
        if np.abs(step).max() < 1e-10:
            break
    return theta[:-1].astype(np.float32), float(theta[-1])


def training_digest(texts: list[str], labels: list[int], weights: list[float]) -> str:
    """sha256 of what was fitted (texts, labels, row weights): the file says which training set made it."""
    return hashlib.sha256(json.dumps([texts, labels, [round(x, 12) for x in weights]]).encode("utf-8")).hexdigest()


def write_weights(path: Path, w, b: float, threshold: float, provenance: str, encoder_revision: str,
                  training: str = "") -> str:
    """The weights file (JSON: float32 weights as base64, the bias, the measured threshold, a provenance line,
    the training set's digest); returns its sha256."""
    import numpy as np

    doc = {"provenance": provenance, "encoder_revision": encoder_revision, "training_sha256": training,
           "dims": int(len(w)),
           "bias": round(float(b), 6), "threshold": threshold,
           "weights_f32_b64": base64.b64encode(np.asarray(w, "<f4").tobytes()).decode("ascii")}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return hashlib.sha256(path.read_bytes()).hexdigest()


@functools.lru_cache(maxsize=4)
def load_weights(name: str, sha256: str = ""):
    """(w, b, threshold) of CLASSIFIERS/NAME.json; a given sha256 must match (the spec pins the file)."""
    import numpy as np

    path = CLASSIFIERS / f"{name}.json"
    raw = path.read_bytes()
    if sha256 and hashlib.sha256(raw).hexdigest() != sha256:
        raise ValueError(f"{path}: sha256 {hashlib.sha256(raw).hexdigest()[:12]}... is not the spec's "
                         f"{sha256[:12]}...")
    doc = json.loads(raw)
    w = np.frombuffer(base64.b64decode(doc["weights_f32_b64"]), "<f4").astype(np.float32)
    return w, float(doc["bias"]), float(doc["threshold"])


@functools.lru_cache(maxsize=1)
def _encoder():
    from mashbill.factory.encoders.embeddings import Encoder

    return Encoder.load(threads=1)


def embed(texts: list[str]):
    """MiniLM embeddings of `texts` (one encoder per process, one thread: the fit's)."""
    return _encoder().encode(list(texts))


def genuine_scores(texts: list[str], name: str = "genuine@1", sha256: str = "", vecs=None):
    """P(genuine request) per text (float64 array); `vecs` are the texts' MiniLM embeddings when already made."""
    import numpy as np

    w, b, _ = load_weights(name, sha256)
    if vecs is None:
        vecs = embed(texts)
    z = np.asarray(vecs, np.float64) @ w.astype(np.float64) + b
    return 1 / (1 + np.exp(-z))


def not_genuine(text: str, name: str = "genuine@1", sha256: str = "", min_p: float | None = None) -> str | None:
    """The detail when the query's P(genuine) is under `min_p` (default: the file's threshold), else None."""
    _, _, threshold = load_weights(name, sha256)
    limit = threshold if min_p is None else min_p
    p = float(genuine_scores([text], name, sha256)[0])
    if p < limit:
        return f"P(genuine request) {p:.2f} under {name}, below {limit:g} (does not read like a user's request)"
    return None
