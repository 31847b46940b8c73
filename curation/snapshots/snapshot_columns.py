"""A snapshot's examples as one Arrow table, built column by column (issue 29: the columnar freeze).

Most records of a large store take the common path (accepted, validated, no review row, no judge's reject): the
store hands them over as columns (`Store.plain_usable`: canonical JSON texts and a few JSON paths), so no record is
decoded whole, and their prompts stay in the store until the split they land in is written (`Store.prompts_of`).
Their example key is the one the store kept when each record was written (`factory.records.sft_key`; for a record
written before that, hashed by the store without copying its prompt out), and their labels and cell are computed
once per distinct combination of the values the labels read (the input's lang/type/complexity, the meta's lang and
taxonomy renames, and for plans the output's task categories and length, for complexity labels the output's
`complexity`), by the same `curation.selection.labels` functions. Any other record (reviewed, corrected, odd
output) and every preference row goes through the `Example` objects of `snapshot_examples` and joins the same table,
in record id order (the order the near-duplicate grouping reads).
"""

from __future__ import annotations

import json
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from mashbill.curation.selection.labels import cell_name, class_list, classification_label, labels_of
from mashbill.curation.snapshots.snapshot_format import MESSAGE
from mashbill.factory.store import loads_many
from mashbill.hashing import canonical_json

EXAMPLES = pa.schema([
    ("key", pa.string()), ("record_id", pa.string()), ("row_kind", pa.string()), ("spec", pa.string()),
    ("source", pa.string()), ("rule", pa.string()), ("query", pa.string()), ("lang", pa.string()),
    ("labels", pa.string()), ("cell", pa.string()), ("class_labels", pa.list_(pa.string())),
    ("prompt", pa.list_(MESSAGE)), ("completion", pa.string()), ("rejected", pa.string()),
    ("rejected_codes", pa.list_(pa.string())), ("turns", pa.list_(MESSAGE)),
    ("links", pa.list_(pa.string())),  # other keys this example must share a split with
    ("inputs", pa.string()),  # the record's input as JSON text (decoded for curation.group_by), not written
    ("n_tokens", pa.int32()),  # the count validation kept under the freeze's tokenizer and template, else NULL
    ("prompt_in_store", pa.bool_()),  # a plain record's prompt (NULL here): read from the store when written
])

# the JSON paths the plain path reads (names are Store.plain_usable column names)
QUERY_PATH = ("q", "input", "$.query")
PLAN_PATHS = (("in_lang", "input", "$.lang"), ("in_type", "input", "$.type"), ("in_cx", "input", "$.complexity"),
              ("me_lang", "meta", "$.lang"), ("me_renamed", "meta", "$.taxonomy_renamed"),
              ("out_cats", "output", "$[*].category"))
# a complexity label reads the output object's `complexity` (its class label too); the input and meta as a plan's
COMPLEXITY_PATHS = (*PLAN_PATHS[:5], ("out_cx", "output", "$.complexity"))
PROJECTED = {"plan": (PLAN_PATHS, "ARRAY"), "complexity": (COMPLEXITY_PATHS, "OBJECT")}  # paths, output JSON type
PLAN_DIMS = {"category", "categories", "complexity", "lang", "n_tasks", "type"}


def paths_for(kind: str, dims: Sequence[str]) -> tuple[tuple[str, str, str], ...]:
    return (QUERY_PATH, *PROJECTED[kind][0]) if projected(kind, dims) else (QUERY_PATH,)


def projected(kind: str, dims: Sequence[str]) -> bool:
    """Whether labels of `kind` over `dims` are computed from its PROJECTED paths (else from each decoded
    record)."""
    return kind in PROJECTED and set(dims) <= PLAN_DIMS


def _projected_output(kind: str, out: str | None, length: int | None):
    """The output as far as the labels read it: a plan's tasks by category (the tasks without a category key as
    non-dicts), a complexity object's `complexity`."""
    if kind == "plan":
        tasks = [{"category": c} for c in json.loads(out)]
        return tasks + [None] * (length - len(tasks))
    return {} if out is None else {"complexity": json.loads(out)}


