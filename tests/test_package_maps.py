"""Every package's `__init__` docstring is a map of the package: it names each of its modules and sub-packages
(as ``name`` and ``name/``), so a newcomer finds a concept from the folder they open."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ["mashbill", "specs", "factory", "validators", "curation", "trainers", "exporters"]


def unmapped(root: Path = ROOT) -> list[str]:
    """'package/__init__.py: name' for every module or sub-package its docstring does not name."""
    found = []
    for folder in FOLDERS:
        for init in sorted((root / folder).rglob("__init__.py")):
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
            for child in sorted(init.parent.iterdir()):
                if child.suffix == ".py" and child.name not in {"__init__.py", "__main__.py"}:
                    if f"``{child.stem}``" not in doc:
                        found.append(f"{init.relative_to(root)}: {child.stem}")
                elif child.is_dir() and (child / "__init__.py").exists() and f"``{child.name}/``" not in doc:
                    found.append(f"{init.relative_to(root)}: {child.name}/")
    return found


def test_every_package_maps_its_modules():
    assert unmapped() == []


def test_the_check_finds_an_unmapped_module(tmp_path):
    pkg = tmp_path / "validators" / "spans"
    pkg.mkdir(parents=True)
    (tmp_path / "validators" / "__init__.py").write_text('"""V.\n\n- ``run``: runs.\n"""\n', encoding="utf-8")
    (tmp_path / "validators" / "run.py").write_text("", encoding="utf-8")
    (tmp_path / "validators" / "new.py").write_text("", encoding="utf-8")
    (pkg / "__init__.py").write_text('"""Token spans (names spans, never as a map entry)."""\n', encoding="utf-8")
    (pkg / "spans.py").write_text("", encoding="utf-8")
    assert unmapped(tmp_path) == ["validators/__init__.py: new", "validators/__init__.py: spans/",
                                  "validators/spans/__init__.py: spans"]


def test_the_readme_layout_names_every_sub_package():
    rows = {line.split("|")[1].strip(" `"): line for line in (ROOT / "README.md").read_text(encoding="utf-8")
            .splitlines() if line.startswith("| `")}
    missing = []
    for layer in FOLDERS[1:]:
        row = rows[f"{layer}/"]
        missing += [f"{layer}/{d.name}/" for d in sorted((ROOT / layer).iterdir())
                    if (d / "__init__.py").exists() and f"`{d.name}/`" not in row]
    cli = {d.name for d in (ROOT / "mashbill" / "cli").iterdir() if (d / "__init__.py").exists()}
    named = rows["mashbill/"].split("`mashbill/cli/{", 1)[-1].split("}/`", 1)[0].split(",")
    assert set(named) == cli
    assert missing == []
