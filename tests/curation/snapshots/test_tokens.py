"""The trainer facts a snapshot records come from a cache only while what they depend on is unchanged."""

from __future__ import annotations

import pytest

from mashbill.curation.snapshots.tokens import _training_facts, training_facts
from mashbill.specs.model import TrainerProfile
from mashbill.validators.tokenizers.tokenizer import CHATML_GENERATION


def test_cached_training_facts_equal_fresh_ones_and_follow_the_template_file(tmp_path, monkeypatch):
    monkeypatch.setenv("MASHBILL_CACHE", str(tmp_path / "cache"))
    tmpl = tmp_path / "chat.jinja"
    tmpl.write_text(CHATML_GENERATION, encoding="utf-8")
    profile = TrainerProfile(chat_template=str(tmpl), max_seq_len=512, loss="last-turn")
    fresh = _training_facts(profile, tmp_path)
    assert fresh[0]["tokenizer_sha256"] and "chat_template_note" not in fresh[0]
    assert training_facts(profile, tmp_path) == fresh  # computed, then cached
    [entry] = (tmp_path / "cache" / "training-facts").iterdir()
    assert training_facts(profile, tmp_path) == fresh  # from the cache
    entry.write_text("{broken", encoding="utf-8")  # a damaged entry is recomputed and rewritten, not trusted
    assert training_facts(profile, tmp_path) == fresh and entry.read_text(encoding="utf-8").startswith('{"facts"')
    tmpl.write_text(CHATML_GENERATION.replace("<|im_start|>", "<|im_start|> "), encoding="utf-8")
    changed = training_facts(profile, tmp_path)  # a changed template file is a new key: computed again
    assert changed == _training_facts(profile, tmp_path)
    assert changed[0]["chat_template_sha256"] != fresh[0]["chat_template_sha256"]
    assert len(list((tmp_path / "cache" / "training-facts").iterdir())) == 2


def test_a_missing_tokenizer_is_noted_and_never_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("MASHBILL_CACHE", str(tmp_path / "cache"))
    profile = TrainerProfile(tokenizer=str(tmp_path / "nowhere"))
    facts, tmpl = training_facts(profile, tmp_path)
    assert facts["tokenizer_sha256"] is None and "not found" in facts["chat_template_note"] and tmpl is None
    assert not (tmp_path / "cache" / "training-facts").exists()


@pytest.mark.parametrize("markers", [True, False])
def test_token_lengths_in_chunks_equal_the_tokenizers_own_count_of_each_conversation(tmp_path, monkeypatch, markers):
    """Conversations are rendered and encoded ENCODE_CHUNK at a time (memory); each length is still the real
    tokenizer's count of that conversation rendered by apply_chat_template, across chunk boundaries, with a template
    that marks the assistant's turns and one that does not."""
    from mashbill.curation.snapshots import tokens

    tmpl = tmp_path / "chat.jinja"
    text = CHATML_GENERATION if markers else CHATML_GENERATION.replace("{% generation %}", "").replace(
        "{% endgeneration %}", "")
    assert ("{% generation %}" in text) == markers
    tmpl.write_text(text, encoding="utf-8")
    profile = TrainerProfile(chat_template=str(tmpl), max_seq_len=512, loss="last-turn")
    monkeypatch.setattr(tokens, "ENCODE_CHUNK", 7)
    convs = [[{"role": "system", "content": "Plan it. " * (i % 5)},
              {"role": "user", "content": f"Wie viel ist {i} * 3?"},
              {"role": "assistant", "content": '[{"task": "t"}]' * (i % 3 + 1)}] for i in range(30)]
    loaded, template, _ = tokens._load(profile, tmp_path)
    own = [len(loaded.tok(loaded.tok.apply_chat_template(c, chat_template=template, tokenize=False),
                          add_special_tokens=False)["input_ids"]) for c in convs]
    assert tokens.token_lengths(profile, tmp_path, convs) == own and len(set(own)) > 5
