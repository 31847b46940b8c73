"""The span engine: token totals and trained token ranges of training examples, by two methods that must agree.

``naive``: render and tokenize every full example, as the trainer does (~115 records/s on one core for a 3,300-token
Llama-3 example). ``fast``: cut the rendered text into pieces whose token counts add up (``span_pieces``), take the
counts of pieces seen before from the cache, and tokenize only the new ones; a piece that straddles a target
boundary is cut further at word cuts (where the policy allows them) and the part at the boundary is tokenized with
offsets. The counts a chunk reads are held by the chunk, so a refill of the cache (it is cleared when full) loses
none of them. Every record asserts that its pieces reassemble to the exact rendered text, and
every run re-renders a sample with the naive method (``span_audit``).

Which tokens the loss covers, per loss mode (TRL's rules):
- ``assistant-only``: every token overlapping an assistant turn (``chat_render`` finds them);
- ``last-turn``: the same, for the last assistant turn only;
- ``completion-only``: TRL's prompt-completion rule: everything after ``len(tokenize(prompt))``, the prompt rendered
  with the generation prompt. Plain-text rows (prompt + completion strings) always follow this rule.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate, chain
from typing import Sequence

from mashbill.validators.errors import SpanAuditError, ValidationInputError
from mashbill.validators.spans.chat_render import ChatRenderer
from mashbill.validators.spans.span_pieces import CutPolicy, PieceCounter, split_words
from mashbill.validators.spans.span_policy import detect_policy
from mashbill.validators.spans.span_rules import (LOSS_MODES, RecordProblem, SpanResult, TrainingExample, is_correction,
                                            merge_ranges)
from mashbill.validators.tokenizers.tokenizer import LoadedTokenizer


@dataclass
class _Prepared:
    """An example rendered to text, with the char spans (mask mode) or the prompt text (tail mode)."""

    ex: TrainingExample
    text: str
    mode: str  # "mask" | "tail"
    spans: list[tuple[int, int]] = field(default_factory=list)
    prompt_text: str = ""
    prefix_specials: int = 0  # tokens the post-processor adds (plain-text examples only)
    suffix_specials: int = 0
    n_assistant: int = 0
    correction: bool = False


class SpanEngine:
    """Computes span results for examples under one trainer profile, by either method."""

    def __init__(self, loaded: LoadedTokenizer, template: str | None, *, loss: str = "assistant-only",
                 policy: CutPolicy | None = None):
        if loss not in LOSS_MODES:
            raise ValidationInputError(f"unknown loss mode {loss!r} (expected one of {', '.join(LOSS_MODES)})")
        self.loaded = loaded
        self.tok = loaded.tok
        self.template = template
        self.loss = loss
        self.renderer = ChatRenderer(loaded, template)
        self.markers = self.renderer.markers
        self.policy = policy or detect_policy(loaded)
        self.counter = PieceCounter(loaded, self.policy)
        self.warnings: list[str] = []
        post = self.tok.backend_tokenizer.post_processor
        probe = self.tok("a", add_special_tokens=True)["input_ids"]
        bare = self.tok("a", add_special_tokens=False)["input_ids"]
        self.prefix_specials = 0
        self.suffix_specials = len(probe) - len(bare)
        if post is not None and len(probe) > len(bare):
            for i in range(len(probe)):
                if probe[i:i + len(bare)] == bare:
                    self.prefix_specials, self.suffix_specials = i, len(probe) - len(bare) - i
                    break
        if template is not None and not self.markers and loss in ("assistant-only", "last-turn"):
            self.warnings.append(
                "the chat template has no {% generation %} markers, which TRL's assistant_only_loss needs (it refuses "
                "such a template); each assistant turn was located by rendering the conversation with a sentinel in "
                "its place instead. Pass --chat-template chatml or a template with generation markers to match the "
                "trainer.")

    def prepare(self, ex: TrainingExample, fast: bool = False) -> _Prepared:
        render = self.renderer.render_fast if fast else self.renderer.render
        if not ex.conversational:
            eos = self.tok.eos_token or ""
            completion = ex.text_completion or ""
            if eos and not completion.endswith(eos):
                completion += eos
            return _Prepared(ex, (ex.text_prompt or "") + completion, "tail", prompt_text=ex.text_prompt or "",
                             prefix_specials=self.prefix_specials, suffix_specials=self.suffix_specials)
        msgs = list(ex.messages)
        corr = is_correction(msgs)
        if self.loss == "completion-only":
            if ex.prompt_len is not None:
                cut = ex.prompt_len
            else:
                last = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), default=None)
                if last is None:
                    raise RecordProblem("SPAN005", "no assistant message to train on")
                cut = last
            full, _ = render(msgs)
            prompt, _ = render(msgs[:cut], add_generation_prompt=True)
            return _Prepared(ex, full, "tail", prompt_text=prompt, n_assistant=1, correction=corr)
        full, spans = self.renderer.assistant_spans(msgs, fast=fast)
        if self.loss == "last-turn":
            spans = spans[-1:]
        return _Prepared(ex, full, "mask", spans=spans, n_assistant=len(spans), correction=corr)

    # -- naive: render and tokenize the whole example, as the trainer does

    def naive(self, ex: TrainingExample) -> SpanResult:
        try:
            return self._naive(ex)
        except RecordProblem as exc:
            return SpanResult(ex.key, 0, (), ex.part, error=(exc.code, exc.detail))

    def _naive(self, ex: TrainingExample) -> SpanResult:
        tok = self.tok
        if not ex.conversational:
            p = self.prepare(ex)
            prompt_ids = tok(p.prompt_text)["input_ids"]
            full_ids = tok(p.text)["input_ids"]
            return SpanResult(ex.key, len(full_ids), merge_ranges([(len(prompt_ids), len(full_ids))]), ex.part, 1)
        msgs = list(ex.messages)
        if self.loss == "completion-only":
            p = self.prepare(ex)
            cut = ex.prompt_len if ex.prompt_len is not None else \
                max(i for i, m in enumerate(msgs) if m.get("role") == "assistant")  # prepare() checked it exists
            prompt_ids = tok.apply_chat_template(msgs[:cut], chat_template=self.template, tokenize=True,
                                                 return_dict=True, add_generation_prompt=True)["input_ids"]
            full_ids = tok.apply_chat_template(msgs, chat_template=self.template, tokenize=True,
                                               return_dict=True)["input_ids"]
            return SpanResult(ex.key, len(full_ids), merge_ranges([(len(prompt_ids), len(full_ids))]), ex.part, 1,
                              p.correction)
        if self.loss == "assistant-only" and self.markers:
            out = tok.apply_chat_template(msgs, chat_template=self.template, tokenize=True, return_dict=True,
                                          return_assistant_tokens_mask=True)
            mask = out["assistant_masks"]
            ranges, start = [], None
            for i, v in enumerate(mask):
                if v and start is None:
                    start = i
                elif not v and start is not None:
                    ranges.append((start, i))
                    start = None
            if start is not None:
                ranges.append((start, len(mask)))
            p = self.prepare(ex)
            return SpanResult(ex.key, len(out["input_ids"]), merge_ranges(ranges), ex.part, p.n_assistant,
                              p.correction)
        p = self.prepare(ex)
        enc = tok(p.text, add_special_tokens=False, return_offsets_mapping=True)
        ranges = mask_ranges(enc["offset_mapping"], p.spans, 0)
        return SpanResult(ex.key, len(enc["input_ids"]), merge_ranges(ranges), ex.part, p.n_assistant, p.correction)

    # -- fast: pieces with cached counts

    def fast(self, examples: Sequence[TrainingExample], *, chunk: int = 256) -> list[SpanResult]:
        out: list[SpanResult] = []
        for i in range(0, len(examples), chunk):
            out.extend(self._fast_chunk(examples[i:i + chunk]))
        return out

    def _fast_chunk(self, examples: Sequence[TrainingExample]) -> list[SpanResult]:
        counter = self.counter
        prepared: list = []
        failed: dict[int, SpanResult] = {}
        for i, ex in enumerate(examples):
            try:
                prepared.append(self.prepare(ex, fast=True))
            except RecordProblem as exc:
                failed[i] = SpanResult(ex.key, 0, (), ex.part, error=(exc.code, exc.detail))
        split = [counter.split(p.text) for p in prepared]
        for p, pieces in zip(prepared, split):
            if "".join(pieces) != p.text:  # a bug, never a data problem
                raise SpanAuditError(f"{p.ex.key}: pieces do not reassemble to the rendered text")
        # Plan each target span over the pieces: runs of pieces it covers whole, and pieces it cuts through (those
        # need token offsets, so they are tokenized with offsets first; their counts come along).
        plans = []
        needs_offsets: dict[str, None] = {}
        for j, (p, pieces) in enumerate(zip(prepared, split)):
            starts, whole, partial = self._plan(p, pieces)
            if partial and self.policy.word_cuts:
                # A piece cut by a span boundary is cut further at word cuts (as count_many does), so that only
                # the words at the boundary are tokenized with offsets; the rest are counted through the cache.
                out, at = [], 0
                for i in partial:  # sorted; only these pieces are cut, the rest are copied as slices
                    out += pieces[at:i]
                    out += split_words(pieces[i], self.policy)
                    at = i + 1
                out += pieces[at:]
                pieces = split[j] = out
                starts, whole, partial = self._plan(p, pieces)
            for idx in partial:
                needs_offsets[pieces[idx]] = None
            plans.append((p, pieces, starts, whole, partial))
        offsets = {}
        known: dict[str, int] = {}
        if needs_offsets:
            keys = list(needs_offsets)
            for k, (ids, offs) in zip(keys, counter.encode_many(keys)):
                offsets[k] = offs
                known[k] = len(ids)
                if k not in counter.cache:
                    counter.cache[k] = len(ids)
                    counter.encoded_pieces += 1
        # This chunk's counts, held here: counting a prompt on its own below may refill (clear) the shared cache.
        # (pieces with offsets are in the cache already, or kept in `known` if a refill cleared them)
        counts = counter.fill(chain.from_iterable(split))
        counts.update(known)
        results = []
        for p, pieces, starts, whole, partial in plans:
            cum = list(accumulate(map(counts.__getitem__, pieces), initial=0))
            total = cum[-1]
            if p.mode == "tail":
                k = self._prefix_count(p.prompt_text, p.text, pieces, cum, starts)
                total += p.prefix_specials + p.suffix_specials
                k += p.prefix_specials + p.suffix_specials
                results.append(SpanResult(p.ex.key, total, merge_ranges([(k, total)]), p.ex.part,
                                          p.n_assistant, p.correction))
                continue
            ranges = [(cum[i0], cum[i1]) for i0, i1 in whole]
            for idx in partial:
                ranges.extend(mask_ranges(offsets[pieces[idx]], p.spans, starts[idx], cum[idx]))
            results.append(SpanResult(p.ex.key, total, merge_ranges(ranges), p.ex.part, p.n_assistant,
                                      p.correction))
        if failed:
            it = iter(results)
            results = [failed[i] if i in failed else next(it) for i in range(len(examples))]
        return results

    def _plan(self, p: _Prepared, pieces: list[str]):
        """Piece start offsets, the runs of pieces each target span covers whole, and the pieces it cuts through."""
        starts = list(accumulate(map(len, pieces), initial=0))
        whole: list[tuple[int, int]] = []
        partial: list[int] = []
        if p.mode == "mask":
            for s_, e_ in p.spans:
                w, part = _span_pieces(starts, s_, e_, self.policy.nonempty_offsets)
                if w is not None:
                    whole.append(w)
                partial.extend(part)
        return starts, whole, sorted(set(partial))

    def _prefix_count(self, prefix: str, text: str, pieces, cum, starts) -> int:
        """Tokens of the prompt alone (TRL's len(tokenize(prompt))). Pieces of the full text count for it only when
        the prompt ends exactly at a cut; a prompt ending inside a piece (inside a special-token string, say) is
        tokenized on its own, since the cuts of the full text are not cuts of the prompt."""
        P = len(prefix)
        if text.startswith(prefix):
            i = bisect_right(starts, P) - 1  # the piece starting at or holding char P
            if i >= len(pieces) or starts[i] == P:
                return cum[min(i, len(pieces))]
        return self.counter.count_text(prefix)


def _span_pieces(starts: list[int], s: int, e: int, nonempty: bool) -> tuple[tuple[int, int] | None, list[int]]:
    """For a char span [s, e): a run (i0, i1) of pieces whose tokens are all trained, and the pieces whose tokens
    must be checked one by one (they straddle a span boundary, or touch it when a token may be empty).

    A token is trained when it overlaps the span (transformers' assistant mask). Pieces ending at or before s and
    pieces starting at or after e hold no such token. A piece strictly inside (s, e) holds only trained tokens;
    so does one that merely touches s or e when every token covers at least one character."""
    n = len(starts) - 1
    if n <= 0:
        return None, []
    if e <= s:
        i = bisect_right(starts, s) - 1
        return None, ([i] if 0 <= i < n and starts[i] < s < starts[i + 1] else [])
    first = bisect_right(starts, s) - 1  # the piece holding char s
    last = bisect_right(starts, e - 1) - 1  # the piece holding char e-1
    first = max(first, 0)
    last = min(last, n - 1)
    if first > last:
        return None, []
    partial = []
    i0, i1 = first, last + 1
    if not (starts[first] == s and nonempty):
        partial.append(first)
        i0 = first + 1
    if last >= i0 and not (starts[last + 1] == e and nonempty):
        partial.append(last)
        i1 = last
    return ((i0, i1) if i1 > i0 else None), partial


def mask_ranges(offsets, spans, char_base: int, tok_base: int = 0) -> list[tuple[int, int]]:
    """Token ranges (tok_base-relative) of tokens overlapping any span, with transformers' loop semantics."""
    out: list[tuple[int, int]] = []
    k = 0
    ns = len(spans)
    run = -1
    for j, (a, b) in enumerate(offsets):
        a += char_base
        b += char_base
        while k < ns and a >= spans[k][1]:
            k += 1
        if k == ns:
            break
        if b > spans[k][0]:
            if run < 0:
                run = j
        elif run >= 0:
            out.append((tok_base + run, tok_base + j))
            run = -1
    else:
        j = len(offsets)
    if run >= 0:
        out.append((tok_base + run, tok_base + j))
    return out
