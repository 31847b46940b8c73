"""An OpenAI-compatible chat-completions server on 127.0.0.1 that answers deterministically and
injects faults on a schedule. Test infrastructure: it stands in for a flaky vLLM/llama.cpp server.

Answers follow the JSON Schema the request carries (any of the ways `structured_fields` sends one),
built from the schema and a hash of the last user message (and, with `by_seed`, the sampling seed),
so the same request always gets the same answer. `schedule(key, attempt)` (key: the last user message; attempt: 1, 2, ... per key)
names the fault for that attempt, or None:

  500       HTTP 500 with an error body
  429       HTTP 429 with `Retry-After: <retry_after>`
  hang      sleep `hang_s` before answering (past the client's timeout)
  close     close the connection without answering
  nonjson   HTTP 200 with an HTML body
  schema    a normal answer whose content violates the schema
  truncate  half an answer with finish_reason "length"
  prose     ignore the schema and answer in prose
  runaway   a degenerate answer, one of RUNAWAY by the request's seed index (else by a hash of the key): "[" until
            the token limit (finish_reason "length"), digits until the token limit, NaN where a value belongs, a
            value nested 70 levels deep, a lone surrogate escaped in the answer's JSON, and one escaped in the
            reply's (so the client's text holds it)
  slow      sleep `slow_s`, then answer normally
  hold      wait until the test sets `server.gate`, then answer normally

Run standalone: python fault_server.py --port 8000 --model fault-model [--delay 0.01]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

try:
    from tests.factory.teacher_helpers import tag
except ImportError:  # run as a script (tests/factory/test_slurm.py): its own folder is on the path
    from teacher_helpers import tag

FAULTS = ("500", "429", "hang", "close", "nonjson", "schema", "truncate", "prose", "slow", "hold", "runaway")
# (content, finish_reason) of the `runaway` fault: what a small model stuck in a loop, or a hostile server, sends
RUNAWAY = (("[" * 5000, "length"), ("1" * 5000, "length"), ('{"value": NaN}', "stop"),
           ('{"value": ' + "[" * 70 + "1" + "]" * 70 + "}", "stop"), ('{"value": "\\ud800 x"}', "stop"),
           ('{"value": "\ud800 raw"}', "stop"))


def instance(schema: dict, seed: str, name: str = "") -> object:
    """A small value valid under the (simple) schema, varying with seed."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][int(seed[:8], 16) % len(schema["enum"])]
    t = schema.get("type")
    if isinstance(t, list):
        t = t[0]
    if t == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: instance(props.get(k, {}), seed, k) for k in schema.get("required", list(props))}
    if t == "array":
        return [instance(schema.get("items", {}), seed) for _ in range(max(1, schema.get("minItems", 1)))]
    if t == "string":
        if name == "category" or "pattern" in schema:
            return "general"
        return f"handle request {seed[:8]}"[: schema.get("maxLength", 80)]
    if t in ("integer", "number"):
        return schema.get("minimum", 0)
    if t == "boolean":
        return False
    return None


def request_schema(body: dict) -> dict | None:
    rf = body.get("response_format") or {}
    if rf.get("type") == "json_schema":
        return (rf.get("json_schema") or {}).get("schema")
    if rf.get("type") == "json_object" and "schema" in rf:
        return rf["schema"]
    if isinstance(body.get("structured_outputs"), dict):
        return body["structured_outputs"].get("json")
    return body.get("guided_json")


SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "seed", "max_tokens", "repeat_penalty", "repetition_penalty")


