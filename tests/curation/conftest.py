"""A small plan library and stores of validated records, written the way generate + validate write them.

The plans are hand-written to pass the real routing rules (shared/rules/moe-routing@4.yaml); the
validation marks come from Store.record_validation, exactly as `mashbill validate` stores them.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from mashbill.factory.generate.generate import select_inputs
from mashbill.factory.records import Record, SpecRef, TeacherCall, Verdict
from mashbill.factory.store import Store
from mashbill.specs import ResolvedSpec, render_prompt

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / "specs" / "library" / "shared"


def calc(task, expr):
    return [{"task": task, "category": "precision_tools", "mcp_tool": "calculate", "mcp_args": {"expression": expr}}]


def weekday(date):
    return [{"task": f"Find the weekday of {date}", "category": "precision_tools", "mcp_tool": "day_of_week",
             "mcp_args": {"date_str": date}}]


def legal(law, para):
    return [{"task": f"Fetch § {para} {law}", "category": "precision_tools", "mcp_tool": "legal_get_paragraph",
             "mcp_args": {"law": law, "paragraph": para}},
            {"task": f"Explain § {para} {law} with the fetched text", "category": "legal_advisor"}]


def research_code(topic):
    return [{"task": f"Look up how {topic} works", "category": "research", "search_query": f"{topic} rules"},
            {"task": f"Implement {topic}", "category": "code_reviewer"}]


def one(cat, task="Answer the request"):
    return [{"task": task, "category": cat}]


def dynamic(domain):
    return [{"task": "Answer with specialist knowledge", "category": "dynamic", "domain": domain}]


# (query, lang, type, good plan)
SEEDS = [
    ("What is 1847 * 23 + 519?", "en", "arithmetic", calc("Compute 1847 * 23 + 519", "1847 * 23 + 519")),
    ("Was ist 7 hoch 5 minus 1000?", "de", "arithmetic", calc("Berechne 7^5 - 1000", "7**5 - 1000")),
    ("What is 17.5% of 4,360?", "en", "arithmetic", calc("Compute 17.5% of 4360", "4360 * 0.175")),
    ("Wie viel sind 19 % Mehrwertsteuer auf 1.249 Euro netto?", "de", "arithmetic", calc("19 % von 1249", "1249 * 0.19")),
    ("Welcher Wochentag war der 9. November 1989?", "de", "date", weekday("1989-11-09")),
    ("What day of the week will 25 December 2026 be?", "en", "date", weekday("2026-12-25")),
    ("Erkläre mir § 242 BGB an einem Beispiel aus dem Mietrecht.", "de", "legal", legal("BGB", "242")),
    ("Ab wann ist ein Betrug nach § 263 StGB vollendet?", "de", "legal", legal("StGB", "263")),
    ("Write a Tetris game in Python with pygame.", "en", "research_code", research_code("Tetris")),
    ("Please write a Tetris game in Python with pygame.", "en", "research_code", research_code("Tetris")),
    ("Implement the A* pathfinding algorithm on a grid in TypeScript.", "en", "research_code", research_code("A*")),
    ("Implementiere den Bellman-Ford-Algorithmus in C++.", "de", "research_code", research_code("Bellman-Ford")),
    ("Berechne den Heizwärmebedarf eines Einfamilienhauses nach GEG.", "de", "dynamic", dynamic("Bauphysik")),
    ("Under the Hague-Visby Rules, how is a carrier's liability per package limited?", "en", "dynamic",
     dynamic("maritime law")),
    ("Explain the difference between weather and climate.", "en", "general", one("general")),
    ("Fasse die Ursachen des Ersten Weltkriegs zusammen.", "de", "general", one("general")),
    ("Write a short poem about autumn in Hamburg.", "en", "creative", one("creative_writer")),
    ("Schreib eine Gutenachtgeschichte über einen Leuchtturmwärter.", "de", "creative", one("creative_writer")),
    ("My Docker container exits immediately. What should I check?", "en", "support", one("technical_support")),
    ("Nginx liefert 502 Bad Gateway. Wie finde ich den Fehler?", "de", "support", one("technical_support")),
    ("What is the capital of Canada?", "en", "general", one("general")),
    ("What is the capital of Canada ?", "en", "general", one("general")),
    ("Wer hat die Relativitätstheorie entwickelt?", "de", "general", one("general")),
    ("What are common side effects of metformin?", "en", "medical", one("medical_consult")),
    ("Translate 'The delivery will be delayed' into German.", "en", "translation", one("translation")),
    ("Übersetze ins Englische: 'Bitte bestätigen Sie den Termin.'", "de", "translation", one("translation")),
]
GENERIC = {"Answer the request", "Answer with specialist knowledge"}


def _about(plan: list, query: str) -> list:
    """An expert sees only its own task, so a generic task text carries the request (DRIFT001 rejects it otherwise)."""
    return [{**t, "task": f"{t['task']}: {query}"} if t["task"] in GENERIC else t for t in plan]


PLANS = {q: _about(plan, q) for q, _, _, plan in SEEDS}


def spec_yaml(name: str, *, kind: str = "plan", curation: dict | None = None, extra: dict | None = None,
              seeds: list | None = None) -> dict:
    data = {
        "name": name, "version": 1, "kind": kind,
        "description": "Test plans for curation.",
        "seeds": [{"inline": [{"query": q, "lang": lang, "type": t} for q, lang, t, _ in (seeds or SEEDS)]}],
        "prompt": {"file": "../shared/prompts/planner@1.yaml",
                   "teacher": {"system": "{{ rules_short }}\n{{ tool_catalog }}", "user": "{{ taxonomy }}\n{{ query }}"},
                   "training": {"system": "CATEGORIES:\n{{ taxonomy }}\n\n{{ rules_short }}", "user": "{{ query }}"}},
        "taxonomy": {"file": "../shared/taxonomy/moe-experts@1.yaml", "variation": False},
        "tools": {"file": "../shared/tools/precision-tools@2.yaml"},
        "output_schema": "../shared/schemas/plan@1.json",
        "rules": "../shared/rules/moe-routing@4.yaml",
        "teacher": {"sampling": {"temperature": 0.2, "max_tokens": 160}},
        "trainer_profile": {"tokenizer": "embedded:smollm2-135m-instruct", "max_seq_len": 1024},
    }
    if curation:
        data["curation"] = curation
    if extra:
        data.update(extra)
    return data


@dataclass
class Lib:
    root: Path

    def write(self, name: str, **kw) -> Path:
        path = self.root / "plan" / f"{name}@1.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(spec_yaml(name, **kw), allow_unicode=True, sort_keys=False), encoding="utf-8")
        return path


@pytest.fixture
def lib(tmp_path) -> Lib:
    root = tmp_path / "lib"
    shutil.copytree(SHARED, root / "shared")
    return Lib(root)


def add_records(store: Store, rs: ResolvedSpec, *, plans: dict | None = None, validate: bool = True,
                rejected_by_validation: dict | None = None, parse_failures: tuple = (), limit: int | None = None,
                latency: float = 0.5) -> list[Record]:
    """Store one record per seed of `rs` (the plan from `plans`, else PLANS) in one run, then a validation run
    over the accepted ones. `rejected_by_validation` maps a query to the verdict code validation gives it."""
    plans = plans if plans is not None else PLANS
    rejected_by_validation = rejected_by_validation or {}
    run = store.begin_run(spec_name=rs.spec.name, spec_version=rs.spec.version, spec_hash=rs.hash,
                          kind=rs.spec.kind, backend="llama_cpp", model=rs.spec.teacher.model, model_sha256="f" * 64,
                          model_info={"sha256": "f" * 64}, sampling=rs.spec.teacher.sampling.model_dump())
    records, verdicts, calls = [], {}, []
    for i, (rid, inputs) in enumerate(select_inputs(rs, limit=limit)):
        prompt = render_prompt(rs, inputs, rid)
        q = inputs["query"]
        meta = {**prompt.meta(), "lang": inputs.get("lang")}
        ref = SpecRef(rs.spec.name, rs.spec.version, rs.hash)
        if q in parse_failures:
            rec = Record(rid, rs.spec.kind, inputs, None, "[{\"task\": ", ref, "rejected", prompt.training_messages, meta)
            verdicts[rid] = [Verdict("PARSE001", "reject", "not JSON")]
        else:
            rec = Record(rid, rs.spec.kind, inputs, plans[q], None, ref, "accepted", prompt.training_messages, meta)
        records.append(rec)
        calls.append(TeacherCall(rid, "p" + rid[:8], 1, "llama_cpp", "m", latency + 0.01 * i, 100, 80, 20, "stop"))
    store.write_batch(run, records, verdicts, calls)
    store.finish_run(run, "completed", {"requested": len(records)})
    if validate:
        results = {}
        for rec in records:
            if rec.status != "accepted":
                continue
            code = rejected_by_validation.get(rec.input["query"])
            results[rec.id] = [Verdict(code, "reject", "test finding", "validate")] if code else []
        store.record_validation(spec_hash=rs.hash, source="store", results=results, counts={})
    return records
