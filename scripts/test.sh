#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run the whole test suite.
#   bash scripts/test.sh            # everything (what CI runs)
#   bash scripts/test.sh --fast     # the fast lane: -m "not slow" (no quick start, no training, no export, no
#                                   # real-model generate runs, no test tests/durations.json measured at 1 s or
#                                   # more: see tests/conftest.py); extra arguments go to pytest either way
set -euo pipefail
MARK=()
if [ "${1:-}" = "--fast" ]; then
  shift
  MARK=(-m "not slow")
fi
cd "$(dirname "$0")/.."
# --train: the trainer tests run real TRL/PEFT on SmolLM2-135M and all-MiniLM-L6-v2 (CPU torch).
bash scripts/setup.sh --dev --train --export
# Headless Chromium checks the HTML report and the annotation page (Debian's package; needs root or sudo).
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "[test] installing Debian's chromium for the browser checks" >&2
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi
# The review tests start a real argilla-server; build its own environment up front (cached, ~1 minute once).
.venv/bin/mashbill review serve --build-only >&2
# Two pytest-xdist workers: the quick start's chain is one long group on one worker while the other takes the rest
# (tests/conftest.py groups the tests that share a costly session fixture). MASHBILL_TEST_WORKERS=0 runs serially.
WORKERS="${MASHBILL_TEST_WORKERS:-2}"
XDIST=()
if [ "$WORKERS" != 0 ]; then
  XDIST=(-n "$WORKERS" --dist loadgroup --no-loadscope-reorder)
  # One OpenMP thread per torch process while two workers share the cores: two threads against a busy core spin
  # at every barrier (bench/RESULTS.md: a training stage beside a one-core job finished both in 128 s with two
  # threads, 110 s with one). A user's OMP_NUM_THREADS wins.
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
fi
exec .venv/bin/python -m pytest -q "${XDIST[@]}" "${MARK[@]}" "$@"
