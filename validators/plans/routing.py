"""Routing rules over planner plans, one entry per rule id of the rule set.

Each rule is a function ``(ctx) -> list[str]`` returning one detail string per finding; the rule set file gives
its code and severity. ``check_plan`` runs every enabled rule and returns verdicts (stage ``validate``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

from mashbill.factory.records import Verdict
from mashbill.validators.plans import drift, fidelity, numwords
from mashbill.validators.plans.drift import InstructionLine, WorkedExample
from mashbill.validators.plans.expr import PLACEHOLDER, matches
from mashbill.validators.plans.plans import Plan, PlanTask, Shown, parse_plan
from mashbill.validators.plans.ruleset import RuleSet
from mashbill.validators.plans.toolargs import ToolArgs, tool_args_for
from mashbill.validators.plans.triggers import QueryTriggers, triggers_for
from mashbill.validators.plans.truncation import cut_off


@dataclass
class RuleContext:
    query: str
    plan: Plan
    shown: Shown
    rs: RuleSet
    triggers: QueryTriggers
    tools: ToolArgs | None
    examples: tuple[WorkedExample, ...] = ()  # the teacher prompt's worked examples (no-parroting)
    instructions: tuple[InstructionLine, ...] = ()  # the teacher prompt's instruction lines (no-prompt-echo)

    @cached_property
    def query_words(self) -> frozenset[str]:
        return drift.content(self.query)

    @cached_property
    def _words(self) -> dict[str, frozenset[str]]:
        return {}

    @cached_property
    def readings(self) -> list[str]:
        """The query's other spellings for a rule set that reads number words (numwords.readings), once a record."""
        return numwords.readings(self.rs, self.query)

    def words(self, text: str) -> frozenset[str]:
        """Content words of a plan text, computed once per plan (no-parroting and no-drift share them)."""
        w = self._words.get(text)
        if w is None:
            w = self._words[text] = drift.content(text)
        return w

    @property
    def cats(self):
        return self.rs.categories

    def precision_tasks(self) -> list[PlanTask]:
        return self.plan.with_category(self.cats.precision)

    @cached_property
    def calculated(self) -> tuple[dict[str, float], list[tuple[str, str, str]]]:
        """fidelity.plan_values of the plan's calculate tasks, once a record (arg-operation and arg-expression)."""
        return fidelity.plan_values(_tool_tasks(self, "calculate"))


# ---------------------------------------------------------------- the rules

RULES: dict[str, Callable[[RuleContext], list[str]]] = {}


def rule(rule_id: str):
    def register(fn):
        RULES[rule_id] = fn
        return fn
    return register


def _nonempty_str(v) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _label(t: PlanTask) -> str:
    return f"task {t.index + 1}" + (f" ({t.id})" if not t.id.startswith("task-") else "")


@rule("task-count")
def task_count(ctx: RuleContext) -> list[str]:
    if ctx.plan.shape == "invalid":
        return [ctx.plan.problem or "not a plan"]
    n, b = len(ctx.plan.tasks), ctx.rs.task_count
    return [] if b.min <= n <= b.max else [f"{n} tasks, allowed {b.min}-{b.max}"]


@rule("task-text")
def task_text(ctx: RuleContext) -> list[str]:
    out = []
    for t in ctx.plan.tasks:
        if not t.is_dict:
            out.append(f"{_label(t)} is {type(t.raw).__name__}, not an object")
        elif not _nonempty_str(t.get("task")):
            out.append(f"{_label(t)} has no task text")
        elif t.category is None:
            out.append(f"{_label(t)} has no category")
    return out


@rule("category-shown")
def category_shown(ctx: RuleContext) -> list[str]:
    names = ctx.shown.names
    if names is None:
        return []
    out = []
    for t in ctx.plan.tasks:
        if t.category is None or t.category in names:
            continue
        shown_as = [n for n, c in ctx.shown.renamed.items() if c == t.category and n in names]
        hint = f" (shown as '{shown_as[0]}')" if shown_as else ""
        out.append(f"{_label(t)}: category '{t.category}' was not shown for this record{hint}")
    return out


