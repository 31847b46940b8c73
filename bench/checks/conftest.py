"""Tests of the bench scripts themselves (run by CI beside tests/, see pyproject's testpaths): only these may import
a bench script; tests/ never does (tests/test_layers.py). The folder is not named tests/: that name is the test
suite's own namespace (`from tests.conftest import ...`)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, so `import fidelity` finds bench/fidelity.py

from tests.validators.conftest import catalog, ruleset  # noqa: E402,F401 (the validator tests' real rule set and catalog)
