"""The factory: drives a teacher and stores every record, accepted or not.

- ``codes``: Every code the project emits, in one place: the code, its default severity, the layer that ...
- ``encoders/``: Query embeddings: one ONNX sentence encoder, built from safetensors, and its cache.
- ``generate/``: The generate loop: jobs, teacher calls, chains, repairs, guards, accounting, query synthesis ...
- ``migrations/``: The store's schema migrations (SQL files, shipped as package data).
- ``records``: The record: small, typed and immutable.
- ``router/``: Outcome tables for a model router: which model answered which query, at what cost.
- ``shards``: Sharded runs: which shard a record belongs to, and merging shard stores into one.
- ``slurm``: SLURM job scripts for a sharded run on GPU nodes: one vLLM server and one shard per array task.
- ``stats``: The one percentile summary: nearest-rank percentiles of a list of numbers.
- ``store``: The store: one DuckDB file (runs, records, verdicts, teacher calls, events) plus Parquet exports.
- ``store_queries``: The store's named reads (and the review write) that curation, review, reports, trainers and ...
- ``teachers/``: Teachers: the backends a generate run asks (embedded llama.cpp, OpenAI-compatible, vLLM) ...
- ``usable``: Is this record usable?
- ``verdict_examples``: A few example records per verdict code (the store's `Store.verdict_examples`), so a report
  can ...
"""