class FaultServer:
    def __init__(self, *, model: str = "fault-model", schedule: Callable[[str, int], str | None] | None = None,
                 delay_s: float = 0.0, hang_s: float = 3.0, slow_s: float = 0.5, retry_after: str = "1",
                 structured: bool = True, port: int = 0, log_file: str | None = None, by_seed: bool = False):
        self.model = model
        self.schedule = schedule or (lambda key, attempt: None)
        self.delay_s = delay_s
        self.hang_s = hang_s
        self.slow_s = slow_s
        self.retry_after = retry_after
        self.structured = structured
        self.by_seed = by_seed  # answers vary with the request's sampling seed too (best-of-n and vote samples)
        self.attempts: dict[str, int] = {}
        self.log: list[tuple[str, int, str | None]] = []  # (key, attempt, fault) per chat request
        self.sampling: list[dict] = []  # the sampling fields of each chat request, as sent
        self.messages: list[list[dict]] = []  # the messages of each chat request, as sent
        self.gate = threading.Event()  # releases requests scheduled to `hold`
        self.log_file = log_file  # one line per chat request, for tests that watch a server in another process
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "FaultServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.gate.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def next_attempt(self, key: str) -> tuple[int, str | None]:
        with self._lock:
            n = self.attempts.get(key, 0) + 1
            self.attempts[key] = n
            fault = self.schedule(key, n)
            self.log.append((key, n, fault))
            if self.log_file:
                with open(self.log_file, "a", encoding="utf-8") as f:
                    f.write(json.dumps([key, n, fault]) + "\n")
        return n, fault

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, code: int, body: bytes, ctype: str = "application/json", headers: dict | None = None):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    data = {"object": "list", "data": [{"id": server.model, "object": "model",
                                                        "owned_by": "fault-server"}]}
                    self._send(200, json.dumps(data).encode())
                else:
                    self._send(404, b'{"error": "not found"}')

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, b'{"error": "not found"}')
                if body.get("model") != server.model:
                    return self._send(404, json.dumps({"error": {"message": f"model {body.get('model')} not found"}})
                                      .encode())
                messages = body.get("messages") or []
                server.sampling.append({k: body[k] for k in SAMPLING_FIELDS if k in body})
                server.messages.append(messages)
                key = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
                _, fault = server.next_attempt(key)
                if server.delay_s:
                    time.sleep(server.delay_s)
                if fault == "500":
                    return self._send(500, b'{"error": {"message": "injected internal error"}}')
                if fault == "429":
                    return self._send(429, b'{"error": {"message": "injected rate limit"}}',
                                      headers={"Retry-After": server.retry_after})
                if fault == "close":
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if fault == "nonjson":
                    return self._send(200, b"<html><body>502 Bad Gateway (injected)</body></html>", "text/html")
                if fault in ("hang", "slow"):
                    time.sleep(server.hang_s if fault == "hang" else server.slow_s)
                if fault == "hold":
                    server.gate.wait(120)
                seed = hashlib.sha256((key + (f"\n{body.get('seed')}" if server.by_seed else "")).encode()).hexdigest()
                schema = request_schema(body) if server.structured else None
                finish = "stop"
                if fault == "prose" or schema is None:
                    text = "Hello! Here is what I would do: " + key[:40]
                elif fault == "schema":
                    text = json.dumps({"mashbill_fault": "schema violated"})
                else:
                    text = json.dumps(instance(schema, seed))
                if fault == "truncate":
                    text, finish = text[: max(1, len(text) // 2)], "length"
                if fault == "runaway":  # by the seed's index where the request has one: n requests in a row
                    # meet every shape, whatever the spec's hash (it holds the checkout's path) does to the keys
                    at = tag(key)
                    text, finish = RUNAWAY[(at if at is not None else int(seed[:8], 16)) % len(RUNAWAY)]
                words = sum(len(str(m.get("content", "")).split()) for m in messages)
                reply = {"id": "chatcmpl-" + seed[:12], "object": "chat.completion", "model": server.model,
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": finish}],
                         "usage": {"prompt_tokens": words, "completion_tokens": max(1, len(text) // 4),
                                   "total_tokens": words + max(1, len(text) // 4)}}
                self._send(200, json.dumps(reply).encode())

        return Handler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--model", default="fault-model")
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--no-structured", action="store_true")
    ap.add_argument("--log", help="append one line per chat request to this file")
    args = ap.parse_args()
    server = FaultServer(model=args.model, delay_s=args.delay, structured=not args.no_structured, port=args.port,
                         log_file=args.log)
    print(f"fault server on {server.url}", flush=True)
    server.httpd.serve_forever()


if __name__ == "__main__":
    main()
