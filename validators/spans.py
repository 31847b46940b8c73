"""Token-span coverage: does each training target survive the trainer's window, token for token?

For every example the trainer would see, this renders it exactly as the trainer does (the same chat
template call transformers' ``apply_chat_template`` makes), finds the tokens the loss covers, and checks
them against ``max_seq_len`` under the profile's truncation side:

- ``SPAN001`` the target is partly cut, ``SPAN002`` it is cut entirely, ``SPAN003`` the prompt alone fills
  the window (so ``SPAN002`` too), ``SPAN004`` left truncation drops the start of the prompt,
  ``SPAN005`` the loss covers no token at all, ``SPAN010`` a correction sample's wrong assistant turn is
  trained.

Which tokens the loss covers, per loss mode (TRL's rules):
- ``assistant-only``: every token overlapping an assistant turn's ``{% generation %}`` block (transformers'
  assistant mask). A template without generation markers is refused by TRL; here the assistant contents
  are located in the rendered text instead (plus an end-of-turn token right after them) and a warning says so.
- ``last-turn``: the same, for the last assistant turn only.
- ``completion-only``: TRL's prompt-completion rule: everything after ``len(tokenize(prompt))``, the prompt
  rendered with the generation prompt.

Two methods compute the same numbers:

``naive``: render and tokenize every full example (what the trainer does, ~115 records/s on one core for a
3,300-token Llama-3 example).

``fast``: cut the rendered text into pieces whose token counts simply add up, cache the counts of pieces
that repeat (framings, category lines, the tool catalog, the rules), and tokenize only the new pieces.
Counts add up across a cut only if no token can span it. A cut is made only
  * at an added token (the tokenizer splits those out before anything else runs), or
  * for byte-level BPE with one of the known regex pre-tokenizers (GPT-2, Llama 3, Qwen 2/3.5), right after
    a line break that follows a non-space character and precedes a non-space, non-combining character.
    The argument: none of those regexes has a lookbehind; every alternative that can match a line break
    either ends at the line-break run (``\\s*[\\r\\n]+``, ``...[\\r\\n]*``) or is a whitespace alternative
    whose match cannot continue into a non-space character; with a non-space character before the line
    break the run is exactly that one ``\\n``, and ``\\s+(?!\\S)`` (the only lookahead) and ``\\s+`` then
    produce the same single pre-token ``\\n`` whether the text goes on or ends there. So the pre-tokens of
    the whole are the pre-tokens of the pieces, and BPE never merges across pre-tokens. An NFC normalizer
    cannot reach across either, because the next character is a non-combining starter.
  Text seen for the first time (a record's query and target) is additionally counted word by word, cutting
  before a space that follows a letter or digit (argued in ``PieceCounter.count_many``), so a new record costs
  roughly its new words rather than its new characters.
Every other tokenizer family gets only the added-token cuts, each piece encoded behind a sentinel special
token so that "start of text" handling (a SentencePiece prefix space, say) is the same as in context, or no
cuts at all when even that fails the self-check.

Three guards keep this honest: the policy is self-checked against the tokenizer at load time on a battery of
adversarial strings (a failure downgrades it); every record asserts that its pieces reassemble to the exact
rendered text; and every run re-renders a random sample with the naive method and fails on any mismatch.
"""

from __future__ import annotations

import logging
import random
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Iterable, Sequence

from mashbill.factory.records import Verdict
from mashbill.validators.errors import SpanAuditError, ValidationInputError
from mashbill.validators.tokenizer import END_OF_TURN, LoadedTokenizer, has_generation_markers

log = logging.getLogger(__name__)

LOSS_MODES = ("assistant-only", "completion-only", "last-turn")

# Characters that may start a piece after a line cut: printable ASCII, Latin-1 and Latin extended letters,
# general punctuation, arrows, maths symbols and box drawing. None is whitespace or a combining mark.
_SAFE_START = "!-~\u00a1-\u02ff\u2010-\u2027\u2030-\u205e\u2190-\u23ff\u2500-\u27bf"
_LINE_CUT = re.compile("\n(?=[" + _SAFE_START + "])")
_WORD_CUT = re.compile(r"(?<=[^\W_])(?= )")

_CORRECTION_CUE = re.compile(
    r"(?i)(?<!\w)(?:review|correct|corrected|correction|fix|wrong|mistake|incorrect|revise|check the plan|"
    r"überprüf\w*|prüfe|korrigier\w*|korrektur|falsch|fehler\w*|verbesser\w*|PRECISION-FIRST|"
    r"RESEARCH-BEFORE-CODE)(?!\w)")


