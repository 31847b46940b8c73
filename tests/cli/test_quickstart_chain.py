"""From the quick start to a release: the README's block "From the quick start to a release", command by command,
as a user runs it (the real CLI in a subprocess, in the folder the quick start ran in, on its store).

snapshot -> train classify / sft / dpo (on the quick start's preference snapshot) -> export onnx (INT8,
parity) -> export gguf (F16, Q8_0, Q4_K_M, verification) -> eval (run, ONNX, GGUF) -> release check && tag -> verify,
the release lines run through bash exactly as the README writes them, once for each outcome (promote and tag, or
keep the incumbent and tag nothing) -> tamper -> verify fails.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, run_cli

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("llama_cpp")
# three trainings (DPO on ~2,000-token pairs), two exports and the quick start itself: past the default 900 s on
# a busy machine
pytestmark = pytest.mark.timeout(5400)


def _ok(proc, what: str):
    assert proc.returncode == 0, f"{what} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


# what the test runs for the README's train and export lines (each checked after it runs)
TRAIN_EXPORT = [["train", "classify", "quickstart-classify", "--stage", "steps:60"],
                ["train", "sft", "quickstart-sft", "--stage", "steps:1"],
                ["train", "dpo", "quickstart-dpo", "--stage", "steps:1"],
                ["export", "onnx", "./mashbill-runs/quickstart-classify", "--store", "./mashbill-data"],
                ["export", "gguf", "./mashbill-runs/quickstart-sft", "--store", "./mashbill-data"],
                ["eval", "./mashbill-runs/quickstart-classify", "--on", "yardstick:complexity"],
                ["eval", "./mashbill-exports/quickstart-classify-onnx", "--on", "yardstick:complexity"]]


def readme_block() -> tuple[list[list[str]], str]:
    """The README's block: the mashbill arguments of each train/export line, and the release lines (from `E=`)
    as the bash script they are."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## From the quick start to a release", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = block.replace("\\\n", " ").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("E="))
    argvs = [shlex.split(line, comments=True) for line in lines[:start]]
    assert all(a[0] == ".venv/bin/mashbill" for a in argvs), argvs
    return [a[1:] for a in argvs], "\n".join(lines[start:]) + "\n"


def test_the_readme_block_is_what_the_chain_runs():
    argvs, script = readme_block()
    assert argvs == TRAIN_EXPORT
    assert "release check" in script and "&& .venv/bin/mashbill release tag complexity-prod" in script
    guards = shlex.split(script.split("--guards", 1)[1])[0]
    from mashbill.exporters.release import load_guards

    assert load_guards(ROOT / guards)  # the shipped example guard file parses


def run_release_lines(cwd: Path, guards: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """The README's release lines through bash, as written, in the quick-start folder (a fresh release folder):
    `.venv/bin/mashbill` is this interpreter's mashbill, `examples/` the repository's (or `guards` written there)."""
    _, script = readme_block()
    shim = cwd / ".venv" / "bin" / "mashbill"
    shim.parent.mkdir(parents=True, exist_ok=True)
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m mashbill "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    shutil.rmtree(cwd / "examples", ignore_errors=True)
    shutil.copytree(ROOT / "examples", cwd / "examples")
    if guards is not None:
        (cwd / "examples" / "guards-complexity.yaml").write_text(yaml.safe_dump(guards, allow_unicode=True),
                                                                 encoding="utf-8")
    shutil.rmtree(cwd / "mashbill-releases", ignore_errors=True)
    proc = subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=1200)
    [record] = list((cwd / "mashbill-releases" / "checks").glob("*.json"))
    rec = json.loads(record.read_text(encoding="utf-8"))
    d = rec["decision"]
    assert "decided by " + d["decided_by"] in proc.stdout, proc.stdout
    tag = cwd / "mashbill-releases" / "tags" / "complexity-prod.json"
    if d["promote"]:  # check exit 0 -> tagged -> verify exit 0
        assert "promote " in proc.stdout and tag.is_file(), proc.stdout + proc.stderr
        assert proc.returncode == 0 and "complexity-prod: " in proc.stdout, proc.stdout + proc.stderr
    else:  # check exit 1 -> nothing tagged -> verify exit 2, naming the missing tag
        assert "keep the incumbent " in proc.stdout and not tag.exists(), proc.stdout + proc.stderr
        assert proc.returncode == 2 and "no tag complexity-prod" in proc.stderr, proc.stdout + proc.stderr
    return proc, rec


