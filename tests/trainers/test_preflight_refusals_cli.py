"""Issue 16's bad inputs through `mashbill train METHOD CONFIG` as a user runs it: a missing snapshot, a tampered
snapshot, a tokenizer that does not match, a template without generation markers under assistant-only loss, a
malformed DeepSpeed JSON and one whose scheduler would silently replace the config's. Each is exit 2 with one
line naming the values, before any model is loaded (every model loader is made to fail the test), with no run
folder, no checkpoint folder and no ladder record (docs: README "Train", "Preflight")."""

from __future__ import annotations

import json
import shutil

import pytest

from mashbill.factory.store import Store
from mashbill.trainers import ladder
from mashbill.trainers.config import load_config
from mashbill.trainers.slurm import ZERO2
from tests.cli.conftest import error_lines, invoke

SMOL = "embedded:smollm2-135m-instruct"
PLAIN = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
         "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def _tampered(snaps, tmp_path):
    copy = tmp_path / "tplan-copy"
    shutil.copytree(snaps.plan, copy)
    raw = bytearray((copy / "data" / "train.parquet").read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    (copy / "data" / "train.parquet").write_bytes(bytes(raw))
    from mashbill.hashing import sha256_file

    want = json.loads((copy / "manifest.json").read_text())["files"]["data/train.parquet"]
    # both values: the file's hash now and the one the manifest recorded
    return {"snapshot": str(copy), "_needles": [f"({sha256_file(copy / 'data' / 'train.parquet')[:12]}, manifest "
                                                f"{want[:12]})"]}


def _tokenizer(snaps, tmp_path):
    from mashbill.paths import vocab_dir

    vocab = vocab_dir() / "ggml-vocab-llama-bpe.gguf"
    if not vocab.is_file():
        pytest.skip("scripts/setup.sh extracts the vocab-only GGUFs")
    return {"profile": {"tokenizer": str(vocab)}}


def _no_markers(snaps, tmp_path):
    (tmp_path / "plain.jinja").write_text(PLAIN, encoding="utf-8")
    return {"profile": {"chat_template": str(tmp_path / "plain.jinja")}}


def _ds(data):
    def make(snaps, tmp_path):
        path = tmp_path / "ds.json"
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
        return {"deepspeed": str(path), "schedule": {"lr_scheduler": "cosine"}}
    return make


CASES = {
    "missing-snapshot": (lambda s, t: {"snapshot": "tplan@9"}, ["no snapshot tplan@9"]),
    "tampered-snapshot": (_tampered, ["data/train.parquet", "sha256 differs"]),
    "tokenizer": (_tokenizer, ["ggml-vocab-llama-bpe.gguf (sha256 ", "is not the snapshot's "
                               "embedded:smollm2-135m-instruct (sha256 "]),
    "no-generation-markers": (_no_markers, ["loss assistant-only needs a chat template with {% generation %}",
                                            "(sha256 "]),
    "malformed-deepspeed": (_ds('{"zero_optimization": {"stage": 2,}'), ["ds.json line 1: not valid JSON"]),
    "deepspeed-scheduler": (_ds({**ZERO2, "scheduler": {"type": "WarmupDecayLR", "params": {}}}),
                            ["scheduler WarmupDecayLR would silently replace the config's lr_scheduler cosine"]),
}


@pytest.fixture
def no_model_loads(monkeypatch):
    """Any model load fails the test: the refusal must come first."""
    import transformers

    from mashbill.trainers import base_model

    def refuse(*args, **kwargs):
        pytest.fail(f"a model was loaded before the refusal: {args[:1]}")

    for cls in (transformers.AutoModelForCausalLM, transformers.AutoModelForSequenceClassification):
        monkeypatch.setattr(cls, "from_pretrained", refuse)
    monkeypatch.setattr(base_model, "materialize_gguf", refuse)


@pytest.mark.parametrize("case", list(CASES))
def test_each_bad_input_is_one_line_exit_2_before_any_model_and_writes_nothing(snaps, tmp_path, case, no_model_loads):
    make, needles = CASES[case]
    fields = {"method": "sft", "snapshot": "tplan@1", "base_model": SMOL, **make(snaps, tmp_path)}
    needles = needles + fields.pop("_needles", [])
    cfg = snaps.config(tmp_path, f"bad-{case}", **fields)
    run = tmp_path / "runs" / "bad"
    res = invoke("train", "sft", cfg, "--stage", "steps:2", "--out", run)
    assert res.exit_code == 2, res.output
    [line] = error_lines(res)
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    for n in needles:
        assert n in line, (n, line)
    assert not (tmp_path / "runs").exists(), "a refused run wrote under its run folder's parent"
    with Store.open(snaps.store, read_only=True) as store:
        assert ladder.history(store, load_config(cfg)[0].sha256) == []  # not even stage config was recorded
