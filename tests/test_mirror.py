"""Tests mirror the tree: the tests of `<layer>/<path>/x.py` are `tests/<layer>/<path>/test_x*.py`, the tests of
`mashbill <command>` are `tests/cli/test_<command>*.py`; only a few cross-cutting files sit at the top."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["specs", "factory", "validators", "curation", "trainers", "exporters"]
TOP = {"test_layers.py", "test_bad_input.py", "test_mirror.py", "test_packaging.py", "test_package_maps.py",
       "test_fast_lane.py"}  # about the whole project, not one module
BASE = {"test_hashing.py", "test_files.py", "test_memory.py",  # mashbill/{hashing,files,memory,jsontext,cpus}.py,
        "test_jsontext.py", "test_cpus.py"}  # below every layer
CLI_EXTRA = {"test_convention.py",  # the convention every command shares (mashbill/cli/__init__.py, _common.py)
             "test_reference.py"}  # docs/cli.md, rendered from every command (mashbill/cli/reference.py)


def misplaced(root: Path = ROOT) -> list[str]:
    """Every test file that names no module (or command) of the folder it mirrors."""
    from mashbill.cli import SUBCOMMANDS

    found = []
    for layer in LAYERS:
        for test in sorted((root / "tests" / layer).rglob("test_*.py")):
            folder = root / layer / test.parent.relative_to(root / "tests" / layer)
            modules = [p.stem for p in folder.glob("*.py") if p.name != "__init__.py"]
            if not any(test.stem.startswith(f"test_{m}") for m in modules):
                found.append(f"{test.relative_to(root)}: no module {folder.relative_to(root)}/X.py for test_X*.py")
    for test in sorted((root / "tests" / "cli").rglob("test_*.py")):
        if test.name not in CLI_EXTRA and not any(test.stem.startswith(f"test_{c}") for c in SUBCOMMANDS):
            found.append(f"{test.relative_to(root)}: no command X for test_X*.py")
    for test in sorted((root / "tests").glob("test_*.py")):
        if test.name not in TOP | BASE:
            found.append(f"{test.relative_to(root)}: belongs in tests/<layer>/ or tests/cli/")
    folders = {p.name for p in (root / "tests").iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    found += [f"tests/{d}/: not a layer" for d in sorted(folders - {*LAYERS, "cli", "fixtures"})]
    return found


def test_tests_mirror_the_tree():
    assert misplaced() == []


def test_the_check_finds_a_misplaced_test(tmp_path):
    (tmp_path / "factory").mkdir()
    (tmp_path / "factory" / "store.py").write_text("", encoding="utf-8")
    for rel in ("tests/factory/test_store_faults.py", "tests/factory/test_teachers.py", "tests/cli/test_sql_cli.py",
                "tests/cli/test_nothing.py", "tests/test_loose.py", "tests/teachers/test_x.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("", encoding="utf-8")
    assert [m.split(":")[0] for m in misplaced(tmp_path)] == [
        "tests/factory/test_teachers.py", "tests/cli/test_nothing.py", "tests/test_loose.py", "tests/teachers/"]
