"""LoRA run -> merged HF model -> GGUF F16 (llama.cpp's converter) -> Q8_0 / Q4_K_M (llama.cpp's quantizer).

The converter is `convert_hf_to_gguf.py` from the llama-cpp-python source distribution that setup already
downloaded (with its `conversion/` and `gguf-py/` folders, extracted once into the cache): the same
llama.cpp that will load the files wrote them. It runs in a subprocess, so its own imports and exits cannot
touch ours; its failure is one line with the converter's last message. Quantization calls
`llama_cpp.llama_model_quantize` in-process (no `llama-quantize` binary needed).

Multimodal checkpoints (a text decoder inside `model.language_model.*` beside a vision tower and a
projector) are reduced to their text decoder first, as the router recipe did: the vision and projector
tensors are dropped and the text tensors renamed to the plain causal-LM layout, so the converter sees an
ordinary text model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import uuid
from contextlib import contextmanager
from pathlib import Path

from mashbill.exporters.runs import ExportError, Run
from mashbill.paths import cache_dir

LLAMA_CPP_VERSION = "0.3.36"
QUANTS = {"q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0", "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M"}
# prefixes of tensors that belong to the vision/audio side of a multimodal checkpoint
DROP_PREFIXES = ("vision_tower.", "vision_model.", "visual.", "multi_modal_projector.", "mm_projector.",
                 "audio_tower.", "embed_vision.", "vision_embed_tokens.")
# (old prefix, new prefix) for the text decoder, most specific first
RENAMES = (("model.language_model.", "model."), ("language_model.model.", "model."),
           ("language_model.lm_head.", "lm_head."), ("language_model.", "model."))
SKIP_FILES = ("preprocessor_config.json", "processor_config.json", "video_preprocessor_config.json")


# ---------------------------------------------------------------- the converter


def converter() -> Path:
    """convert_hf_to_gguf.py (with conversion/ and gguf-py/) from the cached sdist, extracted once."""
    dest = cache_dir() / "convert" / f"llama.cpp-{LLAMA_CPP_VERSION}"
    script = dest / "convert_hf_to_gguf.py"
    if script.is_file():
        return script
    sdist = cache_dir() / "sdist" / f"llama_cpp_python-{LLAMA_CPP_VERSION}.tar.gz"
    if not sdist.is_file():
        raise ExportError(f"{sdist}: missing; the GGUF converter comes from llama-cpp-python's source distribution "
                          "(bash scripts/setup.sh downloads it)")
    prefix = f"llama_cpp_python-{LLAMA_CPP_VERSION}/vendor/llama.cpp/"
    wanted = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/")
    tmp = dest.parent / f".tmp-{dest.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    try:
        with tarfile.open(sdist) as tar:
            members = []
            for m in tar.getmembers():
                if m.name.startswith(prefix) and m.name[len(prefix):].startswith(wanted) and (m.isfile() or m.isdir()):
                    m.name = m.name[len(prefix):]
                    members.append(m)
            tar.extractall(tmp, members=members, filter="data")
        if not (tmp / "convert_hf_to_gguf.py").is_file():
            raise ExportError(f"{sdist}: holds no vendor/llama.cpp/convert_hf_to_gguf.py")
        try:
            os.rename(tmp, dest)
        except OSError:  # another export extracted it first
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return script


def _last_message(text: str, returncode: int) -> str:
    """The converter's last message; a bare exception name (an `assert` failing) gets the source line above it."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return f"exit code {returncode}"
    last = lines[-1]
    if last.isidentifier():
        # Python 3.11+ puts caret lines under the source line
        source = next((ln for ln in reversed(lines[:-1]) if not set(ln) <= set("^~ ")), "")
        if source and not source.startswith("File "):
            last = f"{last} ({source})"
    return last


