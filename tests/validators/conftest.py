"""Fixtures for the validator tests: real tokenizers from GGUF files, the real rule set and tool catalog."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from vhelpers import SYNTH_LABELLED, vocab  # noqa: E402


@pytest.fixture(scope="session")
def ruleset():
    from mashbill.validators.plans.ruleset import load_ruleset

    return load_ruleset()


@pytest.fixture(scope="session")
def catalog():
    from mashbill.specs.loader import LIBRARY, load_catalog

    return load_catalog(LIBRARY / "shared" / "tools" / "precision-tools@2.yaml")


@pytest.fixture(scope="session")
def qwen2():
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer

    return load_tokenizer(str(vocab("qwen2")))


@pytest.fixture(scope="session")
def llama3():
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer

    return load_tokenizer(str(vocab("llama-bpe")))


@pytest.fixture(scope="session")
def smollm2():
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer

    return load_tokenizer("embedded:smollm2-135m-instruct")


@pytest.fixture(scope="session")
def gpt2():
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer

    return load_tokenizer(str(vocab("gpt-2")))


@pytest.fixture(scope="session")
def labelled():
    """The synthetic-query yardstick (vhelpers.SYNTH_LABELLED): each row a query and its by-eye label."""
    return [json.loads(line) for line in SYNTH_LABELLED.read_text(encoding="utf-8").splitlines() if line.strip()]
