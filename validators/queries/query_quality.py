"""Is a synthesized query a genuine request of its cell? Checks beyond the shape (`validators.queries.queries`).

Measured on a labelled yardstick (`tests/validators/fixtures/synth-labelled/`: 520 queries SmolLM2-135M wrote and
the @2 screen kept, 94 of them genuine by eye), tuned on one half and reported on the other, and on real
queries of shared/data/queries-dev for false drops (`bench/synth_quality.py`). Each check returns a detail
when the query must be dropped, None when it passes:

- `SYN009` needs context it does not give: "this text", "the above", "the following" with nothing after it,
  "How does it work?", "any other way" (a follow-up, not a first message). Not for memory-recall cells,
  whose requests refer to the conversation by design.
- `SYN010` several requests in one: two questions, or a request followed by more sentences (an appended
  answer, a second request, a list the model went on with).
- `SYN011` written in the assistant's voice or about the exchange ("Is there anything else I can help with?",
  "A user asked ...", "What's your favorite ..."): not something a user sends.
- `SYN012` does not fit its cell: a unit-conversion query without a unit pair, a subnet query without an
  address, a legal-paragraph query without a cited paragraph, a research-before-code trap without a known
  game, algorithm or format to implement. The precision and legal evidence is the routing rule set's
  triggers (`validators.plans.triggers`), the same the HR rules use on plans, so "fits its cell" means "the
  router's rules see what the cell is about".
"""

from __future__ import annotations

import re

_I = re.IGNORECASE
_WORDS = re.compile(r"[^\W\d_]+", re.UNICODE)

# ---------------------------------------------------------------- SYN009 context

_DEMONSTRATIVE = re.compile(
    r"\b(?:this|these|those|the\s+(?:above|following|given|provided|attached|previous))\s+"
    r"(?:text|passage|paragraph|article|document|story|sentence|poem|essay|excerpt|snippet|email|letter|list|"
    r"table|message|report|code|function|request|question|answer|example|topic|issue|problem|error|rule|rules|"
    r"regulations?|law|game|algorithm|medication|medicine|drug|disease|subnet|task|feature|situation|change|job|"
    r"word|title|string|number|numbers|data|file|method|product|items?|version|service|field|calculation|"
    r"one|dates?)\b", _I)
_BARE_REFERENCE = re.compile(
    r"\b(?:the\s+above|(?:mentioned|shown|given|listed)\s+above|as\s+above|the\s+following\s*[?:]?\s*$|"
    r"any\s+other\s+ways?|another\s+way|besides\s+(?:this|that|just))\b", _I)
# a pronoun with nothing it can refer to: "How does it work?", "How to fix it?", "What is this?"
_DANGLING = re.compile(
    r"^(?:\W*)(?:(?:how|why|what)\s+(?:does|did|do|is|are|can|could|should|would|will|"
    r"to)\s+(?:it|this|that)\b(?!\s+(?:take|cost|mean\s+(?:to|when|if|that)|rain|snow|time|year))|"
    r"(?:how|what)\s+(?:to|do\s+i|can\s+i|should\s+i|do\s+we|can\s+we)\s+\w+\s+(?:it|this|that|them)\s*[?.!]*$|"
    r"what\s+is\s+(?:this|that|it)\s*[?.!]*$)", _I)
_DE_CONTEXT = re.compile(
    r"\b(?:(?:dies|diese[nmrs]?)\s+(?:Text|Satz|Absatz|Artikel|Code|Frage|Aufgabe|Regel|Gesetz|Problem|Fehler|"
    r"Beispiel|Liste|Tabelle)|(?:der|die|das|den|dem)\s+(?:obige[nmrs]?|folgende[nmrs]?|genannte[nmrs]?)\b|"
    r"oben\s+(?:genannt|stehend|erwähnt)|wie\s+funktioniert\s+(?:das|es)\b|andere[nr]?\s+Weg)", _I)
LONG_WORDS = 25
_CONTENT_AFTER = re.compile(r":\s*\S|[\"'“„«`]|\n")  # the text referred to follows


def needs_context(text: str, cell_type: str | None = None) -> str | None:
    """SYN009: a reference to text, code or an earlier turn that the query does not carry."""
    if cell_type == "memory_recall":
        return None
    # in a longer query "this problem" or "these numbers" refer to what the query itself said (a word problem)
    for rx in ((_DEMONSTRATIVE, _DE_CONTEXT) if len(_WORDS.findall(text)) < LONG_WORDS else ()):
        m = rx.search(text)
        if m and not _CONTENT_AFTER.search(text, m.end()):
            return f"refers to {m.group(0)!r} without giving it"
    m = _BARE_REFERENCE.search(text) or _DANGLING.search(text)
    if m:
        return f"refers to {m.group(0).strip()!r} without giving it"
    return None


