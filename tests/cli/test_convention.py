"""The one CLI convention (mashbill/cli/_common.py, `mashbill --help`): --store with MASHBILL_STORE on every
command that reads or writes a store, environment variables only through click's envvar= and shown in --help,
--json on every command that prints results (and it parses), the four exit codes, bad input in one line."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import click
import pytest

from mashbill.cli import EPILOG, main
from mashbill.cli._common import DEFAULT_STORE, STORE_ENV
from tests.cli.conftest import error_lines, invoke

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["specs", "factory", "validators", "curation", "trainers", "exporters", "mashbill"]

# Commands that read or write no store through --store, and why.
NO_STORE = {
    "codes": "the code registry only",
    "merge": "its stores are its arguments (OUT_STORE SHARD_STORE...), as the SLURM merge job calls it",
    "predict": "an exported artifact",
    "release check": "exported artifacts", "release tag": "exported artifacts", "release verify": "exported artifacts",
    "review serve": "the review server's home", "review status": "the review server's home",
    "review stop": "the review server's home",
    "slurm generate": "writes scripts; the shard stores live under --store-root on the cluster",
    "spec check": "spec files", "spec lock": "spec files", "spec ls": "spec files", "spec show": "spec files",
}


def _leaves(cmd=main, path=()):
    ctx = click.Context(main)
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            yield from _leaves(cmd.get_command(ctx, name), (*path, name))
    else:
        yield " ".join(path), cmd


LEAVES = dict(_leaves())


def test_every_command_is_listed_and_loads():
    top = {name.split()[0] for name in LEAVES}
    assert top == {"generate", "validate", "snapshot", "review", "report", "dump", "sql", "merge", "spec", "codes",
                   "router", "judge", "train", "export", "release", "predict", "slurm", "quickstart", "eval", "cleanlab"}
    # tests mirror the tree: one test file (at least) per command module
    for name in top:
        assert list((ROOT / "tests" / "cli").glob(f"test_{name}*.py")), f"no tests/cli/test_{name}*.py"


def test_store_option_is_the_shared_one_everywhere():
    without = []
    for name, cmd in LEAVES.items():
        store = next((p for p in cmd.params if p.name == "store_path"), None)
        if store is None:
            without.append(name)
            continue
        assert store.opts == ["--store"] and store.envvar == STORE_ENV and store.show_envvar, name
        assert store.default in (DEFAULT_STORE, None), name  # None: the config's or the run's store
    assert sorted(without) == sorted(NO_STORE)


@pytest.mark.parametrize("argv", [
    ["sql", "SELECT count(*) AS n FROM records"],
    ["snapshot", "ls"],
    ["snapshot", "verify", "cli@1"],
    ["snapshot", "diff", "cli@1", "cli@1"],
    ["snapshot", "pull", "cli@1"],
    ["report", "cli@1", "--out", "{tmp}/r.html"],
], ids=lambda a: " ".join(a[:2]))
def test_mashbill_store_is_honoured_and_json_parses(cli_store, tmp_path, argv):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    res = invoke(*argv, "--json", env={"MASHBILL_STORE": str(cli_store.store)})
    assert res.exit_code == 0, res.output
    assert isinstance(json.loads(res.stdout), (dict, list))  # the whole of stdout is one JSON document
    elsewhere = invoke(*argv, "--json", env={"MASHBILL_STORE": str(tmp_path / "empty")})
    assert elsewhere.exit_code != 0 or elsewhere.stdout != res.stdout  # the variable, not a default, chose the store


def test_every_command_that_prints_results_takes_json():
    missing = [name for name, cmd in LEAVES.items() if not any(p.name == "as_json" for p in cmd.params)]
    assert missing == []
    for name, cmd in LEAVES.items():
        opt = next(p for p in cmd.params if p.name == "as_json")
        assert opt.opts == ["--json"] and opt.is_flag, name


def _env_options():
    return {(name, p.opts[0]): p for name, cmd in LEAVES.items() for p in cmd.params if getattr(p, "envvar", None)}


def test_environment_variables_are_options_shown_in_help_and_listed_in_the_epilog():
    options = _env_options()
    used = {p.envvar for p in options.values()}
    assert all(p.show_envvar for p in options.values()), [k for k, p in options.items() if not p.show_envvar]
    listed = set(re.findall(r"\b(?:MASHBILL|ARGILLA)_[A-Z_]+\b", EPILOG))
    settings = {"MASHBILL_CACHE", "MASHBILL_STORE_MEMORY", "MASHBILL_PREFILTER"}  # read where they apply, not options
    assert listed == used | settings  # the epilog names every variable an option reads, those settings, no other
    help_text = invoke("--help").stdout
    for line in ("0  ok", "1  findings", "2  bad input", "3  guard stop"):
        assert line in help_text
    assert "[env var: MASHBILL_STORE; default: ./mashbill-data]" in " ".join(invoke("sql", "--help").stdout.split())


def _env_reads(path: Path) -> list[str]:
    """os.environ / os.getenv reads of MASHBILL_* or ARGILLA_* names in a file, as 'file:line NAME'."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        key = None
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.environ.get", "os.getenv") and node.args:
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ" \
                and isinstance(node.ctx, ast.Load):  # setting a variable for a child process is not reading one
            key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.startswith(("MASHBILL_",
                                                                                                  "ARGILLA_")):
            found.append(f"{path}:{node.lineno} {key.value}")
    return found


