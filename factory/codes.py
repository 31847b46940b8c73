"""Every code the project emits, in one place: the code, its default severity, the layer that emits it and what it
means in one line.

Registering a code is one line in ``_TABLE`` below. ``tests/factory/test_codes.py`` scans the source and the rule
sets for code literals and fails on any that is not registered; ``mashbill codes`` lists them and the README's code
table is rendered from here (``mashbill codes --update-doc docs/codes.md`` rewrites it). Rule codes (PLAN, HR, ARG,
COPY, DRIFT) are also in the rule set file, which may change their severity: the severity here is the shipped one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    code: str
    severity: str  # reject | penalty | flag (the default; a rule set may override rule codes)
    source: str  # where it is emitted: factory, validate, rules, complexity, curation, review
    meaning: str
    rule: str = ""  # for rule codes: the rule id in the rule set (validators/plans/routing.py or complexity.py implements it)


# code, severity, source, meaning (and the rule id for rule codes): one line per code
_TABLE = [
    ("PARSE001", "reject", "factory", "the teacher's output is not JSON (or nests over 64 levels, holds NaN or a lone surrogate)"),
    ("PARSE002", "reject", "factory", "the teacher's output is empty"),
    ("TRUNC001", "reject", "factory", "the output hit max_tokens before it finished"),
    ("TEACHER001", "reject", "factory", "the teacher call failed after every retry"),
    ("SCHEMA001", "reject", "factory", "the output does not match the spec's output schema"),
    ("SCHEMA002", "reject", "validate", "the output is missing or not JSON"),
    ("PLAN001", "reject", "rules", "the plan has too few or too many tasks (or is not a plan)", "task-count"),
    ("PLAN002", "reject", "rules", "a task is not an object with task text and a category", "task-text"),
    ("PLAN003", "reject", "rules", "a category was not in the taxonomy shown for this record", "category-shown"),
    ("PLAN004", "reject", "rules", "a research task has no search_query", "research-query"),
    ("PLAN005", "reject", "rules", "a dynamic task has no domain", "dynamic-domain"),
    ("PLAN006", "reject", "rules", "a precision_tools task names no tool or an unknown tool", "tool-known"),
    ("PLAN007", "reject", "rules", "a precision tool's mcp_args do not match its argument schema", "tool-args"),
    ("PLAN008", "reject", "rules", "duplicate task ids, a depends_on naming no task, or a dependency cycle", "dependencies"),
    ("PLAN009", "reject", "rules", "a research task's search_query is a run-together identifier (snake_case, camelCase)", "search-query-text"),
    ("PLAN010", "reject", "rules", "two tasks of one plan have the same text (after normalisation)", "duplicate-tasks"),
    ("PLAN011", "reject", "rules", "a task's text is cut off (ends with a comma, an open quote, a dangling article ...)", "task-complete"),
    ("PLAN012", "reject", "rules", "a task that is not precision_tools carries mcp_tool or mcp_args (a stray tool call)", "tool-fields"),
    ("HR001", "reject", "rules", "PRECISION-FIRST: a query needing an exact computation has no precision_tools task", "precision-first"),
    ("HR002", "reject", "rules", "the precision task uses a tool that does not serve the query's intent", "precision-tool-match"),
    ("HR003", "reject", "rules", "a cited § of German law is not fetched with legal_get_paragraph", "legal-paragraph"),
    ("HR004", "reject", "rules", "the legal_advisor task is missing or comes before the fetch", "legal-order"),
    ("HR005", "penalty", "rules", "legal_get_paragraph fetches another law or paragraph than cited", "legal-args"),
    ("HR006", "reject", "rules", "implementing a known game/algorithm/format lacks a research or code task", "research-before-code"),
    ("HR007", "penalty", "rules", "the research task comes after the code task", "research-order"),
    ("HR008", "flag", "rules", "a niche specialist field has no dynamic task", "niche-dynamic"),
    ("HR009", "reject", "rules", "a precision tool call on a query that asks for no computation, with no argument from the query", "tool-unfounded"),
    ("FIT001", "reject", "rules", "an unmistakable creative-writing request has no creative_writer task (when shown; @8: research only when not)", "creative-fit"),
    ("FIT002", "reject", "rules", "an unmistakable translation request has no translation task (when shown)", "translation-fit"),
    ("FIT003", "reject", "rules", "a question about an earlier turn of the conversation has no memory_recall task (when shown), or no task that can answer it", "memory-fit"),
    ("FIT004", "reject", "rules", "a request that plainly needs a shown category (medical_consult ...) has no task of it", "category-fit"),
    ("ARG001", "reject", "rules", "a precision tool's argument has a number neither in the query nor from a task", "arg-numbers"),
    ("ARG002", "reject", "rules", "the expression does not compute what the query states (an operation was lost)", "arg-operation"),
    ("ARG003", "reject", "rules", "unit_convert units or date_* dates are not the ones the query names", "arg-units-dates"),
    ("ARG004", "reject", "rules", "a precision tool's expression cannot be parsed", "arg-expression"),
    ("COPY001", "reject", "rules", "the plan reproduces a worked example of the teacher's prompt, not the query", "no-parroting"),
    ("COPY002", "reject", "rules", "a task restates the teacher prompt's own instructions, not the query", "no-prompt-echo"),
    ("COPY003", "reject", "rules", "a task copies the request but writes one of its words as another", "garbled-copy"),
    ("DRIFT001", "reject", "rules", "a task shares no content with the query", "no-drift"),
    ("CPLX001", "reject", "complexity", "a query asking about an earlier turn is not labelled memory_recall", "recall-cue"),
    ("CPLX002", "reject", "complexity", "an internal utility request (title, topic check) is not labelled trivial", "utility-phrase"),
    ("CPLX003", "reject", "complexity", "a query of 80 or more words is labelled trivial", "long-not-trivial"),
    ("CPLX004", "reject", "complexity", "memory_recall with no recall phrase and no history", "recall-unfounded"),
    ("CPLX005", "reject", "complexity", "a short factual lookup or greeting is labelled complex", "short-lookup-not-complex"),
    ("CPLX006", "flag", "complexity", "the label disagrees with the reference heuristic (for a reviewer)", "heuristic-agrees"),
    ("CPLX007", "reject", "complexity", "complex without complexity evidence (a short single job)", "complex-without-evidence"),
    ("CPLX008", "reject", "complexity", "trivial on a request that asks for work (a calculation, code, a text, a how-to)", "trivial-needs-work"),
    ("CPLX009", "reject", "complexity", "moderate on a long input (complex) or a short factual lookup with no cue of work (trivial)", "moderate-out-of-range"),
    ("SPAN001", "reject", "validate", "the target is partly beyond max_seq_len"),
    ("SPAN002", "reject", "validate", "the target is entirely beyond max_seq_len"),
    ("SPAN003", "reject", "validate", "the prompt alone fills the window"),
    ("SPAN004", "flag", "validate", "left truncation drops the start of the prompt"),
    ("SPAN005", "reject", "validate", "the loss covers no token"),
    ("SPAN006", "reject", "validate", "the assistant turn is not found in the rendered chat"),
    ("SPAN007", "reject", "validate", "the chat template refused the conversation"),
    ("SPAN008", "reject", "validate", "an assistant turn is empty or whitespace-only"),
    ("SPAN010", "reject", "validate", "a correction sample's wrong assistant turn is trained"),
    ("SPAN011", "reject", "validate", "the span cross-check's second tokenizer (llama.cpp, tokenizer.json) tokenizes the example differently"),
    ("DUP001", "reject", "validate", "exact duplicate after normalisation"),
    ("DUP002", "penalty", "validate", "near duplicate (a MinHash/LSH cluster member that is not kept)"),
    ("LEAK001", "reject", "validate", "matches an item of a holdout set or the eval split"),
    ("PII001", "flag", "validate", "e-mail address"),
    ("PII002", "flag", "validate", "phone number"),
    ("PII003", "flag", "validate", "IBAN"),
    ("PII004", "flag", "validate", "personal name"),
    ("FMT001", "reject", "validate", "an input file's row is not UTF-8, not JSON or not an object"),
    ("FMT002", "reject", "validate", "an input file's row lacks a required field or has the wrong type"),
    ("FMT003", "reject", "validate", "an input file's row belongs to another format"),
    ("GEN000", "reject", "curation", "the record was not accepted at generation"),
    ("REVIEW001", "reject", "review", "a reviewer rejected the record"),
    ("REVIEW002", "reject", "review", "the spec requires review and no reviewer decided"),
    ("REVIEW003", "reject", "review", "reviewers disagree (accept vs reject)"),
    ("REVIEW004", "flag", "review", "the reviewer's correction is invalid and was not used"),
    ("PREF001", "reject", "curation", "preference pair: the chosen plan fails a rule"),
    ("PREF002", "reject", "curation", "preference pair: the rejected plan passes every rule"),
    ("PREF003", "reject", "curation", "preference pair: chosen and rejected are identical"),
    ("PREF004", "reject", "curation", "preference pair: the edit breaks more than its one rule"),
    ("PREF005", "reject", "curation", "preference pair: the edit does not apply to this plan"),
    ("PREF006", "reject", "curation", "judge pair: the two orders disagree (position bias); the pair is dropped"),
    ("PREF007", "reject", "curation", "judge pair: the judge's margin is below min_judge_margin"),
    ("PREF008", "reject", "curation", "judge pair: the judge preferred a sample that fails a hard rule over one that passes"),
    ("PREF009", "reject", "curation", "judge pair: the judge preferred a sample the usability rules leave out (reviewer, validation, judge)"),
    ("SYN000", "reject", "factory", "query synthesis: the call added no new query"),
    ("SYN001", "flag", "validate", "synthesised query: length outside the spec's bounds (dropped)"),
    ("SYN002", "flag", "validate", "synthesised query: not in the cell's language (dropped)"),
    ("SYN003", "flag", "validate", "synthesised query: identical to a seed (dropped)"),
    ("SYN004", "flag", "validate", "synthesised query: identical to a query already in the pool (dropped)"),
    ("SYN005", "flag", "validate", "synthesised query: near duplicate of a seed or pooled query (dropped)"),
    ("SYN006", "flag", "validate", "synthesised query: its cell is already full (dropped)"),
    ("SYN007", "flag", "validate", "synthesised query: echoes the prompt or carries template residue (dropped)"),
    ("SYN008", "flag", "validate", "synthesised query: not shaped like a request, a statement (dropped)"),
    ("SYN009", "flag", "validate", "synthesised query: refers to text or an earlier turn it does not carry (dropped)"),
    ("SYN010", "flag", "validate", "synthesised query: several requests in one, or a question with an appended answer (dropped)"),
    ("SYN011", "flag", "validate", "synthesised query: written in the assistant's voice, not the user's (dropped)"),
    ("SYN012", "flag", "validate", "synthesised query: lacks what its cell is about, by the rule set's triggers (dropped)"),
    ("SYN013", "flag", "validate", "synthesised query: not fluent, the embedded model's mean surprise per token is above the language's limit (dropped)"),
    ("SYN020", "flag", "validate", "synthesised query: a duplicate of a query another shard kept (dropped by `mashbill merge`)"),
    ("VOTE001", "flag", "factory", "vote: the samples tie, or the majority's share is below samples.min_agreement (for a reviewer)"),
    ("JUDGE001", "reject", "factory", "the judge's answer does not parse (stored as failed, asked again next run)"),
    ("JUDGE010", "penalty", "judge", "the judge's score is below the spec's threshold (default code; severity from the spec)"),
    ("LBL001", "flag", "curation", "cleanlab finds the label suspect: out-of-fold probabilities of a MiniLM + logistic regression model (`mashbill cleanlab`)"),
    ("BAL001", "reject", "curation", "left out of a snapshot by a balancing quota"),
    ("OUT001", "reject", "factory", "outcome row: a correctness or score value that is not one, or no model"),
    ("OUT002", "reject", "factory", "outcome row: a model outside the spec's or import's model list"),
    ("OUT003", "reject", "factory", "outcome row: a query id not in the store and the row has no query text"),
    ("OUT004", "reject", "factory", "outcome row: a second outcome for the same query and model (the first is kept)"),
    ("OUT005", "flag", "factory", "outcome: the teacher never answered this model's record (retried next run)"),
    ("EMB001", "flag", "factory", "embedding cache file of another encoder revision (skipped, recomputed)"),
    ("LOG001", "reject", "curation", "orchestrator log line: not JSON or breaks the log schema (its request is dropped)"),
    ("TRN001", "reject", "curation", "transition: a non-finite value (state, reward, latency, cost)"),
    ("TRN002", "reject", "curation", "transition: an action outside the recipe's action list"),
    ("TRN003", "reject", "curation", "transition: a request id seen before (transitions would cross requests)"),
    ("TRP001", "reject", "curation", "triplet: the record's categories are none of the taxonomy's"),
]

CODES: dict[str, Code] = {c[0]: Code(*c) for c in _TABLE}
assert len(CODES) == len(_TABLE), "a code is registered twice"


RULE_IDS: frozenset[str] = frozenset(c.rule for c in CODES.values() if c.rule and c.source == "rules")
# the complexity rule set's ids (validators/complexity/complexity.py implements them)
COMPLEXITY_RULE_IDS: frozenset[str] = frozenset(c.rule for c in CODES.values() if c.rule and c.source == "complexity")


def describe(code: str) -> Code | None:
    return CODES.get(code)


# reject codes that a teacher can fix by answering again (factory.generate.repair): what the factory's parse and schema
# checks and the rule sets find in an answer. Failed calls, validation passes, review and curation are not.
_REPAIRABLE_FACTORY = frozenset({"PARSE001", "PARSE002", "TRUNC001", "SCHEMA001"})


def not_repairable(code: str) -> str | None:
    """Why a repair section may not name `code` (unknown, or not a reject found in the teacher's answer); None if it may."""
    c = CODES.get(code)
    if c is None:
        return f"unknown code {code!r} (see `mashbill codes`)"
    if c.severity != "reject":
        return f"{code} is a {c.severity}, not a reject: it never makes a record to repair"
    if code not in _REPAIRABLE_FACTORY and c.source not in ("rules", "complexity"):
        return (f"{code} ({c.meaning}) is not repairable: only the answer checks (PARSE001, PARSE002, TRUNC001, "
                "SCHEMA001) and rule-set codes can be fixed by asking again")
    return None


def markdown_table() -> str:
    lines = ["| code | severity | from | meaning |", "|---|---|---|---|"]
    lines += [f"| `{c.code}` | {c.severity} | {c.source + (f' `{c.rule}`' if c.rule else '')} | {c.meaning} |"
              for c in CODES.values()]
    return "\n".join(lines)


TABLE_START = "<!-- codes:start (generated by `mashbill codes --update-doc docs/codes.md`) -->"
TABLE_END = "<!-- codes:end -->"


def doc_with_table(text: str) -> str:
    """The document's text with the section between the markers replaced by the current table."""
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError("the file has no code table markers")
    return text[:start + len(TABLE_START)] + "\n" + markdown_table() + "\n" + text[end:]