# ---------------------------------------------------------------- examples and results


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


# ---------------------------------------------------------------- cut policy


@dataclass
class CutPolicy:
    name: str  # "bytelevel-lines" | "added-tokens" | "none"
    special_re: re.Pattern | None
    line_cuts: bool
    sentinel: str = ""  # text encoded before every piece (its tokens are dropped again)
    sentinel_tokens: int = 0
    reason: str = ""
    # Every token covers at least one character (byte-level BPE without offset trimming): a piece lying inside a
    # target span is then entirely trained, so only pieces straddling a span boundary need token offsets.
    nonempty_offsets: bool = False
    # No cut token contains a line break: blocks between blank lines can be split once and cached.
    block_cache: bool = False
    # A piece seen for the first time is counted word by word (see PieceCounter.count_many).
    word_cuts: bool = False
    special_set: frozenset = frozenset()


def _known_regexes() -> set[str]:
    known = {
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    }
    return known


def _bytelevel_regex_ok(pre: dict | None) -> tuple[bool, str]:
    """Is the pre-tokenizer one whose splits are proven stable at our line cuts?"""
    if pre is None:
        return False, "no pre-tokenizer"
    parts = pre["pretokenizers"] if pre.get("type") == "Sequence" else [pre]
    has_bytelevel = False
    for p in parts:
        t = p.get("type")
        if t == "ByteLevel":
            if p.get("add_prefix_space"):
                return False, "ByteLevel adds a prefix space"
            has_bytelevel = True
        elif t == "Split":
            pat = p.get("pattern", {})
            rx = pat.get("Regex") if isinstance(pat, dict) else None
            if rx is None or rx not in _known_regexes():
                return False, "split regex is not one of the proven families"
            if p.get("behavior") not in ("Isolated",) or p.get("invert"):
                return False, "split behaviour is not Isolated"
        elif t == "Digits":
            continue  # splits digits only; never touches a line break
        else:
            return False, f"pre-tokenizer {t} not covered by the proof"
    return has_bytelevel, "" if has_bytelevel else "not byte-level"


def _normalizer_ok(norm: dict | None) -> bool:
    if norm is None:
        return True
    if norm.get("type") == "Sequence":
        return all(_normalizer_ok(n) for n in norm["normalizers"])
    return norm.get("type") in ("NFC",)


