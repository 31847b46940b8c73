"""Is a task's text a complete request, or was it cut off (task-complete, PLAN011)?

The quick start accepted the task "Under the Hague-Visby Rules," for a liability question: the teacher stopped
mid-sentence, or split one sentence into two tasks. A text is cut off when it ends where no request can end: a
comma, colon, semicolon, an open bracket or quote, a dash, or a dangling function word (an article, a conjunction,
a preposition; English and German). Or when it is the head of one of the query's sentences whose question follows:
"Under the Hague-Visby Rules" of "Under the Hague-Visby Rules, how is ... limited?".

What is data (the word lists) comes from the rule set file (``truncation:``); this module only applies it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_SENTENCES = re.compile(r"[^.!?\n]+[.!?]*")
# the characters after which a request cannot end (quotes count when they open: an odd number of them)
_OPEN = {"(": ")", "[": "]", "{": "}", "„": "“", "«": "»"}


_QUOTES = {q: (re.compile(rf"(?<![^\W_]){q}(?=[^\W_])"), re.compile(rf"(?<=[^\W_]){q}|{q}(?![^\W_])"))
           for q in ('"', "'")}


@dataclass(frozen=True)
class CutWords:
    """The rule set's word lists, lower-case. `dangling`: words a request never ends with (articles, conjunctions,
    most prepositions). `stranded`: prepositions English may leave at the end of a question ("what is it made of"),
    dangling only when the text is no question. `question`: the words a question starts with. `joins`: the words
    after which a query's remainder is a request of its own ("and", "then"), so a head cut there is complete."""
    dangling: frozenset[str]
    stranded: frozenset[str]
    question: frozenset[str]
    joins: frozenset[str]
    pronouns: frozenset[str] = frozenset()  # die, das: an article after a preposition ("für die"), else a pronoun


@lru_cache(maxsize=1 << 12)
def _tail(text: str) -> tuple:
    """The last three words and the last character: what a cut shows. Memoised (the query's, for every task)."""
    t = text.strip()
    return _words(t)[-3:], t[-1:] if t else ""


@lru_cache(maxsize=1 << 14)
def _words(text: str) -> tuple[str, ...]:
    """The words of a text, lower-cased. Memoised: a query's sentences are read again for every task of its plan."""
    return tuple(w.lower() for w in _WORD.findall(text))


@lru_cache(maxsize=1 << 12)
def _sentences(query: str) -> tuple[str, ...]:
    return tuple(_SENTENCES.findall(query))


def cut_off(text: str, query: str, words: CutWords) -> str | None:
    """Why the task text looks cut off (a short reason), or None when it reads as complete."""
    t = text.strip()
    if not t or _tail(t) == _tail(query):
        return None  # the query itself ends so ("... nerve supply is the", an NQ cloze): the user's words, not a cut
    last = t[-1]
    if last in ",:;" or last in "-–—" and not t.endswith("--"):
        return f"ends with {last!r}"
    for o, c in _OPEN.items():
        if t.count(o) > t.count(c):
            return f"an open {o!r} is never closed"
    for q, (opening, other) in _QUOTES.items():
        # an opening quote has a word after it and none before; apostrophes inside or after words ("carrier's",
        # "executives' names") are no opening quotes
        if q in t and len(opening.findall(t)) > len(other.findall(t)):
            return f"an open {q} is never closed"
    ws = _words(t)
    if not ws:
        return None
    end = ws[-1]
    if last.isalnum() or last in "'’":
        if end in words.dangling:
            return f"ends with the function word {end!r}"
        if end in words.pronouns and len(ws) > 1 and (ws[-2] in words.dangling or ws[-2] in words.stranded):
            return f"ends with the article {ws[-2] + ' ' + end!r}"
        if end in words.stranded and ws[0] not in words.question and len(ws) > 1:
            return f"ends with the preposition {end!r}"
    return _head_of_sentence(t, ws, query, words)


def _head_of_sentence(t: str, ws: tuple[str, ...], query: str, words: CutWords) -> str | None:
    """The task is the opening phrase of a query sentence whose main clause follows: the sentence goes on after a
    comma or colon, or with a question word, and not with a word that starts a request of its own ("and", "then").
    A head that only drops a qualifier ("Explain X" of "Explain X in simple terms") is complete."""
    if len(ws) < 2 or t[-1] in "?!.":
        return None
    for sentence in _sentences(query):
        sw = _words(sentence)
        if len(sw) < len(ws) + 2 or sw[:len(ws)] != ws:
            continue
        m = re.match(r"(?:[^\W_]+(?:['’-][^\W_]+)*\W*?){%d}" % len(ws), sentence.strip())
        after = sentence.strip()[m.end():] if m else ""
        nxt = sw[len(ws)]
        if nxt in words.joins:
            continue
        if after.lstrip().startswith((",", ":", ";")) or nxt in words.question:
            return f"is the opening phrase of the query's sentence {sentence.strip()[:80]!r}"
    return None
