"""No parroting, no drift: a plan's tasks are about the query, not about the teacher prompt's worked examples.

- ``worked_examples`` reads the ``Request: ... / Plan: [...]`` pairs out of a prompt text (the spec's prompt blocks, or
  the system prompt of a record made elsewhere).
- ``parroted``: a task (its text or search query) that reproduces an example task's content words that the query does
  not contain, when the query is not itself like that example's request ("classic Snake game rules" for a question
  about Heizwärmebedarf).
- ``unrelated``: a task that shares no content word with the query (research "translate" for a valuation question).

Words are compared by a short prefix (``stem``), so "Verkehrswert"/"Verkehrswertes" and "calculate"/"calculation"
meet; numbers are content. The thresholds are in the rule set's ``drift:`` section. ``unrelated`` with
``match="stem"`` (moe-routing@4) compares whole words less an inflection or derivation suffix (``root``) instead: the
5-letter prefix made "relation" meet "Relativitätstheorie" and passed a drifted task.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import cached_property, lru_cache
from os.path import commonprefix

from mashbill import jsontext
from mashbill.validators.plans.expr import PLACEHOLDER

_STOP = frozenset("""
a an the and or but if then else of to in on at by for with from as is are was were be been being it its this that these
those what which who whom whose how why when where do does did can could should would will shall may might must i you he
she we they me my your our their them us please about into over under than not no yes so such just also very more most
some any each every all both few other only own same too s t one two new use using used write make give get tell show
explain describe find list compute calculate determine task
der die das den dem des ein eine einen einem einer eines und oder aber wenn dann sonst von zu im in am an auf mit für
aus als ist sind war waren sein wird werden kann können soll sollte würde was welche welcher welches wer wie warum wann
wo ich du er sie es wir ihr mir mich dir dich uns euch ihnen bitte über unter nicht kein keine ja so auch sehr mehr nur
alle jede jeder jedes beide andere gleiche noch schon bei nach vor bis durch gegen ohne um zum zur vom beim ins erkläre
schreibe schreib gib nenne finde berechne bestimme ermittle mache zeige beschreibe liste aufgabe
""".split())
# numbers, words of three letters or more, and short names with a symbol ("A*", "C++", "C#")
_TOKEN = re.compile(r"[0-9]+(?:[.,][0-9]+)*|[^\W\d_]{3,}|[^\W\d_]{1,2}(?:\*|\+\+|#)")
STEM = 5


def stem(word: str) -> str:
    return word if word[0].isdigit() else word[:STEM]


@lru_cache(maxsize=1 << 14)
def content(text: str) -> frozenset[str]:
    """The content words of a text, lower-cased and cut to a short prefix; numbers kept whole (without separators).
    Memoised (a query is compared with every task of its plan; plans repeat example texts)."""
    low = text.lower()
    if "result_of" in low:
        low = PLACEHOLDER.sub(" ", low)
    words = set(_TOKEN.findall(low))
    words -= _STOP
    return frozenset([w[:STEM] if not w[0].isdigit() else w.replace(".", "").replace(",", "") for w in words])


@dataclass(frozen=True)
class WorkedExample:
    request: str
    tasks: tuple[str, ...]  # each task's text and search query, as written in the example plan

    @cached_property
    def request_words(self) -> frozenset[str]:
        return content(self.request)

    @cached_property
    def task_words(self) -> tuple[tuple[str, frozenset[str]], ...]:
        return tuple((t, content(t)) for t in self.tasks)


_EXAMPLE = re.compile(r"Request:\s*(?P<request>[^\n]+)\n\s*Plan:\s*(?P<plan>\[[^\n]*\])")


def worked_examples(text: str) -> tuple[WorkedExample, ...]:
    """Every "Request: ...\\nPlan: [...]" pair of a prompt text whose plan parses."""
    out = []
    for m in _EXAMPLE.finditer(text or ""):
        try:
            plan = jsontext.loads(m.group("plan"))
        except json.JSONDecodeError:
            continue
        if not isinstance(plan, list):
            continue
        tasks = []
        for t in plan:
            if isinstance(t, dict):
                tasks += [v for k in ("task", "search_query") if isinstance(v := t.get(k), str) and v.strip()]
        out.append(WorkedExample(m.group("request").strip(), tuple(tasks)))
    return tuple(dict.fromkeys(out))


def _task_texts(task) -> list[str]:
    return [v for k in ("task", "search_query") if isinstance(v := task.get(k), str) and v.strip()]


def similarity(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


_INDEX: dict[int, tuple] = {}


def _index(examples: tuple[WorkedExample, ...]):
    """word -> [(example, text)] over the examples' task texts (memoised per examples tuple): a task is compared only
    with the example texts it shares words with."""
    hit = _INDEX.get(id(examples))
    if hit is None or hit[0] is not examples:
        idx: dict[str, list[tuple[int, int]]] = {}
        texts = [list(ex.task_words) for ex in examples]
        for i, ex_texts in enumerate(texts):
            for j, (_, words) in enumerate(ex_texts):
                for w in words:
                    idx.setdefault(w, []).append((i, j))
        hit = _INDEX[id(examples)] = (examples, idx, texts, frozenset(idx))
    return hit[1], hit[2], hit[3]


_PUNCT = "()[]{}\"'«»„“”‚‘’.,;:!?"


def _vocab_hits(text: str, vocab: frozenset[str]) -> int:
    """How many distinct example words a text holds (split at spaces: a cheap first pass before ``content``)."""
    seen = set()
    for tok in text.lower().split():
        tok = tok.strip(_PUNCT)
        if tok and (tok if tok[0].isdigit() else tok[:STEM]) in vocab:
            seen.add(tok)
    return len(seen)


def parroted(query: str, task, examples: tuple[WorkedExample, ...], share: float, relevant: float,
             words=content, query_words=None) -> str | None:
    """The example text a task reproduces instead of the query, or None. ``words`` turns a text into content words
    (a memoising one may be passed); ``query_words`` gives the query's (computed only when needed)."""
    idx, ex_texts, vocab = _index(examples)
    low = query.lower()
    for text in _task_texts(task):
        if _vocab_hits(text, vocab) < 2:
            continue  # fewer than two example words anywhere in the text: nothing can be parroted (a cheap first pass)
        hits: dict[tuple[int, int], int] = {}
        for w in words(text):
            if w in idx and w not in low:  # a word of an example that the query lacks (even as part of a word)
                for key in idx[w]:
                    hits[key] = hits.get(key, 0) + 1
        for (i, j), n in sorted(hits.items()):  # the first example in prompt order (not the order of a set's hashes)
            ex_text, ex_words = ex_texts[i][j]
            if n >= 2 and len(ex_words) >= 2 and n / len(ex_words) >= share:
                q = query_words() if query_words else content(query)
                if similarity(q, examples[i].request_words) < relevant:
                    return ex_text  # (an example whose request is like the query may be followed closely)
    return None