def forcing(rec: dict, promote: bool) -> dict | None:
    """A guard file that forces the other outcome from the answers in a first check's record: a held-out item the
    candidate answers differently (and right), or a guard the incumbent passes and the candidate fails (a veto).
    None when the two artifacts answered every item alike (then only a full tie, the incumbent staying, is
    possible)."""
    inc = {r["id"]: r for r in rec["incumbent"]["items"]}
    cand = rec["candidates"][0]["items"]
    differ = [r for r in cand if r["got"] != inc[r["id"]]["got"]]
    if not differ:
        return None
    shipped = yaml.safe_load((ROOT / "examples" / "guards-complexity.yaml").read_text(encoding="utf-8"))
    texts = {it["id"]: it["text"] for k in ("heldout", "guards") for it in shipped[k]}
    d = differ[0]
    if promote:
        return {"heldout": [{"id": "h", "text": texts[d["id"]], "expect": d["got"]}],
                "guards": [{"id": "g", "text": texts[d["id"]], "expect": d["got"]}]}
    return {"heldout": [{"id": "h", "text": texts[d["id"]], "expect": inc[d["id"]]["got"]}],
            "guards": [{"id": "g", "text": texts[d["id"]], "expect": inc[d["id"]]["got"]}]}


def _preference_pairs(snapshots: Path, name: str) -> str:
    """Check the quick start's DPO pairs against its plan snapshot; returns the preference snapshot's id.

    The prompt is the runtime prompt the plan record was made for (system: the training prompt with this record's
    taxonomy; user: the query alone), `chosen` is that record's accepted plan, `rejected` a different JSON plan."""
    from mashbill.curation.snapshots.pull import load_snapshot

    plans = load_snapshot(snapshots / "quickstart-plan@1", "messages")
    runtime = {r["messages"][1]["content"]: r["messages"] for s in plans for r in plans[s]}
    pref = load_snapshot(snapshots / name, "preference")
    rows = [r for s in pref for r in pref[s]]
    assert len(rows) >= 2 and pref["train"].num_rows >= 2, "too few pairs to train DPO for two steps"
    for r in rows:
        system, user = r["prompt"]
        messages = runtime[user["content"]]
        assert [system, user] == messages[:2] and system["role"] == "system" and user["role"] == "user"
        chosen, rejected = r["chosen"][0]["content"], r["rejected"][0]["content"]
        assert json.loads(chosen) == json.loads(messages[2]["content"])
        assert isinstance(json.loads(rejected), list) and json.loads(rejected) != json.loads(chosen)
    manifest = json.loads((snapshots / name / "manifest.json").read_text(encoding="utf-8"))
    return manifest["snapshot_id"]


