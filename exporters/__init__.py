"""Exporters: trained students -> CPU artifacts with parity, verification and lineage, and the release gate.

- ``runs``: the run folder contract (lineage.json, model/ or adapter/) and the run's verified snapshot;
- ``onnx_export`` + ``parity``: classifier -> ONNX fp32/INT8, parity and latency on the eval split;
- ``gguf_export`` + ``gguf_meta`` + ``gguf_verify`` + ``modelfile``: LoRA -> merged -> GGUF F16/Q8_0/Q4_K_M,
  lineage in metadata, schema-constrained verification, an Ollama Modelfile;
- ``manifest``: export.json (spec hashes -> snapshot -> run -> artifacts with sha256) (atomic folders: mashbill.files);
- ``build``: the two export commands end to end; ``predict``: run an artifact; ``release``: gate, tags, verify.
"""