# longest first; a root keeps at least 4 letters ("möwe" stays, "möwen" -> "möwe")
_SUFFIXES = sorted(set("""
s es ed ing ings er ers ly e ion ions ation ations ity ities ment ments al ness ive ives ic ics ical
en em ern ung ungen lich liche lichen isch ische ischen heit keit
""".split()), key=len, reverse=True)
_ROOT_MIN = 4
_PREFIX_MIN = 6  # a root this long also meets a word it begins (a compound: "relativ" in "relativitätstheorie")


@lru_cache(maxsize=1 << 16)
def root(word: str) -> str:
    """A word less one inflection or derivation suffix (numbers stay whole). Memoised: a corpus has few distinct
    words, and trying every suffix of every word was a third of the drift rule's time (issue 29)."""
    if word[0].isdigit():
        return word.replace(".", "").replace(",", "")
    for suf in _SUFFIXES:
        if word.endswith(suf) and len(word) - len(suf) >= _ROOT_MIN:
            return word[:-len(suf)]
    return word


# words of a request that name no topic: a task made of them ("What should I check?") has lost the query's subject
_GENERIC = frozenset("""
check help need needs want know should happen happens problem issue thing things something anything question answer
look please fix work works working way ways good best right wrong next first start short brief long simple
prüfe prüfen überprüfe hilf hilfe brauche brauchst soll sollte sollen wissen weiß problem frage antwort etwas
kurz kurze kurzen kurzer kurzes lang lange langen einfach einfache
""".split())


@lru_cache(maxsize=1 << 14)
def roots(text: str) -> frozenset[str]:
    """The content words of a text as roots (``root``), lower-cased; generic request words left out. Memoised (the
    query's roots serve every task of its plan)."""
    low = text.lower()
    if "result_of" in low:
        low = PLACEHOLDER.sub(" ", low)
    return frozenset(root(w) for w in set(_TOKEN.findall(low)) - _STOP - _GENERIC)


