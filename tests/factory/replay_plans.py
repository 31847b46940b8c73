"""The replay teacher's plan requests: classes of phrasing, each with a right plan and a wrong one.

One arithmetic template ("What is A * B + C?") put every plan record of a rehearsal through one path of the routing
rules, so the gate at volume and the cost of checking a plan were those of one kind of request. Here each class is a
kind of request the reference's planner meets (arithmetic in English and German, a percentage, a power, a unit
conversion, a day count, a weekday, a GCD, a mean, a cited German law paragraph, an algorithm to implement, a poem, a
translation, a one-line fact), written with slots that seed input j fills, so that the queries of a run are distinct.
A class's right plan is what its requests need; its wrong plan is a typical teacher mistake for it (an invented
operand, a date off by years, a creative or translation request given to `general`, a law paragraph explained
without fetching it, code written without the research it needs, research without a search query).

What the rules say of them is never written down here: `wrong_codes` runs the real record checker of the replay
plan spec (moe-routing@6 with its catalog, taxonomy and prompt) on a spread sample of each class's requests and
takes the reject codes of its wrong plan, refusing a class whose right plan is rejected or whose wrong plan's codes
differ within the sample.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable

TOPICS = ("the sea", "autumn leaves", "a lighthouse", "city rain", "an old dog", "the first snow", "a night train")
RELATIVES = ("sister", "grandmother", "friend", "teacher", "colleague")
PHRASES = ("Good morning, how are you?", "The meeting is moved to Friday.", "Please close the window.",
           "Where is the station?", "The invoice is attached.")
ALGORITHMS = ("Dijkstra's shortest path algorithm", "the A* search algorithm", "a red-black tree",
              "the Raft consensus algorithm")
BOOKS = ("Pride and Prejudice", "The Trial", "Moby-Dick", "Faust", "War and Peace", "Don Quixote")
LAWS = ("BGB", "StGB", "HGB")
INVENTED = 99991  # a number no request holds: every slot stays below it (unit and mean values wrap at 90,000)


def _task(task: str, category: str, **fields) -> dict:
    return {"task": task, "category": category, **fields}


def _tool(task: str, tool: str, args: dict, **fields) -> dict:
    return _task(task, "precision_tools", mcp_tool=tool, mcp_args=args, **fields)


def _date(y: int, m: int, d: int) -> str:
    return f"{y:04d}-{m:02d}-{d:02d}"


@dataclass(frozen=True)
class PlanClass:
    name: str
    query: str  # a format string over the slots
    slots: Callable[[int], dict]  # seed input j -> slot values (str or int)
    right: Callable[[dict], list]  # slot values as read back from a query (strings) -> the right plan
    wrong: Callable[[dict], list]
    lang: str = "en"

    def request(self, j: int) -> str:
        """The class's request for slot input j."""
        return self.query.format(**self.slots(j))

    @functools.cached_property
    def pattern(self) -> re.Pattern:
        """The query format as a regular expression that reads the slots back from a request."""
        parts = re.split(r"\{(\w+)\}", self.query)
        rx = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts))
        return re.compile(rx + r"\Z")


def _n(s, key) -> int:
    return int(s[key])


def _calculation(name: str, query: str, slots, task: str, expression: str, wrong: str, lang: str = "en") -> PlanClass:
    """A class answered by one `calculate` call; its wrong plan computes with an invented operand."""
    def plan(expr: str):
        return lambda s: [_tool(task.format(**s), "calculate", {"expression": expr.format(**s, invented=INVENTED)})]

    return PlanClass(name, query, slots, plan(expression), plan(wrong), lang)


