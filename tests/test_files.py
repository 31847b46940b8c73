"""mashbill/files.py: a file or folder is published whole or not at all."""

from __future__ import annotations

import pytest

from mashbill.errors import MashbillError
from mashbill.files import staged_dir, write_file_atomic


def test_a_staged_folder_appears_only_when_complete_and_a_failure_leaves_nothing(tmp_path):
    final = tmp_path / "out" / "export"
    with staged_dir(final) as tmp:
        (tmp / "a.txt").write_text("a", encoding="utf-8")
        (tmp / "sub").mkdir()
        (tmp / "sub" / "b.txt").write_text("b", encoding="utf-8")
        assert not final.exists()
    assert (final / "sub" / "b.txt").read_text(encoding="utf-8") == "b"
    other = tmp_path / "out" / "other"
    with pytest.raises(RuntimeError):
        with staged_dir(other) as tmp:
            (tmp / "half").write_text("x", encoding="utf-8")
            raise RuntimeError("converter failed")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["export"]  # no .tmp-* left, no `other`
    with pytest.raises(MashbillError, match="already exists"):
        with staged_dir(final):
            pass
    with staged_dir(final, replace=True) as tmp:
        (tmp / "c.txt").write_text("c", encoding="utf-8")
    assert sorted(p.name for p in final.iterdir()) == ["c.txt"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["export"]


def test_write_file_atomic_replaces_whole_and_leaves_no_temp(tmp_path):
    path = tmp_path / "d" / "eval.json"
    write_file_atomic(path, b"one")
    write_file_atomic(path, b"two")
    assert path.read_bytes() == b"two"
    assert [p.name for p in path.parent.iterdir()] == ["eval.json"]