def _meet(a: str, b: str) -> bool:
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= _PREFIX_MIN and not short[0].isdigit() and long_.startswith(short)


@lru_cache(maxsize=1 << 12)
def _query_index(query_roots: frozenset[str]) -> tuple[list[str], frozenset[str]]:
    """The query's roots sorted (a root that begins one of them sits right after where it would sort), and the long
    ones that may begin a task root (``_meet``'s shorter side: at least _PREFIX_MIN letters, no number)."""
    return sorted(query_roots), frozenset(q for q in query_roots if len(q) >= _PREFIX_MIN and not q[0].isdigit())


def _meets_any(r: str, ordered: list[str], prefixes: frozenset[str]) -> bool:
    """``any(_meet(r, q) for q in query_roots)`` for a root r not among them, by lookups instead of a scan: r
    begins a longer query root (r the shorter side), or a long query root shorter than r begins r."""
    if len(r) >= _PREFIX_MIN and not r[0].isdigit():
        i = bisect_right(ordered, r)
        if i < len(ordered) and ordered[i].startswith(r):
            return True
    return bool(prefixes) and any(r[:k] in prefixes for k in range(_PREFIX_MIN, len(r)))


def shared_roots(task_roots: frozenset[str], query_roots: frozenset[str]) -> set[str]:
    """The task's roots that meet a query root: equal, or a long root that begins the other word (``_meet``)."""
    ordered, prefixes = _query_index(query_roots)
    return {r for r in task_roots if r in query_roots or _meets_any(r, ordered, prefixes)}


