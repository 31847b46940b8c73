"""What a trainer needs from a snapshot is in its manifest and files: class mapping, tokenizer hash, the
training template (last-turn under a last-turn loss)."""

from __future__ import annotations

from mashbill.curation.snapshots.pull import load_snapshot
from mashbill.curation.snapshots.snapshot import verify
from mashbill.trainers.preflight import masks_only_last_turn


def test_manifest_carries_classes_tokenizer_hash_and_training_template(snaps):
    m = verify(snaps.cx)
    assert m["classes"] == {"names": ["trivial", "moderate", "complex", "memory_recall"],
                            "problem_type": "single_label_classification"}
    tp = m["trainer_profile"]
    assert len(tp["tokenizer_sha256"]) == 64 and tp["training_template"] == "training_template.jinja"
    assert "training_template.jinja" in m["files"]
    pref = verify(snaps.pref)
    assert pref["trainer_profile"]["loss"] == "last-turn"
    assert pref["trainer_profile"]["training_template_sha256"] != pref["trainer_profile"]["chat_template_sha256"]


def test_the_training_template_of_a_last_turn_snapshot_masks_the_wrong_turn(snaps):
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer

    tok = load_tokenizer("embedded:smollm2-135m-instruct").tok
    pref = load_snapshot(snaps.pref, "messages")
    plan = load_snapshot(snaps.plan, "messages")
    assert masks_only_last_turn(tok, pref.chat_template)
    assert not masks_only_last_turn(tok, plan.chat_template)  # assistant-only: every turn is marked
    conv = pref["train"][0]["messages"]
    # byte-identical rendering: only the markers differ
    assert tok.apply_chat_template(conv, chat_template=pref.chat_template, tokenize=False) == \
        tok.apply_chat_template(conv, chat_template=plan.chat_template, tokenize=False)
