"""The `mashbill router` commands end to end, as a user runs them (real CLI, real store, real MiniLM)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import yaml

from mashbill.specs.router import LIBRARY
from tests.conftest import run_cli


# builds the all-MiniLM-L6-v2 ONNX encoder from its safetensors in a fresh cache and embeds with it: among the
# slowest tests of tests/cli/ in the fast lane (bench/RESULTS.md, issue 25)
@pytest.mark.slow
def test_router_cli_outcomes_transitions_embed(tmp_path):
    env = {"MASHBILL_CACHE": str(tmp_path / "cache"), "COLUMNS": "400"}
    store = tmp_path / "store"
    rows = []
    for i in range(12):
        q = f"Problem {i}: how many apples are left when {i + 3} of {i + 10} are eaten?"
        rows += [{"query": q, "model": "small", "correct": i % 2 == 0}, {"query": q, "model": "large", "correct": True}]
    rows += [{"query": "What is the capital of Canada?", "model": "small", "correct": True},
             {"query": "What is the capital of Canada ?", "model": "small", "correct": True},
             {"query": "What is the capital of Canada?", "model": "large", "correct": "perhaps"}]
    data = tmp_path / "outcomes.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    recipe = tmp_path / "cli-out@1.yaml"
    recipe.write_text(yaml.safe_dump({"dataset": "outcomes", "name": "cli-out", "version": 1,
                                      "model_costs": {"small": 0.001, "large": 0.01}}), encoding="utf-8")
    res = run_cli("router", "outcomes", recipe, "--version", "1", "--import", data, "--hold-out-model", "large",
                  "--store", store, "--json", check=True, env=env)
    m = json.loads(res.stdout)
    assert m["kind"] == "outcomes" and m["splits"]["held_out_models"] == ["large"]
    assert "OUT001 1" in res.stderr and f"{data}:27" in res.stderr  # the bad row, named by file and line
    sides = {}
    for s in ("train", "eval", "test"):
        for r in pq.read_table(store / "snapshots" / "cli-out@1" / "queries" / f"{s}.parquet").to_pylist():
            sides[r["text"]] = s
    # near-duplicate queries share a side
    assert sides["What is the capital of Canada?"] == sides["What is the capital of Canada ?"]
    res = run_cli("router", "embed", "--store", store, check=True, env=env)
    assert "14 queries: 14 cached, 0 computed" in res.stdout
    trn = tmp_path / "cli-trn@1.yaml"
    trn.write_text(yaml.safe_dump({"dataset": "transitions", "name": "cli-trn", "version": 1,
                                   "actions": ["small", "large"],
                                   "log_schema": str(LIBRARY / "shared" / "schemas" / "orchestrator-log@1.json"),
                                   "model_costs": {"small": 0.001, "large": 0.01}}), encoding="utf-8")
    res = run_cli("router", "transitions", trn, "--version", "1", "--from-outcomes", "--store", store, check=True,
                  env=env)
    assert "replayed 14 requests (20 calls)" in res.stderr  # 6 odd problems escalate from small to large
    res = run_cli("snapshot", "pull", "cli-out@1", "--format", "router", "--store", store, "--out", tmp_path / "pulled",
                  check=True, env=env)
    first = json.loads((tmp_path / "pulled" / "train.jsonl").read_text().splitlines()[0])
    assert len(first["embedding"]) == 384 and len(first["correct"]) == 2
    bad = run_cli("router", "transitions", trn, "--version", "2", "--store", store, env=env)
    assert bad.returncode == 2 and "--logs" in bad.stderr


def _import(*args):
    from tests.cli.conftest import invoke

    return invoke("router", "import", *args)


def test_a_second_import_of_the_same_file_says_nothing_was_new(tmp_path):
    """Issue 26: a second `router import` of the same file said "4 outcomes kept" as if new."""
    from tests.cli.conftest import invoke

    data = tmp_path / "outcomes.csv"
    data.write_text("prompt,small,large\nWhat is 2+2?,True,True\nName a prime above 10.,False,True\n",
                    encoding="utf-8")
    store = tmp_path / "store"
    first = _import(data, "--store", store, "--json")
    assert first.exit_code == 0, first.output
    [r] = json.loads(first.stdout)
    assert (r["rows_kept"], r["rows_new"]) == (4, 4)
    again = _import(data, "--store", store)
    assert again.exit_code == 0 and "4 outcomes kept (0 new, 4 already stored and replaced)" in again.stdout, \
        again.output
    data.write_text(data.read_text() + "Capital of Peru?,True,True\n", encoding="utf-8")
    [r] = json.loads(_import(data, "--store", store, "--json").stdout)
    assert (r["rows_kept"], r["rows_new"]) == (6, 2)
    n = json.loads(invoke("sql", "SELECT count(*) AS n FROM router_outcomes", "--store", store, "--json").stdout)
    assert n == [{"n": 6}]


def test_a_binary_csv_is_one_line_and_stores_nothing(tmp_path):
    """Issue 26: `router import` of a binary CSV was a traceback."""
    from tests.cli.conftest import error_lines

    data = tmp_path / "outcomes.csv"
    data.write_bytes(b"prompt,small\n" + bytes(range(256)) * 8)
    store = tmp_path / "store"
    res = _import(data, "--store", store)
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and str(data) in res.stderr, res.output
    bad_parquet = tmp_path / "outcomes.parquet"
    bad_parquet.write_bytes(b"PAR1" + b"\x01" * 100)
    res = _import(bad_parquet, "--store", store)
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and str(bad_parquet) in res.stderr, res.output
    from tests.cli.conftest import invoke

    n = json.loads(invoke("sql", "SELECT count(*) AS n FROM router_outcomes", "--store", store, "--json").stdout)
    assert n == [{"n": 0}]