class PieceCounter:
    """Splits rendered text into pieces and counts tokens, with a cache of piece counts."""

    def __init__(self, loaded: LoadedTokenizer, policy: CutPolicy, cache_limit: int = 2_000_000,
                 block_limit: int = 100_000):
        self.backend = loaded.backend
        self.policy = policy
        self.cache: dict[str, int] = {}
        self.cache_limit = cache_limit
        self.blocks: dict[str, list[str]] = {}
        self.block_limit = block_limit
        self.encoded_pieces = 0  # pieces actually tokenized (cache misses)

    # -- splitting

    def split(self, text: str) -> list[str]:
        """Pieces of text. With block caching, text is first cut at blank lines ("\n\n"); no cut can fall inside
        such a separator (the character before the second line break is a line break, and a line break is not a
        safe start), and no cut token holds a line break, so the cuts of the text are exactly the cuts found in
        each block alone, and each block's pieces are cached. Blocks are then glued back, the separator joining
        the last piece of one block and the first of the next unless either is an added token."""
        pol = self.policy
        if not pol.block_cache or "\n\n" not in text:
            return self._split(text)
        blocks = self.blocks
        if len(blocks) > self.block_limit:
            blocks.clear()
        specials = pol.special_set
        out: list[str] = []
        open_last = False  # is out[-1] a text piece that the next text may extend?
        first_block = True
        for b in text.split("\n\n"):
            if not first_block:
                if open_last:
                    out[-1] += "\n\n"
                else:
                    out.append("\n\n")
                    open_last = True
            first_block = False
            pieces = blocks.get(b)
            if pieces is None:
                pieces = blocks[b] = self._split(b)
            if not pieces:
                continue
            head = pieces[0]
            if open_last and head not in specials:
                out[-1] += head
                out.extend(pieces[1:])
            else:
                out.extend(pieces)
            open_last = out[-1] not in specials
        return out

    def _split(self, text: str) -> list[str]:
        pol = self.policy
        if pol.name == "none":
            return [text] if text else []
        segs = pol.special_re.split(text) if pol.special_re is not None else [text]
        if not pol.line_cuts:
            return [s for s in segs if s]
        out: list[str] = []
        append = out.append
        for seg in segs:
            if not seg:
                continue
            if "\n" not in seg:
                append(seg)
                continue
            start = 0
            for m in _LINE_CUT.finditer(seg):
                e = m.end()
                if e < 2 or seg[e - 2].isspace():
                    continue
                append(seg[start:e])
                start = e
            append(seg[start:])
        return out

    # -- encoding

    def encode_many(self, pieces: Sequence[str]) -> list:
        """Encodings of pieces as they tokenize in context (sentinel tokens removed from ids and offsets)."""
        if not pieces:
            return []
        pol = self.policy
        if pol.sentinel:
            encs = self.backend.encode_batch([pol.sentinel + p for p in pieces], add_special_tokens=False)
            shift = len(pol.sentinel)
            out = []
            for enc in encs:
                ids = enc.ids[pol.sentinel_tokens:]
                offs = [(max(0, a - shift), max(0, b - shift)) for a, b in enc.offsets[pol.sentinel_tokens:]]
                out.append((ids, offs))
            return out
        return [(enc.ids, enc.offsets) for enc in self.backend.encode_batch(list(pieces), add_special_tokens=False)]

    def count_many(self, pieces: Sequence[str]) -> list[int]:
        """Token counts of pieces as they tokenize in context.

        With word cuts, a piece is cut further right before every space that follows a letter or digit, and the
        words are counted through the same cache. For the proven regex families this cut is safe too: the
        pre-token holding that letter or digit is a letter run, a digit group or a contraction, which ends at
        the space whether the text goes on or not (no alternative can continue across a space after a letter or
        digit, and the only lookahead belongs to a whitespace alternative); the right side is scanned from the
        same position either way. New text thus costs only its new words."""
        if not pieces:
            return []
        pol = self.policy
        if pol.word_cuts:
            cache = self.cache
            words = [_WORD_CUT.split(p) for p in pieces]
            new = list({w: None for ws in words for w in ws if w not in cache})
            if new:
                for w, n in zip(new, self._count_raw(new)):
                    cache[w] = n
            return [sum(map(cache.__getitem__, ws)) for ws in words]
        return self._count_raw(pieces)

    def _count_raw(self, pieces: Sequence[str]) -> list[int]:
        pol = self.policy
        if pol.sentinel:
            n = pol.sentinel_tokens
            return [len(e) - n for e in self.backend.encode_batch_fast([pol.sentinel + p for p in pieces],
                                                                       add_special_tokens=False)]
        return [len(e) for e in self.backend.encode_batch_fast(list(pieces), add_special_tokens=False)]

    def fill(self, pieces: Iterable[str]) -> None:
        """Make sure every piece has a cached count (tokenizing the missing ones in one batch)."""
        cache = self.cache
        missing = list({p: None for p in pieces if p not in cache})
        if not missing:
            return
        if len(cache) + len(missing) > self.cache_limit:
            cache.clear()
        self.encoded_pieces += len(missing)
        for p, n in zip(missing, self.count_many(missing)):
            cache[p] = n

    def count_text(self, text: str) -> int:
        pieces = self.split(text)
        self.fill(pieces)
        return sum(map(self.cache.__getitem__, pieces))

    def ids_concat(self, text: str) -> list[int]:
        """Token ids of text assembled from its pieces (used by the self-check)."""
        out: list[int] = []
        for ids, _ in self.encode_many(self.split(text)):
            out.extend(ids)
        return out


def _probe_strings(loaded: LoadedTokenizer, rng: random.Random, n: int = 400) -> list[str]:
    tok = loaded.tok
    added = [t.content for t in tok.backend_tokenizer.get_added_tokens_decoder().values()][:12]
    units = ["a", "Z", "ä", "ß", "1", "42", "123456", ".", ",", ";", "'", "'s", "'t", "\"", "/", "\\", "-", "(", ")",
             "{", "}", "[", "]", ":", "#", "*", "§", " ", "  ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", "\u0301",
             "\u00a0", "中文", "😀", "é", "e\u0301", "Ġ", "▁", "x", "Word", " word", "don't", "<", ">", "|", "=",
             "!", "?"]
    units += added
    out = []
    for _ in range(n):
        k = rng.randint(3, 24)
        out.append("".join(rng.choice(units) for _ in range(k)))
    for a in ["a", ".", "1", "'", "!", "中", "é", ")", "}"]:
        for b in ["a", ".", "1", "'s", " ", "\t", "\n", "/", "中", "\u0301", "é", "{", "-", "<", "§"]:
            out.append(f"x{a}\n{b}y z")
            out.append(f"{a}\n{b}")
            for sp in added[:3]:
                out.append(f"{a}\n{sp}{b}\n{a}")
    return out


