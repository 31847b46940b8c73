"""Commands over students: train, export, eval, predict, release.

- ``eval``: `mashbill eval TARGET --on SET...`: a student on labelled sets, beside the teacher's answers ...
- ``export``: `mashbill export onnx|gguf RUN`: a training run folder -> CPU artifacts with parity or ...
- ``predict``: `mashbill predict ARTIFACT TEXT|FILE`: run an exported student on the CPU, one JSON line per input.
- ``release``: `mashbill release check|tag|verify`: the release gate, tags with sha256, and tag verification.
- ``train``: `mashbill train`: preflight, validation ladder and thin TRL/PEFT trainers over frozen snapshots.
"""
