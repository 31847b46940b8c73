"""Token lengths of snapshot examples under the spec's trainer profile (tokenizer + chat template).

The tokenizer and template are loaded offline by the validators (`mashbill.validators.tokenizer`), the
same way span coverage loads them, so the manifest's template hash is the template validation rendered
with. Without the `validate` extra the lengths are simply absent (None), never guessed.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

from mashbill.hashing import sha256_text
from mashbill.specs.model import TrainerProfile

log = logging.getLogger(__name__)


def _load(profile: TrainerProfile, base_dir: Path | None):
    try:
        from mashbill.validators.tokenizer import load_tokenizer, resolve_chat_template
    except ImportError as exc:
        return None, None, f"validators' tokenizer loader unavailable ({exc})"
    from mashbill.errors import MashbillError

    try:
        loaded = load_tokenizer(profile.tokenizer, base_dir)
        template = resolve_chat_template(loaded, profile.chat_template, base_dir)
    except (MashbillError, ImportError, OSError) as exc:
        return None, None, str(exc).splitlines()[0]
    return loaded, template, None


def tokenizer_sha256(loaded) -> str:
    """A hash of what the tokenizer does (its serialized Rust tokenizer), whatever file it was loaded from."""
    return sha256_text(loaded.backend.to_str())


def training_facts(profile: TrainerProfile, base_dir: Path | None) -> tuple[dict, str | None]:
    """(the manifest's trainer profile, the training template text or None). The profile carries the hashes
    a trainer compares its own tokenizer and template against: the chat template's, the tokenizer's and
    the training template's (the chat template limited to the last turn under a `last-turn` loss)."""
    from mashbill.curation.training_template import TRAINING_TEMPLATE, training_template

    facts = profile.model_dump(mode="json")
    loaded, template, why = _load(profile, base_dir)
    facts["chat_template_sha256"] = sha256_text(template) if template else None
    facts["tokenizer_sha256"] = tokenizer_sha256(loaded) if loaded is not None else None
    train_tmpl = None
    if template:
        try:
            train_tmpl = training_template(template, profile.loss)
        except Exception as exc:  # noqa: BLE001 - reported in the manifest, checked again by the trainer
            why = why or str(exc)
    facts["training_template"] = TRAINING_TEMPLATE if train_tmpl else None
    facts["training_template_sha256"] = sha256_text(train_tmpl) if train_tmpl else None
    if why:
        facts["chat_template_note"] = why
    return facts, train_tmpl


def token_lengths(profile: TrainerProfile, base_dir: Path | None, conversations: Sequence[Sequence[dict]]
                  ) -> list[int] | None:
    """Tokens of each conversation rendered with the profile's chat template (as the trainer renders it)."""
    if not conversations:
        return []
    loaded, template, why = _load(profile, base_dir)
    if loaded is None:
        log.warning("token lengths skipped: %s", why)
        return None
    tok = loaded.tok
    try:
        if template:
            texts = [tok.apply_chat_template(list(c), chat_template=template, tokenize=False) for c in conversations]
        else:
            texts = ["\n".join(m["content"] for m in c) for c in conversations]
        enc = tok(texts, add_special_tokens=False)["input_ids"]
    except Exception as exc:  # a template that cannot render these messages: report, do not fail the freeze
        log.warning("token lengths skipped: the chat template failed: %s", str(exc).splitlines()[0])
        return None
    return [len(ids) for ids in enc]
