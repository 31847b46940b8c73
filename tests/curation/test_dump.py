"""`mashbill dump SPEC` (the record dump; model exports are `mashbill export onnx|gguf`)."""

from __future__ import annotations

import pyarrow.parquet as pq

from mashbill.factory.store import Store
from mashbill.specs import load_spec
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
