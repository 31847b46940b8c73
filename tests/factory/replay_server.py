"""A replay teacher for load: an OpenAI-compatible chat-completions server on 127.0.0.1 that answers from a corpus
of realistic teacher outputs with a seeded, set error mix, at thousands of requests per second.

Test and bench infrastructure (tests/factory/generate/test_generate_replay.py, bench/scale.py), never a teacher users pick:
the generate loop, guards and accounting that talk to it are the real ones (factory/teachers/openai_compat.py).

The corpus (`build_corpus`) holds, per seed query of the labelled yardstick tests/fixtures/complexity_labels, a label
the real complexity rules accept and a wrong label they reject with exactly one reject code (decided by running
`validators.complexity.complexity.check_complexity`, never hard-coded). Seed inputs at volume are those queries with a
numbered suffix (`variant`); the corpus keeps only queries whose rule outcome the suffix does not change.

Each record gets one outcome from `outcome(seed, query)` (a hash of the seed and the record's query, so a resumed
run sees the same one), drawn with the probabilities of the mix:

  ok          an accepted answer (complexity: the accepted label; routing: experts + that label; plan: a plan)
  wrong       complexity: the wrong label (its one reject rule code); plan: its class's wrong plan (an invented
              operand, a date off by years, a request given to the wrong expert ...: tests/factory/replay_plans.py,
              whose codes the real rules decide); routing has no rule set, so its `wrong` is an ok answer
  unparseable HTTP 200 whose content is not JSON                      -> PARSE001
  length      half an answer, finish_reason "length"                  -> TRUNC001 and PARSE001
  429         HTTP 429 with Retry-After: 0 on the first attempt, then ok (a retry, accounted)
  500         HTTP 500 on the first attempt, then ok (a retry, accounted)

Requests that carry no seed query (the preflight's probe, the spec-schema check) get a schema instance.
Run standalone (bench/scale.py does): python replay_server.py --port 8000 --seed 7
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import sys
import threading
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LABELS = ROOT / "tests" / "fixtures" / "complexity_labels" / "labels.jsonl"
LIB = ROOT / "specs" / "library"
COMPLEXITY_RULES = LIB / "shared" / "rules" / "moe-complexity@3.yaml"
CLASSES = ("trivial", "moderate", "complex", "memory_recall")
OUTCOMES = ("ok", "wrong", "unparseable", "length", "429", "500")
MIX = {"ok": 0.80, "wrong": 0.06, "unparseable": 0.03, "length": 0.03, "429": 0.04, "500": 0.04}
_VARIANT = re.compile(r" \[r(\d+)\]$")
_REQUEST = re.compile(r"Request: (.*)\Z", re.S)


def variant(query: str, n: int) -> str:
    """Seed input n made from a corpus query: the query with a numbered suffix the rules do not read."""
    return f"{query} [r{n}]"


def base_query(text: str) -> str:
    return _VARIANT.sub("", text)


def build_corpus(rules_path: Path = COMPLEXITY_RULES) -> dict[str, dict]:
    """query -> {"label": accepted label, "wrong": rejected label, "code": its one reject code, "experts": [...]},
    from the real complexity rules (reject severity only; flags and penalties do not decide)."""
    from mashbill.validators.complexity.complexity import check_complexity
    from mashbill.validators.complexity.complexity_rules import load_complexity_rules

    rs = load_complexity_rules(rules_path)
    corpus = {}
    for line in LABELS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        q = row["query"]
        if len(q) > 400:
            continue
        outcome = {}
        for label in CLASSES:
            per_form = {tuple(sorted(v.code for v in check_complexity(rs, form, {"complexity": label})
                                     if v.severity == "reject"))
                        for form in (q, variant(q, 7), variant(q, 987654))}
            if len(per_form) != 1:
                break  # the suffix changes the outcome: not a stable corpus query
            outcome[label] = per_form.pop()
        else:
            accepted = [lab for lab in CLASSES if not outcome[lab]]
            wrong = [lab for lab in CLASSES if len(outcome[lab]) == 1]
            if accepted and wrong:
                label = row["label"] if row["label"] in accepted else accepted[0]
                corpus[q] = {"label": label, "wrong": wrong[0], "code": outcome[wrong[0]][0],
                             "experts": ["general"] if label in ("trivial", "memory_recall") else ["general", "reasoning"]}
    return corpus


def outcome(seed: int, key: str, mix: dict[str, float] = MIX) -> str:
    """The outcome of one record: set by the seed and the record's query, drawn with the mix's probabilities."""
    u = int.from_bytes(hashlib.blake2b(f"{seed}\0{key}".encode(), digest_size=8).digest(), "big") / 2.0 ** 64
    acc = 0.0
    for name in OUTCOMES:
        acc += mix.get(name, 0.0)
        if u < acc:
            return name
    return "ok"


def plan_wrong_codes(query: str) -> tuple[str, ...]:
    """The reject codes of the wrong plan for a plan request (its class's, as the real rules give them)."""
    from tests.factory.replay_plans import read_plan_query, wrong_codes

    return wrong_codes()[read_plan_query(query)[0].name]


def expected_counts(seed: int, queries, corpus: dict, mix: dict[str, float] = MIX, *, kind: str = "complexity"
                    ) -> dict[str, Counter]:
    """What a first run over `queries` must store: records by status, reject codes, teacher calls and retries."""
    status, codes = Counter(), Counter()
    retries = 0
    for q in queries:
        o = outcome(seed, q, mix)
        if o == "wrong" and kind != "routing":
            status["rejected"] += 1
            codes.update([corpus[base_query(q)]["code"]] if kind == "complexity" else plan_wrong_codes(q))
        elif o in ("unparseable", "length"):
            status["rejected"] += 1
            codes["PARSE001"] += 1  # half a JSON answer is not JSON either: `length` carries both codes
            codes["TRUNC001"] += o == "length"
        else:
            status["accepted"] += 1
            retries += o in ("429", "500")
    return {"status": status, "codes": codes, "retries": Counter(retries=retries)}


def schema_instance(schema: dict) -> object:
    """A value valid under a simple schema (the preflight's probe and spec checks)."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    t = schema.get("type")
    t = t[0] if isinstance(t, list) else t
    if t == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: schema_instance(props.get(k, {})) for k in schema.get("required", list(props))}
    if t == "array":
        return [schema_instance(schema.get("items", {})) for _ in range(max(1, schema.get("minItems", 1)))]
    if t == "string":
        return "general" if "pattern" in schema else "ok"
    if t in ("integer", "number"):
        return schema.get("minimum", 0)
    return False if t == "boolean" else None


def _request_schema(body: dict) -> dict:
    rf = body.get("response_format") or {}
    if rf.get("type") == "json_schema":
        return (rf.get("json_schema") or {}).get("schema") or {}
    if rf.get("type") == "json_object":
        return rf.get("schema") or {}
    if isinstance(body.get("structured_outputs"), dict):
        return body["structured_outputs"].get("json") or {}
    return body.get("guided_json") or {}


class ReplayServer:
    def __init__(self, corpus: dict, *, seed: int = 7, mix: dict[str, float] | None = None, model: str = "replay",
                 port: int = 0):
        self.corpus, self.seed, self.mix, self.model = corpus, seed, mix or MIX, model
        self.port = port
        self.served = Counter()  # outcome -> answers sent (statuses included), for a caller's cross-check
        self.attempts: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self.answered = threading.Event()  # set after each seed request answered (tests wait on it, never sleep)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- answers

    def answer(self, body: dict) -> tuple[int, dict, dict]:
        """(HTTP status, JSON body, extra headers) for one chat request."""
        if body.get("model") != self.model:
            return 404, {"error": {"message": f"model {body.get('model')} not found"}}, {}
        messages = body.get("messages") or []
        user = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
        m = _REQUEST.search(user)
        query = m.group(1).strip() if m else None
        base = base_query(query) if query else None
        schema = _request_schema(body)
        props = schema.get("properties", {}) if isinstance(schema, dict) else {}
        labelled = "experts" in props or "complexity" in props  # routing or complexity; else a plan
        finish = "stop"
        if base is None or (labelled and base not in self.corpus):
            text = json.dumps(schema_instance(schema))
        else:
            o = outcome(self.seed, query, self.mix)
            with self._lock:
                n = self.attempts[query] = self.attempts.get(query, 0) + 1
            self.served[o] += 1
            self.answered.set()
            if o in ("429", "500") and n == 1:
                code = int(o)
                return code, {"error": {"message": f"replay: injected {o}"}}, {"Retry-After": "0"} if code == 429 else {}
            text = self._content(schema, query, base, o)
            if o == "unparseable":
                text = "Sure! The label is " + text.replace("{", "").replace("}", "")
            elif o == "length":
                text, finish = text[: max(1, len(text) // 2)], "length"
        words = sum(len(str(x.get("content", "")).split()) for x in messages)
        return 200, {"id": "chatcmpl-replay", "object": "chat.completion", "model": self.model,
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": finish}],
                     "usage": {"prompt_tokens": words, "completion_tokens": max(1, len(text) // 4),
                               "total_tokens": words + max(1, len(text) // 4)}}, {}

    def _content(self, schema: dict, query: str, base: str, o: str) -> str:
        props = schema.get("properties", {})
        entry = self.corpus.get(base)
        if "experts" in props:  # routing (category) labels
            label = entry["label"] if entry else "moderate"
            return json.dumps({"experts": entry["experts"] if entry else ["general"], "complexity": label,
                               "web_research": False, "graphrag": False})
        if "complexity" in props:
            return json.dumps({"complexity": entry["wrong"] if o == "wrong" else entry["label"]})
        from tests.factory.replay_plans import plan_answer

        return json.dumps(plan_answer(query, o == "wrong"))

    # -- the HTTP server (asyncio, HTTP/1.1 keep-alive; only what an OpenAI client sends)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = 0
                for h in lines[1:]:
                    if h[:15].lower() == "content-length:":
                        length = int(h[15:])
                raw = await reader.readexactly(length) if length else b""
                path = path.rstrip("/")
                if method == "GET" and path == "/v1/models":
                    status, body, headers = 200, {"object": "list", "data": [{"id": self.model, "object": "model",
                                                                              "owned_by": "replay"}]}, {}
                elif method == "POST" and path == "/v1/chat/completions":
                    status, body, headers = self.answer(json.loads(raw or b"{}"))
                else:
                    status, body, headers = 404, {"error": "not found"}, {}
                payload = json.dumps(body).encode()
                extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: "
                             f"{len(payload)}\r\n{extra}\r\n".encode() + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _serve(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        async with self._server:
            await self._server.serve_forever()

    def start(self) -> "ReplayServer":
        def run():
            self._loop = asyncio.new_event_loop()
            try:
                self._loop.run_until_complete(self._serve())
            except asyncio.CancelledError:
                pass

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        self._ready.wait(30)
        return self

    def stop(self) -> None:
        if self._loop and self._server:
            self._loop.call_soon_threadsafe(self._server.close)
            for task in asyncio.all_tasks(self._loop):
                self._loop.call_soon_threadsafe(task.cancel)
        if self._thread:
            self._thread.join(10)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--model", default="replay")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))  # run as a script: the plan classes are tests.factory.replay_plans
    server = ReplayServer(build_corpus(), seed=args.seed, model=args.model, port=args.port)
    server.start()
    print(f"replay server on {server.url}", flush=True)
    server._thread.join()


if __name__ == "__main__":
    main()
