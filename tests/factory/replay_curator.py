"""Bespoke Curator against the replay teacher (bench/scale.py runs this with Curator's own Python, never the project's):
the complexity requests of a seeds file, with the same schema and the same requests in flight as `mashbill generate`.
Prints one JSON line: rows returned, rows parsed, wall seconds.

    ~/.cache/mashbill-curator-venv/bin/python tests/factory/replay_curator.py --url URL --seeds S.jsonl --n 20000
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Literal


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--in-flight", type=int, default=32)
    args = ap.parse_args()
    os.environ.setdefault("CURATOR_CACHE_DIR", tempfile.mkdtemp(prefix="curator-"))
    from bespokelabs import curator
    from bespokelabs.curator.request_processor.online import openai_online_request_processor as oorp
    from datasets import Dataset
    from pydantic import BaseModel

    class FourCharsATokenEncoding:
        """Curator counts tokens (for its rate limiter only) with tiktoken's cl100k_base, which it downloads; with
        no network here, a token is 4 characters (Curator's own fallback)."""

        def encode(self, text, **kwargs):
            return range(max(1, len(str(text)) // 4))

    oorp.OpenAIOnlineRequestProcessor.get_token_encoding = lambda self: FourCharsATokenEncoding()

    class Complexity(BaseModel):
        complexity: Literal["trivial", "moderate", "complex", "memory_recall"]

    class Labeler(curator.LLM):
        response_format = Complexity

        def prompt(self, row):
            return [{"role": "system", "content": "Label the request's complexity."},
                    {"role": "user", "content": f"A\n\nRequest: {row['query']}"}]

        def parse(self, row, response):
            return {"query": row["query"], "complexity": response.complexity}

    with open(args.seeds, encoding="utf-8") as f:
        rows = [json.loads(line) for _, line in zip(range(args.n), f)]
    llm = Labeler(model_name="replay", backend="openai",
                  generation_params={"temperature": 0.0, "max_tokens": 96},
                  backend_params={"base_url": args.url, "api_key": "replay", "max_concurrent_requests": args.in_flight,
                                  "max_requests_per_minute": 10_000_000, "max_tokens_per_minute": 10_000_000_000,
                                  "max_retries": 2, "require_all_responses": False,
                                  "seconds_to_pause_on_rate_limit": 1, "request_timeout": 30})
    t0 = time.perf_counter()
    out = llm(Dataset.from_list(rows))
    wall = time.perf_counter() - t0
    ds = getattr(out, "dataset", out)
    parsed = sum(1 for r in ds if r.get("complexity"))
    print(json.dumps({"requests": len(rows), "rows": len(ds), "parsed": parsed, "wall_s": wall}))


if __name__ == "__main__":
    main()
