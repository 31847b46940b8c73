"""Fixtures for the CLI tests: a small store of validated plan records and one snapshot frozen from it, written
the way generate + validate + `snapshot freeze` write them (no model runs), plus the plan library and the
fault-injecting teacher server of the factory tests.

`invoke` runs the real CLI in this process (click's runner: cheap, and an exception that escapes is a test
failure, as a user would see a traceback); `run_cli` (tests.conftest) runs it in a subprocess where the process
boundary matters (exit codes through `sys.exit`, environment variables of a fresh process).
"""

from __future__ import annotations

import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from mashbill.cli import main
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from tests.curation.conftest import SHARED, Lib, add_records, lib  # noqa: F401  (the plan library fixture)
from tests.factory.conftest import fault_server, write_spec  # noqa: F401  (the fault-injecting teacher)


def invoke(*args, env: dict | None = None):
    """The CLI in-process; stdout and stderr apart (`out`, `err`), the exit code, and no escaped exception."""
    previous = signal.getsignal(signal.SIGTERM)  # generate and judge install their own handler
    try:
        res = CliRunner().invoke(main, [str(a) for a in args], env=env)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert res.exception is None or isinstance(res.exception, SystemExit), f"traceback: {res.exception!r}\n{res.output}"
    return res


def error_lines(res) -> list[str]:
    return [line for line in res.stderr.splitlines() if line.startswith(("error:", "Error:"))]


@dataclass
class CliStore:
    root: Path
    lib: Lib
    spec: Path  # cli-plan@1: 26 records, one rejected at generation (PARSE001), one by validation (HR001)
    store: Path  # holds snapshot cli@1 under store/snapshots

    def copy(self, dest: Path) -> Path:
        """A private copy of the store (for tests that write)."""
        shutil.copytree(self.store, dest)
        return dest


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory) -> CliStore:
    root = tmp_path_factory.mktemp("cli")
    library = Lib(root / "lib")
    shutil.copytree(SHARED, library.root / "shared")
    spec = library.write("cli-plan")
    store = root / "store"
    with Store.open(store) as s:
        add_records(s, load_spec(spec), parse_failures=("What is the capital of Canada ?",),
                    rejected_by_validation={"What is 17.5% of 4,360?": "HR001"})
    res = invoke("snapshot", "freeze", spec, "--name", "cli", "--version", "1", "--store", store, "--no-tokens")
    assert res.exit_code == 0, res.output
    assert "cli@1" in res.stdout and "left out by code: HR001 1, PARSE001 1" in res.stdout
    return CliStore(root, library, spec, store)