# ---------------------------------------------------------------- SYN010 several requests

_SENTENCE = re.compile(r"[^.?!]+(?:[.?!]+|$)")
_QUOTED = re.compile(r"['\"“„«`][^'\"“”„«»`]{2,}['\"”“»`]")
_LIST_ITEM = re.compile(r"(?:^|[.?!:]\s+)\d{1,2}[.)]\s+[^\W\d_]", re.UNICODE)  # "1. How ... 2. What ..."
_MONTHS = ("jan|feb|mär|mar|apr|mai|may|jun|jul|aug|sep|okt|oct|nov|dez|dec")


def _sentences(text: str) -> list[str]:
    # a full stop inside a number ("12.750", "1.249") or an abbreviation-like token does not end a sentence
    # nor does the point of a German ordinal date ("vom 1. März")
    protected = re.sub(r"(?<=\d)\.(?=\d)|(?<=\b\d)\.(?=\s(?:" + _MONTHS + r"))|(?<=\b\d\d)\.(?=\s(?:" + _MONTHS
                       + r"))|\b(?:e\.g|i\.e|etc|vs|Abs|Nr|bzw|z\.B|ca|Dr|Mr|Mrs|St)\.", "\0", text, flags=_I)
    return [s.replace("\0", ".").strip() for s in _SENTENCE.findall(protected) if len(_WORDS.findall(s)) >= 1]


def several_requests(text: str, openers: set[str] | frozenset[str] = frozenset()) -> str | None:
    """SYN010: more than one question, or a request (a question, or a sentence opened by one of `openers`:
    `validators.queries.queries.REQUEST_OPENERS` of the language) and then something else (an answer, a second request)."""
    if len(_LIST_ITEM.findall(text)) >= 2:
        return "a numbered list of requests"
    sentences = _sentences(_QUOTED.sub("'…'", text))  # a question inside quotes is the text to work on
    questions = [s for s in sentences if s.endswith("?")]
    if len(questions) >= 2:
        return f"{len(questions)} questions in one"
    # a question and then a statement: the model answered its own question ("What are the side effects of X?
    # Some common side effects include ..."). A request followed by another instruction is left alone: real
    # users write "Describe X. Answer in two paragraphs."
    for i, s in enumerate(sentences[:-1]):
        if s.endswith("?"):
            rest = [r for r in sentences[i + 1:] if len(_WORDS.findall(r)) >= 3]
            if rest and not any((_WORDS.findall(r) or [""])[0].casefold() in openers for r in rest):
                return f"a question followed by {len(rest)} statement(s)"
    return None


# ---------------------------------------------------------------- SYN011 the assistant's voice

_ASSISTANT = re.compile(
    r"\b(?:(?:can|may|could|shall)\s+I\s+(?:help|assist)\s+you|help\s+you\s+with|I\s+can\s+help\s+with|"
    r"anything\s+else|assist\s+you|what\s+can\s+(?:I|you)\s+do\s+for\s+(?:you|me)|what\s+brings\s+you|"
    r"(?:a|the)\s+user\s+(?:asked|asks|added|sent|wants|will)|your\s+(?:favou?rite|experience)|"
    r"would\s+you\s+like\s+to\s+ask|what\s+made\s+you|are\s+you\s+sure|kann\s+ich\s+(?:dir|Ihnen)\s+(?:\w+\s+){0,2}helfen|womit\s+kann\s+ich)\b", _I)


def assistant_voice(text: str) -> str | None:
    """SYN011: the assistant speaking (or talking about the user) instead of a user asking."""
    m = _ASSISTANT.search(text)
    return f"the assistant's voice ({m.group(0)!r})" if m else None


# ---------------------------------------------------------------- SYN012 cell fit

_NUMBER = re.compile(r"\d")
_NUMBERS = re.compile(r"\d+(?:[.,]\d+)*")
_PERCENT = re.compile(r"%|\bper\s?cent|\bprozent", _I)
_DATE = re.compile(
    r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}\.\s?\d{1,2}\.\s?\d{2,4}\b|\b(?:19|20)\d{2}\b|"
    r"\b(?:jan(?:uary|uar)?|feb(?:ruary|ruar)?|mar(?:ch)?|märz|apr(?:il)?|may|mai|june?|juni|july?|juli|aug(?:ust)?|"
    r"sep(?:tember)?|oct(?:ober)?|okt(?:ober)?|nov(?:ember)?|dec(?:ember)?|dez(?:ember)?|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday|montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag|today|tomorrow|"
    r"heute|morgen)\b", _I)
