"""llama.cpp's own tokenizer for a GGUF file: the reference a tokenizer rebuilt from that file must equal.

``llama_cpp.Llama(model_path=..., vocab_only=True)`` loads only the vocabulary (no weights) and tokenizes with the
same code that serves the model. Two uses: ``check`` runs a battery of strings through both tokenizers when a GGUF
tokenizer is loaded (the file's own ``.inp``/``.out`` test vectors when they lie beside it, adversarial strings,
each of the file's special tokens in context), and ``LlamaCppVocab.encode`` is the second, independent
tokenization that the span audit compares on every run.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Sequence

_OPEN: dict[str, "LlamaCppVocab"] = {}


def available() -> bool:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return True


class LlamaCppVocab:
    """Token ids and per-token character offsets from llama.cpp's tokenizer (parse_special on, as in chat text)."""

    def __init__(self, path: Path):
        import contextlib

        import llama_cpp

        try:  # llama.cpp logs a context warning even with verbose=False; keep the CLI's output clean
            from llama_cpp._utils import suppress_stdout_stderr
            quiet = suppress_stdout_stderr(disable=False)
        except ImportError:
            quiet = contextlib.nullcontext()
        self.path = path
        with quiet:
            self.llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        self._pieces: dict[int, bytes] = {}

    @classmethod
    def open(cls, path: Path) -> "LlamaCppVocab":
        key = str(Path(path).resolve())
        if key not in _OPEN:
            _OPEN[key] = cls(Path(path))
        return _OPEN[key]

    def ids(self, text: str, add_special: bool) -> list[int]:
        if not text:  # llama.cpp returns BOS/EOS only for empty text, like tokenizers
            return self.llm.tokenize(b"", add_bos=add_special, special=True) if add_special else []
        return self.llm.tokenize(text.encode("utf-8"), add_bos=add_special, special=True)

    def piece(self, token: int) -> bytes:
        """The bytes one token stands for (special tokens spelled out), however long. llama-cpp-python's own
        ``detokenize`` reads each piece into a 32-byte buffer and returns nothing for a longer one (a 64-dash table
        rule, a run of spaces); ``llama_token_to_piece`` says how long the piece is, so it is read again with a
        buffer of that size."""
        got = self._pieces.get(token)
        if got is None:
            got = self._pieces[token] = token_piece(self.llm._model.vocab, token)
        return got

    def longest_tokens(self, n: int) -> list[int]:
        """The n ordinary tokens with the longest pieces that are whole UTF-8 text (longest first, then by id)."""
        import llama_cpp

        vocab = self.llm._model.vocab
        found = []
        for t in range(llama_cpp.llama_vocab_n_tokens(vocab)):
            if not llama_cpp.llama_vocab_get_attr(vocab, t) & llama_cpp.LLAMA_TOKEN_ATTR_NORMAL:
                continue
            piece = self.piece(t)
            try:
                piece.decode("utf-8")
            except UnicodeDecodeError:
                continue
            found.append((-len(piece), t))
        return [t for _, t in sorted(found)[:n]]

    def encode(self, text: str, add_special: bool) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids and (start, end) character offsets of each token. A token holding only some of a character's bytes
        covers that whole character (as tokenizers' byte-level offsets do); a BOS/EOS added by add_special that
        does not spell the text at its position covers none."""
        ids = self.ids(text, add_special)
        raw = text.encode("utf-8")
        char_at = []  # byte offset -> index of the character holding that byte
        for ci, ch in enumerate(text):
            char_at += [ci] * len(ch.encode("utf-8"))
        char_at.append(len(text))
        out, pos = [], 0
        for t in ids:
            piece = self.piece(t)
            if piece and not raw.startswith(piece, pos):
                pos = self._skip_untokenized(raw, pos, piece, t)
            if piece and raw.startswith(piece, pos):
                end = pos + len(piece)
                out.append((char_at[pos], char_at[end - 1] + 1))
                pos = end
            elif add_special:
                out.append((char_at[pos], char_at[pos]))
            else:
                raise ValueError(f"llama.cpp token {t} ({piece!r}) does not spell the text at byte {pos}")
        return ids, out

    def _skip_untokenized(self, raw: bytes, pos: int, piece: bytes, token: int) -> int:
        """Where the next token's piece starts when llama.cpp dropped the bytes before it: a vocabulary without a
        token for some byte (SmolLM2 has none for 0x1D) tokenizes it to nothing, as the trainer's tokenizer does.
        Only bytes that llama.cpp itself tokenizes to nothing may be skipped; anything else is left for the caller
        to report."""
        at = raw.find(piece, pos + 1)
        if at < 0:
            return pos
        try:
            gap = raw[pos:at].decode("utf-8")
        except UnicodeDecodeError:
            return pos
        return at if self.ids(gap, False) == [] else pos


def token_piece(vocab, token: int) -> bytes:
    """llama.cpp's bytes for one token, special tokens spelled out, with a buffer as long as the piece."""
    import ctypes

    import llama_cpp

    size = 64
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_token_to_piece(vocab, llama_cpp.llama_token(token), buf, size, 0, True)
        if n >= 0:
            return buf.raw[:n]
        size = -n  # the piece needs -n bytes


def battery(path: Path, special_tokens: Sequence[str], seed: int = 0, n: int = 300) -> list[str]:
    """Strings both tokenizers must agree on: the file's own test vectors, hand-picked traps, random mixtures."""
    out: list[str] = []
    inp = path.with_name(path.name + ".inp")
    if inp.is_file():
        out += inp.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")[:-1]  # each ends with the separator
    traps = ["Steps:\n\n1. a\n\n2. b", "\n\n1.", "Cửa Việt", "12345678901234567890", "3.14159 × 2.71828 = 8.5397",
             "x <", " <|", "<|endoftext|>", "<|im_start|>", "don't DON'T Don'T I'M we'LL", "   leading", "trailing   ",
             "tabs\t\tand\r\nCRLF\r\n", "emoji 😀👍🏽 中文 한국어 العربية", "e\u0301 combining \u0301 alone", "§ 823 Abs. 2 BGB",
             '{"task": "x", "deps": [1, 2]}\n', "line\n line\n\n\nthree\n \n", "a\u00a0b\u2028c\u3000d", "ǅungla ﬁ ǈ"]
    out += traps
    specials = [s for s in special_tokens if s][:40]
    for s in specials[:20]:
        out += [f"x{s}y", f" {s} ", f"{s}\n{s}", f"a <{s}>", f"{s[:-1]}", f"{s}{s}"]
    rng = random.Random(seed)
    units = ["a", "Z", "ä", "ß", "1", "42", "123456", ".", ",", "'", "'s", "'T", '"', "/", "\\", "-", "(", ")", "{",
             "}", ":", "#", "*", "§", " ", "  ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", "\u0301", "\u00a0", "中文",
             "😀", "é", "e\u0301", "x", "Word", " word", "don't", "<", ">", "|", "=", "!", "?", "Việt", "ỗ"]
    units += specials[:12]
    for _ in range(n):
        out.append("".join(rng.choice(units) for _ in range(rng.randint(2, 24))))
    return out


def check(backend, path: Path, special_tokens: Sequence[str]) -> tuple[int, str | None]:
    """Compare a tokenizers.Tokenizer with llama.cpp on the battery: (strings compared, first difference or None)."""
    ref = LlamaCppVocab.open(path)
    strings = battery(path, special_tokens)
    for s in strings:
        want = ref.ids(s, add_special=False)
        got = backend.encode(s, add_special_tokens=False).ids
        if got != want:
            return len(strings), f"{s!r}: llama.cpp gives {want[:16]}, the rebuilt tokenizer {got[:16]}"
    for s in ("a", "Hello world", ""):
        want = ref.ids(s, add_special=True)
        got = backend.encode(s, add_special_tokens=True).ids
        if got != want:
            return len(strings), (f"{s!r} with special tokens (BOS/EOS): llama.cpp gives {want}, the rebuilt "
                                  f"tokenizer {got}")
    return len(strings), None
