"""`mashbill cleanlab`: flags stored on a complexity spec's records, --no-write stores none, a plan spec refused."""

from __future__ import annotations

import json

import pytest

from mashbill.factory.store import Store
from tests.cli.conftest import error_lines, invoke
from tests.curation.test_label_issues import _store
from tests.trainers.conftest import snaps  # noqa: F401

pytest.importorskip("cleanlab")


def _flags(path) -> int:
    with Store.open(path, read_only=True, create=False) as store:
        return store.verdict_counts().get("LBL001", 0)


def test_cleanlab_flags_and_no_write(tmp_path, snaps):  # noqa: F811
    rs, path = _store(tmp_path, snaps)
    dry = invoke("cleanlab", rs.path, "--store", path, "--no-write", "--json")
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["flagged"] >= 4 and _flags(path) == 0
    res = invoke("cleanlab", rs.path, "--store", path)
    assert res.exit_code == 0 and "labelled records flagged as label issues (LBL001)" in res.stdout, res.output
    assert _flags(path) == json.loads(dry.stdout)["flagged"]


def test_a_plan_spec_is_refused(tmp_path, snaps):  # noqa: F811
    res = invoke("cleanlab", snaps.root / "plan" / "tplan@1.yaml", "--store", snaps.store)
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and "single-label spec" in res.stderr, res.output
