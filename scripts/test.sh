#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
export MASHBILL_VOCAB_DIR="${MASHBILL_VOCAB_DIR:-${MASHBILL_CACHE:-$HOME/.cache/mashbill}/vocab}"
exec .venv/bin/python -m pytest -q "$@"
