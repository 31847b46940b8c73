"""The span gate's verdict rules: what one training example is, what was measured on it, and which finding follows.

``judge`` turns a measured example (its token total and the trained token ranges) into verdicts under the trainer's
window and truncation side:

- ``SPAN001`` the target is partly cut, ``SPAN002`` it is cut entirely, ``SPAN003`` the prompt alone fills the window
  (so ``SPAN002`` too), ``SPAN004`` left truncation drops the start of the prompt, ``SPAN005`` the loss covers no
  token at all, ``SPAN010`` a correction sample's wrong assistant turn is trained;
- an example that could not be rendered or located carries its own code (``SPAN006`` assistant turn not found,
  ``SPAN007`` the template refused the conversation, ``SPAN008`` an empty or whitespace-only assistant turn);
- ``SPAN011`` (from ``span_audit``, not ``judge``): the second, independent tokenizer disagrees on the example.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from mashbill.factory.records import Verdict

LOSS_MODES = ("assistant-only", "completion-only", "last-turn")

_CORRECTION_CUE = re.compile(
    r"(?i)(?<!\w)(?:review|correct|corrected|correction|fix|wrong|mistake|incorrect|revise|check the plan|"
    r"überprüf\w*|prüfe|korrigier\w*|korrektur|falsch|fehler\w*|verbesser\w*|PRECISION-FIRST|"
    r"RESEARCH-BEFORE-CODE)(?!\w)")


class RecordProblem(Exception):
    """An example that cannot be rendered or located; becomes a verdict on that example, never a crash."""

    def __init__(self, code: str, detail: str):
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(frozen=True)
class TrainingExample:
    """One example as the trainer sees it. Either conversational (messages, optionally split into a prompt of
    the first ``prompt_len`` messages and a completion) or plain text (prompt + completion)."""

    key: str
    messages: tuple[dict, ...] | None = None
    prompt_len: int | None = None
    text_prompt: str | None = None
    text_completion: str | None = None
    part: str = ""  # "chosen" / "rejected" for preference rows

    @property
    def conversational(self) -> bool:
        return self.messages is not None


@dataclass
class SpanResult:
    key: str
    total: int  # tokens of the full example
    ranges: tuple[tuple[int, int], ...]  # trained token ranges [start, end), merged and sorted
    part: str = ""
    n_assistant_spans: int = 0  # assistant turns the loss covers
    correction: bool = False
    error: tuple[str, str] | None = None  # (code, detail) when the example could not be rendered or located

    @property
    def trained(self) -> int:
        return sum(e - s for s, e in self.ranges)

    @property
    def target_start(self) -> int | None:
        return self.ranges[0][0] if self.ranges else None

    @property
    def target_end(self) -> int | None:
        return self.ranges[-1][1] if self.ranges else None

    def signature(self) -> tuple:
        """What must agree between the fast and the naive method."""
        return (self.total, self.ranges, self.error)


@dataclass
class SpanOutcome:
    result: SpanResult
    kept: int
    margin: int
    verdicts: list[Verdict]


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for s, e in sorted(r for r in ranges if r[1] > r[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return tuple((s, e) for s, e in out)


def judge(res: SpanResult, max_seq_len: int, side: str, loss: str) -> SpanOutcome:
    """Verdicts for one example under a window of max_seq_len tokens."""
    total, L = res.total, max_seq_len
    lo, hi = (0, L) if side == "right" else (max(0, total - L), total)
    trained = res.trained
    kept = sum(max(0, min(e, hi) - max(s, lo)) for s, e in res.ranges)
    margin = L - total
    verdicts: list[Verdict] = []
    where = f" [{res.part}]" if res.part else ""
    if res.error is not None:
        verdicts.append(Verdict(res.error[0], "reject", res.error[1] + where, "validate"))
        return SpanOutcome(res, 0, margin, verdicts)
    if trained == 0:
        verdicts.append(Verdict("SPAN005", "reject", f"the loss covers no token{where} (loss {loss})", "validate"))
    elif kept == 0:
        start = res.target_start
        verdicts.append(Verdict("SPAN002", "reject", f"target fully cut{where}: target tokens {start}-{res.target_end} "
                                f"of {total}, window {L} ({side} truncation)", "validate"))
        if side == "right" and start is not None and start >= L:
            verdicts.append(Verdict("SPAN003", "reject", f"prompt alone is {start} tokens{where}, window {L}",
                                    "validate"))
    elif kept < trained:
        verdicts.append(Verdict("SPAN001", "reject", f"target partly cut{where}: {trained - kept} of {trained} target "
                                f"tokens beyond the window ({total} tokens, window {L}, {side} truncation)",
                                "validate"))
    if side == "left" and total > L and res.ranges and res.ranges[0][0] > 0:
        verdicts.append(Verdict("SPAN004", "flag", f"left truncation drops the first {total - L} prompt tokens{where} "
                                "(the start of the system prompt)", "validate"))
    if res.correction and res.n_assistant_spans >= 2:
        verdicts.append(Verdict("SPAN010", "reject", f"correction sample{where}: the first (wrong) assistant turn is "
                                f"trained under loss {loss}; mask it (--loss last-turn) or make it a DPO pair",
                                "validate"))
    return SpanOutcome(res, kept, margin, verdicts)


def is_correction(messages: Sequence[dict]) -> bool:
    """A multi-turn sample where a user turn after an assistant turn asks to review or correct it."""
    roles = [m.get("role") for m in messages]
    if roles.count("assistant") < 2:
        return False
    seen_assistant = False
    for m in messages:
        if m.get("role") == "assistant":
            seen_assistant = True
        elif m.get("role") == "user" and seen_assistant:
            if _CORRECTION_CUE.search(str(m.get("content", ""))):
                return True
    return False
