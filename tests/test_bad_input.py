"""The bad-input corpus: every case gives one line naming the file and what is wrong, the documented exit
code (2 for bad input, 1 for findings), and never a traceback.

Static files live in tests/fixtures/bad_input/; damaged stores, specs that do not match their lock and
altered snapshots are made here from real ones (a real DuckDB store, a real freeze). Each case runs the
real CLI in this process (click's runner: an exception that escapes shows as `result.exception`, which is
what a user would see as a traceback).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from mashbill.cli import main
from mashbill.factory.generate.generate import select_inputs
from mashbill.factory.records import Record, SpecRef
from mashbill.factory.store import Store
from mashbill.specs import load_spec, render_prompt
from mashbill.specs.lock import LOCK_NAME, write_lock
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent
BAD = ROOT / "fixtures" / "bad_input"
TINY = ROOT / "fixtures" / "specs"
TOKENIZER = "embedded:smollm2-135m-instruct"


def fill_store(path: Path, spec: Path, *, validated: bool = True) -> None:
    """One run of accepted records for every seed of `spec`, validated, as generate + validate store them."""
    rs = load_spec(spec)
    with Store.open(path) as store:
        run = store.begin_run(spec_name=rs.spec.name, spec_version=rs.spec.version, spec_hash=rs.hash,
                              kind=rs.spec.kind, backend="llama_cpp", model="m", model_sha256=None, model_info={},
                              sampling=rs.spec.teacher.sampling.model_dump())
        records = []
        for rid, inputs in select_inputs(rs):
            prompt = render_prompt(rs, inputs, rid)
            records.append(Record(rid, rs.spec.kind, inputs, [{"task": "answer", "category": "general"}], "[]",
                                  SpecRef(rs.spec.name, rs.spec.version, rs.hash), "accepted",
                                  prompt.training_messages, {**prompt.meta(), "lang": inputs.get("lang")}))
        store.write_batch(run, records, {}, [])
        store.finish_run(run, "completed", {"requested": len(records)})
        if validated:
            store.record_validation(spec_hash=rs.hash, source="store", results={r.id: [] for r in records},
                                    counts={})


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    """Damaged copies of a real store and snapshot, and specs that disagree with their lock."""
    from mashbill.curation.snapshots.snapshot import freeze

    tmp = tmp_path_factory.mktemp("corpus")
    specs = tmp / "specs"
    shutil.copytree(TINY, specs)
    spec = specs / "tiny" / "tiny-plan@1.yaml"
    write_lock(specs / LOCK_NAME, {"tiny-plan@1": load_spec(spec).hash})
    good = tmp / "good"
    fill_store(good, spec)
    freeze(spec, store_path=good, name="qs", version="1", tokens=False)
    db = good / "mashbill.duckdb"
    size = db.stat().st_size

    def store_copy(name: str) -> Path:
        dst = tmp / name
        shutil.copytree(good, dst)
        return dst

    truncated = store_copy("truncated")
    os.truncate(truncated / "mashbill.duckdb", size // 2)
    flipped = store_copy("flipped")  # one byte in the first table data block: found when a query reads it
    with open(flipped / "mashbill.duckdb", "r+b") as f:
        pos = 262144 + 3 * 4096 + 200
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0xFF]))
    import duckdb

    lost = store_copy("lost-migration")
    con = duckdb.connect(str(lost / "mashbill.duckdb"))
    con.execute("DELETE FROM schema_migrations WHERE version = 3")
    con.close()
    newer = store_copy("newer")
    con = duckdb.connect(str(newer / "mashbill.duckdb"))
    con.execute("INSERT INTO schema_migrations VALUES (99, 'future', now())")
    con.close()

    snaps = store_copy("snapshots") / "snapshots"
    tampered = snaps / "qs@1"
    shutil.copytree(tampered, snaps / "qs@2")
    os.rename(snaps / "qs@2", snaps / "qs@99")  # renamed: it still holds qs@1
    shutil.copytree(tampered, snaps / "nomani@1")
    (snaps / "nomani@1" / "manifest.json").unlink()
    with open(tampered / "data" / "train.parquet", "ab") as f:
        f.write(b"\0")

    # a seed edited under a locked version, and a version bumped but not locked
    edited = tmp / "edited"
    shutil.copytree(specs, edited)
    with open(edited / "shared" / "seeds.jsonl", "a", encoding="utf-8") as f:
        f.write('{"query": "An extra seed nobody locked.", "lang": "en"}\n')
    bumped = specs / "tiny" / "tiny-plan@2.yaml"
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    bumped.write_text(yaml.safe_dump({**data, "version": 2}), encoding="utf-8")
    noembed = tmp / "no-such-model@1.yaml"
    data = yaml.safe_load((BAD / "missing-tokenizer@1.yaml").read_text(encoding="utf-8"))
    data["name"] = "no-such-model"
    data["trainer_profile"] = {"tokenizer": "embedded:no-such-model"}
    for key in ("prompt",):
        data[key]["file"] = str(BAD / data[key]["file"])
    data["output_schema"] = str(BAD / data["output_schema"])
    data["seeds"] = [{"path": str(TINY / "shared" / "seeds.jsonl")}]
    noembed.write_text(yaml.safe_dump(data), encoding="utf-8")
    oa = tmp / "oa-plan@1.yaml"
    oa_data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    oa_data.update(name="oa-plan", teacher={"backend": "openai", "model": "m"})
    for key in ("taxonomy", "tools", "prompt"):
        oa_data[key]["file"] = str(specs / "tiny" / oa_data[key]["file"])
    oa_data["output_schema"] = str(specs / "tiny" / oa_data["output_schema"])
    oa_data["seeds"][0]["path"] = str(specs / "tiny" / oa_data["seeds"][0]["path"])
    oa.write_text(yaml.safe_dump(oa_data), encoding="utf-8")
    # broken tokenizer files, written here rather than tracked (no .gguf in git): text, and a header cut short
    (tmp / "not-a-model.gguf").write_bytes(b"this is not a GGUF file\n")
    (tmp / "truncated.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    huge = tmp / "huge@1.yaml"
    huge.write_text("description: '" + "x" * (1 << 20) + "'\n", encoding="utf-8")
    recursive = tmp / "recursive@1.yaml"
    recursive.write_text("a: &a [1, *a]\nname: recursive\n", encoding="utf-8")
    return {"huge": huge, "recursive": recursive, "tmp": tmp, "spec": spec, "good": good, "truncated": truncated, "flipped": flipped, "lost": lost,
            "newer": newer, "snaps": snaps, "edited": edited / "tiny" / "tiny-plan@1.yaml", "bumped": bumped,
            "noembed": noembed, "oa": oa}


# (case id, argv built from the corpus, exit code, text the one line must hold, text it must not hold)
CASES = [
    ("broken-yaml", lambda c: ["generate", BAD / "broken-yaml@1.yaml", "--store", c["tmp"] / "s"], 2,
     ["broken-yaml@1.yaml:", "YAML syntax error"], []),
    ("unknown-key", lambda c: ["generate", BAD / "unknown-key@1.yaml", "--store", c["tmp"] / "s"], 2,
     ["unknown-key@1.yaml:", "temprature", "unknown key"], []),
    ("seed-row-not-json", lambda c: ["generate", BAD / "seeds-bad-row@1.yaml", "--store", c["tmp"] / "s"], 2,
     ["seeds-bad-row.jsonl:2", "row is not JSON"], []),
    ("seed-not-utf8", lambda c: ["generate", BAD / "seeds-not-utf8@1.yaml", "--store", c["tmp"] / "s"], 2,
     ["seeds-not-utf8.jsonl:1", "not UTF-8"], []),
    ("seed-file-empty", lambda c: ["generate", BAD / "seeds-empty@1.yaml", "--store", c["tmp"] / "s"], 2,
     ["seeds-empty.jsonl", "no seed rows"], []),
    ("spec-without-lock", lambda c: ["generate", BAD / "missing-tokenizer@1.yaml", "--store", c["tmp"] / "s"], 2,
     ["missing-tokenizer@1", "no specs.lock", "--allow-unlocked"], []),
    ("seed-edited-under-locked-version", lambda c: ["generate", c["edited"], "--store", c["tmp"] / "s"], 2,
     ["tiny-plan@1", "content changed", "--allow-unlocked"], []),
    ("version-bumped-not-locked", lambda c: ["generate", c["bumped"], "--store", c["tmp"] / "s"], 2,
     ["tiny-plan@2", "not in", LOCK_NAME], []),
    ("tokenizer-file-missing", lambda c: ["spec", "check", BAD / "missing-tokenizer@1.yaml"], 1,
     ["FAIL spec missing-tokenizer@1", "trainer_profile.tokenizer", "/nonexistent/tok.gguf"], []),
    ("tokenizer-embedded-unknown", lambda c: ["spec", "check", c["noembed"]], 1,
     ["trainer_profile.tokenizer", "no-such-model"], []),
    ("chat-template-file-syntax", lambda c: ["validate", BAD / "messages.jsonl", "--format", "messages", "--tokenizer",
                                             TOKENIZER, "--chat-template", BAD / "template-syntax.jinja",
                                             "--max-seq-len", "256", "--no-write"], 2,
     ["template-syntax.jinja:1", "Jinja syntax error"], []),
    ("chat-template-text-syntax", lambda c: ["validate", BAD / "messages.jsonl", "--format", "messages",
                                             "--tokenizer", TOKENIZER, "--chat-template",
                                             "{% for m in messages %}{{ m.content ", "--max-seq-len", "256",
                                             "--no-write"], 2,
     ["Jinja syntax error"], []),
    ("wrong-format", lambda c: ["validate", BAD / "messages.jsonl", "--format", "nope", "--tokenizer", TOKENIZER], 2,
     ["--format", "nope"], []),
    ("gguf-not-a-gguf", lambda c: ["validate", BAD / "messages.jsonl", "--format", "messages", "--tokenizer",
                                   c["tmp"] / "not-a-model.gguf", "--max-seq-len", "256", "--no-write"], 2,
     ["not-a-model.gguf", "not a GGUF file"], []),
    ("gguf-truncated", lambda c: ["validate", BAD / "messages.jsonl", "--format", "messages", "--tokenizer",
                                  c["tmp"] / "truncated.gguf", "--max-seq-len", "256", "--no-write"], 2,
     ["truncated.gguf"], []),
    ("store-truncated", lambda c: ["sql", "SELECT count(*) FROM records", "--store", c["truncated"]], 2,
     ["mashbill.duckdb", "damaged or unreadable"], []),
    ("store-truncated-generate", lambda c: ["generate", c["spec"], "--store", c["truncated"]], 2,
     ["mashbill.duckdb", "damaged or unreadable"], []),
    ("store-flipped-byte", lambda c: ["generate", c["spec"], "--store", c["flipped"]], 2,
     ["mashbill.duckdb", "damaged or unreadable", "Corrupt database file"], []),
    ("store-flipped-byte-sql", lambda c: ["sql", "SELECT * FROM records", "--store", c["flipped"]], 2,
     ["Corrupt database file"], []),
    ("store-lost-migration-row", lambda c: ["generate", c["spec"], "--store", c["lost"]], 2,
     ["schema_migrations lacks version(s) [3]"], []),
    ("store-newer-schema", lambda c: ["sql", "SELECT 1", "--store", c["newer"]], 2,
     ["schema version 99", "upgrade mashbill"], []),
    # verify's job is finding alterations: a finding (1), like `ls --verify` and `release verify`
    ("snapshot-tampered", lambda c: ["snapshot", "verify", "qs@1", "--dir", c["snaps"]], 1,
     ["altered", "data/train.parquet"], []),
    ("snapshot-renamed", lambda c: ["snapshot", "verify", "qs@99", "--dir", c["snaps"]], 1,
     ["holds snapshot qs@1", "qs@99", "renamed"], ["ok "]),
    ("snapshot-manifest-deleted", lambda c: ["snapshot", "verify", "nomani@1", "--dir", c["snaps"]], 2,
     ["nomani@1", "no manifest.json"], []),
    ("snapshot-ls-verify-altered", lambda c: ["snapshot", "ls", "--verify", "--dir", c["snaps"]], 1,
     ["ALTERED"], []),
    ("snapshot-pull-renamed", lambda c: ["snapshot", "pull", "qs@99", "--dir", c["snaps"], "--out",
                                         c["tmp"] / "pulled"], 2,
     ["renamed"], []),
    # issue 26: the loader walked every alias to record line numbers (2.2 GB after 180 s)
    ("alias-bomb-check", lambda c: ["spec", "check", BAD / "alias-bomb@1.yaml"], 1,
     ["FAIL", "alias-bomb@1.yaml", "aliases expand to more than"], []),
    ("alias-bomb-generate", lambda c: ["generate", BAD / "alias-bomb@1.yaml", "--store", c["tmp"] / "s"], 2,
     ["alias-bomb@1.yaml", "aliases expand to more than"], []),
    ("spec-too-big", lambda c: ["spec", "check", c["huge"]], 1, ["huge@1.yaml", "bytes; a spec file is at most"], []),
    ("recursive-alias", lambda c: ["spec", "check", c["recursive"]], 1, ["recursive@1.yaml", "recursive YAML alias"],
     []),
    ("base-url-credentials", lambda c: ["generate", c["oa"], "--allow-unlocked", "--store", c["tmp"] / "oa",
                                        "--base-url", f"http://user:sk-SECRET123@127.0.0.1:{free_port()}/v1"], 2,
     ["cannot reach the teacher server", "http://***@127.0.0.1"], ["sk-SECRET123", "user:"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gives_one_line_and_the_documented_exit_code(corpus, case):
    _, argv, code, needles, absent = case
    previous = signal.getsignal(signal.SIGTERM)  # generate installs its own handler
    try:
        result = CliRunner().invoke(main, [str(a) for a in argv(corpus)])
    finally:
        signal.signal(signal.SIGTERM, previous)
    output = result.output  # stdout and stderr, as a terminal shows them
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        f"traceback: {result.exception!r}\n{output}"
    assert "Traceback" not in output
    assert result.exit_code == code, output
    for needle in needles:
        assert needle in output, f"{needle!r} not in {output!r}"
    for word in absent:
        assert word not in output, f"{word!r} in {output!r}"
    if code == 2:
        errors = [line for line in output.splitlines() if line.startswith(("error:", "Error:"))]
        assert len(errors) == 1, output


def test_a_locked_store_names_the_lock(corpus, tmp_path):
    """Another process holds the store's write lock (a running generate): one line, exit 2."""
    store = tmp_path / "locked"
    shutil.copytree(corpus["good"], store)
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
                               "print('ready', flush=True); sys.stdin.read()", str(store / "mashbill.duckdb")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        result = CliRunner().invoke(main, ["sql", "SELECT 1", "--store", str(store)])
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert result.exit_code == 2 and "locked by another process" in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_spec_check_of_a_folder_reports_every_spec_after_a_non_utf8_seed(tmp_path):
    """Case 1: a seed file with a Latin-1 byte no longer stops `spec check DIR` at that spec."""
    folder = tmp_path / "bad"
    shutil.copytree(BAD, folder)
    shutil.copytree(TINY / "shared", tmp_path / "specs" / "shared")
    result = CliRunner().invoke(main, ["spec", "check", str(folder)])
    fails = [line for line in result.output.splitlines() if line.startswith("FAIL")]
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1
    assert any("seeds-not-utf8.jsonl:1" in line and "not UTF-8" in line for line in fails), result.output
    # every spec of the folder was checked, the ones after the bad seed file included
    names = sorted(p.stem for p in folder.glob("*@1.yaml"))
    assert all(any(n in line for line in fails) for n in names), result.output
    assert f"{len(names)} spec(s)" in result.output


