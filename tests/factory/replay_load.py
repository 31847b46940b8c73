"""Requests per second a replay server answers (bench/scale.py prints it; the generate loop is not in the way):
`concurrency` keep-alive connections each send complexity requests back to back for `seconds`."""

from __future__ import annotations

import asyncio
import json
import time


async def _client(port: int, body: bytes, stop_at: float, counts: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    try:
        while time.perf_counter() < stop_at:
            writer.write(req)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            counts[0] += 1
    finally:
        writer.close()


def requests_per_s(port: int, query: str, *, concurrency: int = 16, seconds: float = 3.0, model: str = "replay") -> float:
    schema = {"type": "object", "properties": {"complexity": {"type": "string"}}, "required": ["complexity"]}
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": f"A\n\nRequest: {query}"}],
                       "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": schema}}
                       }).encode()
    counts = [0]

    async def run():
        stop_at = time.perf_counter() + seconds
        await asyncio.gather(*(_client(port, body, stop_at, counts) for _ in range(concurrency)))

    t0 = time.perf_counter()
    asyncio.run(run())
    return counts[0] / (time.perf_counter() - t0)
