"""Specs and seed inputs for runs against the replay teacher (tests/factory/replay_server.py), shared by the
replay tests and bench/scale.py (a bench script is never imported by a test; both import this).

Every spec here is a library spec's prompt, schema and rules with an `openai` teacher named `replay`, written into
a folder of the caller's with a specs.lock beside it, so `mashbill generate` runs it as it runs a shipped spec.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.factory.replay_server import LIB, variant

KINDS = ("complexity", "routing", "plan")  # routing = the category labels


def seed_rows(kind: str, n: int, corpus: dict) -> list[dict]:
    """n distinct seed inputs: corpus queries with numbered suffixes (complexity, routing), or plan requests of
    the classes of tests/factory/replay_plans.py taking turns (their class as `type`)."""
    if kind == "plan":
        from tests.factory.replay_plans import plan_query

        rows = []
        for i in range(n):
            cls, query = plan_query(i)
            rows.append({"query": query, "lang": cls.lang, "type": cls.name})
        return rows
    queries = sorted(corpus)
    return [{"query": variant(queries[i % len(queries)], i), "lang": "en", "type": "general"} for i in range(n)]


def write_seeds(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def write_spec(folder: Path, kind: str, seeds: Path, *, name: str | None = None, runtime: dict | None = None) -> Path:
    """A locked spec of `kind` over `seeds` (a JSONL file) with the replay teacher."""
    from mashbill.specs import load_spec
    from mashbill.specs.lock import LOCK_NAME, read_lock, write_lock

    folder.mkdir(parents=True, exist_ok=True)
    shared = LIB / "shared"
    name = name or f"replay-{kind}"
    spec: dict = {"name": name, "version": 1, "kind": kind,
                  "seeds": [{"path": str(seeds), "columns": {"query": "query", "lang": "lang", "type": "type"}}]}
    if kind == "complexity":
        spec["prompt"] = {"file": str(shared / "prompts" / "complexity@1.yaml"), "framings": ["A", "B", "C"],
                          "teacher": {"system": "{{ classes }}\n\n{{ examples }}\n\n{{ output_note }}",
                                      "user": "{{ framing }}\n\nRequest: {{ query }}"},
                          "training": {"system": "{{ framing }}\n\n{{ classes }}\n\n{{ output_note }}",
                                       "user": "{{ query }}"}}
        spec["output_schema"] = str(shared / "schemas" / "complexity@1.json")
        spec["rules"] = str(shared / "rules" / "moe-complexity@3.yaml")
    elif kind == "routing":
        spec["prompt"] = {"file": str(shared / "prompts" / "routing@1.yaml"), "framings": ["A", "B", "C"],
                          "teacher": {"system": "{{ instructions }}\n\nCATEGORIES:\n{{ taxonomy }}\n\n{{ output_note }}",
                                      "user": "{{ framing }}\n\nRequest: {{ query }}"},
                          "training": {"system": "{{ framing }}\n\nCATEGORIES:\n{{ taxonomy }}\n\n{{ instructions }}",
                                       "user": "{{ query }}"}}
        spec["taxonomy"] = {"file": str(shared / "taxonomy" / "moe-experts@1.yaml"), "variation": False}
        spec["output_schema"] = str(shared / "schemas" / "routing@1.json")
    elif kind == "plan":
        spec["prompt"] = {"file": str(shared / "prompts" / "planner@1.yaml"), "framings": ["A", "B", "C"],
                          "teacher": {"system": "{{ rules }}\n\nPRECISION TOOLS:\n{{ tool_catalog }}\n\n{{ output_note }}",
                                      "user": "{{ framing }}\n\nCATEGORIES FOR THIS REQUEST:\n{{ taxonomy }}\n\n"
                                              "Request: {{ query }}"},
                          "training": {"system": "{{ framing }}\n\nCATEGORIES:\n{{ taxonomy }}\n\n{{ rules }}\n\n"
                                                 "PRECISION TOOLS:\n{{ tool_catalog }}\n\n{{ output_note }}",
                                       "user": "{{ query }}"}}
        spec["taxonomy"] = {"file": str(shared / "taxonomy" / "moe-experts@1.yaml"), "variation": False}
        spec["tools"] = {"file": str(shared / "tools" / "precision-tools@2.yaml")}
        spec["output_schema"] = str(shared / "schemas" / "plan@1.json")
        spec["rules"] = str(shared / "rules" / "moe-routing@6.yaml")
    else:
        raise ValueError(f"no replay spec for kind {kind!r}; known: {', '.join(KINDS)}")
    spec["teacher"] = {"backend": "openai", "model": "replay", "base_url": "http://127.0.0.1:9/v1",
                       "sampling": {"temperature": 0.0, "max_tokens": 96, "seed": 1}}
    spec["runtime"] = {"batch_size": 256, "concurrency": 16, "timeout_s": 30, "max_retries": 2, "backoff_s": 0.0,
                       "backoff_max_s": 0.0, "structured_output": "json_schema", "progress_every_s": 3600,
                       **(runtime or {})}
    spec["trainer_profile"] = {"tokenizer": "embedded:smollm2-135m-instruct",
                               "chat_template": str(shared / "templates" / "chatml-generation@1.jinja"),
                               # the library specs' window: the plan spec's training prompt alone is ~2,500
                               # tokens; at 1024 every plan target (0.4% of the category ones) was cut off
                               "max_seq_len": 4096, "loss": "assistant-only"}
    path = folder / f"{name}@1.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    rs = load_spec(path)
    lock = folder / LOCK_NAME
    write_lock(lock, {**read_lock(lock), rs.ref: rs.hash})
    return path
