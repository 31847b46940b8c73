"""`mashbill dump SPEC`: write a spec's stored records to Parquet (atomically).

(Model exports are `mashbill export onnx|gguf`; this dumps records, not models.)
"""

from __future__ import annotations

import click

from mashbill.cli._common import echo_json, json_option, out, store_option


@click.command()
@click.argument("spec")
@store_option
@json_option(help='Print {"spec", "path", "records"} as JSON.')
def command(spec, store_path, as_json):
    """Write SPEC's records (all statuses) to STORE/parquet/NAME@VERSION/records.parquet.

    \b
    Example:  mashbill dump plan-moe --store ./mashbill-data
    """
    from mashbill.factory.store import Store
    from mashbill.specs import find_spec, load_spec

    rs = load_spec(find_spec(spec))
    with Store.open(store_path, create=False) as store:
        path = store.export_parquet(rs.spec.name, rs.spec.version, rs.hash)
    if as_json:
        import pyarrow.parquet as pq

        echo_json({"spec": rs.ref, "path": str(path), "records": pq.read_metadata(path).num_rows})
        return
    out.print(str(path))
