"""Tests of the bench scripts themselves (run by CI beside tests/, see pyproject's testpaths): only these may import
a bench script; tests/ never does (tests/test_layers.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, so `import fidelity` finds bench/fidelity.py


@pytest.fixture(scope="session")
def ruleset():
    from mashbill.validators.ruleset import load_ruleset

    return load_ruleset()


@pytest.fixture(scope="session")
def catalog():
    from mashbill.specs.loader import LIBRARY, load_catalog

    return load_catalog(LIBRARY / "shared" / "tools" / "precision-tools@2.yaml")
