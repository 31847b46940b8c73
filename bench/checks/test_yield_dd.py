"""bench/yield_dd.py: NeMo Data Designer's outputs read back and scored like ours, on a real recorded DD run.

bench/checks/data/yield_dd/ holds what `bench/yield.py --teacher server --dd --dd-keep` kept from data-designer
0.9.7 against llama.cpp's server on SmolLM2-135M: DD's rows (`dd_rows.jsonl`, with DD's own
conversation trace per row) and the calls the timing proxy saw (`dd_calls.jsonl`), for both setups;
recorded.json says how and when.
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data" / "yield_dd"
# DD's health check exactly as it reached llama-cpp-python's server (captured by the proxy, which the server
# refused with HTTP 500 before the proxy joined content parts): data_designer/engine/models/registry.py
HEALTH_CHECK = (b'{"model":"smollm2","messages":[{"role":"system","content":[{"type":"text","text":"You are a helpful '
                b'assistant."}]},{"role":"user","content":[{"type":"text","text":"Hello!"}]}],"temperature":0.2,'
                b'"top_p":0.95,"max_tokens":64,"seed":0}')


def _recorded(setup: str):
    meta = json.loads((DATA / "recorded.json").read_text(encoding="utf-8"))
    calls = [json.loads(ln) for ln in (DATA / setup / "dd_calls.jsonl").read_text(encoding="utf-8").splitlines()]
    return meta, calls


def _requests(n: int):
    """Our rendered prompts for the first n rows of the report half, as the bench rendered them for DD."""
    y = importlib.import_module("yield")
    import yield_dd

    from mashbill.specs import load_spec

    rows = y.load_rows("report")[:n]
    args = argparse.Namespace(attempts=2, samples=3, threads=1, teacher="server", server_url=None)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        rs = load_spec(y.method_spec(Path(tmp), "single", rows, args))
        return rows, rs, yield_dd.dd_requests(rs, rows, y.bench_work(rs, "single", rows, args))


@pytest.mark.parametrize("setup", ["constrained", "prompted"])
def test_recorded_rows_read_back_with_their_conversations(setup):
    import yield_dd

    meta, calls = _recorded(setup)
    rows = yield_dd.read_dd_rows(DATA / setup / "dd_rows.jsonl")
    assert set(rows) <= set(range(meta["requests"]))
    for row in rows.values():
        assert isinstance(row["output"], dict)
        assert 1 <= row["calls"] <= 1 + meta["correction_steps"]  # DD's budget: the first answer + corrections
        assert row["trace"][0]["role"] == "system" and row["trace"][-1]["role"] == "assistant"
    asked = [c for c in calls if not c["health_check"]]
    # DD kept a row per request it answered; a row's calls are its conversation's assistant turns
    assert sum(r["calls"] for r in rows.values()) <= len(asked) <= meta["requests"] * (1 + meta["correction_steps"])


def _framings(rs, query: str, tries: int = 64) -> set[tuple[str, str]]:
    """Every (system, user) our spec renders for `query`, over the framings it can draw. The framing a recorded run
    drew depends on its spec hash, and the bench's temporary spec names its files by absolute path, so the hash
    (and the draw) differs between checkouts: the recording is compared with each possible rendering."""
    import dataclasses

    from mashbill.factory.generate.work import SpecWork

    work = SpecWork(rs)
    [job] = [j for j in work.jobs() if j.inputs["query"] == query]
    out = set()
    for n in range(tries):
        msgs = {m["role"]: m["content"]
                for m in work.prompt(dataclasses.replace(job, prompt_key=f"probe-{n}")).teacher_messages}
        out.add((msgs.get("system", ""), msgs["user"]))
    return out


def test_dd_was_given_our_prompts():
    meta, _ = _recorded("constrained")
    rows = importlib.import_module("yield_dd").read_dd_rows(DATA / "constrained" / "dd_rows.jsonl")
    yard, rs, _ = _requests(meta["requests"])
    assert rows
    for i, row in rows.items():
        system, user = row["trace"][0], row["trace"][1]
        text = {m["role"]: "".join(p["text"] for p in m["content"]) if isinstance(m["content"], list) else m["content"]
                for m in (system, user)}
        ours = _framings(rs, yard[i]["query"])
        assert len(ours) > 1  # the spec varies its framing, so the check below is not trivially met
        # DD got one of our renderings, then appended its own schema instructions to the user turn
        [(_, sent)] = [(s, u) for s, u in ours if s == text["system"] and text["user"].startswith(u)]
        assert "<response_schema>" in text["user"][len(sent):]


def test_a_dd_output_counts_only_if_our_checker_accepts_it():
    import yield_dd

    from mashbill.validators.checker import RecordChecker

    meta, calls = _recorded("constrained")
    rows = yield_dd.read_dd_rows(DATA / "constrained" / "dd_rows.jsonl")
    labels, rs, requests = _requests(meta["requests"])
    gold = {r["query"]: r["label"] for r in labels}
    checker = RecordChecker.for_spec(rs)
    asked = [c for c in calls if not c["health_check"]]
    res = yield_dd.score_dd(rows, requests, checker, gold, "complexity", asked)
    assert res["requests"] == meta["requests"] and res["rows"] == len(rows)
    assert 0 <= res["right"] <= res["accepted"] <= res["rows"]
    assert res["teacher_s"] == pytest.approx(sum(c["latency_s"] for c in asked))
    assert res["calls"] == len(asked) and res["tokens"] > 0

    # one accepted row's output replaced by a label our rules reject for its request: no longer accepted
    accepted_i = [i for i, r in rows.items()
                  if not [v for v in checker.check(requests[i]["inputs"], r["output"], requests[i]["meta"])
                          if v.severity == "reject"]]
    assert accepted_i, "the recorded run has an accepted row"
    i = accepted_i[0]
    bad = None
    for label in ("memory_recall", "trivial", "complex", "moderate"):
        verdicts = checker.check(requests[i]["inputs"], {"complexity": label}, requests[i]["meta"])
        codes = [v.code for v in verdicts if v.severity == "reject"]
        if codes:
            bad = label, codes
            break
    assert bad, "some label is rejected by the rule set for this request"
    changed = {**rows, i: {**rows[i], "output": {"complexity": bad[0]}}}
    res2 = yield_dd.score_dd(changed, requests, checker, gold, "complexity", asked)
    assert res2["accepted"] == res["accepted"] - 1
    assert all(res2["codes"].get(c, 0) >= 1 for c in bad[1])

    # a row DD dropped counts as asked and not accepted
    dropped = {k: v for k, v in rows.items() if k != i}
    res3 = yield_dd.score_dd(dropped, requests, checker, gold, "complexity", asked)
    assert res3["accepted"] == res["accepted"] - 1 and res3["codes"]["DD_DROPPED"] == res["codes"].get("DD_DROPPED",
                                                                                                       0) + 1


def test_the_proxy_joins_dds_content_parts_and_knows_its_health_check():
    import yield_dd

    proxy = yield_dd.TimingProxy("http://127.0.0.1:9/v1")  # never started: only its body rewrite is used
    try:
        body = json.loads(proxy._flatten(HEALTH_CHECK))
    finally:
        proxy._client.close()
        proxy._server.server_close()
    assert [m["content"] for m in body["messages"]] == ["You are a helpful assistant.", "Hello!"]
    assert body["max_tokens"] == 64 and proxy.flattened == 2
    assert yield_dd._is_health_check(HEALTH_CHECK)
    assert not yield_dd._is_health_check(json.dumps({"messages": [{"role": "user", "content": "Hello!"}]}).encode())