@rule("research-query")
def research_query(ctx: RuleContext) -> list[str]:
    return [f"{_label(t)}: research task without search_query" for t in ctx.plan.with_category(ctx.cats.research)
            if not _nonempty_str(t.get("search_query"))]


@rule("search-query-text")
def search_query_text(ctx: RuleContext) -> list[str]:
    trig = triggers_for(ctx.rs)
    return [f"{_label(t)}: search_query {q!r} is a run-together identifier, not a query a user would type"
            for t in ctx.plan.with_category(ctx.cats.research)
            if _nonempty_str(q := t.get("search_query")) and trig.run_together(q, ctx.query)]


@rule("dynamic-domain")
def dynamic_domain(ctx: RuleContext) -> list[str]:
    return [f"{_label(t)}: dynamic task without domain" for t in ctx.plan.with_category(ctx.cats.dynamic)
            if not _nonempty_str(t.get("domain"))]


@rule("tool-known")
def tool_known(ctx: RuleContext) -> list[str]:
    out = []
    for t in ctx.precision_tasks():
        tool = t.get("mcp_tool")
        if not _nonempty_str(tool):
            out.append(f"{_label(t)}: precision_tools task without mcp_tool")
        elif ctx.tools is not None and tool not in ctx.tools.tools:
            out.append(f"{_label(t)}: unknown tool '{tool}'")
    return out


@rule("tool-args")
def tool_args(ctx: RuleContext) -> list[str]:
    if ctx.tools is None:
        return []
    out = []
    for t in ctx.precision_tasks():
        tool = t.get("mcp_tool")
        if isinstance(tool, str) and tool in ctx.tools.tools:
            if "mcp_args" not in (t.raw or {}):
                out.append(f"{_label(t)}: {tool} without mcp_args")
            else:
                out.extend(f"{_label(t)}: {p}" for p in ctx.tools.problems(tool, t.get("mcp_args")))
    return out


@rule("dependencies")
def dependencies(ctx: RuleContext) -> list[str]:
    plan = ctx.plan
    out = [f"duplicate task id '{d}'" for d in plan.duplicate_ids]
    ids = plan.by_id()
    raw_dep = {t.id: t.get("depends_on") for t in plan.tasks}
    for t in plan.tasks:
        dep = raw_dep[t.id]
        if dep is not None and not isinstance(dep, (str, list)):
            out.append(f"{_label(t)}: depends_on is {type(dep).__name__}")
        for d in t.depends_on:
            if d == t.id:
                out.append(f"{_label(t)} depends on itself")
            elif d not in ids:
                out.append(f"{_label(t)}: depends_on '{d}' names no task id (ids: {', '.join(ids)})")
    stuck = plan.cyclic_ids()
    if stuck:
        out.append("dependency cycle among " + ", ".join(stuck))
    return out


_TOOL_FIELDS = ("mcp_tool", "mcp_args")


@rule("tool-fields")
def tool_fields(ctx: RuleContext) -> list[str]:
    """mcp_tool and mcp_args belong to precision_tools tasks (DOMAIN §1): on another task nothing runs the tool, and
    the reference's own wrong-plan maker removes both when it moves a task out of precision_tools (§5.1). A null
    value counts as absent."""
    out = []
    for t in ctx.plan.tasks:
        if t.canonical is None or t.canonical == ctx.cats.precision:
            continue  # no category: task-text reports it
        stray = [f for f in _TOOL_FIELDS if t.get(f) is not None]
        if stray:
            tool = t.get("mcp_tool")
            what = f"tool {tool!r}" if tool is not None else f"mcp_args {_short(t.get('mcp_args'))}"
            out.append(f"{_label(t)} ({t.category}) carries {' and '.join(stray)} ({what}), which only a "
                       f"{ctx.cats.precision} task may: {_short(t.get('task'))}")
    return out


def _short(v, n: int = 60) -> str:
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
    return repr(text if len(text) <= n else text[:n - 3] + "...")


def _evidence(ctx: RuleContext) -> str:
    return "; ".join(f"{name}: '{ctx.triggers.evidence[name]}'" for name in ctx.triggers.intents)


@rule("precision-first")
def precision_first(ctx: RuleContext) -> list[str]:
    if not ctx.triggers.intents or ctx.precision_tasks():
        return []
    return [f"query needs an exact computation ({_evidence(ctx)}) but the plan has no precision_tools task"]