def test_settings_are_read_from_the_environment_only_through_click():
    reads = [r for layer in LAYERS for p in sorted((ROOT / layer).rglob("*.py")) for r in _env_reads(p)]
    # the exceptions are settings the library needs wherever it runs, each read once through a named constant:
    # MASHBILL_CACHE (mashbill/paths.py), MASHBILL_STORE_MEMORY (the store), MASHBILL_PREFILTER (the prefilter)
    assert reads == []
    for path, constant in (("mashbill/paths.py", 'CACHE_ENV = "MASHBILL_CACHE"'),
                           ("factory/store.py", 'MEMORY_ENV = "MASHBILL_STORE_MEMORY"'),
                           ("validators/prefilter.py", 'PREFILTER_ENV = "MASHBILL_PREFILTER"')):
        assert constant in (ROOT / path).read_text(encoding="utf-8"), path
    cli = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "mashbill" / "cli").glob("*.py"))
    assert "os.environ" not in cli and "getenv" not in cli


def test_the_detector_finds_an_environment_read(tmp_path):
    f = tmp_path / "probe.py"
    f.write_text('import os\nx = os.environ.get("MASHBILL_X")\ny = os.environ["ARGILLA_Y"]\nz = os.getenv("HOME")\n'
                 'os.environ["ARGILLA_Z"] = "1"\n', encoding="utf-8")
    assert [r.split()[1] for r in _env_reads(f)] == ["MASHBILL_X", "ARGILLA_Y"]


