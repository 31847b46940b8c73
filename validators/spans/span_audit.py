"""The span audit: every run re-checks a sample of its examples two ways and fails on any difference.

1. The fast method against the naive one (a full render and tokenize of each sampled example, as the trainer does).
2. The naive method's tokenization against a second, independent tokenizer of the same texts: llama.cpp's own
   tokenizer (vocab-only) when the tokenizer came from a GGUF file, the ``tokenizers`` library reading the
   ``tokenizer.json`` directly when it came from a Hugging Face folder. Token ids must be identical, and the trained
   ranges recomputed from the second tokenizer's offsets must be the same, so that a converter regression cannot
   pass silently. A difference is a finding on that example (``SPAN011``, with a line in the report), never a
   crash; a second tokenizer that cannot run at all is one ``SpanAuditError`` naming the file or the row.

The sample is stratified by shape (plain-text rows, single-turn and multi-turn conversations, preference parts,
examples that failed to render) so that rare shapes are always in it, whatever their share.
"""

from __future__ import annotations

import logging
import random
from typing import Sequence

from mashbill.factory.records import Verdict
from mashbill.validators.errors import SpanAuditError
from mashbill.validators.spans.span_engine import SpanEngine, mask_ranges
from mashbill.validators.spans.span_rules import SpanResult, TrainingExample, merge_ranges

log = logging.getLogger(__name__)


def shape(ex: TrainingExample, res: SpanResult) -> tuple:
    """The stratum of an example in the audit sample."""
    if res.error is not None:
        kind = "error"
    elif not ex.conversational:
        kind = "text"
    elif sum(1 for m in ex.messages if m.get("role") == "assistant") > 1 or len(ex.messages) > 3:
        kind = "multi-turn"
    else:
        kind = "single-turn"
    return kind, ex.part


def stratified_sample(examples: Sequence[TrainingExample], results: Sequence[SpanResult], sample: int,
                      seed: int = 0) -> list[int]:
    """Indices to audit: every shape gets an equal share of half the sample (all of it when it is smaller), the
    rest is drawn at random from what is left. Deterministic for a seed."""
    return stratified_pick([shape(ex, res) for ex, res in zip(examples, results)], sample, seed)


