"""The lab's tests run only when asked (`.venv/bin/python -m pytest bench/lab`): the suite's testpaths is tests/."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent.parent / "tests" / "validators")]
