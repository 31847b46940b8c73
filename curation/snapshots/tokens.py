"""Token lengths of snapshot examples under the spec's trainer profile (tokenizer + chat template).

The tokenizer and template are loaded offline by the validators (`mashbill.validators.tokenizers.tokenizer`), the
same way span coverage loads them, so the manifest's template hash is the template validation rendered
with. Without the `validate` extra the lengths are simply absent (None), never guessed.
"""

from __future__ import annotations

import logging
import os
from itertools import chain
from pathlib import Path
from typing import Sequence

from mashbill.hashing import sha256_text
from mashbill.specs.model import TrainerProfile

log = logging.getLogger(__name__)


def _load(profile: TrainerProfile, base_dir: Path | None):
    try:
        from mashbill.validators.tokenizers.tokenizer import load_tokenizer, resolve_chat_template
    except ImportError as exc:
        return None, None, f"validators' tokenizer loader unavailable ({exc})"
    from mashbill.errors import MashbillError

    try:
        loaded = load_tokenizer(profile.tokenizer, base_dir)
        template = resolve_chat_template(loaded, profile.chat_template, base_dir)
    except (MashbillError, ImportError, OSError) as exc:
        return None, None, str(exc).splitlines()[0]
    return loaded, template, None


def _facts_key(profile: TrainerProfile, base_dir: Path | None) -> str | None:
    """What training facts depend on: the profile, the tokenizer's files (path, size, mtime), a chat template
    file's, and the versions of the libraries that build and render them. None when that cannot be told."""
    import json
    from importlib.metadata import PackageNotFoundError, version

    try:
        from mashbill import __version__
        from mashbill.validators.tokenizers.tokenizer import _BUILD_VERSION, resolve_tokenizer_path

        path = resolve_tokenizer_path(profile.tokenizer, base_dir)
        files = sorted(path.iterdir()) if path.is_dir() else [path]
        stats = [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file()]
        tmpl = profile.chat_template
        for cand in ([Path(tmpl).expanduser(), *([base_dir / tmpl] if base_dir is not None else [])]
                     if tmpl and "{" not in tmpl else []):
            if cand.is_file():
                stats.append((str(cand.resolve()), cand.stat().st_size, cand.stat().st_mtime_ns))
        libs = [version(n) for n in ("transformers", "tokenizers", "jinja2")]
        try:  # the load-time check against llama.cpp (validators.tokenizers.tokenizer) depends on it
            libs.append(version("llama_cpp_python"))
        except PackageNotFoundError:
            libs.append(None)
    except Exception:  # noqa: BLE001 - a tokenizer that cannot be found: no key, computed afresh (with its note)
        return None
    body = [profile.model_dump(mode="json"), str(base_dir), stats, libs, __version__, _BUILD_VERSION]
    return sha256_text(json.dumps(body, sort_keys=True, default=str))[:32]


def training_facts(profile: TrainerProfile, base_dir: Path | None) -> tuple[dict, str | None]:
    """(the manifest's trainer profile, the training template text or None). The profile carries the hashes
    a trainer compares its own tokenizer and template against: the chat template's, the tokenizer's and
    the training template's (the chat template limited to the last turn under a `last-turn` loss).

    A clean answer (no note) is cached under $MASHBILL_CACHE/training-facts, keyed by `_facts_key`, so a freeze
    does not load the tokenizer only to hash it again (about a CPU second)."""
    import json

    from mashbill.paths import cache_dir

    key = _facts_key(profile, base_dir)
    entry = cache_dir("training-facts") / f"{key}.json" if key else None
    if entry is not None and entry.is_file():
        try:
            cached = json.loads(entry.read_text(encoding="utf-8"))
            return cached["facts"], cached["template"]
        except (OSError, ValueError, KeyError):
            pass  # a damaged entry is recomputed and rewritten
    facts, train_tmpl = _training_facts(profile, base_dir)
    if entry is not None and "chat_template_note" not in facts:
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            tmp = entry.with_name(f"{entry.name}.tmp-{os.getpid()}")
            tmp.write_text(json.dumps({"facts": facts, "template": train_tmpl}, ensure_ascii=False), encoding="utf-8")
            tmp.replace(entry)
        except OSError:
            pass  # the cache is an optimisation only
    return facts, train_tmpl


def _training_facts(profile: TrainerProfile, base_dir: Path | None) -> tuple[dict, str | None]:
    from mashbill.curation.snapshots.training_template import TRAINING_TEMPLATE, training_template
    from mashbill.validators.tokenizers.tokenizer import tokenizer_sha256

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


def known_tokens_profile(rs) -> str | None:
    """The tokens profile (tokenizer.tokens_profile) of the spec's trainer profile: validation's counts made under
    it are the counts this freeze would make. None where the tokenizer or template cannot be loaded."""
    from mashbill.validators.tokenizers.tokenizer import tokens_profile

    facts, _ = training_facts(rs.spec.trainer_profile, rs.home)
    return tokens_profile(facts.get("tokenizer_sha256"), facts.get("chat_template_sha256"))


# Texts counted at a time: 44,000 plan prompts tokenized at once held 3.9 GB (bench/RESULTS.md, "The scale rehearsal
# at 20K and 100K, and freeze memory").
ENCODE_CHUNK = 1024


def _piece_counter(loaded):
    """The validators' exact counter (validators/spans/span_pieces.py): rendered text cut where the tokenizer
    provably cannot merge across (checked against it at load), each distinct piece tokenized once. Prompts that
    share a system prompt tokenize it once instead of once per example."""
    from mashbill.validators.spans.span_pieces import PieceCounter
    from mashbill.validators.spans.span_policy import detect_policy

    return PieceCounter(loaded, detect_policy(loaded))


def token_lengths(profile: TrainerProfile, base_dir: Path | None, conversations: Sequence[Sequence[dict]]
                  ) -> list[int] | None:
    """Tokens of each conversation rendered with the profile's chat template (as the trainer renders it)."""
    if not conversations:
        return []
    loaded, template, why = _load(profile, base_dir)
    if loaded is None:
        log.warning("token lengths skipped: %s", why)
        return None
    from mashbill.validators.spans.chat_render import ChatRenderer

    render = ChatRenderer(loaded, template).render_fast  # apply_chat_template's text (the span audit checks it)
    try:
        counter = _piece_counter(loaded)
        lengths = []
        # a chunk of conversations rendered and counted at a time: a million 2 KB prompts rendered at once are
        # gigabytes (`conversations` may be a lazy sequence that reads only the slice asked for)
        for start in range(0, len(conversations), ENCODE_CHUNK):
            chunk = conversations[start:start + ENCODE_CHUNK]
            if template:
                texts = [render(c)[0] for c in chunk]
            else:
                texts = ["\n".join(m["content"] for m in c) for c in chunk]
            pieces = [counter.split(t) for t in texts]
            counts = counter.fill(chain.from_iterable(pieces))
            lengths += [sum(map(counts.__getitem__, p)) for p in pieces]
    except Exception as exc:  # a template that cannot render these messages: report, do not fail the freeze
        log.warning("token lengths skipped: the chat template failed: %s", str(exc).splitlines()[0])
        return None
    return lengths
