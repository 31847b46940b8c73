"""Write tests/durations.json from the output of a whole test run with `--durations=0`.

    bash scripts/test.sh -p no:cacheprovider --durations=0 > full.log; python scripts/slow_tests.py full.log

Each test's setup, call and teardown seconds are summed; tests/conftest.py puts every test that took
`SLOW_S` seconds or more into the slow lane (`scripts/test.sh --fast` leaves them out). Take the run on a quiet
machine: on a busy one every test looks slow.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^\s*([0-9.]+)s (setup|call|teardown)\s+(\S.*?)\s*$")
# pytest-xdist's loadgroup appends "@GROUP" to a grouped test's id, after any parameter brackets (an "@" inside
# them is followed by "]", so it never matches)
GROUP = re.compile(r"@[A-Za-z0-9_]+$")


def durations(text: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            out[GROUP.sub("", m.group(3))] += float(m.group(1))
    return {node: round(s, 2) for node, s in sorted(out.items())}


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    found = durations(Path(sys.argv[1]).read_text(encoding="utf-8", errors="replace"))
    if not found:
        raise SystemExit(f"{sys.argv[1]}: no duration lines (run pytest with --durations=0)")
    target = Path(__file__).resolve().parents[1] / "tests" / "durations.json"
    target.write_text(json.dumps(found, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{target}: {len(found)} tests, {sum(found.values()):.0f} s in all")


if __name__ == "__main__":
    main()