_IP = re.compile(r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?:/\d{1,2})?\b|\b[0-9a-f]{1,4}(?::[0-9a-f]{0,4}){2,7}/\d{1,3}\b",
                 _I)  # IPv4, or an IPv6 prefix
_HASH_WORD = re.compile(r"\b(?:sha-?\d*|md5|hash\w*|base64|base-64|hex\w*)\b", _I)
_PAYLOAD = re.compile(r"['\"“„«`][^'\"“”„«»`]{2,}['\"”“»`]|:\s*\S{6,}")
_PARAGRAPH = re.compile(r"§\s*\d|\bArt(?:\.|ikel|icle)\s*\d|\bParagra(?:ph|f)\s+\d", _I)
_TRANSLATE = re.compile(r"\btranslat\w*|\bübersetz\w*|\bhow\s+do\s+(?:you|I)\s+say\b|\bwie\s+sagt\s+man\b|\bin(?:to|s)\s+(?:\w+\s+)?(?:English|German|French|Spanish|"
                        r"Italian|Englische|Deutsche|Französische|Spanische)\b", _I)
_RECALL = re.compile(r"\b(?:earlier|before|previous(?:ly)?|last\s+time|you\s+said|(?:did\s+)?I\s+(?:said|say|told|tell|"
                     r"mentioned|mention|gave|give|asked)|remember|recall|remind|vorhin|vorher|erwähnt|gesagt|genannt|weißt\s+du\s+noch|"
                     r"erinnerst)\b", _I)
_CREATIVE = re.compile(r"\b(?:write|compose|draft|create|invent|tell|poem|poetry|story|stories|song|lyrics|haiku|"
                       r"limerick|essay|verse|slogan|schreib\w*|entw[iu]rf\w*|dichte\w*|gedicht|geschichte|erzähl\w*|lied|märchen)\b", _I)
_CODE = re.compile(r"\b(?:code|python|java|javascript|typescript|rust|go|golang|c\+\+|c#|sql|regex|bash|shell|script|"
                   r"function|method|class|list|array|dict\w*|string|loop|bug|exception|error|compile\w*|api|"
                   r"program\w*|funktion|schleife|fehler|skript)\b", _I)
# cell types whose queries an exact tool answers: the trigger's intent or the type's own evidence must be there
_PRECISION_TYPES = {"arithmetic", "percentage", "date", "unit_conversion", "subnet", "hash_base64"}


def _evidence(cell_type: str, text: str, trig) -> bool:
    numbers = len(_NUMBERS.findall(text))
    if cell_type == "arithmetic":
        return numbers >= 2 or "arithmetic" in trig.intents
    if cell_type == "percentage":
        return numbers >= 1 and bool(_PERCENT.search(text))
    if cell_type == "date":
        return bool(_DATE.search(text)) and (numbers >= 1 or any(i.startswith(("date", "week")) for i in trig.intents))
    if cell_type == "unit_conversion":
        return "unit_conversion" in trig.intents or "unit_pair" in trig.contexts
    if cell_type == "subnet":
        return bool(_IP.search(text))
    if cell_type == "hash_base64":
        return bool(_HASH_WORD.search(text)) and bool(_PAYLOAD.search(text))
    return True


def cell_fit(text: str, cell_type: str, trap: bool, trig) -> str | None:
    """SYN012: the query lacks what its cell is about. `trig` is `Triggers.analyze(text)` of the rule set."""
    if trap:
        if cell_type == "precision-first":
            if trig.precision or any(_evidence(t, text, trig) for t in _PRECISION_TYPES - {"arithmetic"}):
                return None
            return "a precision-first trap without an exact computation the rules recognise"
        if cell_type == "legal-paragraph":
            return None if trig.citations or _PARAGRAPH.search(text) else "a legal-paragraph trap citing no paragraph"
        if cell_type == "research-before-code":
            return None if trig.impl else "a research-before-code trap naming no known game, algorithm or format"
        return None
    if cell_type in _PRECISION_TYPES:
        return None if _evidence(cell_type, text, trig) else f"a {cell_type} query without its numbers or operands"
    checks = {"legal_paragraph": lambda: trig.citations or _PARAGRAPH.search(text),
              "research_before_code": lambda: trig.impl,
              "translation": lambda: _TRANSLATE.search(text) and _PAYLOAD.search(text),  # and the text to translate
              "memory_recall": lambda: _RECALL.search(text),
              "creative": lambda: _CREATIVE.search(text),
              "code": lambda: _CODE.search(text),
              "trivial": lambda: len(_WORDS.findall(text)) <= 12}
    check = checks.get(cell_type)
    if check is not None and not check():
        return f"does not look like a {cell_type} request"
    return None
