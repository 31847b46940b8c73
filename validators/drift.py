"""No parroting, no drift: a plan's tasks are about the query, not about the teacher prompt's worked examples.

- ``worked_examples`` reads the ``Request: ... / Plan: [...]`` pairs out of a prompt text (the spec's prompt blocks, or
  the system prompt of a record made elsewhere).
- ``parroted``: a task (its text or search query) that reproduces an example task's content words that the query does
  not contain, when the query is not itself like that example's request ("classic Snake game rules" for a question
  about Heizwärmebedarf).
- ``unrelated``: a task that shares no content word with the query (research "translate" for a valuation question).

Words are compared by a short prefix (``stem``), so "Verkehrswert"/"Verkehrswertes" and "calculate"/"calculation"
meet; numbers are content. The thresholds are in the rule set's ``drift:`` section.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from mashbill.validators.expr import PLACEHOLDER

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
_TOKEN = re.compile(r"[0-9]+(?:[.,][0-9]+)*|[^\W\d_]+", re.UNICODE)
STEM = 5


def stem(word: str) -> str:
    return word if word[0].isdigit() else word[:STEM]


def content(text: str) -> set[str]:
    """The content words of a text, lower-cased and cut to a short prefix; numbers kept whole."""
    out = set()
    for w in _TOKEN.findall(PLACEHOLDER.sub(" ", text.lower())):
        if w[0].isdigit():
            out.add(re.sub(r"[.,]", "", w))
        elif len(w) >= 3 and w not in _STOP:
            out.add(stem(w))
    return out


@dataclass(frozen=True)
class WorkedExample:
    request: str
    tasks: tuple[str, ...]  # each task's text and search query, as written in the example plan

    @property
    def request_words(self) -> set[str]:
        return content(self.request)


_EXAMPLE = re.compile(r"Request:\s*(?P<request>[^\n]+)\n\s*Plan:\s*(?P<plan>\[[^\n]*\])")


def worked_examples(text: str) -> tuple[WorkedExample, ...]:
    """Every "Request: ...\\nPlan: [...]" pair of a prompt text whose plan parses."""
    out = []
    for m in _EXAMPLE.finditer(text or ""):
        try:
            plan = json.loads(m.group("plan"))
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


def parroted(query: str, task, examples: tuple[WorkedExample, ...], share: float, relevant: float) -> str | None:
    """The example text a task reproduces instead of the query, or None."""
    q = content(query)
    for ex in examples:
        if similarity(q, ex.request_words) >= relevant:
            continue  # the query is like this example's request: sharing its wording is expected
        for text in _task_texts(task):
            words = content(text)
            for ex_text in ex.tasks:
                ex_words = content(ex_text)
                if len(ex_words) < 2:
                    continue
                copied = (words & ex_words) - q
                if len(copied) / len(ex_words) >= share and len(copied) >= 2:
                    return ex_text
    return None


def unrelated(query: str, task, min_shared: int) -> bool:
    """True when the task (text, search query, domain, tool arguments) shares fewer than min_shared content words
    with the query."""
    parts = _task_texts(task)
    for k in ("domain", "mcp_args"):
        v = task.get(k)
        if v is not None:
            parts.append(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
    words = set().union(*(content(p) for p in parts)) if parts else set()
    if not words:
        return False  # nothing to compare (a bare placeholder task): task-text checks report it
    return len(words & content(query)) < min_shared
