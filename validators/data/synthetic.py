"""A synthetic corpus shaped like the reference's planner dataset, for benchmarks and tests.

Five framings of a ~2,500-token system prompt (about 12.8k characters) whose category block varies per record
(renames, novel categories, random subsets), queries of 5-200 tokens in English and German, JSON plan targets of
13-300 tokens, and a few five-message correction samples. Deterministic for a given seed; needs no files.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

FRAMINGS = [
    "You are the planner of a sovereign mixture-of-experts orchestrator. Every request is carried out by specialist "
    "expert models and exact tools; you split it into tasks and route each task to the expert or tool that does it best.",
    "Decompose the user request into expert tasks. Output JSON only.",
    "This is the planning layer of a multi-expert system. It sits between the user and the experts and decides which "
    "subtasks a request contains and who handles each one. Nothing here is shown to the user.",
    "Task: turn the following request into an execution plan.",
    "You are an agent whose only output is a plan. You never answer a request yourself; you write the JSON plan that "
    "other experts and tools will execute.",
]

CATEGORIES = {
    "general": "General questions, explanations and summaries; the fallback",
    "technical_support": "Troubleshooting, configuration, DevOps and networking; never plain arithmetic",
    "code_reviewer": "Writing, reviewing, debugging and refactoring source code",
    "math": "Proofs, derivations and mathematical theory; not plain arithmetic",
    "data_analyst": "Analysing data, interpreting statistics, choosing ML models",
    "science": "Physics, chemistry, biology and research methodology",
    "creative_writer": "Stories, poems, song lyrics and worldbuilding",
    "medical_consult": "Symptoms, medicines and health information; never a diagnosis",
    "legal_advisor": "Interpreting law; for a cited paragraph only after legal_get_paragraph",
    "translation": "Translating text between languages",
    "reasoning": "Logic puzzles, argumentation and step-by-step deduction",
    "vision": "Images, diagrams or PDF pages; only with an image input marker",
    "agentic_coder": "Iterative multi-file software projects",
}
RENAMES = {"creative_writer": ["creative_writing", "content_writer"], "data_analyst": ["data_analysis", "analytics"],
           "technical_support": ["it_support", "helpdesk"], "medical_consult": ["medical_advisor"],
           "translation": ["translator"], "science": ["scientific_analysis"]}
NOVEL = {"long_context": "Working through very long documents", "security_analysis": "Threat models and hardening",
         "web_researcher": "Gathering information from the web", "knowledge_healing": "Fixing stale knowledge",
         "tool_agent": "Driving external tools step by step", "mail_classify": "Sorting and triaging e-mail",
         "skill_detector": "Recognising reusable skills", "memory_recall": "Answering from earlier turns",
         "devops_sre": "Deployments, monitoring and incidents"}
STRUCTURAL = {"research": "Web research for current or external facts (requires search_query)",
              "precision_tools": "Exact computation by a deterministic tool (requires mcp_tool, mcp_args)",
              "dynamic": "A niche specialist built on demand (requires domain)"}

TOOLS = [
    ("calculate", "expression: string", "Evaluates an arithmetic expression exactly", {"expression": "2840 * 0.17"}),
    ("solve_equation", "equation: string, variable: string?", "Solves an equation", {"equation": "2*x+3=7"}),
    ("statistics_calc", "data: string, operations: string?", "Descriptive statistics", {"data": "1,2,3"}),
    ("prime_factorize", "n: integer", "Prime factorisation", {"n": 360}),
    ("gcd_lcm", "a: integer, b: integer, operation: gcd|lcm|both?", "GCD and LCM", {"a": 48, "b": 18}),
    ("date_diff", "date1: string, date2: string", "Days between two ISO dates", {"date1": "2024-03-01",
                                                                                 "date2": "2024-12-24"}),
    ("date_add", "base_date: string, days: integer?", "Shifts an ISO date", {"base_date": "2024-01-31", "days": 90}),
    ("day_of_week", "date_str: string", "Weekday of an ISO date", {"date_str": "2024-07-15"}),
    ("unit_convert", "value: number, from_unit: string, to_unit: string", "Unit conversion",
     {"value": 100, "from_unit": "km/h", "to_unit": "m/s"}),
    ("subnet_calc", "cidr: string", "Subnet facts for a CIDR block", {"cidr": "192.168.1.0/24"}),
    ("hash_text", "text: string, algorithm: string?", "Cryptographic hash", {"text": "hello", "algorithm": "sha256"}),
    ("base64_codec", "text: string, mode: encode|decode?", "Base64", {"text": "Hallo Welt", "mode": "encode"}),
    ("regex_extract", "pattern: string, text: string, flags: string?", "Regex matches", {"pattern": "[0-9]+",
                                                                                         "text": "a1b22"}),
    ("text_analyze", "text: string", "Word and sentence counts", {"text": "The quick brown fox."}),
    ("roman_numeral", "value: string", "Roman numerals", {"value": "2024"}),
    ("json_query", "json_str: string, path: string", "Value at a JSON path", {"json_str": "{\"a\":1}", "path": "a"}),
    ("legal_get_paragraph", "law: string, paragraph: string", "Wording of one paragraph", {"law": "BGB",
                                                                                          "paragraph": "242"}),
    ("legal_get_law_overview", "law: string", "Table of contents of a law", {"law": "BGB"}),
    ("legal_search_laws", "query: string", "Finds laws by keyword", {"query": "Mietrecht"}),
    ("legal_fulltext_search", "law: string, query: string", "Keyword search in a law", {"law": "BGB",
                                                                                       "query": "Treu und Glauben"}),
]

_WORDS_EN = ("the plan task expert tool result request answer number value system network server data report "
             "customer invoice deadline project budget summary analysis schedule document policy contract risk "
             "quality test release feature module function error log user account payment order").split()
_WORDS_DE = ("der die das Plan Aufgabe Experte Werkzeug Ergebnis Anfrage Antwort Zahl Wert System Netzwerk Server "
             "Daten Bericht Kunde Rechnung Frist Projekt Budget Zusammenfassung Analyse Zeitplan Dokument Vertrag "
             "Risiko Qualität Prüfung Freigabe Funktion Fehler Protokoll Benutzer Konto Zahlung Bestellung für über "
             "größer Straße schön").split()
_OPENERS = ["What is {a} * {b} + {c}?", "Berechne {a} geteilt durch {b}.", "Explain the {w} of the {w2}.",
            "Erkläre den Unterschied zwischen {w} und {w2}.", "Write a Python function that sorts a {w} list.",
            "Was bedeutet § {a} BGB für {w}?", "Summarise this {w}: ", "Fasse zusammen: ", "How do I fix my {w}?",
            "Implement a Tetris clone in Python.", "Wie viele Tage liegen zwischen dem 2024-03-01 und dem 2024-12-24?",
            "Convert {a} km to miles.", "Berechne den Heizwärmebedarf eines Hauses mit {a} m² Wohnfläche."]


def _rules_block(rng: random.Random) -> str:
    r = random.Random(7)  # the rules text is fixed across records
    lines = ["MANDATORY PLANNING RULES", ""]
    for section in range(5):
        lines.append(f"Section {section + 1}: " + " ".join(r.choice(_WORDS_EN) for _ in range(4)).title())
        for item in range(5):
            lines.append(f"- Rule {section + 1}.{item + 1}: " + " ".join(r.choice(_WORDS_EN + _WORDS_DE)
                                                                    for _ in range(r.randint(8, 18))) + ".")
        lines.append("")
    return "\n".join(lines).strip()


def _catalog_block() -> str:
    lines = []
    for name, sig, desc, example in TOOLS:
        lines.append(f"- {name}({sig}): {desc}. Example mcp_args: {json.dumps(example, ensure_ascii=False)}")
    return "\n".join(lines)


def _examples_block() -> str:
    r = random.Random(11)
    out = ["WORKED EXAMPLES", ""]
    for i in range(6):
        q = r.choice(_OPENERS).format(a=r.randint(2, 999), b=r.randint(2, 99), c=r.randint(1, 9),
                                      w=r.choice(_WORDS_EN), w2=r.choice(_WORDS_EN))
        out.append(f"Request: {q}")
        out.append("Plan: " + json.dumps(_plan(r, q, ("general", "research", "precision_tools", "code_reviewer"), 2),
                                         ensure_ascii=False))
        out.append("")
    return "\n".join(out).strip()


_RULES = _rules_block(random.Random(0))
_CATALOG = _catalog_block()
_EXAMPLES = None


def _taxonomy(rng: random.Random) -> tuple[str, list[str], dict[str, str]]:
    pool, renamed = [], {}
    for name, desc in CATEGORIES.items():
        alts = RENAMES.get(name)
        if alts and rng.random() < 0.35:
            new = rng.choice(alts)
            renamed[new] = name
            pool.append((new, desc))
        else:
            pool.append((name, desc))
    for name, desc in NOVEL.items():
        if rng.random() < 0.30:
            pool.append((name, desc))
    rng.shuffle(pool)
    kept = pool[:rng.randint(3, len(pool))]
    if all(n != "general" for n, _ in kept) and rng.random() < 0.92:
        kept[-1] = ("general", CATEGORIES["general"])
    lines = [f"- {n.ljust(21)}{d}" for n, d in kept] + [f"- {n.ljust(21)}{d}" for n, d in STRUCTURAL.items()]
    names = [n for n, _ in kept] + list(STRUCTURAL)
    return "\n".join(lines), names, {n: c for n, c in renamed.items() if n in names}


def _plan(rng: random.Random, query: str, names, max_tasks: int) -> list[dict]:
    plan = []
    for i in range(rng.randint(1, max_tasks)):
        cat = rng.choice(list(names))
        task = {"id": f"t{i + 1}", "task": " ".join(rng.choice(_WORDS_EN + _WORDS_DE)
                                                     for _ in range(rng.randint(3, 40))) + ".", "category": cat}
        if cat == "precision_tools":
            name, _, _, example = rng.choice(TOOLS)
            task["mcp_tool"], task["mcp_args"] = name, example
        elif cat == "research":
            task["search_query"] = " ".join(rng.choice(_WORDS_EN) for _ in range(rng.randint(2, 6)))
        elif cat == "dynamic":
            task["domain"] = rng.choice(["Bauphysik", "Geotechnik", "GMP", "Seerecht", "Immobilienbewertung"])
        if i and rng.random() < 0.5:
            task["depends_on"] = f"t{i}"
        plan.append(task)
    return plan


def system_prompt(framing: int, taxonomy_block: str) -> str:
    global _EXAMPLES
    if _EXAMPLES is None:
        _EXAMPLES = _examples_block()
    return (f"{FRAMINGS[framing]}\n\nCATEGORIES:\n{taxonomy_block}\n\n{_RULES}\n\n"
            f"PRECISION TOOLS (mcp_tool and its mcp_args):\n{_CATALOG}\n\n{_EXAMPLES}\n\n"
            "Answer with the JSON array only, no prose and no code fences.")


@dataclass(frozen=True)
class SynthRecord:
    id: str
    query: str
    plan: list
    messages: tuple[dict, ...]  # system, user, assistant (5 messages for a correction sample)
    taxonomy_shown: tuple[str, ...]
    taxonomy_renamed: dict
    framing: str


def _query(rng: random.Random) -> str:
    words = _WORDS_DE if rng.random() < 0.5 else _WORDS_EN
    opener = rng.choice(_OPENERS).format(a=rng.randint(2, 9999), b=rng.randint(2, 999), c=rng.randint(1, 99),
                                         w=rng.choice(words), w2=rng.choice(words))
    n = int(rng.triangular(0, 110, 6))
    tail = " ".join(rng.choice(words) for _ in range(n))
    if n > 60 and rng.random() < 0.5:
        cut = rng.randint(1, n - 1)
        parts = tail.split(" ")
        tail = " ".join(parts[:cut]) + "\n" + " ".join(parts[cut:])
    return (opener + " " + tail).strip()


def corpus(n: int, seed: int = 0, correction_share: float = 0.05, start: int = 0) -> list[SynthRecord]:
    """Records start..start+n-1 of the corpus for this seed (each record depends only on seed and index)."""
    return [make_record(seed, i, correction_share) for i in range(start, start + n)]


def make_record(seed: int, i: int, correction_share: float = 0.05) -> SynthRecord:
    r = random.Random(f"{seed}:{i}")
    framing = r.randrange(5)
    block, names, renamed = _taxonomy(r)
    sys_text = system_prompt(framing, block)
    query = _query(r)
    plan = _plan(r, query, names, 4)
    target = json.dumps(plan, ensure_ascii=False, separators=(",", ":"))
    msgs = [{"role": "system", "content": sys_text}, {"role": "user", "content": query},
            {"role": "assistant", "content": target}]
    if r.random() < correction_share:
        wrong = json.dumps(plan[:1], ensure_ascii=False, separators=(",", ":"))
        msgs = msgs[:2] + [{"role": "assistant", "content": wrong},
                           {"role": "user", "content": "Review the plan against PRECISION-FIRST, LEGAL §-PATTERN "
                                                       "and RESEARCH-BEFORE-CODE; correct it or return it unchanged."},
                           {"role": "assistant", "content": target}]
    return SynthRecord(f"syn-{seed}-{i:07d}", query, plan, tuple(msgs), tuple(names), renamed, "ABCDE"[framing])
