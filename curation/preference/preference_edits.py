"""Rule-derived preference edits: a validated plan (`chosen`) and a minimal edit of it (`rejected`) that breaks
exactly one named routing rule. `curation.preference.preference.build_pairs` checks each pair (the edit breaks its rule and
nothing but its companions); this module only makes the edits.

An edit is worth a pair only when its rejected plan is a mistake a student would plausibly make, so the pair
teaches the rule rather than "JSON noise is bad": each edit below says which mistake it stands for.
"""

from __future__ import annotations

import copy

from mashbill.errors import MashbillError
from mashbill.specs import ResolvedSpec

PREFERENCE_EDITS = ("precision-to-llm", "drop-legal-paragraph", "drop-research", "research-after-code",
                    "break-tool-args", "drop-domain", "drop-search-query", "unshown-category")
# What a spec without `curation.preference.preference.edits` gets: the first six, so the specs frozen before the later
# edits existed (plan-preference@2, quickstart-preference@1) keep producing the same pairs. Later edits apply only
# where a spec lists them.
DEFAULT_EDITS = PREFERENCE_EDITS[:6]

# edit -> (the rule id it breaks, rule ids that may break with it because they test the same thing)
EDIT_RULES = {
    "precision-to-llm": ("precision-first", {"precision-tool-match"}),
    "drop-legal-paragraph": ("legal-paragraph", {"legal-order", "legal-args"}),
    "drop-research": ("research-before-code", set()),
    "research-after-code": ("research-order", set()),
    "break-tool-args": ("tool-args", set()),
    "drop-domain": ("dynamic-domain", set()),
    "drop-search-query": ("research-query", set()),
    "unshown-category": ("category-shown", set()),
}

# Structural categories are never renamed, so their near misses come from the novel experts that do the same job:
# a planner that memorised a deployment where web research was `web_researcher` writes that name here.
STRUCTURAL_NEAR_MISSES = {"research": ("web_researcher",)}


def edits_of(rs: ResolvedSpec) -> list[str]:
    """The spec's edits (default: `DEFAULT_EDITS`), each a name this module knows."""
    edits = rs.spec.curation.preference.edits
    if edits is None:
        return list(DEFAULT_EDITS)
    unknown = sorted(set(edits) - set(PREFERENCE_EDITS))
    if unknown:
        raise MashbillError(f"{rs.path}: curation.preference.preference.edits: unknown edit(s) {unknown}; known: "
                            f"{', '.join(PREFERENCE_EDITS)}")
    return list(edits)


def _structural(rs: ResolvedSpec) -> set[str]:
    return set(rs.taxonomy.structural) if rs.taxonomy else {"research", "precision_tools", "dynamic"}


def _llm_category(rs: ResolvedSpec, meta: dict) -> str:
    shown = meta.get("taxonomy_shown")
    renamed = meta.get("taxonomy_renamed") or {}
    if shown is None:
        return "technical_support"
    for want in ("technical_support", "general"):
        for name in shown:
            if renamed.get(name, name) == want:
                return name
    llm = [n for n in shown if n not in _structural(rs)]
    return llm[0] if llm else "general"


def _shown_names(rs: ResolvedSpec, meta: dict) -> set[str] | None:
    """The category names shown for this record: its own (varied) taxonomy, else the spec's fixed one."""
    if isinstance(meta.get("taxonomy_shown"), list):
        return set(meta["taxonomy_shown"])
    if rs.taxonomy is not None:
        return set(rs.taxonomy.categories) | set(rs.taxonomy.structural)
    return None


def near_misses(category: str, rs: ResolvedSpec, renamed: dict) -> list[str]:
    """Real expert names of the full taxonomy that mean what `category` (as shown) means, best first: the canonical
    name of a renamed expert (the memorised name the variation exists to unlearn), the expert's other renames,
    then the novel expert doing the same job as a structural one."""
    tax = rs.taxonomy
    if tax is None:
        return []
    canonical = renamed.get(category, category)
    names = [canonical, *tax.variation.renames.get(canonical, [])] if canonical in tax.categories else []
    real = {*tax.categories, *tax.variation.novel}
    names += [n for n in STRUCTURAL_NEAR_MISSES.get(canonical, ()) if n in real]
    return [n for n in dict.fromkeys(names) if n != category]


