"""bench/yield.py --dd: NeMo Data Designer's correction loop on the same requests, prompts, schema and server.

- The requests: our prompt rendered for each request exactly as the single-shot method renders it (the same
  framing, system and user turn: `SpecWork.prompt(job).teacher_messages`), written to a JSONL file that DD reads
  as its seed dataset (bench/yield_dd_run.py, run with DD's own python: `--dd-python`, default
  ~/.cache/mashbill-dd-venv/bin/python; `python -m venv` it and `pip install data-designer==0.9.7`).
- The teacher: the same llama.cpp server as `--teacher server`, through a timing proxy on 127.0.0.1 that forwards
  every request and keeps its latency, tokens and finish reason, so DD's teacher seconds are counted as ours are
  (the sum of call latencies, one call in flight), not guessed from its wall time.
- The score: a DD row counts as accepted only if our record checker (the spec's schema and rule set) accepts its
  output, and right if that output's label is the yardstick's; so precision is comparable with ours. A request
  whose row DD dropped (its correction loop gave up) counts as asked and not accepted.

Where DD cannot run (no environment, an import or configuration error, a failed create), `run_dd` prints where it
stopped and returns {"stopped": ...}; the bench then prints `n/a` for DD's fields.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DD_PY = Path.home() / ".cache" / "mashbill-dd-venv" / "bin" / "python"
DD_SCRIPT = Path(__file__).resolve().parent / "yield_dd_run.py"
DD_MAX_TOKENS = 64  # DD decodes unconstrained and wraps its JSON in a ```json fence: more room than our 16 tokens


def dd_requests(rs, rows: list[dict], work=None) -> list[dict]:
    """One {"i", "query", "system", "user", "meta"} per yardstick row: the prompt our single shot sends for it
    (`work`: the single-shot method's work, default the spec's own)."""
    from mashbill.factory.generate.work import SpecWork

    work = work or SpecWork(rs)
    by_query = {job.inputs["query"]: job for job in work.jobs()}
    out = []
    for i, row in enumerate(rows):
        job = by_query[row["query"]]
        prompt = work.prompt(job)
        msgs = {m["role"]: m["content"] for m in prompt.teacher_messages}
        out.append({"i": i, "query": row["query"], "system": msgs.get("system", ""), "user": msgs["user"],
                    "inputs": job.inputs, "meta": {**prompt.meta(), "lang": job.inputs.get("lang")}})
    return out


def read_dd_rows(path: Path) -> dict[int, dict]:
    """DD's rows as written by yield_dd_run.py: request index -> {"output", "calls", "trace"}; `calls` counts the
    assistant turns of the row's conversation (1 + the corrections DD asked for)."""
    rows = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        rec = json.loads(line)
        if not isinstance(rec.get("i"), int):
            raise ValueError(f"{path}:{n}: field 'i' is not a request index")
        trace = rec.get("trace") or []
        output = rec.get("output")
        rows[rec["i"]] = {"output": output if isinstance(output, dict) else None, "trace": trace,
                          "calls": sum(1 for m in trace if isinstance(m, dict) and m.get("role") == "assistant")}
    return rows


def score_dd(dd_rows: dict[int, dict], requests: list[dict], checker, gold: dict[str, str], field: str,
             calls: list[dict]) -> dict:
    """DD's outputs through our record checker and the yardstick, with the teacher seconds the proxy counted."""
    accepted = right = 0
    codes: dict[str, int] = {}
    corrected = 0
    for req in requests:
        row = dd_rows.get(req["i"])
        if row is None or row["output"] is None:
            codes["DD_DROPPED"] = codes.get("DD_DROPPED", 0) + 1
            continue
        corrected += row["calls"] > 1
        rejects = [v.code for v in checker.check(req["inputs"], row["output"], req["meta"]) if v.severity == "reject"]
        for c in set(rejects):
            codes[c] = codes.get(c, 0) + 1
        if rejects:
            continue
        accepted += 1
        right += row["output"].get(field) == gold[req["query"]]
    n = len(requests)
    teacher_s = sum(c["latency_s"] for c in calls)
    tokens = sum(c.get("prompt_tokens", 0) + c.get("completion_tokens", 0) for c in calls)
    return {"method": "dd", "requests": n, "rows": sum(1 for r in requests if r["i"] in dd_rows),
            "accepted": accepted, "right": right, "accepted_share": accepted / n if n else 0.0,
            "precision": right / accepted if accepted else 0.0, "right_per_100": 100 * right / n if n else 0.0,
            "calls": len(calls), "teacher_s": teacher_s, "tokens": tokens, "corrected_rows": corrected,
            "teacher_s_per_right": teacher_s / right if right else None,
            "tokens_per_right": tokens / right if right else None, "codes": dict(sorted(codes.items()))}


