"""bench/complexity_labels.py reads a --labels file that holds fewer teacher modes than asked for: the missing
modes are skipped with a line saying so (no KeyError), and their figures print as n/a."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_modes_missing_from_a_labels_file_are_skipped(tmp_path):
    rows = [json.loads(x) for x in (ROOT / "tests" / "fixtures" / "complexity_labels" / "labels.jsonl")
            .read_text(encoding="utf-8").splitlines() if x.strip()]
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"sample": {r["query"]: r["label"] for r in rows}}), encoding="utf-8")
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "complexity_labels.py"), "--labels", str(labels),
                          "--split", "all", "--limit", "20"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "mode=score: not in" in res.stdout and "mode=calibrated: not in" in res.stdout
    last = res.stdout.strip().splitlines()[-1]
    assert "sample_acc=1.000" in last and "score_acc=n/a" in last and "calibrated_acc=n/a" in last
