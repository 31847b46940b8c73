"""The complexity side of bench/yield.py: each method's spec is quickstart-complexity@5 with the yardstick's
requests and the method's sections; the combined `vote+retrieved` has both the vote and the bank of tune-half
labels, and no measured (report-half) request is in that bank."""

from __future__ import annotations

import importlib
import json
from argparse import Namespace

import pytest
import yaml

from mashbill.specs import load_spec

bench = importlib.import_module("yield")  # bench/yield.py (bench/checks/conftest.py puts bench/ on the path)
ARGS = Namespace(attempts=2, samples=3, threads=1, k=6, repeat_penalty=None)


@pytest.mark.parametrize("method", ["single", "vote", "retrieved", "vote+retrieved"])
def test_each_complexity_method_has_its_sections(tmp_path, method):
    rows = bench.load_rows("report")[:3]
    rs = load_spec(bench.method_spec(tmp_path, method, rows, ARGS))
    assert rs.spec.kind == "complexity" and rs.spec.teacher == load_spec(bench.SPEC).spec.teacher
    data = yaml.safe_load(next(tmp_path.glob("*.yaml")).read_text(encoding="utf-8"))
    voting = method in ("vote", "vote+retrieved")
    retrieving = method in ("retrieved", "vote+retrieved")
    assert data.get("samples") == ({"n": 3, "pick": "vote", "vote_on": "complexity"} if voting else None)
    assert "repair" not in data
    assert (data.get("examples") or {}).get("k") == (6 if retrieving else None)
    system = data["prompt"]["teacher"]["system"]
    assert ("{{ retrieved_examples }}" in system) == retrieving and ("{{ examples }}" in system) != retrieving


def test_the_bank_holds_no_measured_request(tmp_path):
    rows = bench.load_rows("report")
    bench.method_spec(tmp_path, "vote+retrieved", rows[:2], ARGS)
    bank = [json.loads(line) for line in (tmp_path / "yardstick-tune@1.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {b["query"] for b in bank} == {r["query"] for r in bench.load_rows("tune")}
    assert not {b["query"] for b in bank} & {r["query"] for r in rows}
