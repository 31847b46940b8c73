"""Token-span coverage: does each training target survive the trainer's window, token for token?

For every example the trainer would see, the span gate renders it exactly as the trainer does, finds the tokens the
loss covers, and checks them against ``max_seq_len`` under the profile's truncation side. It is split by job:

- ``span_rules``: training examples, measured results and the verdict rules (``SPAN001``-``SPAN010``);
- ``chat_render``: rendering as ``apply_chat_template`` does and locating assistant turns (the only module that
  touches transformers' internals);
- ``span_pieces`` and ``span_policy``: cutting text where no token can span the cut, the piece-count cache, and the
  policy's self-check against the tokenizer;
- ``span_engine``: the naive (render and tokenize everything) and the fast (cached pieces) methods;
- ``span_audit``: every run re-checks a stratified sample with the naive method and with a second, independent
  tokenizer (llama.cpp's for a GGUF source) and fails on any difference.

The tokenizer is the trainer's own (``tokenizer``): a Hugging Face folder as is, or a GGUF's tokenizer rebuilt to
tokenize exactly as llama.cpp does (``gguf_tokenizer``, checked at load by ``llamacpp_vocab``). This module is the
public face of the gate: import from here.
"""

from __future__ import annotations

from mashbill.validators.spans.span_audit import audit, audit_picked, shape, stratified_pick, stratified_sample
from mashbill.validators.spans.span_engine import SpanEngine
from mashbill.validators.spans.span_pieces import CutPolicy, PieceCounter
from mashbill.validators.spans.span_policy import detect_policy
from mashbill.validators.spans.span_rules import (LOSS_MODES, RecordProblem, SpanOutcome, SpanResult, TrainingExample,
                                            is_correction, judge, merge_ranges)

__all__ = ["LOSS_MODES", "CutPolicy", "PieceCounter", "RecordProblem", "SpanEngine", "SpanOutcome", "SpanResult",
           "TrainingExample", "audit", "audit_picked", "detect_policy", "is_correction", "judge", "merge_ranges",
           "shape", "stratified_pick", "stratified_sample"]
