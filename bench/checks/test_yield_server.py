"""bench/yield.py --teacher server: the embedded teacher's GGUF behind llama.cpp's OpenAI-compatible server, asked
through the OpenAI-compatible teacher, goes through the one generate loop and its repair chains and comes out with
the same accounting fields as the embedded teacher, on the very same prompts."""

from __future__ import annotations

import argparse
import importlib

import pytest

from tests.factory.conftest import llama_server  # noqa: F401 (llama-cpp-python's server on the embedded GGUF)


def _args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"attempts": 2, "samples": 3, "threads": 1, "teacher": "embedded", "server_url": None,
                                 **kw})


@pytest.mark.slow
def test_the_server_path_accounts_like_the_embedded_one(llama_server, tmp_path):  # noqa: F811
    y = importlib.import_module("yield")  # bench/yield.py (`yield` is a keyword)
    from mashbill.factory.store import Store

    rows = y.load_rows("report")[:3]
    runs = {}
    for mode in ("embedded", "server"):
        args = _args(teacher=mode, server_url=llama_server if mode == "server" else None)
        teacher = y.make_bench_teacher(args, rows)
        (tmp_path / mode).mkdir()
        try:
            runs[mode] = y.run_method("repair", rows, teacher, tmp_path / mode, args)
        finally:
            teacher.close()
    emb, srv = runs["embedded"], runs["server"]
    assert set(srv) == set(emb)  # the same accounting fields
    for res in (emb, srv):
        assert res["requests"] == 3 and res["calls"] >= 3 and res["teacher_s"] > 0 and res["tokens"] > 0
        assert 0 <= res["right"] <= res["accepted"] <= 3
        for by_code in res["repair"].values():
            assert set(by_code) >= {"tried", "fixed"} and by_code["fixed"] <= by_code["tried"]

    stored = {}
    for mode in ("embedded", "server"):
        with Store.open(tmp_path / mode / "repair") as store:
            recs = store.records(status=None)
            backend = [run["backend"] for run in store.runs_info(sorted(store.record_runs([r.id for r in recs]).values()))]
            attempts = store.attempts([r.id for r in recs])
        stored[mode] = (backend, {r.input["query"]: r.meta.get("prompt_variant") for r in recs}, attempts)
    assert stored["embedded"][0] == ["llama_cpp"] and stored["server"][0] == ["openai"]
    # the same prompt (framing) for every request, though the server spec's hash differs from the embedded one's
    assert stored["server"][1] == stored["embedded"][1] and len(stored["server"][1]) == 3
    # every attempt is stored, each answer after the first is a repair that states the verdicts
    attempts = stored["server"][2]
    assert len(attempts) == srv["calls"]
    assert all((a["attempt"] > 1) == (a["feedback"] is not None) for a in attempts)
