"""The yield sections in the spec hash: `repair` and `samples` change what a record is, so they change the hash;
the repair guard decides only when to stop asking, so it does not (docs/specs.md, docs/yield.md)."""

from __future__ import annotations

import yaml

from mashbill.specs import LIBRARY, load_spec
from mashbill.specs.loader import spec_home

BASE = LIBRARY / "archive" / "quickstart" / "quickstart-complexity@5.yaml"
HOME = spec_home(BASE)  # where its relative references start


def _write(tmp_path, name: str, **sections):
    data = yaml.safe_load(BASE.read_text(encoding="utf-8"))
    for key in ("output_schema", "rules"):
        data[key] = str((HOME / data[key]).resolve())
    data["prompt"]["file"] = str((HOME / data["prompt"]["file"]).resolve())
    data["seeds"] = [{"inline": [{"query": "What is 2 + 2?", "lang": "en"}]}]
    data.pop("trainer_profile")
    data.pop("repair")
    data.update(name=name, version=1, **sections)
    path = tmp_path / f"{name}@1.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return load_spec(path).hash


def test_repair_and_samples_are_in_the_hash_and_the_guard_is_not(tmp_path):
    repair = {"max_attempts": 2, "codes": ["CPLX005"]}
    plain = _write(tmp_path, "y")
    with_repair = _write(tmp_path, "y", repair=repair)
    other_guard = _write(tmp_path, "y", repair={**repair, "guard": {"window": 5, "action": "skip"}})
    more = _write(tmp_path, "y", repair={**repair, "max_attempts": 3})
    vote = _write(tmp_path, "y", samples={"n": 3, "pick": "vote"})
    assert len({plain, with_repair, more, vote}) == 4
    assert other_guard == with_repair
