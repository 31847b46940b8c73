"""Every code the project emits is registered in mashbill.factory.codes; docs/codes.md's table is its rendering."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from mashbill.factory.codes import CODES, TABLE_END, TABLE_START, markdown_table

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["mashbill", "specs", "factory", "validators", "curation", "trainers", "exporters"]
CODE = re.compile(r"""["']([A-Z]{2,8}[0-9]{3})["']""")


def _emitted_in_source() -> dict[str, str]:
    found = {}
    for layer in LAYERS:
        for path in (ROOT / layer).rglob("*.py"):
            if path.name == "codes.py" and path.parent.name == "factory":
                continue
            for code in CODE.findall(path.read_text(encoding="utf-8")):
                found.setdefault(code, str(path.relative_to(ROOT)))
    return found


def _emitted_by_rule_sets() -> dict[str, str]:
    found = {}
    for path in (ROOT / "specs" / "library").rglob("*.yaml"):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("rules"), list):
            for r in data["rules"]:
                found.setdefault(r["code"], str(path.relative_to(ROOT)))
            for key, value in (data.get("checks") or {}).items():
                for k, v in (value or {}).items():
                    if k.endswith("code"):
                        found.setdefault(v, str(path.relative_to(ROOT)))
    return found


def test_every_emitted_code_is_registered():
    emitted = {**_emitted_in_source(), **_emitted_by_rule_sets()}
    assert len(emitted) > 40  # the scan finds the codes (PARSE, SCHEMA, PLAN, HR, SPAN, DUP, PII, PREF ...)
    missing = {c: where for c, where in emitted.items() if c not in CODES}
    assert not missing, f"register these in factory/codes.py (one line each): {missing}"


def test_registry_entries_are_well_formed():
    for c in CODES.values():
        assert re.fullmatch(r"[A-Z]{2,8}[0-9]{3}", c.code) and c.severity in ("reject", "penalty", "flag")
        assert c.meaning and "\n" not in c.meaning and c.source


def test_rule_set_severities_match_the_registry():
    from mashbill.validators.plans.ruleset import load_ruleset

    for r in load_ruleset().rules:
        assert CODES[r.code].severity == r.severity and CODES[r.code].source == "rules", r.code


def test_docs_table_is_the_registry_rendering():
    text = (ROOT / "docs" / "codes.md").read_text(encoding="utf-8")
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    assert text[start:end].strip() == markdown_table(), \
        "docs/codes.md's code table is stale: run `.venv/bin/mashbill codes --update-doc docs/codes.md`"


def test_registered_rule_ids_are_exactly_the_implemented_rules():
    from mashbill.factory.codes import RULE_IDS
    from mashbill.validators.plans.routing import RULES

    assert set(RULES) == RULE_IDS
    assert all(CODES[c].rule for c in CODES if CODES[c].source == "rules")