@rule("precision-tool-match")
def precision_tool_match(ctx: RuleContext) -> list[str]:
    tasks = ctx.precision_tasks()
    if not ctx.triggers.intents or not tasks:
        return []
    used = {t.get("mcp_tool") for t in tasks}
    out = []
    for name, tools in ctx.triggers.intents.items():
        if not used & set(tools):
            out.append(f"{name} ('{ctx.triggers.evidence[name]}') needs {' or '.join(tools)}; plan uses "
                       f"{', '.join(sorted(str(u) for u in used))}")
    return out


@rule("tool-unfounded")
def tool_unfounded(ctx: RuleContext) -> list[str]:
    """A precision_tools task where the query asks for no computation (no precision intent fires, no § is cited) is
    kept only when something in its arguments comes from the query: "What are common side effects of metformin?" with
    calculate("100") passes ARG001 (100 is a constant any plan may use) but computes nothing the query asked about."""
    if ctx.triggers.intents or ctx.triggers.citations:
        return []  # the query asks for a tool: HR002 and the argument checks judge the call
    fid = ctx.rs.fidelity
    trig = triggers_for(ctx.rs)

    def names(key: str, value: str) -> bool:  # a law by its full name ("Bürgerliches Gesetzbuch" for BGB)
        law = trig.canonical_law(value) if key == "law" else None
        return law is not None and any(law_ == law and rx.search(ctx.query) for rx, law_ in trig.laws)

    out = []
    for t in ctx.precision_tasks():
        tool = t.get("mcp_tool")
        if not _nonempty_str(tool):
            continue  # tool-known reports it
        args = t.get("mcp_args")
        if not fidelity.grounded(ctx.query, args, fid.units, fid.option_args, ctx.readings, fid.read_notation,
                                 names):
            out.append(f"{_label(t)}: {tool} {_short(args)} on a query that asks for no computation (no precision "
                       f"intent fires), and no argument is a number, unit, date or word the query states")
    return out


def _legal_tasks(ctx: RuleContext) -> list[PlanTask]:
    return [t for t in ctx.precision_tasks() if t.get("mcp_tool") == ctx.rs.legal_tool]


@rule("legal-paragraph")
def legal_paragraph(ctx: RuleContext) -> list[str]:
    cites = ctx.triggers.citations
    if not cites or _legal_tasks(ctx):
        return []
    return [f"query cites {cites[0].text!r} but the plan has no {ctx.rs.legal_tool} task"]


@rule("legal-order")
def legal_order(ctx: RuleContext) -> list[str]:
    cites = ctx.triggers.citations
    fetch = _legal_tasks(ctx)
    if not cites or not fetch:
        return []
    advisor_cat = ctx.cats.legal_advisor
    advisors = ctx.plan.with_category(advisor_cat)
    if not advisors:
        if ctx.shown.shows(advisor_cat):
            return [f"query cites {cites[0].text!r}: the {ctx.rs.legal_tool} result is never interpreted by a "
                    f"{advisor_cat} task"]
        return []
    first_fetch = fetch[0]
    out = []
    for a in advisors:
        if a.index < first_fetch.index and not any(ctx.plan.depends_transitively(a, f) for f in fetch):
            out.append(f"{_label(a)} ({advisor_cat}) comes before the {ctx.rs.legal_tool} task")
    return out


_PARA_NUM = re.compile(r"(\d+[a-z]?)", re.IGNORECASE)


@rule("legal-args")
def legal_args(ctx: RuleContext) -> list[str]:
    cites = ctx.triggers.citations
    fetch = _legal_tasks(ctx)
    if not cites or not fetch:
        return []
    trig = triggers_for(ctx.rs)
    wanted = {(c.law.lower(), p) for c in cites for p in c.paragraphs}
    got = set()
    for t in fetch:
        args = t.get("mcp_args")
        if isinstance(args, dict) and isinstance(args.get("law"), str):
            para = args.get("paragraph")
            m = _PARA_NUM.search(str(para)) if para is not None else None
            got.add((trig.canonical_law(args["law"]).lower(), m.group(1).lower() if m else ""))
    if wanted & got:
        return []
    return [f"cited {', '.join(c.text for c in cites)} but fetches "
            f"{', '.join(f'{law} {p}' for law, p in sorted(got)) or 'nothing usable'}"]


