"""Small real snapshots for the trainer tests, built once per session the way generate + validate + freeze
build them: hand-written plans that pass the real routing rules (tests/curation/conftest.py), a preference
snapshot of rule-derived pairs with correction samples (last-turn loss), and a complexity snapshot whose
classes a classifier can learn from the wording. Short training prompts keep a CPU step around a second.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from mashbill.curation.snapshots.snapshot import freeze
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from tests.curation.conftest import SEEDS, SHARED, add_records, spec_yaml

TRAIN_PROMPT = {"file": "../shared/prompts/planner@1.yaml",
                "teacher": {"system": "{{ rules_short }}\n{{ tool_catalog }}", "user": "{{ taxonomy }}\n{{ query }}"},
                "training": {"system": "Plan the request as a JSON array of tasks.", "user": "{{ query }}"}}
PROFILE = {"tokenizer": "embedded:smollm2-135m-instruct",
           "chat_template": "../shared/templates/chatml-generation@1.jinja", "max_seq_len": 512}


def complexity_seeds() -> list[tuple[str, str, str, dict]]:
    """~90 requests whose class shows in the wording: one-line facts, explanations, multi-part projects."""
    rng = random.Random(7)
    things = ["the moon", "a volcano", "Berlin", "photosynthesis", "a router", "inflation", "the Rhine", "jazz",
              "a transistor", "tides", "Mozart", "a glacier", "the euro", "honey bees", "Linux", "a comet"]
    langs = ["Python", "Rust", "Go", "TypeScript", "Java", "C++"]
    systems = ["an online shop", "a chat server", "a booking system", "a data pipeline", "a game engine",
               "a search index", "a payment service", "a CI runner"]
    trivial = ["Hi!", "Thanks a lot.", "What is {t}?", "Define {t}.", "Who knows {t}?", "Is {t} big?",
               "Name {t}.", "Hello there, {t}."]
    moderate = ["Explain how {t} works and why it matters for everyday life.",
                "Compare {t} with {u} and list three differences between them.",
                "Summarise the history of {t} in a few paragraphs for a school report.",
                "Describe the main causes and effects related to {t}, with one example."]
    complex_ = ["Design and implement {s} in {l} with authentication, a database schema, unit tests, a CI pipeline "
                "and a deployment plan, then benchmark it against {s2} and write a migration guide.",
                "Build {s} in {l}: gather the requirements, research existing libraries, write the code across "
                "several modules, add integration tests, profile it and document every design decision.",
                "Plan, research and implement a multi-step refactoring of {s} written in {l}, split it into "
                "services, add monitoring and load tests, and produce a rollout and rollback strategy."]
    out = []
    for label, templates in (("trivial", trivial), ("moderate", moderate), ("complex", complex_)):
        for i in range(30):
            t, u = rng.sample(things, 2)
            s, s2 = rng.sample(systems, 2)
            q = templates[i % len(templates)].format(t=t, u=u, s=s, s2=s2, l=rng.choice(langs))
            out.append((f"{q} (#{i})" if q.count(" ") < 3 else q, "en", label, {"complexity": label}))
    return out


@dataclass
class Snaps:
    root: Path  # the spec library
    store: Path
    plan: Path  # snapshot folders
    pref: Path
    cx: Path

    def config(self, tmp_path: Path, name: str, **fields) -> Path:
        """A training config file in tmp_path for these snapshots."""
        # one thread: on a busy shared machine two spinning OpenMP threads wait on each other for minutes
        data = {"name": name, "store": str(self.store), "threads": 1, **fields}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return path


def _write(root: Path, kind_dir: str, name: str, data: dict) -> Path:
    path = root / kind_dir / f"{name}@1.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def snaps(tmp_path_factory) -> Snaps:
    base = tmp_path_factory.mktemp("trainer-snaps")
    root = base / "lib"
    shutil.copytree(SHARED, root / "shared")
    store = base / "store"
    plan = _write(root, "plan", "tplan", spec_yaml("tplan", extra={"prompt": TRAIN_PROMPT, "trainer_profile": PROFILE},
                                                   curation={"splits": {"train": 0.7, "eval": 0.2, "test": 0.1}}))
    pref_data = spec_yaml("tpref", kind="preference", extra={
        "prompt": TRAIN_PROMPT, "trainer_profile": {**PROFILE, "loss": "last-turn"}},
        curation={"splits": {"train": 0.7, "eval": 0.2, "test": 0.1}, "quotas": {"dims": ["source", "lang"]},
                  "preference": {"source_spec": "../plan/tplan@1.yaml", "sources": ["rule"],
                                 "correction_samples": True}})
    pref = _write(root, "preference", "tpref", pref_data)
    cx_seeds = complexity_seeds()
    cx_data = spec_yaml("tcx", seeds=cx_seeds, extra={
        "kind": "complexity", "output_schema": "../shared/schemas/complexity@1.json",
        "prompt": {"file": "../shared/prompts/complexity@1.yaml",
                   "teacher": {"system": "Label the request.", "user": "{{ query }}"},
                   "training": {"system": "Label the request.", "user": "{{ query }}"}},
        "trainer_profile": PROFILE}, curation={"splits": {"train": 0.65, "eval": 0.3, "test": 0.05}})
    for key in ("rules", "taxonomy", "tools"):
        cx_data.pop(key, None)
    cx = _write(root, "complexity", "tcx", cx_data)
    with Store.open(store) as s:
        add_records(s, load_spec(plan))
        add_records(s, load_spec(cx), plans={q: label for q, _, _, label in cx_seeds})
    out = {}
    for name, path in (("tplan", plan), ("tpref", pref), ("tcx", cx)):
        out[name] = freeze(path, store_path=store, name=name, version="1").path
    return Snaps(root, store, out["tplan"], out["tpref"], out["tcx"])


@pytest.fixture(scope="session")
def smol_base():
    """SmolLM2-135M as an HF folder, dequantized from the wheel's GGUF once (cached under ~/.cache/mashbill)."""
    from mashbill.trainers.base_model import resolve

    return resolve("embedded:smollm2-135m-instruct")


__all__ = ["SEEDS"]
