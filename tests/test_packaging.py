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


# modules whose import needs what only their own environment has (the argilla-server venv of `mashbill review serve`)
OWN_ENV = {"mashbill.curation.review.server.sqlsearch"}


def test_the_wheel_from_a_clean_checkout_imports_every_module(tmp_path):
    """Build the wheel from the tracked files only (no build/ or egg-info left over), unpack it as pip would, and
    import every module it holds from there, not from the source tree."""
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        if (ROOT / rel).is_file() and not rel.startswith(("tests/", "bench/", "docs/")):
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_bytes((ROOT / rel).read_bytes())
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", ".", "-w",
                    str(tmp_path / "dist")], cwd=src, check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("mashbill-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        z.extractall(site)
    modules = sorted(n[:-3].replace("/", ".").removesuffix(".__init__") for n in names
                     if n.endswith(".py") and not n.endswith("__main__.py"))
    on_disk = sorted(p for p in (ROOT / "mashbill").rglob("*.py")) + [
        p for layer in ("specs", "factory", "validators", "curation", "trainers", "exporters")
        for p in (ROOT / layer).rglob("*.py")]
    assert len(modules) == len([p for p in on_disk if p.name != "__main__.py"])
    assert "mashbill.factory.migrations" in modules and any(n.endswith(".sql") for n in names)
    check = ("import importlib, sys\n"
             f"site = {str(site)!r}\n"
             "bad = []\n"
             f"for m in {[m for m in modules if m not in OWN_ENV]!r}:\n"
             "    mod = importlib.import_module(m)\n"
             "    if not mod.__file__.startswith(site):\n"
             "        bad.append(f'{m} from {mod.__file__}')\n"
             "print('\\n'.join(bad))\n")
    proc = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == ""
