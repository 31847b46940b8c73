"""The learned 'looks like a real user request' candidate (bench/lab/query_genuine.py, measured and left out
of the screen): what it was fitted on (never the held-out rows), that the fit is deterministic and reproduces the
shipped weights, the check on a few yardstick rows, and its figures on the yardstick's report half (the
floors are what bench/synth_quality.py measured, minus a margin)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import sys

import numpy as np
import pytest

from mashbill.specs import load_spec
from mashbill.validators.queries.queries import quality_codes, query_screen
from query_genuine import CLASSIFIERS, embed, fit, fit_half, genuine_scores, load_weights
from query_genuine import not_genuine, training_digest

from vhelpers import QUERIES_DEV as DEV
from vhelpers import QUERIES_SPEC as SPEC
from vhelpers import ROOT
from vhelpers import SYNTH_LABELLED as FIXTURE

WEIGHTS = CLASSIFIERS / "genuine@1.json"


@pytest.fixture(scope="module")
def labelled():
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]


def _fit_script():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("fit_genuine", ROOT / "bench" / "fit_genuine.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(DEV is None, reason="shared/data/queries-dev is not beside this checkout")
def test_fitted_on_the_tune_half_and_even_real_queries_only(labelled):
    texts, labels, weights = _fit_script().training_set(DEV)
    doc = json.loads(WEIGHTS.read_text(encoding="utf-8"))
    assert training_digest(texts, labels, weights) == doc["training_sha256"]  # the file came from this set
    tune = {r["query"] for r in labelled if r["half"] == "tune"}
    held_out = {r["query"] for r in labelled if r["half"] == "report"}
    for name in ("grown-sample@3.jsonl", "grown-sample@4.jsonl"):
        held_out |= {json.loads(line)["query"] for line in (FIXTURE.parent / name).read_text().splitlines() if line}
    # a grown query the teacher wrote again ("What is climate?") is a tune row too; nothing else is shared
    assert not (held_out - tune) & set(texts) and len(held_out & tune) <= 1
    assert all(fit_half(t) for t in texts if t not in tune)


def test_fit_is_deterministic_and_separates_what_it_saw(labelled):
    rows = [r for r in labelled if r["half"] == "tune"][:60]
    x = embed([r["query"] for r in rows])
    y = [int(r["genuine"]) for r in rows]
    w1, b1 = fit(x, y, l2=0.1)
    w2, b2 = fit(x, y, l2=0.1)
    assert w1.tobytes() == w2.tobytes() and b1 == b2
    p = 1 / (1 + np.exp(-(x @ w1 + b1)))
    assert min(p[i] for i in range(len(y)) if y[i]) > max(p[i] for i in range(len(y)) if not y[i])


def test_shipped_file_is_pinned_by_its_hash():
    sha = hashlib.sha256(WEIGHTS.read_bytes()).hexdigest()
    w, _, threshold = load_weights("genuine@1", sha)
    assert w.shape == (384,) and 0 < threshold < 1
    with pytest.raises(ValueError, match="sha256"):
        load_weights("genuine@1", "0" * 64)


def test_check_on_yardstick_rows():
    dropped = ["What can you do for me? How does that work?", "In what ways can I assist you?",
               "Wie vielen Ausgangsschmutze wir erfüllen"]
    kept = ["What day of the week will it be on December 25th?", "Does metformine have any adverse effects for "
            "pregnant women?", "How can I write a poem about autumn in Hamburg?"]
    assert all(not_genuine(t) for t in dropped), [t for t in dropped if not not_genuine(t)]
    assert not any(not_genuine(t) for t in kept), [t for t in kept if not_genuine(t)]
    assert "below 0.122" in not_genuine(dropped[0])


def test_report_half_figures(labelled):
    """bench/synth_quality.py --half report: with it the screen keeps a genuine share of 0.479 (0.457
    without) and 0.686 of the genuine (0.843 without): the small gain for the loss is why no spec turns it on."""
    screen = query_screen(load_spec(SPEC))
    rows = [r for r in labelled if r["half"] == "report"]
    found = [quality_codes(screen, r["query"], r["lang"], r["cell"].split("/")[0], r["cell"].endswith("/trap"))
             for r in rows]
    threshold = load_weights("genuine@1")[2]
    p = genuine_scores([r["query"] for r in rows])
    kept = [r for r, f, x in zip(rows, found, p) if not f and x >= threshold]
    share = sum(r["genuine"] for r in kept) / len(kept)
    recall = sum(r["genuine"] for r in kept) / sum(r["genuine"] for r in rows)
    assert share >= 0.46 and recall >= 0.64, (share, recall)


@pytest.mark.slow
@pytest.mark.skipif(DEV is None or not os.environ.get("MASHBILL_TEST_REFIT"),
                    reason="set MASHBILL_TEST_REFIT=1 (with shared/data/queries-dev): it embeds 1,871 texts, ~50 s")
def test_script_reproduces_the_shipped_weights(tmp_path):
    """The whole script again: the same training set, threshold and weights (float32 noise aside). Off in CI,
    whose cheaper guard is the training digest and the deterministic fit above; run it after a refit."""
    import subprocess

    out = tmp_path / "genuine.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "fit_genuine.py"), "--data", str(DEV), "--out", str(out)],
                   check=True, capture_output=True, timeout=900)
    new, old = json.loads(out.read_text()), json.loads(WEIGHTS.read_text())
    assert (new["training_sha256"], new["threshold"]) == (old["training_sha256"], old["threshold"])
    w_new, w_old = (np.frombuffer(base64.b64decode(d["weights_f32_b64"]), "<f4") for d in (new, old))
    assert abs(w_new - w_old).max() < 1e-4 and abs(new["bias"] - old["bias"]) < 1e-4