def unrelated(query: str, task, min_shared: int, words=content, query_words=None, match: str = "prefix") -> bool:
    """True when the task (text, search query, domain, tool arguments) shares fewer than min_shared content words
    with the query. A first pass looks the task's words up in the query's text; only a task failing it is compared
    word by word."""
    parts = _task_texts(task)
    if isinstance(task.get("domain"), str):
        parts.append(task.get("domain"))
    args = task.get("mcp_args")
    if args is not None:
        parts.append(args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
    if match == "stem":
        found = frozenset().union(*(roots(p) for p in parts)) if parts else frozenset()
        if not parts:
            return False  # no text at all: task-text reports it
        query_roots = roots(query)
        # a task of generic words only ("What should I check?") keeps nothing of a query that has a subject
        return len(shared_roots(found, query_roots)) < min_shared if found else bool(query_roots)
    low = query.lower()
    shared = set()
    for p in parts:  # a cheap first pass: the task's words, one by one, looked up in the query's text
        for w in p.lower().split():
            w = w.strip(_PUNCT)
            if len(w) >= 3 and w not in _STOP and (w if w[0].isdigit() else w[:STEM]) in low:
                shared.add(w)
                if len(shared) >= min_shared:
                    return False
    found = frozenset().union(*(words(p) for p in parts)) if parts else frozenset()
    if not found:
        return False  # nothing to compare (a bare placeholder task): task-text checks report it
    return len(found & (query_words() if query_words else content(query))) < min_shared


_FUNCTION = {"en": frozenset("the a an and of to in for is are what how with on my me please which this that".split()),
             "de": frozenset("der die das den dem ein eine einen und ist sind wie was zu von mit für ich mir mein "
                             "bitte welche nach auf im des wird".split())}
_LETTERS = re.compile(r"[^\W\d_]+")
_NUMBERS = re.compile(r"\d+(?:[.,]\d+)*")


def language(text: str) -> str | None:
    """'en' or 'de' when the text's function words clearly point one way, else None (no model is loaded)."""
    words = [w.casefold() for w in _LETTERS.findall(text)]
    en = sum(w in _FUNCTION["en"] for w in words)
    de = sum(w in _FUNCTION["de"] for w in words)
    if en > 2 * de and en >= 1:
        return "en"
    if de > 2 * en and de >= 1:
        return "de"
    return None


def other_language_related(query: str, task) -> bool:
    """A task in the other language than the query (an English task for a German request) that restates one of the
    query's numbers in its text or tool arguments: related although it shares no word. A task with no number in
    common is still judged by shared roots (cognates such as Photosynthese/photosynthesis meet; a translated noun
    does not): accepting a drifted plan costs more than losing a right one."""
    text = " ".join(_task_texts(task))
    lq, lt = language(query), language(text)
    if lq is None or lt is None or lq == lt:
        return False
    numbers = {n.replace(",", ".") for n in _NUMBERS.findall(query)}
    if not numbers:
        return False
    args = task.get("mcp_args")
    said = text + " " + (json.dumps(args, ensure_ascii=False) if args is not None else "")
    return bool(numbers & {n.replace(",", ".") for n in _NUMBERS.findall(said)})


# ---------------------------------------------------------------- no prompt echo

_EXAMPLE_LINE = re.compile(r"^\s*(?:Request|Plan)\s*:", re.I)


@dataclass(frozen=True)
class InstructionLine:
    text: str
    words: frozenset[str]


def instruction_lines(*texts: str, min_words: int = 3) -> tuple[InstructionLine, ...]:
    """The teacher prompt's own instruction lines (framings, rules, output notes), worked examples left out: what a
    planner that restates its instructions instead of the request copies ("turn the request into an execution
    plan")."""
    out = []
    for text in texts:
        for line in (text or "").splitlines():
            if _EXAMPLE_LINE.match(line):
                continue
            words = content(line)
            if len(words) >= min_words:
                out.append(InstructionLine(line.strip(), words))
    return tuple(dict.fromkeys(out))


def echoed(query: str, task, lines: tuple[InstructionLine, ...], share: float, min_words: int = 3,
           words=content, query_words=None) -> str | None:
    """The instruction line a task's text restates instead of the query, or None: the text has at least
    ``min_words`` content words, shares none with the query, and ``share`` of them stand in one instruction line."""
    text = task.get("task")
    if not isinstance(text, str) or not lines:
        return None
    found = words(text)
    if len(found) < min_words:
        return None
    q = query_words() if query_words else content(query)
    low = query.lower()
    if found & q or any(w in low for w in found):
        return None  # any word of the query (even inside a compound) and it is about the query
    for line in lines:
        if len(found & line.words) >= share * len(found):
            return line.text
    return None


# ---------------------------------------------------------------- no garbled copy


@lru_cache(maxsize=1 << 12)
def _query_letters(query: str) -> tuple[list[str], list[str], frozenset[str]]:
    """The query's words as written, case-folded, and as a set (memoised: every task of a plan reads them)."""
    words = _LETTERS.findall(query)
    folded = [w.casefold() for w in words]
    return words, folded, frozenset(folded)


def garbled(query: str, text: str, min_letters: int = 8, copy_share: float = 0.6, prefix_share: float = 0.7,
            typo_ratio: float = 0.8) -> tuple[str, str] | None:
    """(the word written, the query's word it stands for) where a task text copies the request but writes one of
    its words as another that shares only a beginning with it ("Leuchtrufflemär" for "Leuchtturmwärter"), else None.

    The text is a copy when ``copy_share`` of its words are the query's, in order (difflib's alignment of the two
    word lists). In a place where the alignment swaps query words for task words, a task word of at least
    ``min_letters`` letters that the query does not hold is garbled when it and a swapped query word of that length
    begin alike (3 letters or more) but share no more than ``prefix_share`` of the shorter word, meet by neither
    root nor prefix (``root``, ``_meet``: an inflection or a compound's part), and are not a spelling fix of each
    other (difflib ratio below ``typo_ratio``)."""
    original = _LETTERS.findall(text)
    if len(original) < 3:
        return None
    query_original, query_words, held = _query_letters(query)
    task_words = [w.casefold() for w in original]
    # one pass before any alignment (the common case ends here): a long word the query lacks, and enough of the
    # query's words to be a copy in whatever order (the alignment counts no more)
    if not any(len(w) >= min_letters for w in set(task_words).difference(held)):
        return None
    if sum(map(held.__contains__, task_words)) < copy_share * len(task_words):
        return None
    align = SequenceMatcher(None, query_words, task_words, autojunk=False)
    if sum(b.size for b in align.get_matching_blocks()) < copy_share * len(task_words):
        return None
    for op, i1, i2, j1, j2 in align.get_opcodes():
        if op != "replace":
            continue
        for j in range(j1, j2):
            w = task_words[j]
            if len(w) < min_letters or w in held:
                continue
            for i in range(i1, i2):
                q = query_words[i]
                if len(q) < min_letters:
                    continue
                begin = len(commonprefix([w, q]))
                if begin < 3 or begin > prefix_share * min(len(w), len(q)):
                    continue
                if _meet(root(w), root(q)) or SequenceMatcher(None, w, q, autojunk=False).ratio() >= typo_ratio:
                    continue
                return original[j], query_original[i]
    return None