def test_the_corpus_covers_every_static_file():
    used = {Path(str(a)).name for _, argv, *_ in CASES for a in argv(_FakeCorpus())}
    static = {p.name for p in BAD.iterdir() if p.name != "README.md"}
    referenced = {"seeds-not-utf8.jsonl", "seeds-empty.jsonl", "seeds-bad-row.jsonl"}  # through their specs
    assert static - used - referenced == set()


class _FakeCorpus(dict):
    def __missing__(self, key):
        return Path("/corpus") / key



@pytest.mark.parametrize("spec", ["missing-tokenizer@1.yaml", "no-such-model"])
def test_spec_lock_refuses_what_spec_check_refuses(corpus, tmp_path, spec):
    """Issue 26: `spec lock` locked a spec whose trainer tokenizer does not exist, and generate then ran it."""
    folder = tmp_path / "lib"
    folder.mkdir()
    src = corpus["noembed"] if spec == "no-such-model" else BAD / spec
    data = yaml.safe_load(src.read_text(encoding="utf-8"))
    data["prompt"]["file"] = str((src.parent / data["prompt"]["file"]).resolve())
    data["output_schema"] = str((src.parent / data["output_schema"]).resolve())
    data["seeds"] = [{"path": str(TINY / "shared" / "seeds.jsonl")}]
    target = folder / src.name
    target.write_text(yaml.safe_dump(data), encoding="utf-8")
    result = CliRunner().invoke(main, ["spec", "lock", str(folder)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, result.output
    assert f"refused {data['name']}@1" in result.output and "trainer_profile.tokenizer" in result.output
    assert not (folder / LOCK_NAME).exists() or data["name"] not in (folder / LOCK_NAME).read_text()
    gen = CliRunner().invoke(main, ["generate", str(target), "--store", str(tmp_path / "s"), "--limit", "1"])
    assert gen.exit_code == 2 and ("no specs.lock" in gen.output or "not in" in gen.output), gen.output