def stratified_pick(shapes: Sequence[tuple], sample: int, seed: int = 0) -> list[int]:
    """``stratified_sample`` from each example's ``shape`` alone, so that a pass over batches keeps only the shapes."""
    n = len(shapes)
    if sample <= 0:
        return []
    if n <= sample:
        return list(range(n))
    rng = random.Random(seed)
    strata: dict[tuple, list[int]] = {}
    for i, sh in enumerate(shapes):
        strata.setdefault(sh, []).append(i)
    share = max(1, sample // (2 * len(strata)))
    picked: set[int] = set()
    for key in sorted(strata, key=str):
        idx = strata[key]
        picked.update(idx if len(idx) <= share else rng.sample(idx, share))
    rest = [i for i in range(n) if i not in picked]
    picked.update(rng.sample(rest, min(len(rest), max(0, sample - len(picked)))))
    return sorted(picked)


class _Second:
    """The independent tokenizer of the cross-check: encode(text, add_special) -> (ids, char offsets)."""

    def __init__(self, engine: SpanEngine):
        try:
            self._open(engine.loaded)
        except Exception as exc:  # the checker itself, not the data: one line
            raise SpanAuditError(f"span cross-check: the second tokenizer cannot read {engine.loaded.path}: "
                                 f"{_first_line(exc)}") from None

    def _open(self, loaded) -> None:
        self.name = None
        self.skipped = None
        source = loaded.facts.get("source")
        if source == "gguf":
            from mashbill.validators.tokenizers import llamacpp_vocab

            if not llamacpp_vocab.available():
                self.skipped = "llama-cpp-python is not installed (pip install 'mashbill[embedded]')"
                return
            self._vocab = llamacpp_vocab.LlamaCppVocab.open(loaded.path)
            self.name = "llama.cpp"
        elif source in ("hf-folder", "tokenizer.json"):
            from tokenizers import Tokenizer

            path = loaded.path if loaded.path.is_file() else loaded.path / "tokenizer.json"
            if not path.is_file():
                self.skipped = f"{loaded.path} has no tokenizer.json to read directly"
                return
            self._raw = Tokenizer.from_file(str(path))
            self.name = "tokenizers (tokenizer.json read directly)"
        else:
            self.skipped = "no second tokenizer for this source"

    def encode(self, text: str, add_special: bool) -> tuple[list[int], list[tuple[int, int]]]:
        if self.name == "llama.cpp":
            return self._vocab.encode(text, add_special)
        enc = self._raw.encode(text, add_special_tokens=add_special)
        return enc.ids, enc.offsets


def _second_result(engine: SpanEngine, second: _Second, ex: TrainingExample) -> tuple[bool, SpanResult]:
    """What the second tokenizer gives for an example: (same ids as the trainer's tokenizer?, total and ranges)."""
    p = engine.prepare(ex)
    add_special = not ex.conversational  # chat texts are tokenized without BOS/EOS (apply_chat_template's rule)
    ids, offsets = second.encode(p.text, add_special)
    same = ids == engine.tok(p.text, add_special_tokens=add_special)["input_ids"]
    if p.mode == "tail":
        start = len(second.encode(p.prompt_text, add_special)[0])
        ranges = merge_ranges([(start, len(ids))])
    else:
        ranges = merge_ranges(mask_ranges(offsets, p.spans, 0))
    return same, SpanResult(ex.key, len(ids), ranges, ex.part)


def audit(engine: SpanEngine, examples: Sequence[TrainingExample], fast: Sequence[SpanResult], *, sample: int,
          seed: int = 0) -> dict:
    """Re-run a stratified sample with the naive method and a second tokenizer. A difference between the fast and
    the naive method is a bug of ours: SpanAuditError. A difference with the second tokenizer is a finding: one
    ``SPAN011`` verdict per example in ``findings`` ((key, Verdict) pairs) and one report line each in ``lines``."""
    pick = stratified_sample(examples, fast, sample, seed)
    return audit_picked(engine, [examples[i] for i in pick], [fast[i] for i in pick])


def audit_picked(engine: SpanEngine, examples: Sequence[TrainingExample], fast: Sequence[SpanResult]) -> dict:
    """``audit`` of examples already picked (``stratified_pick``), with their fast results."""
    if not examples:
        return {"audited": 0, "mismatches": 0, "cross_check": None}
    bad = []
    for ex, res in zip(examples, fast):
        try:
            n = engine.naive(ex)
        except Exception as exc:  # not a finding on the data (those are RecordProblem verdicts): one line
            raise SpanAuditError(f"span audit: the full render and tokenize of {ex.key}"
                                 f"{_where(ex)} failed: {_first_line(exc)}") from None
        if n.signature() != res.signature():
            bad.append((ex.key, n.signature(), res.signature()))
    if bad:
        key, want, got = bad[0]
        raise SpanAuditError(f"span audit failed on {len(bad)} of {len(examples)} sampled examples; first {key}: "
                             f"full render gives total/ranges {want}, the fast method {got}")
    second = _Second(engine)
    cross = {"tokenizer": second.name, "compared": 0, "mismatches": 0, "skipped": second.skipped}
    findings: list[tuple[str, Verdict]] = []
    lines: list[str] = []
    if second.name is not None:
        for ex, res in zip(examples, fast):
            if res.error is not None:
                continue
            try:
                same_ids, other = _second_result(engine, second, ex)
            except Exception as exc:  # the checker itself failed on this row: one line naming it
                raise SpanAuditError(f"span cross-check could not run on {ex.key}{_where(ex)}: {second.name}: "
                                     f"{_first_line(exc)}") from None
            cross["compared"] += 1
            if same_ids and other.signature()[:2] == res.signature()[:2]:
                continue
            cross["mismatches"] += 1
            detail = (f"{second.name} gives {other.total} tokens with target ranges {list(other.ranges)}"
                      f"{'' if same_ids else ' and other token ids'}, the trainer's tokenizer {res.total} and "
                      f"{list(res.ranges)}{_where(ex)}: its span verdicts are not trusted")
            findings.append((ex.key, Verdict("SPAN011", "reject", detail, "validate")))
            lines.append(f"{ex.key}: span cross-check: {detail}")
    else:
        log.warning("span cross-check skipped: %s", second.skipped)
    return {"audited": len(examples), "mismatches": 0, "cross_check": cross, "findings": findings, "lines": lines}


def _where(ex: TrainingExample) -> str:
    return f" [{ex.part}]" if ex.part else ""


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
