"""mashbill/hashing.py: the one sha256 helper every layer uses (spec, record, pair and config hashes)."""

from __future__ import annotations

import hashlib

import pytest

from mashbill.hashing import canonical_json, sha256_bytes, sha256_file, sha256_json, sha256_text


def test_canonical_json_sorts_keys_drops_spaces_and_keeps_unicode():
    assert canonical_json({"b": [1, 2], "a": "é"}) == '{"a":"é","b":[1,2]}'


def test_sha256_json_ignores_key_order_but_not_values():
    assert sha256_json({"a": 1, "b": {"c": 2, "d": 3}}) == sha256_json({"b": {"d": 3, "c": 2}, "a": 1})
    assert sha256_json({"a": 1}) != sha256_json({"a": 2})
    assert sha256_json({"a": "é"}) == hashlib.sha256('{"a":"é"}'.encode()).hexdigest()


def test_sha256_file_reads_in_chunks_and_matches_the_bytes(tmp_path):
    data = bytes(range(256)) * 5000  # over 1 MiB, so more than one chunk
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f") == sha256_bytes(data) == hashlib.sha256(data).hexdigest()
    assert sha256_text("héllo") == sha256_bytes("héllo".encode())


def test_canonical_json_is_json_dumps_with_its_settings_whatever_the_value():
    """The kept encoder writes what json.dumps(sort_keys, compact separators, non-ASCII kept) writes."""
    import json
    import math

    values = [None, True, 0, -7, 2**70, 1.5, 1e-300, math.inf, -math.inf, "", "ä\u2028\"\\\n\t\x00", "東京",
              [], {}, {"z": {"b": [1, {"y": 2, "x": None}], "a": 1.0}, "é": "ß", "A": []},
              {1: "int key", 2.5: "float key", 0: "zero"},
              [{"tasks": [{"category": "precision_tools", "args": {"expression": "0.17*2340"}}]}] * 3]
    for v in values:
        assert canonical_json(v) == json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(math.nan) == "NaN"
    for bad in ({"a": 1, 2: "b"}, {1, 2}, object()):  # the same errors as json.dumps
        with pytest.raises(TypeError):
            canonical_json(bad)
