"""Small `queries` and plan specs for the synthesis and judge tests, written into tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "specs" / "library" / "shared"
TINY = ROOT / "tests" / "fixtures" / "specs" / "shared"

SEEDS = [
    {"query": "What is 1847 * 23 + 519?", "lang": "en", "type": "arithmetic"},
    {"query": "How much is 2 to the power of 32?", "lang": "en", "type": "arithmetic"},
    {"query": "What is 17.5% of 4,360?", "lang": "en", "type": "percentage"},
    {"query": "Explain what a hash table is.", "lang": "en", "type": "general"},
    {"query": "Write a short poem about autumn leaves.", "lang": "en", "type": "creative"},
]


def write_queries_spec(folder: Path, *, target: int = 8, per_call: int = 2, trap_share: float = 0.25,
                       teacher: dict | None = None, seeds: list[dict] | None = None, holdout: list[str] | None = None,
                       min_seeds: int = 1, languages: list[str] | None = None, name: str = "tq",
                       filters: dict | None = None, synthesis: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    holdout_file = folder / "holdout.jsonl"
    holdout_file.write_text("".join(json.dumps({"query": q}) + "\n" for q in (holdout or ["Who wrote Faust?"])))
    spec = {
        "name": name, "version": 1, "kind": "queries", "languages": languages or ["en"],
        "seeds": [{"inline": seeds if seeds is not None else SEEDS, "source": "test seeds", "licence": "CC0-1.0"}],
        "prompt": {"file": str(LIB / "prompts" / "synth@1.yaml"),
                   "teacher": {"system": "{{ instructions }}",
                               "user": "Call {{ call }}. Kind: {{ cell_hint }} ({{ language }})\n{{ examples }}\n"
                                       "Write {{ n }} new requests."},
                   "training": {"system": "{{ instructions }}", "user": "{{ cell_hint }}\n{{ examples }}"}},
        "teacher": {"backend": "llama_cpp", "model": "embedded:smollm2-135m-instruct", "n_ctx": 1024,
                    "sampling": {"temperature": 0.9, "max_tokens": 96, "seed": 1}, **(teacher or {})},
        "output_schema": str(LIB / "schemas" / "queries@1.json"),
        "holdout": [str(holdout_file)],
        "synthesis": {"target": target, "per_call": per_call, "shown": 2, "trap_share": trap_share,
                      "min_seeds_per_cell": min_seeds, "calls_per_quota": 3,
                      "traps": {"precision-first": {"types": ["arithmetic", "percentage"],
                                                    "hint": "an exact computation phrased as a technical question"}},
                      "filters": {"min_chars": 8, "max_chars": 200, **(filters or {})}, **(synthesis or {})},
        "runtime": {"batch_size": 2, "concurrency": 2, "timeout_s": 5, "max_retries": 1, "backoff_s": 0.01,
                    "backoff_max_s": 0.05},
    }
    path = folder / f"{name}@1.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def write_plan_spec(folder: Path, *, seeds: dict | list | None = None, judge: dict | None = None,
                    name: str = "tp", kind: str = "plan", curation: dict | None = None) -> Path:
    """A plan spec over the tiny fixtures; `seeds` is a seed source (e.g. {"from_spec": ...}) or inline rows."""
    folder.mkdir(parents=True, exist_ok=True)
    source = seeds if isinstance(seeds, dict) else {"inline": seeds or SEEDS}
    spec = {
        "name": name, "version": 1, "kind": kind,
        "seeds": [source],
        "prompt": {"file": str(TINY / "tiny-prompt@1.yaml"), "framings": ["A"],
                   "teacher": {"system": "{{ rules }}", "user": "{{ framing }}\n{{ taxonomy }}\nRequest: {{ query }}"},
                   "training": {"system": "{{ framing }}\n{{ taxonomy }}", "user": "{{ query }}"}},
        "taxonomy": {"file": str(TINY / "tiny-taxonomy@1.yaml"), "variation": False},
        "tools": {"file": str(TINY / "tiny-tools@1.yaml")},
        "teacher": {"sampling": {"temperature": 0.0, "max_tokens": 64}},
        "output_schema": str(TINY / "tiny-plan@1.json"),
    }
    if judge is not None:
        spec["judge"] = judge
    if curation is not None:
        spec["curation"] = curation
    path = folder / f"{name}@1.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def judge_section(**over) -> dict:
    return {
        "teacher": {"backend": "llama_cpp", "model": "embedded:smollm2-135m-instruct", "n_ctx": 1024,
                    "sampling": {"temperature": 0.0, "max_tokens": 120}},
        "rubric": "5: the plan routes every task right; 1: it is wrong.",
        "prompt": {"system": "Grade the plan. {{ rubric }} Answer JSON {\"score\": 1-5, \"rationale\": \"...\"}.",
                   "user": "Request: {{ query }}\nPlan: {{ output }}"},
        "pair_prompt": {"system": "Compare two plans. {{ rubric }}",
                        "user": "Request: {{ query }}\nA: {{ output_a }}\nB: {{ output_b }}"},
        "score_schema": str(LIB / "schemas" / "judge-score@1.json"),
        "pair_schema": str(LIB / "schemas" / "judge-pair@1.json"),
        "threshold": 6, "below": "penalty", **over}