CLASSES = (
    _calculation("arithmetic", "What is {a} * {b} + {c}?",
                 lambda j: {"a": 1000 + j % 9000, "b": 11 + (j // 9000) % 89, "c": 2 + j // 801000},
                 "Compute {a} * {b} + {c} exactly", "{a} * {b} + {c}", "{a} * {b} + {c} + {invented}"),
    _calculation("percent", "What is {p}% of {a}?", lambda j: {"p": 11 + (j // 9000) % 89, "a": 1000 + j % 9000},
                 "Compute {p}% of {a}", "{a} * {p} / 100", "{a} * {invented} / 100"),
    _calculation("power", "How much is {a} to the power of {e}?",
                 lambda j: {"a": 1000 + j % 9000, "e": 2 + (j // 9000) % 3},
                 "Compute {a} to the power of {e}", "{a} ** {e}", "{a} ** {invented}"),
    _calculation("division_de", "Berechne {a} geteilt durch {b}.",
                 lambda j: {"a": 1000 + j % 9000, "b": 11 + (j // 9000) % 89},
                 "Berechne {a} geteilt durch {b}", "{a} / {b}", "{a} / {invented}", "de"),
    PlanClass("unit_conversion", "Convert {v} kilometers to miles.",
              lambda j: {"v": 5 + j % 90000},
              lambda s: [_tool(f"Convert {s['v']} km to miles", "unit_convert",
                               {"value": _n(s, "v"), "from_unit": "km", "to_unit": "mile"})],
              lambda s: [_tool(f"Convert {s['v']} km to miles", "unit_convert",
                               {"value": _n(s, "v") + INVENTED, "from_unit": "km", "to_unit": "mile"})]),
    PlanClass("day_count", "How many days are there between {d1} and {d2}?",
              lambda j: {"d1": _date(2000 + j % 30, 1 + (j // 30) % 12, 1 + (j // 360) % 28),
                         "d2": _date(2031 + (j // 10080) % 60, 1 + (j // 30) % 12, 1 + (j // 360) % 28)},
              lambda s: [_tool("Count the days between the two dates", "date_diff",
                               {"date1": s["d1"], "date2": s["d2"]})],
              lambda s: [_tool("Count the days between the two dates", "date_diff",
                               {"date1": s["d1"], "date2": f"{int(s['d2'][:4]) + 3}{s['d2'][4:]}"})]),
    PlanClass("weekday", "What day of the week was {d}?",
              lambda j: {"d": _date(1800 + j % 220, 1 + (j // 220) % 12, 1 + (j // 2640) % 28)},
              lambda s: [_tool("Find the weekday of the date", "day_of_week", {"date_str": s["d"]})],
              lambda s: [_tool("Find the weekday of the date", "day_of_week",
                               {"date_str": f"{int(s['d'][:4]) + 3}{s['d'][4:]}"})]),
    PlanClass("gcd", "What is the greatest common divisor of {a} and {b}?",
              lambda j: {"a": 1000 + j % 9000, "b": 6 * (11 + (j // 9000) % 89)},
              lambda s: [_tool(f"Compute gcd({s['a']}, {s['b']})", "gcd_lcm",
                               {"a": _n(s, "a"), "b": _n(s, "b"), "operation": "gcd"})],
              lambda s: [_tool(f"Compute gcd({s['a']}, {s['b']})", "gcd_lcm",
                               {"a": _n(s, "a"), "b": INVENTED, "operation": "gcd"})]),
    PlanClass("mean", "What is the mean of {a}, {b}, {c} and {d}?",
              lambda j: {"a": 1000 + j % 9000, "b": 11 + (j // 9000) % 89, "c": 2 + j % 7, "d": 5 + j % 90000},
              lambda s: [_tool("Compute the mean of the numbers", "statistics_calc",
                               {"data": f"{s['a']},{s['b']},{s['c']},{s['d']}", "operations": "mean"})],
              lambda s: [_tool("Compute the mean of the numbers", "statistics_calc",
                               {"data": f"{s['a']},{s['b']},{s['c']},{INVENTED}", "operations": "mean"})]),
    PlanClass("law_paragraph", "Was regelt § {p} {law}? (Fall {j})",
              lambda j: {"p": 100 + j % 800, "law": LAWS[(j // 800) % len(LAWS)], "j": j},
              lambda s: [_tool(f"Hole den Wortlaut von § {s['p']} {s['law']}", "legal_get_paragraph",
                               {"law": s["law"], "paragraph": s["p"]}, id="t1"),
                         _task(f"Erkläre § {s['p']} {s['law']}", "legal_advisor", id="t2", depends_on="t1")],
              lambda s: [_task(f"Erkläre § {s['p']} {s['law']}", "legal_advisor")], "de"),
    PlanClass("implement", "Implement {algo} in Python for project {j}.",
              lambda j: {"algo": ALGORITHMS[j % len(ALGORITHMS)], "j": j},
              lambda s: [_task(f"Research how {s['algo']} works", "research",
                               search_query=f"{s['algo']} explained", id="t1"),
                         _task(f"Implement {s['algo']} in Python", "code_reviewer", id="t2", depends_on="t1")],
              lambda s: [_task(f"Write a Python implementation of {s['algo']}", "code_reviewer")]),
    PlanClass("poem", "Write a short poem about {topic} for my {who} (draft {j}).",
              lambda j: {"topic": TOPICS[j % len(TOPICS)], "who": RELATIVES[(j // len(TOPICS)) % len(RELATIVES)],
                         "j": j},
              lambda s: [_task(f"Write a short poem about {s['topic']}", "creative_writer")],
              lambda s: [_task(f"Write a short poem about {s['topic']}", "general")]),
    PlanClass("translation", "Translate '{text}' into German (note {j}).",
              lambda j: {"text": PHRASES[j % len(PHRASES)], "j": j},
              lambda s: [_task(f"Translate '{s['text']}' into German", "translation")],
              lambda s: [_task(f"Translate '{s['text']}' into German", "general")]),
    PlanClass("fact", "Who wrote {book}? (question {j})",
              lambda j: {"book": BOOKS[j % len(BOOKS)], "j": j},
              lambda s: [_task(f"Name the author of {s['book']}", "general")],
              lambda s: [_task(f"Find the author of {s['book']}", "research")]),
)


def plan_query(i: int) -> tuple[PlanClass, str]:
    """Seed input i: (its class, its request). Classes take turns; j = i // len(CLASSES) fills the slots. The
    requests are distinct for the first 1,260,000 (90,000 a class: a unit conversion's value wraps there)."""
    cls = CLASSES[i % len(CLASSES)]
    return cls, cls.request(i // len(CLASSES))


def read_plan_query(query: str) -> tuple[PlanClass, dict] | None:
    """The class of a request and its slots as written, or None for a request of no class."""
    for cls in CLASSES:
        m = cls.pattern.match(query)
        if m:
            return cls, m.groupdict()
    return None


def plan_answer(query: str, wrong: bool) -> list[dict]:
    """The right (or wrong) plan for a request of a class."""
    found = read_plan_query(query)
    if found is None:
        raise ValueError(f"no plan class reads {query!r}")
    cls, slots = found
    return cls.wrong(slots) if wrong else cls.right(slots)


# spread over every slot's cycle, with the seeds where a slot once took the invented number's old value (7919)
SAMPLE = (0, 1, 2, 3, 5, 8, 13, 29, 61, 127, 255, 800, 2047, 6919, 7914, 9001, 12345, 65537, 89995, 99991, 250000,
          801001)


@functools.lru_cache(maxsize=1)
def wrong_codes() -> dict[str, tuple[str, ...]]:
    """Per class, the reject codes the real routing rules give its wrong plan (the replay plan spec's rule set,
    catalog and taxonomy), from SAMPLE's requests of it; a class whose right plan gets a reject, or whose wrong plan
    gets other codes on another request, is an error (the class no longer means what it says)."""
    import tempfile
    from pathlib import Path

    from mashbill.specs import load_spec
    from mashbill.validators.checker import RecordChecker

    from tests.factory.rehearsal import write_seeds, write_spec

    with tempfile.TemporaryDirectory() as tmp:  # the replay plan spec itself: its rules, catalog, taxonomy, prompt
        seeds = write_seeds(Path(tmp) / "plan.jsonl", [{"query": plan_query(0)[1], "lang": "en", "type": "arithmetic"}])
        checker = RecordChecker.for_spec(load_spec(write_spec(Path(tmp), "plan", seeds)))

    def rejects(query: str, plan: list) -> tuple[str, ...]:
        return tuple(sorted({v.code for v in checker.check({"query": query}, plan) if v.severity == "reject"}))

    out = {}
    for cls in CLASSES:
        seen = set()
        for j in SAMPLE:
            query = cls.request(j)
            slots = cls.pattern.match(query).groupdict()
            right = rejects(query, cls.right(slots))
            if right:
                raise AssertionError(f"plan class {cls.name}: the right plan for {query!r} is rejected: {right}")
            seen.add(rejects(query, cls.wrong(slots)))
        if len(seen) != 1 or not next(iter(seen)):
            raise AssertionError(f"plan class {cls.name}: its wrong plan gets {sorted(seen)} over the sample, not one "
                                 "non-empty set of reject codes")
        out[cls.name] = seen.pop()
    return out