def convert_f16(hf_dir: Path, out: Path, *, outtype: str = "f16", name: str | None = None) -> None:
    """Run llama.cpp's converter on an HF folder; raise one line with its last message on failure (naming the
    folder as `name` when it is a temporary one)."""
    script = converter()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("NO_LOCAL_GGUF", None)  # the converter must use its own gguf-py, not the installed package
    proc = subprocess.run([sys.executable, str(script), str(hf_dir), "--outtype", outtype, "--outfile", str(out)],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0 or not out.is_file():
        last = _last_message(proc.stderr + proc.stdout, proc.returncode)
        out.unlink(missing_ok=True)
        raise ExportError(f"convert_hf_to_gguf.py failed on {name or hf_dir}: {last[:300]}")


def quantize(src: Path, dst: Path, quant: str, *, threads: int | None = None) -> None:
    import ctypes

    try:
        import llama_cpp
    except ImportError:
        raise ExportError("quantizing needs llama-cpp-python: bash scripts/setup.sh installs it") from None
    if quant not in QUANTS:
        raise ExportError(f"unknown quantization {quant!r}; expected one of {', '.join(QUANTS)}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, QUANTS[quant])
    params.nthread = threads or os.cpu_count() or 1
    with _quiet_stderr() as log:  # llama.cpp prints one line per tensor
        rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    if rc != 0 or not dst.is_file():
        dst.unlink(missing_ok=True)
        raise ExportError(f"llama_model_quantize({src.name} -> {quant}) failed with code {rc}: "
                          f"{lines[-1][:200] if lines else 'no message'}")


@contextmanager
def _quiet_stderr():
    """Send file descriptor 2 (C code writes there directly) to a temporary file for the duration."""
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.NamedTemporaryFile(prefix="mashbill-quantize-", suffix=".log", delete=False) as f:
        path = Path(f.name)
        os.dup2(f.fileno(), 2)
    try:
        yield path
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        path.unlink(missing_ok=True)


# ---------------------------------------------------------------- merging and multimodal reduction


def merge_adapter(run: Run, dst: Path) -> Path:
    """Merge the run's LoRA adapter into its base model; save an ordinary HF folder (fp32) with the tokenizer."""
    try:
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise ExportError("merging a LoRA adapter needs torch, transformers and peft: "
                          "pip install 'mashbill[train]'") from None
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a CLI error must be the one line on stderr, not after loading bars
    base_dir = text_only_if_multimodal(run.base_model, dst.parent / (dst.name + ".text"))
    try:
        base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32)
        model = PeftModel.from_pretrained(base, str(run.adapter_dir))
    except Exception as exc:  # OSError, ValueError, KeyError, safetensors' SafetensorError on a truncated file
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ExportError(f"{run.adapter_dir}: cannot apply the adapter to {run.base_model} "
                          f"({type(exc).__name__}: {first})") from None
    merged = model.merge_and_unload()
    merged.save_pretrained(str(dst), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(base_dir)).save_pretrained(str(dst))
    if base_dir != run.base_model:
        shutil.rmtree(base_dir, ignore_errors=True)
    return dst


def is_multimodal(config: dict) -> bool:
    return "text_config" in config and any(k in config for k in ("vision_config", "audio_config", "mm_tokens_per_image",
                                                                   "image_token_index", "image_token_id"))


def rename_text_tensor(name: str) -> str | None:
    """The causal-LM name of a multimodal checkpoint's tensor, or None for a vision/projector tensor."""
    bare = name[len("model."):] if name.startswith("model.") and not name.startswith("model.language_model.") else name
    if bare.startswith(DROP_PREFIXES):
        return None
    for old, new in RENAMES:
        if name.startswith(old):
            return new + name[len(old):]
    return name


def text_only_if_multimodal(src: Path, dst: Path) -> Path:
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    return text_only_checkpoint(src, dst) if is_multimodal(config) else src


def text_only_checkpoint(src: Path, dst: Path) -> Path:
    """Write `dst`: the text decoder of the multimodal checkpoint `src`, as an ordinary causal-LM folder."""
    from safetensors import safe_open
    from safetensors.torch import save_file
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    if "text_config" not in config:
        raise ExportError(f"{src / 'config.json'}: field 'text_config' is missing; not a multimodal checkpoint")
    text = dict(config["text_config"])
    mtype = text.get("model_type")
    if mtype not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ExportError(f"{src / 'config.json'}: field 'text_config.model_type': {mtype!r} has no causal-LM class")
    text["architectures"] = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[mtype]]
    for key in ("torch_dtype", "dtype", "tie_word_embeddings"):
        if key in config and key not in text:
            text[key] = config[key]
    tensors, dropped = {}, []
    shards = sorted(src.glob("*.safetensors"))
    if not shards:
        raise ExportError(f"{src}: no *.safetensors weights")
    for shard in shards:
        with safe_open(str(shard), framework="pt") as f:
            for name in f.keys():
                new = rename_text_tensor(name)
                if new is None:
                    dropped.append(name)
                else:
                    tensors[new] = f.get_tensor(name)
    dst.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    (dst / "config.json").write_text(json.dumps(text, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for f in src.iterdir():
        if f.is_file() and f.suffix != ".safetensors" and f.name not in ("config.json", "model.safetensors.index.json",
                                                                         *SKIP_FILES):
            shutil.copyfile(f, dst / f.name)
    (dst / "text_only.json").write_text(json.dumps({"source": str(src), "kept": len(tensors),
                                                    "dropped": len(dropped)}, indent=2) + "\n", encoding="utf-8")
    return dst
