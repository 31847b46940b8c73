"""A teacher behind any OpenAI-compatible chat-completions server: vLLM `serve`, llama.cpp's servers,
Ollama, TGI, SGLang.

- Async (httpx) on a background event loop, with at most `runtime.concurrency` requests in flight.
  `generate` is pipelined: it keeps the window full across the generate loop's batch boundaries.
- Retries on 429, 5xx, timeouts, dropped connections and unreadable 200s, with exponential backoff
  and jitter, never sooner than a `Retry-After` header asks. Every attempt is returned (as the
  teacher_calls row it becomes) with its error; other 4xx answers are not retried (the record fails with that error).
- Structured output: the spec's JSON Schema is sent the way the server expects (`runtime.
  structured_output`): OpenAI's `response_format: json_schema`, llama-cpp-python's
  `response_format: json_object + schema`, vLLM's `structured_outputs` or its older `guided_json`.
  `auto` finds the first one the server actually enforces, in the preflight.
- The finish reason is kept: `length` means the output was truncated (the generate loop rejects it
  with TRUNC001), never a success.
- Preflight (`check_schema`, before any bulk work): the server answers, it serves `teacher.model`
  (GET /models), it enforces a probe schema, and it accepts the spec's schema. Each failure is a
  one-line TeacherError that says what to fix.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import queue
import random
import re
import threading
import time
from datetime import datetime, timezone
from typing import Iterable, Iterator
from urllib.parse import urlsplit, urlunsplit

from mashbill.errors import TeacherError
from mashbill.factory.teachers.base import TeacherRequest, TeacherResult, attempt

log = logging.getLogger(__name__)

MODES = ("json_schema", "json_object", "structured_outputs", "guided_json")
NOT_RETRIED = {400, 401, 403, 404, 405, 413, 415, 422}  # the same request will get the same answer
MAX_RETRY_AFTER_S = 600.0

# A schema no model satisfies by chance: if the answer matches, the server enforced it.
PROBE_SCHEMA = {"type": "object", "properties": {"mashbill_probe": {"type": "string", "enum": ["ok-4417"]}},
                "required": ["mashbill_probe"], "additionalProperties": False}
PROBE_MESSAGES = [{"role": "user", "content": "Say hello."}]


def structured_fields(mode: str, schema: dict) -> dict:
    """The request fields that carry a JSON Schema, for each way servers accept one."""
    if mode == "json_schema":  # OpenAI; vLLM, llama.cpp's C++ server, Ollama, SGLang, LM Studio
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": "output", "schema": schema, "strict": True}}}
    if mode == "json_object":  # llama-cpp-python's server (and llama.cpp's C++ server)
        return {"response_format": {"type": "json_object", "schema": schema}}
    if mode == "structured_outputs":  # vLLM >= 0.10.2
        return {"structured_outputs": {"json": schema}}
    if mode == "guided_json":  # older vLLM
        return {"guided_json": schema}
    raise ValueError(f"unknown structured-output mode {mode!r}")


def _import_httpx():
    try:
        import httpx
    except ImportError:
        raise TeacherError("the openai teacher needs httpx: pip install 'mashbill[openai]'") from None
    return httpx


def normalize_base_url(url: str) -> str:
    """'http://host:8000' -> 'http://host:8000/v1'; a URL with a path is kept as given (without a trailing /)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise TeacherError(f"teacher base_url {redact_url(url)!r} is not an http(s) URL (expected e.g. "
                           "http://127.0.0.1:8000/v1)")
    path = parts.path.rstrip("/") or "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def redact_url(text: str) -> str:
    """Hide credentials written into a URL (`http://user:key@host/v1` -> `http://***@host/v1`): they never
    reach an error line, a log or the store."""
    return _USERINFO.sub("***@", text)


def retry_after_s(value: str | None) -> float | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return None
    try:
        return min(max(0.0, float(value)), MAX_RETRY_AFTER_S)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return min(max(0.0, (when - datetime.now(timezone.utc)).total_seconds()), MAX_RETRY_AFTER_S)


def _snippet(text: str, n: int = 200) -> str:
    text = " ".join((text or "").split())
    return text[:n] + ("..." if len(text) > n else "")


