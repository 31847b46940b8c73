"""Cutting rendered text into pieces whose token counts add up, and the cache of piece counts.

Counts add up across a cut only if no token can span it. ``span_policy`` decides which cuts a tokenizer provably
allows (and self-checks that at load); this module applies them:
  * at an added token (the tokenizer splits those out before anything else runs), or
  * for byte-level BPE with one of the known regex pre-tokenizers (GPT-2, Llama 3, Qwen 2/3.5, with or without
    digit isolation), right after a line break that follows a non-space character and precedes a non-space,
    non-combining character. None of those regexes has a lookbehind; every alternative that can match a line break
    either ends at the line-break run (``\\s*[\\r\\n]+``, ``...[\\r\\n]*``) or is a whitespace alternative whose
    match cannot continue into a non-space character; with a non-space character before the line break the run is
    exactly that one ``\\n``, and ``\\s+(?!\\S)`` (the only lookahead) and ``\\s+`` then produce the same single
    pre-token ``\\n`` whether the text goes on or ends there. So the pre-tokens of the whole are the pre-tokens of
    the pieces, and BPE never merges across pre-tokens. An NFC normalizer cannot reach across either, because the
    next character is a non-combining starter.
Text seen for the first time (a record's query and target) is additionally counted word by word, cutting before a
space that follows a letter or digit (argued in ``PieceCounter.count_many``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from mashbill.validators.tokenizers.tokenizer import LoadedTokenizer

# Characters that may start a piece after a line cut: printable ASCII, Latin-1 and Latin extended letters,
# general punctuation, arrows, maths symbols and box drawing. None is whitespace or a combining mark.
_SAFE_START = "!-~\u00a1-\u02ff\u2010-\u2027\u2030-\u205e\u2190-\u23ff\u2500-\u27bf"
_LINE_CUT = re.compile("\n(?=[" + _SAFE_START + "])")
# A word cut: right after a letter or digit, before a space or an ASCII punctuation character (argued in
# PieceCounter.count_many). Never applied inside an added token's piece (``split_words``).
# (The lookahead comes first: it fails at most positions, and it is cheaper than the Unicode lookbehind.)
WORD_CUT = re.compile(r"(?=[ !-/:-@\[-`{-~])(?<=[^\W_])")


# A digit cut: before and after every ASCII digit, for a tokenizer whose first pre-tokenizer makes each digit a
# pre-token of its own (``span_policy.isolates_digits_first``): a new number then costs no tokenizer call.
_DIGIT = re.compile("([0-9])")


def split_words(piece: str, policy: "CutPolicy") -> list[str]:
    """The words of a piece at word cuts (and digit cuts where the policy has them); an added token's piece is one
    word (its text may hold letters before punctuation, ``<|endoftext|>``, but it is one token)."""
    if piece in policy.special_set:
        return [piece]
    words = WORD_CUT.split(piece)
    if policy.digit_cuts and _DIGIT.search(piece):
        return [d for w in words for d in _DIGIT.split(w) if d]
    return words


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
    # ... and also cut before and after every ASCII digit (see split_words).
    digit_cuts: bool = False



class PieceCounter:
    """Splits rendered text into pieces and counts tokens, with a cache of piece counts."""

    def __init__(self, loaded: LoadedTokenizer, policy: CutPolicy, cache_limit: int = 2_000_000,
                 block_limit: int = 100_000, head_limit: int = 1_000):
        self.backend = loaded.backend
        self.policy = policy
        self.cache: dict[str, int] = {}
        self.cache_limit = cache_limit
        self.blocks: dict[str, list[str]] = {}
        self.block_limit = block_limit
        self.heads: dict[str, tuple[tuple[str, ...], bool]] = {}  # glued blocks before the last blank line
        self.head_limit = head_limit
        self.encoded_pieces = 0  # pieces actually tokenized (cache misses)
        self.refills = 0  # times the cache was full and cleared

    # -- splitting

    def split(self, text: str) -> list[str]:
        """Pieces of text. With block caching, text is first cut at blank lines ("\n\n"); no cut can fall inside
        such a separator (the character before the second line break is a line break, and a line break is not a
        safe start), and no cut token holds a line break, so the cuts of the text are exactly the cuts found in
        each block alone, and each block's pieces are cached. Blocks are then glued back, the separator joining
        the last piece of one block and the first of the next unless either is an added token. What gluing the
        blocks before the last blank line gives is kept too (a rendered example's head: the system prompt many
        examples share), so an example whose head was seen glues only its last block. (That blank line is the last
        "\n\n" found from the right, which in a run of three line breaks is not where a split from the left parts
        it; any "\n\n" parts the text safely, by the argument above.)"""
        pol = self.policy
        if not pol.block_cache or "\n\n" not in text:
            return self._split(text)
        if len(self.blocks) > self.block_limit:
            self.blocks.clear()
        cut = text.rfind("\n\n")
        head = text[:cut]
        kept = self.heads.get(head)
        if kept is None:
            if len(self.heads) >= self.head_limit:
                self.heads.clear()
            out, open_last = self._glued([], False, head.split("\n\n"), True)
            kept = self.heads[head] = (tuple(out), open_last)
        return self._glued(list(kept[0]), kept[1], [text[cut + 2:]], False)[0]

    def _glued(self, out: list[str], open_last: bool, blocks: list[str], first_block: bool) -> tuple[list[str], bool]:
        """`out` (pieces so far; `open_last`: is its last a text piece that the next text may extend?) with each
        block appended, a blank line before each but the very first; returns the pieces and whether the last is
        open."""
        specials = self.policy.special_set
        cached = self.blocks
        for b in blocks:
            if not first_block:
                if open_last:
                    out[-1] += "\n\n"
                else:
                    out.append("\n\n")
                    open_last = True
            first_block = False
            pieces = cached.get(b)
            if pieces is None:
                pieces = cached[b] = self._split(b)
            if not pieces:
                continue
            head = pieces[0]
            if open_last and head not in specials:
                out[-1] += head
                out.extend(pieces[1:])
            else:
                out.extend(pieces)
            open_last = out[-1] not in specials
        return out, open_last

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

        With word cuts, a piece (other than an added token) is cut further right before every space or ASCII
        punctuation character (``!"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~``) that follows a letter or digit, and the
        words are counted through the same cache. For the proven regex families this cut is safe too: the
        pre-token holding that letter or digit is a letter run (with its optional leading character), a digit
        group or a contraction, and each of those ends at such a character whether the text goes on or not (it
        is neither a letter, a mark nor a number, so no alternative can continue across it; the only lookahead
        belongs to a whitespace alternative, and a pre-token ending in a letter or digit is not whitespace); the
        right side is scanned from the same position either way, as none of the regexes has a lookbehind. An NFC
        normalizer cannot compose across it (no ASCII character composes with the character before it). JSON
        scaffolding (``","category":"``) thus becomes words of its own, seen before, and new text costs only its
        new words."""
        if not pieces:
            return []
        pol = self.policy
        if pol.word_cuts:
            cache = self.cache
            words = [split_words(p, pol) for p in pieces]
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

    def fill(self, pieces: Iterable[str]) -> dict[str, int]:
        """The count of every piece, tokenizing the missing ones in one batch: a dict of its own, so that a later
        refill of the cache (which may clear it, whatever chunk boundary it falls on) cannot take a count the
        caller still reads."""
        cache = self.cache
        wanted = dict.fromkeys(pieces)
        missing = [p for p in wanted if p not in cache]
        if missing and len(cache) + len(missing) > self.cache_limit:
            keep = {p: cache[p] for p in wanted if p in cache}
            self.refills += 1
            cache.clear()
            cache.update(keep)
        if missing:
            self.encoded_pieces += len(missing)
            for p, n in zip(missing, self.count_many(missing)):
                cache[p] = n
        return {p: cache[p] for p in wanted}

    def count_text(self, text: str) -> int:
        pieces = self.split(text)
        counts = self.fill(pieces)
        return sum(map(counts.__getitem__, pieces))

    def ids_concat(self, text: str) -> list[int]:
        """Token ids of text assembled from its pieces (used by the self-check)."""
        out: list[int] = []
        for ids, _ in self.encode_many(self.split(text)):
            out.extend(ids)
        return out
