"""Exporters: trained students -> CPU artifacts with parity, verification and lineage, and the release gate.

- ``build``: `mashbill export onnx|gguf`: one run folder in, one verified export folder out (written whole ...
- ``evaluation/``: `mashbill eval`: a student on labelled sets, its metrics and its page.
- ``gguf/``: LoRA run -> merged model -> GGUF, its metadata, verification and Ollama Modelfile.
- ``manifest``: The export manifest: spec hashes -> snapshot id -> training run -> artifacts, each with its sha256.
- ``onnx/``: Classifier run -> ONNX (fp32, INT8) and its parity with PyTorch.
- ``predict``: Run an exported student on the CPU: an ONNX classifier or a GGUF planner, from the file alone.
- ``release``: The release gate, tags and tag verification.
- ``runs``: A training run folder as the exporters read it, and the snapshot it was trained on.
"""