def _policy_holds(counter: PieceCounter, probes: Sequence[str]) -> str | None:
    """None if piece-wise tokenization equals whole tokenization on every probe, else the first failure."""
    backend = counter.backend
    for s in probes:
        whole = backend.encode(s, add_special_tokens=False).ids
        pieces = counter.split(s)
        if "".join(pieces) != s:
            return f"pieces do not reassemble {s!r}"
        if counter.ids_concat(s) != whole:
            return f"piece-wise tokens differ on {s!r}"
        if counter.policy.word_cuts:
            words = [w for p in pieces for w in _WORD_CUT.split(p)]
            ids = [i for ids, _ in counter.encode_many(words) for i in ids]
            if ids != whole:
                return f"word-wise tokens differ on {s!r}"
    return None


def detect_policy(loaded: LoadedTokenizer, seed: int = 0) -> CutPolicy:
    """The strongest cut policy the tokenizer provably supports, self-checked against it."""
    import json

    cached = loaded.info.get("policy")
    if cached is not None:
        return cached
    j = json.loads(loaded.backend.to_str())
    added = j.get("added_tokens", [])
    cut_tokens = [a["content"] for a in added if a["content"] and not any(
        a.get(flag) for flag in ("normalized", "lstrip", "rstrip", "single_word"))]
    risky = [a["content"] for a in added if a.get("lstrip") or a.get("rstrip") or a.get("single_word")
             or a.get("normalized")]
    special_re = (re.compile("(" + "|".join(re.escape(t) for t in sorted(cut_tokens, key=len, reverse=True)) + ")")
                  if cut_tokens else None)
    rng = random.Random(seed)
    probes = _probe_strings(loaded, rng)
    candidates: list[CutPolicy] = []
    model_type = j.get("model", {}).get("type")
    ok_pre, why = _bytelevel_regex_ok(j.get("pre_tokenizer"))
    post = json.dumps(j.get("post_processor"))
    trims = '"trim_offsets": true' in post
    no_newline_tokens = not any("\n" in t for t in cut_tokens)
    if model_type == "BPE" and ok_pre and _normalizer_ok(j.get("normalizer")) and not risky:
        candidates.append(CutPolicy("bytelevel-lines", special_re, True, reason="byte-level BPE, known regex",
                                    nonempty_offsets=not trims, block_cache=no_newline_tokens,
                                    special_set=frozenset(cut_tokens), word_cuts=True))
    if special_re is not None and not risky:
        sentinel = None
        for t in added:
            if t.get("special") and t["content"] in cut_tokens:
                sentinel = t["content"]
                break
        if sentinel is not None:
            n = len(loaded.backend.encode(sentinel, add_special_tokens=False).ids)
            candidates.append(CutPolicy("added-tokens", special_re, False, sentinel=sentinel, sentinel_tokens=n,
                                        reason="cuts at added tokens only"))
    candidates.append(CutPolicy("none", None, False, reason="no provable cut"))
    chosen = candidates[-1]
    for pol in candidates:
        if pol.name == "none":
            break
        failure = _policy_holds(PieceCounter(loaded, pol), probes)
        if failure is None:
            chosen = pol
            break
        log.info("cut policy %s rejected for %s: %s", pol.name, loaded.name, failure)
    if chosen.name != "bytelevel-lines" and not ok_pre:
        chosen.reason += f" ({why})"
    loaded.info["policy"] = chosen
    return chosen