class TimingProxy:
    """A loopback HTTP proxy to an OpenAI-compatible server that times every POST (one line per call in `calls`)."""

    def __init__(self, upstream: str, *, flatten: bool = True):
        import httpx

        self.upstream = upstream.rstrip("/")
        self.flatten = flatten
        self.flattened = 0  # messages whose content parts were joined into one string
        self.calls: list[dict] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=900)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else None
                if body and proxy.flatten:
                    body = proxy._flatten(body)
                path = self.path[3:] if self.path.startswith("/v1") else self.path
                t0 = time.perf_counter()
                r = proxy._client.request(method, proxy.upstream + path, content=body,
                                          headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
                latency = time.perf_counter() - t0
                if method == "POST":
                    proxy._note(path, r, latency, body)
                data = r.content
                self.send_response(r.status_code)
                self.send_header("Content-Type", r.headers.get("content-type", "application/json"))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._forward("GET")

            def do_POST(self):
                self._forward("POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _flatten(self, body: bytes) -> bytes:
        """DD sends every message's content as a list of parts ([{"type": "text", "text": ...}]), which the OpenAI
        API allows but llama-cpp-python's server refuses for system messages (HTTP 500, "Input should be a valid
        string"): join text-only part lists into the one string they spell; nothing else changes."""
        try:
            data = json.loads(body)
        except ValueError:
            return body
        n = 0
        for m in data.get("messages") or []:
            parts = m.get("content")
            if isinstance(parts, list) and parts and all(isinstance(p, dict) and p.get("type") == "text" for p in parts):
                m["content"] = "".join(p.get("text", "") for p in parts)
                n += 1
        if not n:
            return body
        with self._lock:
            self.flattened += n
        return json.dumps(data, ensure_ascii=False).encode("utf-8")

    def _note(self, path: str, r, latency: float, sent: bytes | None) -> None:
        call = {"path": path, "status": r.status_code, "latency_s": latency, "health_check": _is_health_check(sent)}
        if r.status_code != 200:  # what was asked and what the server said, to show where a peer stops
            call.update(sent=(sent or b"")[:1500].decode("utf-8", "replace"), answer=r.text[:600])
        try:
            body = r.json()
            usage = body.get("usage") or {}
            choice = (body.get("choices") or [{}])[0]
            call.update(prompt_tokens=usage.get("prompt_tokens", 0), completion_tokens=usage.get("completion_tokens", 0),
                        finish_reason=choice.get("finish_reason"), text=((choice.get("message") or {}).get("content")
                                                                         or "")[:400])
        except (ValueError, AttributeError):
            pass
        with self._lock:
            self.calls.append(call)

    def __enter__(self) -> "TimingProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()


SETUPS = ("prompted", "constrained")


def run_dd(args, rows: list[dict], spec_path: Path, folder: Path, setup: str = "prompted", work=None) -> dict:
    """DD against the bench's server on `rows`; prints its line (or where it stopped) and returns its results.
    setup `prompted`: DD as its documentation sets it up (the schema in the prompt, DD parses and corrects);
    `constrained`: the schema also sent for the server to enforce, through DD's `extra_body`."""
    name = f"dd-{setup}"
    from mashbill.specs import load_spec
    from mashbill.validators.checker import RecordChecker

    python = Path(args.dd_python or DD_PY)
    if not python.exists():
        return _stopped(name, f"no Data Designer environment at {python} (python -m venv it; pip install "
                        "data-designer==0.9.7)")
    rs = load_spec(spec_path)
    folder.mkdir(parents=True, exist_ok=True)
    requests = dd_requests(rs, rows, work)
    req_file = folder / "requests.jsonl"
    req_file.write_text("".join(json.dumps({k: r[k] for k in ("i", "system", "user")}, ensure_ascii=False) + "\n"
                                for r in requests), encoding="utf-8")
    schema_file = folder / "schema.json"
    schema_file.write_text(json.dumps(rs.output_schema), encoding="utf-8")
    sampling = rs.spec.teacher.sampling
    with TimingProxy(args.server_url, flatten=not getattr(args, "dd_as_sent", False)) as proxy:
        cmd = [str(python), str(DD_SCRIPT), "--requests", str(req_file), "--schema", str(schema_file),
               "--url", proxy.url, "--model", "smollm2", "--out", str(folder),
               "--correction-steps", str(args.attempts), "--temperature", str(sampling.temperature),
               "--top-p", str(sampling.top_p), "--max-tokens", str(DD_MAX_TOKENS), "--seed", str(sampling.seed),
               *(["--constrained"] if setup == "constrained" else [])]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=folder,
                              env={**os.environ, "PYTHONPATH": "", "NO_COLOR": "1"})
        calls = [c for c in proxy.calls if c["path"].endswith("/chat/completions")]
        flattened = proxy.flattened
    (folder / "dd_calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls), encoding="utf-8")
    (folder / "dd_stderr.log").write_text(proc.stderr, encoding="utf-8")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    info = json.loads(lines[-1]) if lines else {}
    asked = [c for c in calls if not c["health_check"]]  # DD's health check ("Hello!") is not a request of ours
    if proc.returncode != 0 or not info.get("ok"):
        where = info.get("stage", "start")
        why = info.get("error") or (proc.stderr or proc.stdout).strip()[-600:]
        if not (where == "create" and asked and all(c["status"] == 200 for c in asked)):
            refused = next((c for c in calls if c["status"] != 200), None)
            server = (f"\n        the server answered HTTP {refused['status']}"
                      f"{' to its health check' if refused['health_check'] else ''}: {refused.get('answer', '')[:300]}"
                      if refused else "")
            return _stopped(name, f"stopped at {where} (exit {proc.returncode}): {why}{server}")
        # create raises when every row was dropped; the requests were asked and answered: none kept
        print(f"{name:7s} Data Designer kept no row: {why.splitlines()[0][:300]}")
        (folder / "dd_rows.jsonl").write_text("", encoding="utf-8")
    out_dir = getattr(args, "dd_keep", None)
    if out_dir:  # keep the real outputs (bench/checks reads a recorded one)
        keep = Path(out_dir) / setup
        keep.mkdir(parents=True, exist_ok=True)
        for f in ("requests.jsonl", "dd_rows.jsonl", "dd_calls.jsonl"):
            (keep / f).write_bytes((folder / f).read_bytes())
    gold = {r["query"]: r["label"] for r in rows}
    res = score_dd(read_dd_rows(folder / "dd_rows.jsonl"), requests, RecordChecker.for_spec(rs), gold,
                   "complexity", asked)
    res["method"], res["version"], res["wall_s"] = name, info.get("version"), info.get("wall_s")
    per_s = f"{res['teacher_s_per_right']:.2f}" if res["teacher_s_per_right"] else "n/a"
    wall = f"{res['wall_s']:.1f}" if res["wall_s"] else "n/a"
    print(f"{name:7s} accepted {res['accepted']}/{res['requests']} ({res['accepted_share']:.3f}) precision "
          f"{res['precision']:.3f} right/100 {res['right_per_100']:.1f} calls {res['calls']} teacher_s "
          f"{res['teacher_s']:.1f} teacher_s/right {per_s} tokens/right "
          f"{res['tokens_per_right'] and round(res['tokens_per_right'])}")
    print(f"        data-designer {res['version']}: {res['rows']} rows kept of {res['requests']}, "
          f"{res['corrected_rows']} after a correction (max_correction_steps={args.attempts}, restarts 0), "
          f"wall {wall}s; not accepted by our checker: "
          f"{json.dumps(res['codes'])}; {flattened} message(s) flattened for llama-cpp-python's server")
    return res


def _is_health_check(sent: bytes | None) -> bool:
    """DD's model health check: a system "You are a helpful assistant." and a user "Hello!" (data_designer's
    engine/models/registry.py), asked once before generation."""
    try:
        msgs = json.loads(sent or b"{}").get("messages") or []
    except (ValueError, AttributeError):
        return False
    texts = [m.get("content") if isinstance(m.get("content"), str) else
             "".join(p.get("text", "") for p in m.get("content") or [] if isinstance(p, dict)) for m in msgs]
    return texts == ["You are a helpful assistant.", "Hello!"]


def _stopped(name: str, why: str) -> dict:
    print(f"{name:7s} Data Designer did not run: {why}")
    return {"method": name, "stopped": why}