def apply_edit(edit: str, plan: list, rs: ResolvedSpec, meta: dict) -> list | None:
    """The plan with one minimal edit, or None when the edit does not apply to this plan."""
    if not isinstance(plan, list):
        return None
    plan = copy.deepcopy(plan)
    renamed = meta.get("taxonomy_renamed") or {}
    cats = [renamed.get(t.get("category"), t.get("category")) if isinstance(t, dict) else None for t in plan]
    code_cats = {"code_reviewer", "agentic_coder"}
    if edit == "precision-to-llm":
        idx = [i for i, c in enumerate(cats) if c == "precision_tools" and plan[i].get("mcp_tool") != "legal_get_paragraph"]
        if not idx:
            return None
        for i in idx:
            plan[i]["category"] = _llm_category(rs, meta)
            plan[i].pop("mcp_tool", None)
            plan[i].pop("mcp_args", None)
        return plan
    if edit == "drop-legal-paragraph":
        kept = [t for t in plan if not (isinstance(t, dict) and t.get("mcp_tool") == "legal_get_paragraph")]
        return _drop_refs(kept, plan) if kept and len(kept) < len(plan) else None
    if edit == "drop-research":
        kept = [t for t, c in zip(plan, cats) if c != "research"]
        return _drop_refs(kept, plan) if kept and len(kept) < len(plan) else None
    if edit == "research-after-code":
        r_idx = [i for i, c in enumerate(cats) if c == "research"]
        c_idx = [i for i, c in enumerate(cats) if c in code_cats]
        if not r_idx or not c_idx or r_idx[0] > c_idx[-1]:
            return None
        task = plan.pop(r_idx[0])
        last_code = max(i for i, t in enumerate(plan) if isinstance(t, dict) and
                        renamed.get(t.get("category"), t.get("category")) in code_cats)
        plan.insert(last_code + 1, task)
        for t in plan:  # an explicit dependency on the research task would still order it first
            if isinstance(t, dict) and task.get("id") and t.get("depends_on") == task.get("id"):
                t.pop("depends_on")
        return plan
    if edit == "break-tool-args":
        catalog = rs.catalog.tools if rs.catalog else {}
        for i, c in enumerate(cats):
            # the legal lookup's arguments belong to its own rules (legal-args); drop-legal-paragraph covers it
            if c == "precision_tools" and isinstance(plan[i].get("mcp_args"), dict) and plan[i].get("mcp_tool") in \
                    catalog and plan[i]["mcp_tool"] != "legal_get_paragraph":
                required = catalog[plan[i]["mcp_tool"]].args.get("required") or []
                present = [a for a in required if a in plan[i]["mcp_args"]]
                if present:
                    del plan[i]["mcp_args"][present[0]]
                    return plan
        return None
    if edit == "drop-domain":
        for i, c in enumerate(cats):
            if c == "dynamic" and "domain" in plan[i]:
                del plan[i]["domain"]
                return plan
        return None
    if edit == "drop-search-query":
        # The runtime's research expert searches for exactly the task's search_query; a research task without one
        # gives it nothing to search, so the plan cannot run. The right research task, minus its query.
        for i, c in enumerate(cats):
            if c == "research" and "search_query" in plan[i]:
                del plan[i]["search_query"]
                return plan
        return None
    if edit == "unshown-category":
        # The runtime dispatches only to the experts listed for this request; any other name has no expert behind
        # it. The rejected plan keeps the task and names the same expert as a planner that memorised names would
        # (the original of a renamed expert, another deployment's name for it), not a random string, so the pair
        # teaches "read the list you were shown" and nothing about spelling.
        shown = _shown_names(rs, meta)
        if shown is None:
            return None
        for t in plan:
            if not isinstance(t, dict) or not isinstance(t.get("category"), str):
                continue
            hidden = [n for n in near_misses(t["category"], rs, renamed) if n not in shown]
            if hidden:
                t["category"] = hidden[0]
                return plan
        return None
    raise MashbillError(f"unknown preference edit {edit!r}")


def _drop_refs(kept: list, original: list) -> list:
    ids = {t.get("id") for t in kept if isinstance(t, dict)}
    for t in kept:
        if isinstance(t, dict) and t.get("depends_on") and t["depends_on"] not in ids:
            t.pop("depends_on")
    return kept