def parse_completion(body) -> tuple[str, str | None, dict, str | None]:
    """(text, finish_reason, usage, reported model) from a chat-completions body; ValueError if malformed."""
    if not isinstance(body, dict):
        raise ValueError(f"expected a JSON object, found {type(body).__name__}")
    if "error" in body and "choices" not in body:
        raise ValueError(f"error body: {_snippet(json.dumps(body['error']))}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("no choices in the response")
    message = choices[0].get("message") or {}
    text = message.get("content")
    if text is not None and not isinstance(text, str):
        raise ValueError(f"message content is {type(text).__name__}, not text")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    return text or "", choices[0].get("finish_reason"), usage, body.get("model")


class OpenAITeacher:
    backend = "openai"

    def __init__(self, teacher_spec, *, runtime=None, base_url: str | None = None, concurrency: int | None = None,
                 api_key: str | None = None, threads: int | None = None):
        from mashbill.specs.model import Runtime

        httpx = _import_httpx()
        rt = runtime or Runtime()
        url = base_url or teacher_spec.base_url  # the CLI's --base-url (or MASHBILL_TEACHER_URL), else the spec's
        if not url:
            raise TeacherError("teacher.backend is 'openai' but no server URL is set: give teacher.base_url in the "
                               "spec, --base-url, or MASHBILL_TEACHER_URL (e.g. http://127.0.0.1:8000/v1)")
        self.spec = teacher_spec
        self.model = teacher_spec.model
        self.base_url = normalize_base_url(url)
        self.shown_url = redact_url(self.base_url)  # what messages and the run's model_info show
        self.concurrency = concurrency or rt.concurrency
        self.timeout_s = rt.timeout_s
        self.max_retries = rt.max_retries
        self.backoff_s = rt.backoff_s
        self.backoff_max_s = rt.backoff_max_s
        self.mode = rt.structured_output
        self.api_key_env = rt.api_key_env
        key = api_key if api_key is not None else os.environ.get(rt.api_key_env)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._httpx = httpx
        self._rng = random.Random()
        self._server: dict = {}
        self._checked: set[str] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mashbill-openai", daemon=True)
        self._thread.start()
        limits = httpx.Limits(max_connections=self.concurrency + 2, max_keepalive_connections=self.concurrency + 2)
        timeout = httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0))

        async def make_client():
            return httpx.AsyncClient(headers=headers, limits=limits, timeout=timeout)

        self._client = self._run(make_client())

    # ------------------------------------------------------------ plumbing

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        if not self._thread.is_alive():
            return

        async def shutdown():
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._client.aclose()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout=10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def info(self) -> dict:
        return {"backend": self.backend, "model": self.model, "revision": self.spec.revision,
                "base_url": self.shown_url, "structured_output": self.mode, "server": dict(self._server),
                "concurrency": self.concurrency, "timeout_s": self.timeout_s, "max_retries": self.max_retries}

    def payload(self, messages: list[dict], schema: dict | None, sampling: dict, mode: str | None) -> dict:
        p = {"model": self.model, "messages": messages, "temperature": sampling["temperature"],
             "top_p": sampling["top_p"], "max_tokens": sampling["max_tokens"], "seed": sampling["seed"],
             "stream": False}
        if sampling.get("top_k"):
            p["top_k"] = sampling["top_k"]
        if "repeat_penalty" in sampling:  # sent at 1.0 too: llama.cpp's server would apply its own default 1.1
            p["repetition_penalty"] = sampling["repeat_penalty"]  # vLLM, TGI
            p["repeat_penalty"] = sampling["repeat_penalty"]  # llama.cpp
        if schema is not None and mode and mode != "auto":
            p.update(structured_fields(mode, schema))
        return p

    @property
    def _chat_url(self) -> str:
        return self.base_url + "/chat/completions"

    # ------------------------------------------------------------ preflight

    def check_schema(self, schema: dict | None) -> None:
        """Preflight before any bulk work: reachable, serves the model, enforces structured output."""
        schema = schema if self.spec.constrained else None
        key = json.dumps(schema, sort_keys=True)
        if key in self._checked:
            return
        self._run(self._preflight(schema))
        self._checked.add(key)

    preflight = check_schema

    async def _preflight(self, schema: dict | None) -> None:
        await self._check_models()
        if schema is not None:
            await self._check_structured()
            await self._check_spec_schema(schema)
        else:
            await self._check_chat()

    async def _check_chat(self) -> None:
        """Unconstrained: one tiny completion, for the model name the server reports."""
        sampling = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 1, "seed": 0}
        r = await self._post_check(self.payload(PROBE_MESSAGES, None, sampling, None), "chat check")
        if r.status_code != 200:
            raise TeacherError(f"the teacher server at {self.shown_url} answered HTTP {r.status_code} to a chat "
                               f"completion for '{self.model}': {_snippet(r.text, 200)}")
        try:
            self._server["reported_model"] = parse_completion(r.json())[3]
        except ValueError as exc:
            raise TeacherError(f"the teacher server at {self.shown_url} did not return a chat completion: "
                               f"{_snippet(str(exc), 120)}") from None

    async def _get(self, url: str, what: str):
        httpx = self._httpx
        try:
            return await self._client.get(url, timeout=min(self.timeout_s, 15.0))
        except httpx.ConnectError as exc:
            raise TeacherError(f"cannot reach the teacher server at {self.shown_url} ({_reason(exc)}); is it running? "
                               "Check teacher.base_url in the spec or --base-url") from None
        except httpx.TimeoutException:
            raise TeacherError(f"the teacher server at {self.shown_url} did not answer {what} within "
                               f"{min(self.timeout_s, 15.0):g}s") from None
        except httpx.HTTPError as exc:
            raise TeacherError(f"{what} at {self.shown_url} failed: {_reason(exc)}") from None

    async def _check_models(self) -> None:
        r = await self._get(self.base_url + "/models", "GET /models")
        if r.status_code in (401, 403):
            raise TeacherError(f"the teacher server at {self.shown_url} refused the API key (HTTP {r.status_code}); "
                               f"set ${self.api_key_env}")
        if r.status_code != 200:
            raise TeacherError(f"GET {self.shown_url}/models answered HTTP {r.status_code} ({_snippet(r.text, 120)}); "
                               "is this an OpenAI-compatible server? The URL usually ends in /v1")
        try:
            entries = r.json()["data"]
            ids = [m["id"] for m in entries]
        except (ValueError, KeyError, TypeError):
            raise TeacherError(f"GET {self.shown_url}/models did not return an OpenAI model list: "
                               f"{_snippet(r.text, 120)}") from None
        if self.model not in ids:
            raise TeacherError(f"the teacher server at {self.shown_url} does not serve model '{self.model}' "
                               f"(teacher.model); it serves: {', '.join(ids) or 'no models'}")
        entry = next(m for m in entries if m["id"] == self.model)
        self._server["models"] = ids
        self._server["model_entry"] = {k: v for k, v in entry.items() if k != "permission"}
        root = self.base_url.rsplit("/v1", 1)[0] if self.base_url.endswith("/v1") else None
        if root:  # vLLM tells its version; other servers may 404, which is fine
            try:
                v = await self._client.get(root + "/version", timeout=3.0)
                if v.status_code == 200 and isinstance(v.json(), dict) and "version" in v.json():
                    self._server["version"] = v.json()["version"]
            except (self._httpx.HTTPError, ValueError):
                pass

    async def _post_check(self, payload: dict, what: str):
        httpx = self._httpx
        try:
            return await self._client.post(self._chat_url, json=payload)
        except httpx.TimeoutException:
            raise TeacherError(f"the teacher server at {self.shown_url} did not answer the {what} within "
                               f"{self.timeout_s:g}s (runtime.timeout_s)") from None
        except httpx.HTTPError as exc:
            raise TeacherError(f"the {what} request to {self.shown_url} failed: {_reason(exc)}") from None

    async def _check_structured(self) -> None:
        import jsonschema

        modes = list(MODES) if self.mode == "auto" else [self.mode]
        sampling = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 48, "seed": 0}
        tried = []
        for mode in modes:
            r = await self._post_check(self.payload(PROBE_MESSAGES, PROBE_SCHEMA, sampling, mode),
                                       "structured-output check")
            if r.status_code in (401, 403):
                raise TeacherError(f"the teacher server at {self.shown_url} refused the API key (HTTP "
                                   f"{r.status_code}); set ${self.api_key_env}")
            if r.status_code != 200:  # servers refuse an unknown format with 400, 422 or even 500
                tried.append(f"{mode}: HTTP {r.status_code} {_snippet(r.text, 100)}")
                continue
            try:
                text, finish, _, reported = parse_completion(r.json())
                ok = jsonschema.Draft202012Validator(PROBE_SCHEMA).is_valid(json.loads(text))
            except ValueError as exc:
                tried.append(f"{mode}: unreadable answer ({_snippet(str(exc), 80)})")
                continue
            if ok:
                self.mode = mode
                self._server["structured_output"] = mode
                self._server["reported_model"] = reported
                body = r.json()
                if body.get("system_fingerprint"):
                    self._server["system_fingerprint"] = body["system_fingerprint"]
                return
            tried.append(f"{mode}: ignored, answered {_snippet(text, 60)!r}")
        raise TeacherError(f"the teacher server at {self.shown_url} does not enforce structured output for model "
                           f"'{self.model}' (tried {'; '.join(tried)}). Use a server with JSON-Schema support "
                           "(vLLM, llama.cpp), set runtime.structured_output, or set teacher.constrained: false")

    async def _check_spec_schema(self, schema: dict) -> None:
        sampling = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 4, "seed": 0}
        r = await self._post_check(self.payload(PROBE_MESSAGES, schema, sampling, self.mode), "output-schema check")
        if r.status_code != 200:
            raise TeacherError(f"the teacher server at {self.shown_url} refused the spec's output schema with "
                               f"structured_output={self.mode} (HTTP {r.status_code}): {_snippet(r.text, 200)}")

    # ------------------------------------------------------------ generation

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with equal jitter; never shorter than the server's Retry-After."""
        cap = min(self.backoff_max_s, self.backoff_s * (2 ** attempt))
        delay = cap / 2 + self._rng.random() * cap / 2
        return max(delay, retry_after) if retry_after is not None else delay

    async def _one(self, req: TeacherRequest) -> TeacherResult:
        httpx = self._httpx
        payload = self.payload(list(req.messages), req.schema, req.sampling, self.mode)
        attempts: list = []
        for tried in range(self.max_retries + 1):
            start = time.perf_counter()
            retry_after = None
            try:
                r = await self._client.post(self._chat_url, json=payload)
            except httpx.TimeoutException as exc:
                error = f"timeout after {self.timeout_s:g}s ({type(exc).__name__})"
            except httpx.HTTPError as exc:
                error = f"connection error ({_reason(exc)})"
            else:
                latency = time.perf_counter() - start
                if r.status_code == 200:
                    try:
                        text, finish, usage, _ = parse_completion(r.json())
                    except ValueError as exc:
                        error = f"bad response: {_snippet(str(exc), 120)} (body: {_snippet(r.text, 80)!r})"
                    else:
                        details = usage.get("prompt_tokens_details") or {}
                        attempts.append(attempt(req, self, latency, usage.get("prompt_tokens"),
                                                details.get("cached_tokens"), usage.get("completion_tokens"), finish,
                                                n=tried + 1))
                        return TeacherResult(req, text, finish, attempts)
                else:
                    error = f"HTTP {r.status_code}: {_snippet(r.text, 200)}"
                    if r.status_code in NOT_RETRIED:
                        attempts.append(attempt(req, self, latency, error=error, n=tried + 1))
                        return TeacherResult(req, None, None, attempts, error=error)
                    retry_after = retry_after_s(r.headers.get("retry-after"))
            attempts.append(attempt(req, self, time.perf_counter() - start, error=error, n=tried + 1))
            if tried < self.max_retries:
                await asyncio.sleep(self._delay(tried, retry_after))
        return TeacherResult(req, None, None, attempts, error=attempts[-1].error)

    def generate(self, requests: Iterable[TeacherRequest]) -> Iterator[TeacherResult]:
        """Yield results as they complete, keeping `concurrency` requests in flight; pulls requests lazily."""
        it = iter(requests)
        done: queue.SimpleQueue = queue.SimpleQueue()
        checked = self.mode != "auto"
        inflight: set = set()
        exhausted = False
        try:
            while True:
                while not exhausted and len(inflight) < self.concurrency:
                    try:
                        req = next(it)
                    except StopIteration:
                        exhausted = True
                        break
                    if not checked and req.schema is not None:
                        self.check_schema(req.schema)  # the caller skipped the preflight: learn the mode first
                        checked = True
                    fut = asyncio.run_coroutine_threadsafe(self._one(req), self._loop)
                    fut.add_done_callback(done.put)
                    inflight.add(fut)
                if not inflight:
                    return
                fut = done.get()
                inflight.discard(fut)
                yield fut.result()
        finally:
            for fut in inflight:
                fut.cancel()


def _reason(exc: BaseException) -> str:
    text = redact_url(str(exc).strip())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
