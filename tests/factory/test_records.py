"""factory/records.py: the one wording of PARSE001 and SCHEMA001, used by generate and by review corrections."""

from __future__ import annotations

import json

import jsonschema
import pytest

from mashbill.factory.records import parse_verdict, schema_verdicts

SCHEMA = {"type": "object", "required": ["tasks"], "properties": {"tasks": {"type": "array", "items": {
    "type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}}}}


def test_parse_verdict_names_what_and_where():
    with pytest.raises(json.JSONDecodeError) as exc:
        json.loads('{"tasks": [}')
    v = parse_verdict(exc.value)
    assert (v.code, v.severity) == ("PARSE001", "reject")
    assert v.detail.startswith("not JSON: ") and v.detail.endswith(f"at char {exc.value.pos}")


def test_schema_verdicts_are_in_path_order_named_by_path_and_capped():
    validator = jsonschema.Draft202012Validator(SCHEMA)
    bad = {"tasks": [{"id": "x"}, {}, {"id": 1}, {"id": "y"}]}
    found = schema_verdicts(validator, bad, 5)
    assert [v.code for v in found] == ["SCHEMA001"] * 3
    assert [v.detail.split(":")[0] for v in found] == ["tasks/0/id", "tasks/1", "tasks/3/id"]
    assert len(schema_verdicts(validator, bad, 2)) == 2
    assert [v.detail.split(":")[0] for v in schema_verdicts(validator, [], 5)] == ["(root)"]
    assert schema_verdicts(validator, {"tasks": []}, 5) == []
