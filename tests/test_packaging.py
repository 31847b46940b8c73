"""The wheel holds every package: pyproject's hand-written package list equals the folders that hold an __init__.py
(a sub-package left out of the list breaks only the installed wheel, while tests on the source tree still pass)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _declared() -> tuple[set[str], dict[str, str]]:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    return set(conf["packages"]), conf["package-dir"]


def test_every_package_folder_is_in_the_wheel():
    packages, dirs = _declared()
    on_disk = set()
    for name, folder in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            on_disk.add(".".join([name, *rel.parts]))
    # a mapped package under another mapped package (mashbill.cli under mashbill) is found through both roots
    assert packages == on_disk, (f"in pyproject but no __init__.py: {sorted(packages - on_disk)}; "
                                 f"folders with __init__.py missing from pyproject: {sorted(on_disk - packages)}")
