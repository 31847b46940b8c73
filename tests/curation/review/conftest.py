"""The real argilla-server, started once per session, and stores full of records for it to review.

The server's virtual environment is built on first use and cached in ~/.cache/mashbill (or
$MASHBILL_CACHE); on a machine without the cache the first test waits about 70 s for the build.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from mashbill.curation.review import local
from mashbill.factory.records import Record, SpecRef, TeacherCall, Verdict, record_id
from mashbill.factory.store import Store
from mashbill.specs import load_spec, render_prompt
from tests.conftest import ROOT, free_port, run_cli

FIXTURE_SPEC = ROOT / "tests" / "curation" / "review" / "fixtures" / "review-plan@1.yaml"

# The teacher outputs of the fixture spec's seeds, in seed order, with the findings a validation run had.
PLANS = [
    # 0: right: a precision tool for arithmetic
    ([{"task": "Evaluate (4580 - 1275) * 3.5 / 7 exactly.", "category": "precision_tools", "mcp_tool": "calculate",
       "mcp_args": {"expression": "(4580 - 1275) * 3.5 / 7"}}], []),
    # 1: wrong: arithmetic sent to an LLM category
    ([{"task": "Rechne 98.765 minus 45.678 mal 2 aus.", "category": "math"}],
     [Verdict("HR001", "reject", "precision-first: no precision_tools task", "validate")]),
    # 2: research before code, but flagged for review
    ([{"task": "Find the rules of Tetris.", "category": "research", "search_query": "tetris rules"},
      {"task": "Write Tetris in Python.", "category": "general"}],
     [Verdict("HR006", "penalty", "research-before-code: no code task", "validate")]),
    # 3: a niche field without a dynamic task
    ([{"task": "Explain the heating demand of an old building.", "category": "science"}],
     [Verdict("HR008", "flag", "niche-dynamic: no dynamic task", "validate")]),
    # 4: fine
    ([{"task": "Summarise Hamlet in two sentences.", "category": "general"}], []),
    # 5: the teacher never answered (a failed record is never pushed)
    (None, [Verdict("TEACHER001", "reject", "timeout", "generate")]),
]


@dataclass(frozen=True)
class Server:
    url: str
    home: Path
    creds: dict

    @property
    def owner_key(self) -> str:
        return self.creds["owner"]["api_key"]

    @property
    def annotator_key(self) -> str:
        return self.creds["annotator"]["api_key"]

    def env(self) -> dict:
        """Environment for the CLI: the embedded server through its home, no ARGILLA_* override."""
        return {"MASHBILL_REVIEW_HOME": str(self.home), "ARGILLA_API_URL": "", "ARGILLA_API_KEY": ""}


@pytest.fixture(scope="session")
def argilla(tmp_path_factory) -> Server:
    home = tmp_path_factory.mktemp("argilla-home")
    info = local.start(home, port=free_port(), timeout_s=180)
    try:
        yield Server(info.url, info.home, local.read_credentials(info.home))
    finally:
        local.stop(info.home)


@pytest.fixture(autouse=True)
def _no_ambient_argilla(monkeypatch):
    """Tests decide which server they talk to; an ARGILLA_API_URL from the shell must not leak in."""
    monkeypatch.delenv("ARGILLA_API_URL", raising=False)
    monkeypatch.delenv("ARGILLA_API_KEY", raising=False)
    monkeypatch.delenv("ARGILLA_WORKSPACE", raising=False)


def spec_copy(tmp_path: Path, name: str, extra: str = "") -> Path:
    """The fixture spec under another name (so each test gets its own Argilla dataset), with a private copy of
    the library files it references (so its hash cannot change under a running test)."""
    shared = tmp_path / "shared"
    if not shared.exists():
        shutil.copytree(ROOT / "specs" / "library" / "shared", shared)
    text = FIXTURE_SPEC.read_text(encoding="utf-8")
    # a relative reference: the spec's text, so its hash, its record ids and the categories each record was shown,
    # are the same wherever the test runs (an absolute temporary path made them differ from run to run)
    text = text.replace("../../../specs/library/shared", "shared").replace("name: review-plan", f"name: {name}")
    path = tmp_path / f"{name}@1.yaml"
    path.write_text(text + extra, encoding="utf-8")
    return path


def fill_store(store_dir: Path, spec_path: Path, only: list[int] | None = None) -> list[str]:
    """Write the fixture records (as a generate run plus a validation run would) and return their ids in seed order."""
    rs = load_spec(spec_path)
    ref = SpecRef(rs.spec.name, rs.spec.version, rs.hash)
    records, verdicts, calls, validation = [], {}, [], {}
    ids = []
    for i, (inputs, (plan, found)) in enumerate(zip(rs.seeds, PLANS)):
        rid = record_id(rs.hash, inputs)
        ids.append(rid)
        if only is not None and i not in only:
            continue
        prompt = render_prompt(rs, inputs, rid)
        status = "failed" if plan is None else "accepted"
        records.append(Record(rid, "plan", inputs, plan, None if plan is None else json.dumps(plan), ref, status,
                              prompt.training_messages, {**prompt.meta(), "lang": inputs.get("lang")}))
        verdicts[rid] = [v for v in found if v.stage == "generate"]
        if status != "failed":
            validation[rid] = [v for v in found if v.stage == "validate"]
        calls.append(TeacherCall(rid, f"p{i}", 1, "test", "smollm2-135m-instruct", 0.1))
    with Store.open(store_dir) as store:
        run = store.begin_run(spec_name=rs.spec.name, spec_version=rs.spec.version, spec_hash=rs.hash, kind="plan",
                              backend="llama_cpp", model="smollm2-135m-instruct", model_sha256=None, model_info=None,
                              sampling={})
        store.write_batch(run, records, verdicts, calls)
        store.finish_run(run, "completed", {"accepted": len(records)})
        store.record_validation(spec_hash=rs.hash, source="store", results=validation, counts={})
    return ids


class Annotator:
    """What the annotation UI does, through the same REST API, as one user."""

    def __init__(self, url: str, api_key: str):
        self.http = httpx.Client(base_url=f"{url}/api/v1", headers={"X-Argilla-Api-Key": api_key}, timeout=30)

    def dataset_id(self, name: str) -> str:
        items = self.http.get("/me/datasets").raise_for_status().json()["items"]
        return next(d["id"] for d in items if d["name"] == name)

    def search(self, dataset_id: str, body: dict | None = None, **params) -> tuple[int, list[dict]]:
        resp = self.http.post(f"/me/datasets/{dataset_id}/records/search", json=body or {},
                              params={"include": "responses,suggestions", **params})
        assert resp.status_code == 200, resp.text
        data = resp.json()
        return data["total"], [item["record"] for item in data["items"]]

    def pending(self, dataset_id: str) -> list[dict]:
        return self.search(dataset_id, status_filter(["pending"]), limit=1000)[1]

    def respond(self, record_uuid: str, values: dict, status: str = "submitted") -> dict:
        resp = self.http.post(f"/records/{record_uuid}/responses", json={"values": values, "status": status})
        assert resp.status_code == 201, resp.text
        return resp.json()

    def update(self, response_id: str, values: dict, status: str = "submitted") -> dict:
        resp = self.http.put(f"/responses/{response_id}", json={"values": values, "status": status})
        assert resp.status_code == 200, resp.text
        return resp.json()


def status_filter(values: list[str]) -> dict:
    return {"filters": {"and": [{"type": "terms", "scope": {"entity": "response", "property": "status"},
                                 "values": values}]}}


def answer(decision: str | None = None, correction: str | None = None, **more) -> dict:
    values = {}
    if decision is not None:
        values["decision"] = {"value": decision}
    if correction is not None:
        values["correction"] = {"value": correction}
    for name, value in more.items():
        values[name] = {"value": value}
    return values


def cli(server: Server, *args, check: bool = True):
    return run_cli("review", *args, env=server.env(), check=check)


def by_external_id(records: list[dict]) -> dict[str, dict]:
    return {r["external_id"]: r for r in records}


os.environ.setdefault("HF_HUB_OFFLINE", "1")


def client_for(server: Server, api_key: str | None = None):
    from mashbill.curation.review.client import ArgillaReview, Connection

    return ArgillaReview.connect(Connection(server.url, api_key or server.owner_key, "mashbill", "test server"))


def push_records(server: Server, spec_path: Path, store_dir: Path, selection: str = "all", **kwargs):
    from mashbill.curation.review.push import push
    from mashbill.curation.review.select import parse_selection

    mode, arg = parse_selection(selection)
    with Store.open(store_dir, read_only=True) as store:
        return push(load_spec(spec_path), store, client_for(server), selection=mode, arg=arg, **kwargs)


def pull_decisions(server: Server, spec_path: Path, store_dir: Path):
    from mashbill.curation.review.pull import pull

    with Store.open(store_dir) as store:
        return pull(load_spec(spec_path), store, client_for(server))
