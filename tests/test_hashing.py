"""mashbill/hashing.py: the one sha256 helper every layer uses (spec, record, pair and config hashes)."""

from __future__ import annotations

import hashlib

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