def _code_tasks(ctx: RuleContext) -> list[PlanTask]:
    code = [t for t in ctx.plan.tasks if t.canonical in ctx.cats.code]
    if code:
        return code
    if not any(ctx.shown.shows(c) for c in ctx.cats.code):
        # no code category was shown: any task that is not research/precision/dynamic may carry the code
        skip = {ctx.cats.research, ctx.cats.precision, ctx.cats.dynamic}
        return [t for t in ctx.plan.tasks if t.canonical not in skip and t.canonical is not None]
    return []


@rule("research-before-code")
def research_before_code(ctx: RuleContext) -> list[str]:
    term = ctx.triggers.impl
    if not term:
        return []
    out = []
    if not ctx.plan.with_category(ctx.cats.research):
        out.append(f"implementing '{term}' needs a research task first")
    if not _code_tasks(ctx):
        out.append(f"implementing '{term}' needs a code task ({' or '.join(ctx.cats.code)})")
    return out


@rule("research-order")
def research_order(ctx: RuleContext) -> list[str]:
    if not ctx.triggers.impl:
        return []
    research = ctx.plan.with_category(ctx.cats.research)
    code = _code_tasks(ctx)
    if not research or not code:
        return []
    first = min(code, key=lambda t: t.index)
    if research[0].index < first.index or any(ctx.plan.depends_transitively(first, r) for r in research):
        return []
    return [f"research ({_label(research[0])}) comes after the code task ({_label(first)})"]


@rule("niche-dynamic")
def niche_dynamic(ctx: RuleContext) -> list[str]:
    if not ctx.triggers.niche or ctx.plan.with_category(ctx.cats.dynamic):
        return []
    return [f"niche field ('{ctx.triggers.niche}') without a dynamic task"]


def _fit(ctx: RuleContext, term: str | None, cat: str, what: str, no_search: bool = False,
         served: tuple[str, ...] = (), cannot_answer: tuple[str, ...] = ()) -> list[str]:
    """A request of one kind (its trigger words `term`) needs a task of category `cat` when `cat` was shown. With
    `no_search`, where `cat` was not shown, the plan still needs a task that can answer (not only research and
    precision tools, nor the `cannot_answer` categories): a web search neither translates a text nor recalls this
    conversation."""
    # without the taxonomy shown for the record the rule cannot know the name to expect (the checker reports the skip)
    if not term or ctx.shown.names is None or ctx.plan.with_category(cat, *served):
        return []
    if not ctx.shown.shows(cat):
        lookup = {ctx.cats.research, ctx.cats.precision, *cannot_answer}
        if no_search and ctx.plan.tasks and all(t.canonical in lookup for t in ctx.plan.tasks):
            return [f"{what} ('{term}') is planned as {' and '.join(sorted({t.canonical for t in ctx.plan.tasks}))} "
                    f"only ({cat} was not shown: a general task answers it)"]
        return []
    names = [n for n, c in ctx.shown.renamed.items() if c == cat and n in ctx.shown.names]
    return [f"{what} ('{term}') has no {names[0] if names else cat} task"]


@rule("creative-fit")
def creative_fit(ctx: RuleContext) -> list[str]:
    req = ctx.rs.creative_request
    return _fit(ctx, ctx.triggers.creative, ctx.cats.creative, "a creative-writing request",
                no_search=bool(req and req.not_search_only))


@rule("translation-fit")
def translation_fit(ctx: RuleContext) -> list[str]:
    return _fit(ctx, ctx.triggers.translation, ctx.cats.translation, "a translation request", no_search=True)


@rule("memory-fit")
def memory_fit(ctx: RuleContext) -> list[str]:
    req = ctx.rs.recall_request
    creative = (ctx.cats.creative,) if req and req.creative_cannot_recall and not ctx.triggers.creative else ()
    return _fit(ctx, ctx.triggers.recall, ctx.cats.memory, "a question about an earlier turn", no_search=True,
                cannot_answer=creative)


