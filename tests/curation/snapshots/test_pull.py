"""curation.snapshots.pull reads only the columns each format is made of (PULL_COLUMNS): the rows it makes from them
are the rows it makes from whole snapshot rows, for every format and row kind."""

import pytest

from mashbill.curation.snapshots.pull import FORMATS, PULL_COLUMNS, rows_for
from mashbill.curation.snapshots.snapshot_format import SCHEMA


def _rows() -> list[dict]:
    def msg(role, text):
        return {"role": role, "content": text}

    base = {f.name: None for f in SCHEMA}
    prompt = [msg("system", "Plan the request."), msg("user", "What is 2 + 2?")]
    return [
        {**base, "example_id": "a", "record_id": "r1", "row_kind": "sft", "query": "What is 2 + 2?", "prompt": prompt,
         "completion": '[{"task": "add"}]', "class_labels": ["math"], "copy": 0},
        {**base, "example_id": "a", "record_id": "r1", "row_kind": "sft", "query": "What is 2 + 2?", "prompt": prompt,
         "completion": '[{"task": "add"}]', "class_labels": ["math"], "copy": 1},  # an oversampled copy
        {**base, "example_id": "b", "record_id": "r2", "row_kind": "preference", "query": "Hi", "prompt": prompt,
         "completion": "good", "rejected": "bad", "rejected_codes": ["HR001"], "class_labels": ["general"], "copy": 0},
        {**base, "example_id": "c", "record_id": "r2", "row_kind": "preference", "query": "Hi", "prompt": prompt,
         "completion": "good", "rejected": "worse", "class_labels": ["general"], "copy": 0},
        {**base, "example_id": "d", "record_id": "r2", "row_kind": "correction", "query": "Hi", "prompt": prompt,
         "completion": "good", "turns": [*prompt, msg("assistant", "bad"), msg("user", "fix"), msg("assistant", "good")],
         "class_labels": ["general"], "copy": 0},
    ]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["complexity", "plan"])
def test_a_format_made_of_its_columns_alone_gives_the_rows_of_whole_rows(fmt, kind):
    whole = _rows()
    narrow = [{k: r[k] for k in PULL_COLUMNS[fmt]} for r in whole]  # a column rows_for reads beyond: a KeyError
    got = rows_for(fmt, narrow, kind)
    assert got == rows_for(fmt, whole, kind) and got


def test_every_column_named_is_a_snapshot_column():
    assert set(PULL_COLUMNS) == set(FORMATS)
    assert {c for cols in PULL_COLUMNS.values() for c in cols} <= set(SCHEMA.names)