def from_examples(examples: Sequence) -> pa.Table:
    """`snapshot_examples.Example` objects as EXAMPLES rows."""
    cols = {"key": [e.key for e in examples], "record_id": [e.record_id for e in examples],
            "row_kind": [e.row_kind for e in examples], "spec": [e.spec for e in examples],
            "source": [e.source for e in examples], "rule": [e.rule for e in examples],
            "query": [e.query for e in examples], "lang": [e.lang for e in examples],
            "labels": [canonical_json(e.labels) for e in examples], "cell": [e.cell for e in examples],
            "class_labels": [e.class_labels for e in examples], "prompt": [e.prompt for e in examples],
            "completion": [e.completion for e in examples], "rejected": [e.rejected for e in examples],
            "rejected_codes": [e.rejected_codes for e in examples], "turns": [e.turns for e in examples],
            "links": [e.group_links for e in examples], "inputs": [canonical_json(e.inputs) for e in examples],
            "n_tokens": [None] * len(examples), "prompt_in_store": [False] * len(examples)}
    return pa.table({f.name: pa.array(cols[f.name], f.type) for f in EXAMPLES}, schema=EXAMPLES)


def _label_facts(kind: str, dims: list[str], inputs: dict, output, meta: dict) -> tuple[str, str, list[str], str]:
    """(labels as canonical JSON, cell, class labels, lang) of one record, as snapshot_examples.sft_examples
    computes them."""
    labels = labels_of(dims, kind, inputs, output, meta)
    lang = labels.get("lang") or inputs.get("lang") or meta.get("lang") or "none"
    return (canonical_json(labels), cell_name(labels, dims), class_list(classification_label(kind, output, meta)),
            lang)


def _loads(text: str | None):
    return None if text is None else json.loads(text)


_ABSENT, _SEP = "\x01", "\x00"  # no JSON text holds a raw control character
_FACT_TYPES = (pa.string(), pa.string(), pa.list_(pa.string()), pa.string())  # as _label_facts gives them


def _projected_facts(plain: pa.Table, kind: str, dims: list[str]) -> tuple[pa.Array, list[tuple | None]]:
    """`_label_facts` once per distinct combination of the values the labels read (see PROJECTED; None for a
    combination whose output is not of the JSON type the labels read: its records are decoded whole) and each
    record's combination (an index into them). The combinations are found by Arrow's dictionary encoding of those
    values joined."""
    import numpy as np

    paths, json_type = PROJECTED[kind]
    names = [name for name, _, _ in paths]
    values = [plain.column(name) for name in names] + [plain.column("output_len").cast(pa.string()),
                                                         plain.column("output_type")]
    joined = pc.binary_join_element_wise(*[pc.fill_null(v, _ABSENT) for v in values], _SEP)
    encoded = joined.combine_chunks().dictionary_encode()
    at = encoded.indices.to_numpy(zero_copy_only=False)
    _, first = np.unique(at, return_index=True)  # the first row of each combination, in the dictionary's order
    rows = plain.select([*names, "output_len", "output_type"]).take(pa.array(first, pa.int64())).to_pylist()
    distinct: list[tuple | None] = []
    for row in rows:
        if row["output_type"] != json_type:  # not a list of tasks (plans), not an object (complexity)
            distinct.append(None)
            continue
        inputs = {k: json.loads(row[name]) for k, name in zip(("lang", "type", "complexity"), names[:3])
                  if row[name] is not None}
        meta = {k: json.loads(row[name]) for k, name in zip(("lang", "taxonomy_renamed"), names[3:5])
                if row[name] is not None}
        distinct.append(_label_facts(kind, dims, inputs, _projected_output(kind, row[names[5]], row["output_len"]),
                                     meta))
    return pa.array(at), distinct


