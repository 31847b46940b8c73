"""`mashbill dump SPEC` (the record dump; model exports are `mashbill export onnx|gguf`)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from mashbill.factory.store import Store
from mashbill.specs import load_spec
from tests.cli.conftest import invoke
from tests.conftest import run_cli
from tests.curation.conftest import SEEDS, add_records


def test_dump_writes_every_stored_record_to_parquet(lib, tmp_path):
    spec = lib.write("dump-t")
    with Store.open(tmp_path / "store") as store:
        add_records(store, load_spec(spec), parse_failures=(SEEDS[0][0],), validate=False)
    proc = run_cli("dump", spec, "--store", tmp_path / "store", check=True)
    path = tmp_path / "store" / "parquet" / "dump-t@1" / "records.parquet"
    assert proc.stdout.strip().endswith("records.parquet") and path.is_file()
    assert pq.read_table(path).num_rows == len(SEEDS)  # rejected records too


def test_dump_json_names_the_file_and_counts_its_rows(cli_store, tmp_path):
    store = cli_store.copy(tmp_path / "store")
    res = invoke("dump", cli_store.spec, "--json", env={"MASHBILL_STORE": str(store)})
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["spec"] == "cli-plan@1" and got["records"] == 26
    assert got["path"] == str(store / "parquet" / "cli-plan@1" / "records.parquet")
    assert pq.read_table(got["path"]).num_rows == 26