# ---------------------------------------------------------------- the span engine


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
        self.markers = bool(template) and has_generation_markers(template)
        self.policy = policy or detect_policy(loaded)
        self.counter = PieceCounter(loaded, self.policy)
        self.warnings: list[str] = []
        self._template_kwargs = dict(self.tok.special_tokens_map)
        self._compiled = None
        self._plain_kwargs: dict = {}
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
        backend = self.tok.backend_tokenizer
        eot = [t for t in END_OF_TURN if backend.token_to_id(t) is not None]
        if self.tok.eos_token and self.tok.eos_token not in eot:
            eot.insert(0, self.tok.eos_token)
        self._eot = tuple(eot)
        if template is not None and not self.markers and loss in ("assistant-only", "last-turn"):
            self.warnings.append(
                "the chat template has no {% generation %} markers, which TRL's assistant_only_loss needs (it refuses "
                "such a template); assistant turns were located by their content instead. Pass --chat-template chatml "
                "or a template with generation markers to match the trainer.")

    # -- rendering

    def _render(self, messages: Sequence[dict], add_generation_prompt: bool = False) -> tuple[str, list]:
        from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template

        if self.template is None:
            raise ValidationInputError(f"tokenizer {self.loaded.ref} has no chat template; pass --chat-template "
                                       "(chatml, a .jinja file or template text)")
        conv = _normalize_chat_messages(list(messages))
        try:
            texts, gen = render_jinja_template(conversations=[conv], tools=None, documents=None,
                                           chat_template=self.template,
                                           return_assistant_tokens_mask=self.markers and not add_generation_prompt,
                                           continue_final_message=False, add_generation_prompt=add_generation_prompt,
                                           **self._template_kwargs)
        except Exception as exc:  # jinja raise_exception(), TypeError on odd contents...
            raise RecordProblem("SPAN007", f"the chat template refused this conversation: "
                                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        return texts[0], (gen[0] if gen else [])

    def _render_fast(self, messages: Sequence[dict], add_generation_prompt: bool = False) -> tuple[str, list]:
        """What render_jinja_template does for a plain conversation (no tools, no documents), minus the generic
        copying: messages whose values are all strings are copied shallowly, anything else goes through
        transformers' own sanitising copy. The audit compares the result with the full method."""
        from transformers.utils.chat_template_utils import (_alias_reasoning_fields, _compile_jinja_template,
                                                            _plain_template_data, _render_with_assistant_indices)

        if self.template is None:
            return self._render(messages, add_generation_prompt)
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = _compile_jinja_template(self.template)
            self._plain_kwargs = _plain_template_data(self._template_kwargs)
        chat = []
        plain = True
        for m in messages:
            if not isinstance(m, dict):
                return self._render(messages, add_generation_prompt)
            d = {k: v for k, v in m.items() if v is not None}
            if plain and not all(type(v) is str and type(k) is str for k, v in d.items()):
                plain = False
            chat.append(d)
        if not plain:
            return self._render(messages, add_generation_prompt)
        chat = _alias_reasoning_fields(chat)
        try:
            if self.markers and not add_generation_prompt:
                return _render_with_assistant_indices(compiled, chat, None, None, add_generation_prompt,
                                                      **self._plain_kwargs)
            return compiled.render(messages=chat, tools=None, documents=None,
                                   add_generation_prompt=add_generation_prompt, **self._plain_kwargs), []
        except Exception as exc:
            raise RecordProblem("SPAN007", f"the chat template refused this conversation: "
                                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None

    def _content_spans(self, text: str, messages: Sequence[dict]) -> list[tuple[int, int]]:
        spans, cursor = [], 0
        for m in messages:
            content = m.get("content")
            if not isinstance(content, str):
                continue
            if m.get("role") != "assistant":
                if content:
                    at = text.find(content, cursor)
                    if at >= 0:
                        cursor = at + len(content)
                continue
            at = text.find(content, cursor)
            if at < 0 and content.strip():
                content = content.strip()  # templates that trim contents
                at = text.find(content, cursor)
            if at < 0:
                raise RecordProblem("SPAN006", "an assistant message does not appear in the rendered chat (the "
                                    "template rewrites it), so its tokens cannot be located; use a template with "
                                    "generation markers")
            end = at + len(content)
            for t in self._eot:
                if text.startswith(t, end):
                    end += len(t)
                    break
            spans.append((at, end))
            cursor = end
        return spans

    def prepare(self, ex: TrainingExample, fast: bool = False) -> _Prepared:
        render = self._render_fast if fast else self._render
        if not ex.conversational:
            eos = self.tok.eos_token or ""
            completion = ex.text_completion or ""
            if eos and not completion.endswith(eos):
                completion += eos
            return _Prepared(ex, (ex.text_prompt or "") + completion, "tail", prompt_text=ex.text_prompt or "",
                             prefix_specials=self.prefix_specials, suffix_specials=self.suffix_specials)
        msgs = list(ex.messages)
        n_asst = sum(1 for m in msgs if m.get("role") == "assistant")
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
        full, gen = render(msgs)
        spans = [tuple(s) for s in gen] if self.markers else self._content_spans(full, msgs)
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
        ranges = _mask_ranges(enc["offset_mapping"], p.spans, 0)
        return SpanResult(ex.key, len(enc["input_ids"]), merge_ranges(ranges), ex.part, p.n_assistant, p.correction)

    # -- fast: pieces with cached counts

    def fast(self, examples: Sequence[TrainingExample], *, chunk: int = 256) -> list[SpanResult]:
        out: list[SpanResult] = []
        for i in range(0, len(examples), chunk):
            out.extend(self._fast_chunk(examples[i:i + chunk]))
        return out

    def _fast_chunk(self, examples: Sequence[TrainingExample]) -> list[SpanResult]:
        counter = self.counter
        nonempty = self.policy.nonempty_offsets
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
        cache = counter.cache
        # Plan each target span over the pieces: runs of pieces it covers whole, and pieces it cuts through (those
        # need token offsets, so they are tokenized with offsets first; their counts come along).
        plans = []
        needs_offsets: dict[str, None] = {}
        for p, pieces in zip(prepared, split):
            starts = list(accumulate(map(len, pieces), initial=0))
            whole: list[tuple[int, int]] = []
            partial: list[int] = []
            if p.mode == "mask":
                for s_, e_ in p.spans:
                    w, part = _span_pieces(starts, s_, e_, nonempty)
                    if w is not None:
                        whole.append(w)
                    partial.extend(part)
                for idx in partial:
                    needs_offsets[pieces[idx]] = None
            plans.append((p, pieces, starts, whole, sorted(set(partial))))
        offsets = {}
        if needs_offsets:
            keys = list(needs_offsets)
            for k, (ids, offs) in zip(keys, counter.encode_many(keys)):
                offsets[k] = offs
                if k not in cache:
                    cache[k] = len(ids)
                    counter.encoded_pieces += 1
        counter.fill(pc for pieces in split for pc in pieces)
        results = []
        for p, pieces, starts, whole, partial in plans:
            cum = list(accumulate(map(cache.__getitem__, pieces), initial=0))
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
                ranges.extend(_mask_ranges(offsets[pieces[idx]], p.spans, starts[idx], cum[idx]))
            results.append(SpanResult(p.ex.key, total, merge_ranges(ranges), p.ex.part, p.n_assistant,
                                      p.correction))
        if failed:
            it = iter(results)
            results = [failed[i] if i in failed else next(it) for i in range(len(examples))]
        return results

    def _prefix_count(self, prefix: str, text: str, pieces, cum, starts) -> int:
        P = len(prefix)
        if text.startswith(prefix):
            i = bisect_right(starts, P) - 1  # piece containing char P (or starting at it)
            if i >= len(pieces) or starts[i] == P:
                return cum[min(i, len(pieces))]
            rest = text[starts[i]:P]
            return cum[i] + self.counter.count_text(rest)
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


def _mask_ranges(offsets, spans, char_base: int, tok_base: int = 0) -> list[tuple[int, int]]:
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


# ---------------------------------------------------------------- statistics


def percentiles(values: Sequence[int]) -> dict:
    import numpy as np

    if not values:
        return {"min": None, "p50": None, "p95": None, "p99": None, "max": None, "mean": None}
    arr = np.asarray(values)
    return {"min": int(arr.min()), "p50": int(np.percentile(arr, 50, method="nearest")),
            "p95": int(np.percentile(arr, 95, method="nearest")), "p99": int(np.percentile(arr, 99, method="nearest")),
            "max": int(arr.max()), "mean": round(float(arr.mean()), 1)}


def audit(engine: SpanEngine, examples: Sequence[TrainingExample], fast: Sequence[SpanResult], *, sample: int,
          seed: int = 0) -> dict:
    """Re-run a random sample with the naive method; raise SpanAuditError on any difference."""
    if not examples:
        return {"audited": 0, "mismatches": 0}
    rng = random.Random(seed)
    idx = list(range(len(examples)))
    pick = idx if len(idx) <= sample else rng.sample(idx, sample)
    bad = []
    for i in pick:
        n = engine.naive(examples[i])
        if n.signature() != fast[i].signature():
            bad.append((examples[i].key, n.signature(), fast[i].signature()))
    if bad:
        key, want, got = bad[0]
        raise SpanAuditError(f"span audit failed on {len(bad)} of {len(pick)} sampled examples; first {key}: "
                             f"full render gives total/ranges {want}, the fast method {got}")
    return {"audited": len(pick), "mismatches": 0}