def _json_strings(texts: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Each JSON text decoded (absent: ""): a string without escapes is its text between the quotes, taken in Arrow;
    the rest are decoded together (at a million queries, json.loads of each was 0.6 s of the freeze)."""
    import numpy as np

    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    plain = pc.fill_null(pc.and_(pc.starts_with(texts, '"'), pc.invert(pc.match_substring(texts, "\\"))), False)
    out = pc.if_else(plain, pc.utf8_slice_codeunits(texts, 1, -1), pa.nulls(len(texts), pa.string()))
    rest = np.flatnonzero(~plain.to_numpy(zero_copy_only=False))
    if len(rest):
        mask = np.zeros(len(texts), dtype=bool)
        mask[rest] = True
        values = texts.take(pa.array(rest, pa.int64())).to_pylist()
        decoded = loads_many(values)
        out = pc.replace_with_mask(out, pa.array(mask), pa.array(["" if v is None else d
                                                                   for v, d in zip(values, decoded)], pa.string()))
    return out


def plain_table(plain: pa.Table, kind: str, dims: list[str], spec_ref: str, inputs: bool = True) -> pa.Table:
    """EXAMPLES rows of the plain records (`Store.plain_usable` columns with `paths_for(kind, dims)`); without
    `inputs` (no curation.group_by to read them) their inputs column is left empty."""
    n = plain.num_rows
    outputs = pc.fill_null(plain.column("output"), "null").to_pylist()  # canonical_json(None) for no output
    queries = _json_strings(plain.column("q"))  # input.get("query", "")
    facts: list[tuple] = [None] * n
    columns = None  # labels, cell, class labels, lang
    if projected(kind, dims) and n:
        at, distinct = _projected_facts(plain, kind, dims)
        if None in distinct:
            facts = [distinct[i] for i in at.to_pylist()]
        else:  # as columns, without a Python object per record
            columns = [pa.array(list(c), t).take(at) for c, t in zip(zip(*distinct), _FACT_TYPES)]
    if columns is None:
        inputs_col, meta_col = plain.column("input"), plain.column("meta")
        for i in (i for i in range(n) if facts[i] is None):
            facts[i] = _label_facts(kind, dims, json.loads(inputs_col[i].as_py()), _loads(outputs[i]),
                                    json.loads(meta_col[i].as_py()))
        columns = [pa.array(list(c), t) for c, t in zip(zip(*facts) if n else ((), (), (), ()), _FACT_TYPES)]
    labels, cells, classes, langs = columns
    none = pa.nulls(n, pa.string())
    return pa.table({
        "key": plain.column("key"), "record_id": plain.column("record_id"),
        "row_kind": pa.array(["sft"] * n, pa.string()), "spec": pa.array([spec_ref] * n, pa.string()),
        "source": pa.array(["teacher"] * n, pa.string()), "rule": none,
        "query": pa.array(queries, pa.string()), "lang": langs, "labels": labels, "cell": cells,
        "class_labels": classes,
        "prompt": pa.nulls(n, pa.list_(MESSAGE)),
        "completion": pa.array(outputs, pa.string()), "rejected": none,
        "rejected_codes": pa.array([[]] * n, pa.list_(pa.string())), "turns": pa.nulls(n, pa.list_(MESSAGE)),
        "links": pa.array([[]] * n, pa.list_(pa.string())),
        "inputs": plain.column("input") if inputs else none,  # the stored JSON text
        "n_tokens": plain.column("n_tokens").cast(pa.int32()) if "n_tokens" in plain.schema.names
        else pa.nulls(n, pa.int32()),
        "prompt_in_store": pa.array([True] * n, pa.bool_()),
    }, schema=EXAMPLES)


def sft_table(objects: Sequence, plain: pa.Table | None, kind: str, dims: list[str], spec_ref: str,
              inputs: bool = True) -> pa.Table:
    """The SFT examples of a selection (`objects`: Examples of the records off the plain path) in record id
    order."""
    parts = [from_examples(objects)]
    if plain is not None and plain.num_rows:
        parts.append(plain_table(plain, kind, dims, spec_ref, inputs))
    if len(parts) > 1 and not parts[0].num_rows:
        # one chunk, not an empty one beside it: a take on a chunked column first concatenates its chunks, a copy
        # of every prompt (the freeze's peak, issue 29)
        parts = parts[1:]
    table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    if len(parts) > 1 and parts[0].num_rows:
        table = table.take(pc.sort_indices(table, [("record_id", "ascending")]))
    if any(column.num_chunks > 1 for column in table.columns):
        # DuckDB hands over its batches as chunks; every later take on a chunked column first concatenates it, a
        # transient copy of every prompt per split (at 176K complexity records 2,296 -> 1,880 MB peak, issue 29)
        table = table.combine_chunks()
    return table