@rule("category-fit")
def category_fit(ctx: RuleContext) -> list[str]:
    out = []
    for cat, term in ctx.triggers.categories.items():
        served = (cat, *ctx.rs.category_request[cat].served_by)
        shown = next((c for c in served if ctx.shown.shows(c)), None)  # _fit names it as shown (renamed or not)
        if shown:
            out += _fit(ctx, term, shown, f"a request for {cat}", served=served)
    return out


@rule("task-complete")
def task_complete(ctx: RuleContext) -> list[str]:
    words = triggers_for(ctx.rs).cut_words
    if words is None:
        return []
    return [f"{_label(t)} looks cut off ({why}): {text.strip()!r}" for t in ctx.plan.tasks
            if _nonempty_str(text := t.get("task")) and (why := cut_off(text, ctx.query, words))]


_NOT_WORD = re.compile(r"[\W_]+")


@rule("duplicate-tasks")
def duplicate_tasks(ctx: RuleContext) -> list[str]:
    seen: dict[str, PlanTask] = {}
    out = []
    for t in ctx.plan.tasks:
        text = t.get("task") if t.is_dict else None
        key = " ".join(_NOT_WORD.sub(" ", text.casefold()).split()) if isinstance(text, str) else ""
        if not key:
            continue  # no text: task-text reports it
        if key in seen:
            out.append(f"{_label(t)} repeats {_label(seen[key])}: {text.strip()!r}")
        else:
            seen[key] = t
    return out


# ---------------------------------------------------------------- argument fidelity (validators/plans/fidelity.py)

_DATE_TOOLS = ("date_diff", "date_add", "day_of_week")


def _tool_tasks(ctx: RuleContext, *tools: str) -> list[PlanTask]:
    return [t for t in ctx.precision_tasks() if t.get("mcp_tool") in tools]


@rule("arg-numbers")
def arg_numbers(ctx: RuleContext) -> list[str]:
    out = []
    fid = ctx.rs.fidelity
    for t in _tool_tasks(ctx, *fid.tools):
        args = t.get("mcp_args")
        if isinstance(args, dict) and t.get("mcp_tool") in _DATE_TOOLS:
            args = {k: v for k, v in args.items() if not isinstance(v, str)}  # dates: arg-units-dates
        bad = fidelity.invented_numbers(ctx.query, args, fid.constants)
        for spelled in ctx.readings if bad else ():  # a number spelled out is stated too
            bad = [b for b in bad if b in fidelity.invented_numbers(spelled, args, fid.constants)]
        if bad:
            shown = ", ".join(f"{b:g}" for b in bad)
            out.append(f"{_label(t)}: {t.get('mcp_tool')} uses {shown}, which the query does not state")
    return out


@rule("arg-operation")
def arg_operation(ctx: RuleContext) -> list[str]:
    calc = _tool_tasks(ctx, "calculate")
    if not calc:
        return []
    wanted = fidelity.query_computations(ctx.query)
    if not wanted:
        return []
    values, _ = ctx.calculated
    if not values:
        return []  # nothing computable: arg-expression reports it
    tol = ctx.rs.fidelity.tolerance
    out = []
    for c in wanted:
        accept = c.values + (fidelity.remainders(ctx.query, c.text) if ctx.rs.fidelity.read_notation else ())
        if not any(matches(v, w, tol) for v in values.values() for w in accept):
            got = "; ".join(f"{e!r} = {values[t.id]:g}" for t in calc
                            if t.id in values and isinstance(e := (t.get("mcp_args") or {}).get("expression"), str))
            out.append(f"the query computes '{c.text}' = {c.values[0]:g}; the plan computes {got}")
    return out


@rule("arg-expression")
def arg_expression(ctx: RuleContext) -> list[str]:
    _, bad = ctx.calculated
    labels = {t.id: _label(t) for t in ctx.plan.tasks}
    return [f"{labels.get(tid, tid)}: expression {e!r} cannot be parsed: {why}" for tid, e, why in bad]