def test_quick_start_to_a_verified_release_and_a_tamper_named(quickstart):
    cwd, _ = quickstart
    snaps = {p.name for p in (cwd / "mashbill-data" / "snapshots").iterdir()}
    assert "quickstart-complexity@1" in snaps and "quickstart-plan@1" in snaps

    # train: one documented command per method
    cls = _ok(run_cli(*TRAIN_EXPORT[0], cwd=cwd, timeout=1500),
              "train classify")
    assert "eval accuracy" in cls.stdout
    _ok(run_cli(*TRAIN_EXPORT[1], cwd=cwd, timeout=2400), "train sft")
    for run, method in (("quickstart-classify", "classify"), ("quickstart-sft", "sft")):
        lineage = json.loads((cwd / "mashbill-runs" / run / "lineage.json").read_text(encoding="utf-8"))
        assert lineage["method"] == method and lineage["stage"].startswith("steps:")
    sft_metrics = json.loads((cwd / "mashbill-runs" / "quickstart-sft" / "metrics.json").read_text(encoding="utf-8"))
    assert sft_metrics["global_step"] == 1
    # DPO on the quick start's preference snapshot: its pairs are the runtime prompt and two JSON plans
    [pref] = [s for s in snaps if s.startswith("quickstart-preference@")]
    pairs = _preference_pairs(cwd / "mashbill-data" / "snapshots", pref)
    _ok(run_cli(*TRAIN_EXPORT[2], cwd=cwd, timeout=2400), "train dpo")
    dpo_run = cwd / "mashbill-runs" / "quickstart-dpo"
    assert (dpo_run / "adapter" / "adapter_config.json").is_file()
    lineage = json.loads((dpo_run / "lineage.json").read_text(encoding="utf-8"))
    assert lineage["method"] == "dpo" and lineage["stage"] == "steps:1"
    assert lineage["snapshot"]["id"] == pairs  # the run names the snapshot it trained on
    assert json.loads((dpo_run / "metrics.json").read_text(encoding="utf-8"))["global_step"] == 1

    # export
    _ok(run_cli(*TRAIN_EXPORT[3], cwd=cwd, timeout=1200), "export onnx")
    onnx = cwd / "mashbill-exports" / "quickstart-classify-onnx"
    parity = json.loads((onnx / "parity.json").read_text(encoding="utf-8"))
    assert (onnx / "model.int8.onnx").is_file() and parity["parity"]["int8"]["n"] >= 1
    _ok(run_cli(*TRAIN_EXPORT[4], cwd=cwd, timeout=2400), "export gguf")
    gguf = cwd / "mashbill-exports" / "quickstart-sft-gguf"
    for name in ("model.f16.gguf", "model.q8_0.gguf", "model.q4_k_m.gguf", "Modelfile", "export.json"):
        assert (gguf / name).is_file(), name
    verify = json.loads((gguf / "verify.json").read_text(encoding="utf-8"))
    # the quick start's plan snapshot is tiny (all in train): the report says which split it verified on
    assert set(verify["files"]) == {"f16", "q8_0", "q4_k_m"} and verify["rows"] >= 1
    assert verify["held_out"] == (verify["split"] != "train")

    # eval (docs/eval.md): the classify run, its ONNX export and the GGUF export on labelled sets
    for argv in TRAIN_EXPORT[5:7]:
        target = argv[1]
        _ok(run_cli(*argv, cwd=cwd, timeout=900), f"eval {target}")
        doc = json.loads((cwd / target / "eval.json").read_text(encoding="utf-8"))
        res = doc["sets"]["yardstick:complexity"]
        assert res["rows"] >= 100 and 0 <= res["student"]["accuracy"] <= 1 and "heuristic" in res["baselines"]
    (cwd / "plans.jsonl").write_text(json.dumps({"query": "What is 17 times 23?", "plan": {
        "categories": ["precision_tools"], "tool": "calculate"}}) + "\n", encoding="utf-8")
    _ok(run_cli("eval", "./mashbill-exports/quickstart-sft-gguf", "--on", "plans.jsonl", "--max-tokens", "96",
                cwd=cwd, timeout=1800), "eval gguf")
    st = json.loads((gguf / "eval.json").read_text(encoding="utf-8"))["sets"]["plans.jsonl"]["student"]
    assert st["n"] == 1 and st["rules"] and "categories_right" in st

    # release: INT8 (candidate) against fp32 (incumbent) on the shipped example guard file, the README's lines
    # as written; then, from that check's answers, a guard file that forces the other outcome
    _, first = run_release_lines(cwd)
    outcomes = {first["decision"]["promote"]}
    other = forcing(first, promote=not first["decision"]["promote"])
    if other is None:  # both graphs answered every item alike: a full tie, the incumbent stays
        assert not first["decision"]["promote"] and first["decision"]["decided_by"].startswith("a full tie")
    else:
        _, second = run_release_lines(cwd, other)
        outcomes.add(second["decision"]["promote"])
        assert outcomes == {True, False}, (first["decision"], second["decision"])
    assert False in outcomes  # the branch where the incumbent stays ran as written

    rel = "./mashbill-exports/quickstart-classify-onnx"
    _ok(run_cli("release", "tag", "complexity-test", f"{rel}/model.int8.onnx", cwd=cwd), "release tag")
    _ok(run_cli("release", "verify", "complexity-test", cwd=cwd), "release verify")

    # one byte changed in the tagged file: verify exits 1 naming it, and check refuses the altered export
    target = onnx / "model.int8.onnx"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    bad = run_cli("release", "verify", "complexity-test", cwd=cwd)
    assert bad.returncode == 1 and "model.int8.onnx" in bad.stderr + bad.stdout
    refused = run_cli("release", "check", f"{rel}/model.int8.onnx", "--incumbent", f"{rel}/model.onnx", "--guards",
                      "examples/guards-complexity.yaml", cwd=cwd)
    assert refused.returncode == 2 and "changed after export" in refused.stderr, refused.stderr