def test_exit_codes_are_the_named_constants():
    """No bare exit numbers in the CLI: every sys.exit/SystemExit/ctx.exit uses EXIT_* (or a MashbillError)."""
    bare = []
    for p in sorted((ROOT / "mashbill" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("sys.exit", "SystemExit", "ctx.exit") \
                    and node.args and not re.fullmatch(r"EXIT_\w+|EXIT_\w+ if .+ else EXIT_\w+",
                                                       ast.unparse(node.args[0])):
                bare.append(f"{p.name}:{node.lineno} {ast.unparse(node)}")
    assert bare == []


def test_out_is_always_what_the_command_writes():
    """--out is the path of the command's own output; the folder snapshots are written into is --dir."""
    for (name, opt), p in {(n, q.opts[0]): q for n, c in LEAVES.items() for q in c.params
                           if isinstance(q, click.Option)}.items():
        if "snapshots folder" in (p.help or "").lower():
            assert opt == "--dir", f"{name} {opt}: {p.help}"
    assert "--out" not in [q.opts[0] for q in LEAVES["snapshot freeze"].params]


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_an_unknown_option_is_bad_input_in_one_line(name):
    res = invoke(*name.split(), "--no-such-option")
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and "--no-such-option" in res.stderr, res.output


def _groups(cmd=main, path=("mashbill",)):
    if isinstance(cmd, click.Group):
        yield " ".join(path), cmd
        ctx = click.Context(main)
        for name in cmd.list_commands(ctx):
            yield from _groups(cmd.get_command(ctx, name), (*path, name))


def test_every_option_has_help_text():
    """Issue 26: `--threads` of `export gguf` and `release check` (and ten more) had none."""
    missing = [f"{name or 'mashbill'} {p.opts[0]}" for name, cmd in [("", main), *LEAVES.items(),
                                                                        *((g, c) for g, c in _groups())]
               for p in cmd.params if isinstance(p, click.Option) and not (p.help or "").strip()]
    assert missing == []


def test_no_command_description_is_cut_in_help():
    """Each group's command list shows every one-line description whole, at an 80-column terminal: click cut
    them at the width with '...' ("Merge SHARD_STOREs (from `mashbill generate --shard i/n...")."""
    from click.testing import CliRunner

    from mashbill.cli._common import short_help

    checked = 0
    for path, group in _groups():
        args = path.split()[1:] + ["--help"]
        res = CliRunner().invoke(main, args, terminal_width=80)
        assert res.exit_code == 0, res.output
        listing = res.output.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
        flat = " ".join(re.sub(r"(\w)-\n\s+", r"\1-", listing).split())  # click breaks after a hyphen
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            desc = short_help(group.get_command(ctx, name))
            assert desc.endswith((".", ".)")), f"{path} {name}: {desc!r} is not a whole sentence"
            assert f"{name} {desc}" in flat, f"{path} --help cuts the description of {name}"
            checked += 1
    assert checked >= len(LEAVES)


def test_plain_progress_lines_are_whole_and_carry_done_rate_and_eta():
    """Issue 26: piped to a log, the quick start's plan step printed nothing for 9.5 minutes, and its one line was
    cut at 80 columns. Lines carry the label, done/total, accept rate, rate and ETA, whatever the width."""
    from mashbill.cli._common import PlainProgress

    p = PlainProgress("quickstart-plan@5 with a long label that goes on past eighty columns of a CI log", every=1e9)
    p.update(10, 52, accepted=4, judged=10)
    line = p.line(now=p.start + 300.0)
    assert line == ("quickstart-plan@5 with a long label that goes on past eighty columns of a CI log: 10/52 "
                    "records, accept 40%, 2.00 records/min, elapsed 0:05:00, eta 0:21:00")


def test_progress_clocks_round_a_float_difference_to_the_second():
    """Elapsed is now minus a monotonic start: for some starts 300 s later differs from 300 in the last bit, and
    truncating printed 0:04:59 (the test above failed so under load)."""
    from mashbill.cli._common import _clock

    assert [_clock(299.99999999), _clock(300.4), _clock(1259.9999999), _clock(3600.0)] == [
        "0:05:00", "0:05:00", "0:21:00", "1:00:00"]


def test_plain_progress_prints_at_start_on_a_steady_interval_while_nothing_finishes_and_at_the_end():
    """A slow row (13 minutes for one GGUF verification row under load) still shows the step is alive."""
    import threading

    from mashbill.cli._common import PlainProgress

    lines, ticked = [], threading.Event()

    def write(line):
        lines.append(line)
        if len(lines) >= 3:
            ticked.set()

    with PlainProgress("verify", every=0.01, unit="rows", write=write) as p:
        p.update(0, 1)
        assert ticked.wait(30), lines  # two interval lines while no row has finished
        p.update(1, 1)
    assert lines[0] == "verify: started"
    assert lines[1].startswith("verify: 0/1 rows") and "eta" not in lines[1]
    assert lines[-1].startswith("verify: 1/1 rows")


def test_run_progress_prints_plain_lines_when_stderr_is_not_a_terminal():
    """The live bar of generate and quickstart becomes plain lines in a pipe (CliRunner's stderr is one)."""
    from mashbill.cli import _common

    assert not _common.console.is_terminal  # pytest captures stderr
    bar = _common.RunProgress("spec@1")
    assert bar.plain is not None and bar.progress.disable
    assert _common.RunProgress("spec@1", enabled=False).plain is None