@rule("arg-units-dates")
def arg_units_dates(ctx: RuleContext) -> list[str]:
    out = []
    for t in _tool_tasks(ctx, "unit_convert"):
        fid = ctx.rs.fidelity
        found = fidelity.unit_problems(ctx.query, t.get("mcp_args"), fid.units, fid.read_notation)
        if found and (spelled := numwords.for_rules(ctx.rs, ctx.query)) != ctx.query:  # "seventy-two kg"
            found = fidelity.unit_problems(spelled, t.get("mcp_args"), fid.units, fid.read_notation)
        out += [f"{_label(t)}: {p}" for p in found]
    for t in _tool_tasks(ctx, *_DATE_TOOLS):
        out += [f"{_label(t)}: {p}" for p in fidelity.date_problems(ctx.query, t.get("mcp_args"))]
    return out


# ---------------------------------------------------------------- no parroting, no drift (validators/plans/drift.py)


@rule("no-parroting")
def no_parroting(ctx: RuleContext) -> list[str]:
    if not ctx.examples:
        return []
    d = ctx.rs.drift
    out = []
    for t in ctx.plan.tasks:
        if t.is_dict:
            copied = drift.parroted(ctx.query, t, ctx.examples, d.parrot_share, d.example_relevant, ctx.words,
                                    lambda: ctx.query_words)
            if copied:
                out.append(f"{_label(t)} reproduces the prompt's worked example {copied!r}, not the query")
    return out


@rule("garbled-copy")
def garbled_copy(ctx: RuleContext) -> list[str]:
    d = ctx.rs.drift
    out = []
    for t in ctx.plan.tasks:
        if not t.is_dict:
            continue
        for field in ("task", "search_query"):
            text = t.get(field)
            if isinstance(text, str) and (found := drift.garbled(ctx.query, text, d.garble_min_letters,
                                                                 d.garble_copy_share, d.garble_prefix_share,
                                                                 d.garble_typo_ratio)):
                out.append(f"{_label(t)} copies the request but its {field} writes {found[0]!r} for {found[1]!r}")
                break
    return out


@rule("no-prompt-echo")
def no_prompt_echo(ctx: RuleContext) -> list[str]:
    out = []
    for t in ctx.plan.tasks:
        if t.is_dict:
            line = drift.echoed(ctx.query, t, ctx.instructions, ctx.rs.drift.echo_share, words=ctx.words,
                                query_words=lambda: ctx.query_words)
            if line:
                out.append(f"{_label(t)} restates the prompt's instruction {line!r}, not the query")
    return out


@rule("no-drift")
def no_drift(ctx: RuleContext) -> list[str]:
    out = []
    for t in ctx.plan.tasks:
        if not t.is_dict or t.depends_on or PLACEHOLDER.search(str(t.get("task") or "")):
            continue  # a task building on an earlier result is about that result
        if drift.unrelated(ctx.query, t, ctx.rs.drift.min_shared, ctx.words, lambda: ctx.query_words,
                           ctx.rs.drift.match) and not (ctx.rs.drift.cross_language
                                                        and drift.other_language_related(ctx.query, t)):
            out.append(f"{_label(t)} shares no content with the query")
    return out


# ---------------------------------------------------------------- running them


def check_plan(rs: RuleSet, query: str, output: Any, shown: Shown, catalog=None,
               triggers: QueryTriggers | None = None, examples: tuple[WorkedExample, ...] = (),
               instructions: tuple[InstructionLine, ...] = ()) -> list[Verdict]:
    """All verdicts of the rule set's enabled rules for one plan."""
    trig = triggers if triggers is not None else triggers_for(rs).analyze(query)
    plan = parse_plan(output, shown)
    ctx = RuleContext(query, plan, shown, rs, trig, tool_args_for(catalog), examples, instructions)
    out = []
    for entry in rs.rules:
        if not entry.enabled:
            continue
        fn = RULES[entry.id]  # load_ruleset refuses unknown ids
        if plan.shape == "invalid" and entry.id != "task-count":
            continue
        for detail in fn(ctx):
            out.append(Verdict(entry.code, entry.severity, f"{entry.id}: {detail}", "validate"))
    return out


def unknown_rule_ids(rs: RuleSet) -> list[str]:
    """Rule ids of a rule set without an implementation here (load_ruleset refuses them; kept for tests)."""
    return [r.id for r in rs.rules if r.id not in RULES]
