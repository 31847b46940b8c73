"""What a review dataset looks like: its fields, questions, metadata and guidelines, and one record in it.

One Argilla dataset per spec version (`plan-moe@2`). Names used here are the contract with pull:

    fields     query, output (the plan rendered readably), taxonomy (what the teacher was shown), verdicts
    questions  decision (accept | reject, required), correction (the corrected output as JSON text),
               categories (multi-label; specs with a taxonomy), complexity (label)
    metadata   spec_version, language, verdict_codes, teacher, status, confidence

The correction question is suggested with the teacher's own output, so a reviewer edits it in place;
on pull a correction identical to the teacher's output counts as no correction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

import yaml

from mashbill.factory.records import Record, Verdict
from mashbill.specs import ResolvedSpec

DECISION = "decision"
CORRECTION = "correction"
CATEGORIES = "categories"
COMPLEXITY = "complexity"
COMPLEXITY_LABELS = ("trivial", "moderate", "complex", "memory_recall")
FIELDS = ("query", "output", "taxonomy", "verdicts")
METADATA = ("spec_version", "language", "verdict_codes", "teacher", "status", "confidence")


def dataset_name(rs: ResolvedSpec) -> str:
    return f"{rs.spec.name}@{rs.spec.version}"


def _output_noun(rs: ResolvedSpec) -> str:
    return "plan" if rs.spec.kind in ("plan", "preference") else "output"


def category_labels(rs: ResolvedSpec) -> list[str]:
    if rs.taxonomy is None:
        return []
    return [*rs.taxonomy.categories, *rs.taxonomy.structural]


def question_names(rs: ResolvedSpec) -> list[str]:
    names = [DECISION, CORRECTION]
    if category_labels(rs):
        names.append(CATEGORIES)
    names.append(COMPLEXITY)
    return names


def build_settings(rs: ResolvedSpec, *, min_submitted: int = 1):
    """The argilla SDK `Settings` of the spec's review dataset."""
    import argilla as rg

    noun = _output_noun(rs)
    questions = [
        rg.LabelQuestion(name=DECISION, title=f"Is the teacher's {noun} right?",
                         labels={"accept": "accept", "reject": "reject"}, required=True,
                         description=f"accept: the {noun} is correct as it stands. reject: it is wrong; fix it below "
                                     "if you can."),
        rg.TextQuestion(name=CORRECTION, title=f"Corrected {noun} (JSON)", required=False, use_markdown=False,
                        description=f"Starts as the teacher's {noun}. Edit it into the right {noun} (valid JSON in "
                                    "the same format) or leave it unchanged. A correction is re-checked by the "
                                    "spec's schema and rules when decisions are pulled; an invalid one is flagged, "
                                    "not used."),
    ]
    labels = category_labels(rs)
    if labels:
        questions.append(rg.MultiLabelQuestion(
            name=CATEGORIES, title="Categories the request needs", labels=labels, required=False,
            visible_labels=min(len(labels), 20),
            description="Tick every category (canonical name) the right plan uses."))
    questions.append(rg.LabelQuestion(
        name=COMPLEXITY, title="Complexity of the request", labels=list(COMPLEXITY_LABELS), required=False,
        description="trivial: one direct answer; moderate: up to 3 tasks; complex: 4 tasks or deep analysis; "
                    "memory_recall: asks about earlier conversation."))
    fields = [
        rg.TextField(name="query", title="Request", use_markdown=False),
        rg.TextField(name="output", title=f"Teacher's {noun}", use_markdown=True),
        rg.TextField(name="taxonomy", title="Categories shown to the teacher", use_markdown=True, required=False),
        rg.TextField(name="verdicts", title="Automatic checks", use_markdown=True, required=False),
    ]
    metadata = [
        rg.IntegerMetadataProperty(name="spec_version", title="Spec version"),
        rg.TermsMetadataProperty(name="language", title="Language"),
        rg.TermsMetadataProperty(name="verdict_codes", title="Verdict codes"),
        rg.TermsMetadataProperty(name="teacher", title="Teacher"),
        rg.TermsMetadataProperty(name="status", title="Factory status"),
        rg.FloatMetadataProperty(name="confidence", title="Confidence"),
    ]
    return rg.Settings(guidelines=guidelines(rs), fields=fields, questions=questions, metadata=metadata,
                       distribution=rg.TaskDistribution(min_submitted=min_submitted))


# ------------------------------------------------------------------ guidelines


def _rules(rs: ResolvedSpec) -> list[tuple[str, str, str]]:
    path = rs.file_paths.get("rules")
    if path is None:
        return []
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return []
    out = []
    for rule in data.get("rules", []) if isinstance(data, dict) else []:
        if isinstance(rule, dict) and rule.get("code"):
            out.append((str(rule["code"]), str(rule.get("severity", "")), str(rule.get("description", ""))))
    return out


def guidelines(rs: ResolvedSpec) -> str:
    spec = rs.spec
    noun = _output_noun(rs)
    parts = [f"# Review of {spec.ref}", "", spec.description.strip() or f"Records of the {spec.kind} spec.", "",
             f"Spec hash `{rs.hash[:16]}`. Every record shows the request, the teacher's {noun}, the categories "
             "the teacher was shown for this record, and what the automatic checks found.", "",
             "## What to do", "",
             f"1. Read the request and the teacher's {noun}.",
             f"2. **{DECISION}**: *accept* if the {noun} is right as it stands; *reject* if it is wrong.",
             f"3. **{CORRECTION}**: if you rejected it and can fix it, edit the JSON (it starts as the teacher's "
             f"{noun}) into the right one. Keep the same format. Leave it unchanged otherwise.",
             ]
    if category_labels(rs):
        parts.append(f"4. **{CATEGORIES}**: tick the categories the right plan uses (canonical names, even when the "
                     "teacher was shown a renamed one).")
    parts += [f"5. **{COMPLEXITY}**: how demanding the request is.",
              "6. **Submit**. Use **Discard** for a record you cannot judge (it is stored as discarded, not as a "
              "decision).", "",
              "Corrections are re-checked against the spec's output schema and routing rules when decisions are "
              "pulled; an invalid correction is flagged and not used, so a reviewer sees it again.", ""]
    if rs.taxonomy is not None:
        parts += ["## Categories", "", "| category | meaning |", "| --- | --- |"]
        parts += [f"| `{name}` | {desc} |" for name, desc in rs.taxonomy.categories.items()]
        for name, cat in rs.taxonomy.structural.items():
            needs = f" Requires {', '.join(f'`{r}`' for r in cat.requires)}." if cat.requires else ""
            parts.append(f"| `{name}` | {cat.description}{needs} |")
        parts.append("")
    rules = _rules(rs)
    if rules:
        parts += ["## Rules every plan must follow", "", "| code | severity | rule |", "| --- | --- | --- |"]
        parts += [f"| {code} | {sev} | {desc} |" for code, sev, desc in rules]
        parts.append("")
    parts += ["## Output format", "", "```json", json.dumps(rs.output_schema, indent=1, ensure_ascii=False)[:6000],
              "```"]
    return "\n".join(parts)


# ------------------------------------------------------------------ records


@dataclass(frozen=True)
class ReviewItem:
    """A stored record with what a reviewer needs to judge it."""

    record: Record
    verdicts: tuple[Verdict, ...]
    confidence: float
    teacher: str
    sampleable: bool = True  # random:N may draw it (curation.review.select.sampleable)


def render_output(output: Any, raw: str | None) -> str:
    """The teacher's output as readable Markdown: a numbered task list for plans, JSON otherwise."""
    if output is None:
        return "*The output did not parse.* Raw text:\n\n```\n" + (raw or "")[:4000] + "\n```"
    if isinstance(output, list) and all(isinstance(t, dict) for t in output):
        lines = []
        for i, task in enumerate(output, 1):
            ident = f" `{task['id']}`" if task.get("id") else ""
            lines.append(f"**{i}.{ident} `{task.get('category', '?')}`** {task.get('task', '')}")
            for key in ("mcp_tool", "mcp_args", "search_query", "domain", "depends_on", "requires", "no_search"):
                if key in task:
                    value = task[key]
                    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                    lines.append(f"   - {key}: `{shown}`")
            extra = sorted(set(task) - {"id", "task", "category", "mcp_tool", "mcp_args", "search_query", "domain",
                                        "depends_on", "requires", "no_search"})
            for key in extra:
                lines.append(f"   - {key}: `{json.dumps(task[key], ensure_ascii=False)}`")
        return "\n".join(lines)
    return "```json\n" + json.dumps(output, indent=2, ensure_ascii=False) + "\n```"


def render_taxonomy(rs: ResolvedSpec, meta: dict) -> str:
    shown = meta.get("taxonomy_shown")
    if not shown:
        return "(not recorded)" if rs.taxonomy is not None else "(this spec has no taxonomy)"
    renamed = meta.get("taxonomy_renamed") or {}
    descriptions = dict(rs.taxonomy.categories) if rs.taxonomy else {}
    if rs.taxonomy:
        descriptions.update({k: v.description for k, v in rs.taxonomy.structural.items()})
    lines = []
    for name in shown:
        canonical = renamed.get(name)
        label = f"`{name}` (= `{canonical}`)" if canonical else f"`{name}`"
        desc = descriptions.get(canonical or name, "(novel category)")
        lines.append(f"- {label}: {desc}")
    return "\n".join(lines)


def render_verdicts(verdicts: Sequence[Verdict]) -> str:
    if not verdicts:
        return "No findings: every check passed."
    return "\n".join(f"- **{v.code}** ({v.severity}, {v.stage}): {v.detail}" for v in verdicts)


def plan_categories(output: Any, meta: dict, labels: Sequence[str]) -> list[str]:
    if not isinstance(output, list):
        return []
    renamed = meta.get("taxonomy_renamed") or {}
    found = []
    for task in output:
        if isinstance(task, dict) and isinstance(task.get("category"), str):
            name = renamed.get(task["category"], task["category"])
            if name in labels and name not in found:
                found.append(name)
    return found


def to_argilla_record(rs: ResolvedSpec, item: ReviewItem):
    """The SDK record for one stored record; its id is the Mashbill record id (Argilla's external_id)."""
    import argilla as rg

    rec = item.record
    query = rec.input.get("query") if isinstance(rec.input, dict) else None
    fields = {
        "query": query if isinstance(query, str) and query else json.dumps(rec.input, ensure_ascii=False),
        "output": render_output(rec.output, rec.raw),
        "taxonomy": render_taxonomy(rs, rec.meta),
        "verdicts": render_verdicts(item.verdicts),
    }
    codes = sorted({v.code for v in item.verdicts})
    metadata = {"spec_version": rec.spec.version, "language": str(rec.input.get("lang") or rec.meta.get("lang")
                                                                  or "unknown"),
                "verdict_codes": codes or ["none"], "teacher": item.teacher, "status": rec.status,
                "confidence": item.confidence}
    score = round(item.confidence, 4)
    passed = rec.status == "accepted" and not any(v.severity == "reject" for v in item.verdicts)
    suggestions = [rg.Suggestion(question_name=DECISION, value="accept" if passed else "reject", score=score,
                                 agent=item.teacher)]
    if rec.output is not None:
        suggestions.append(rg.Suggestion(question_name=CORRECTION, agent=item.teacher, score=score,
                                         value=json.dumps(rec.output, indent=2, ensure_ascii=False)))
    labels = category_labels(rs)
    cats = plan_categories(rec.output, rec.meta, labels)
    if labels and cats:
        suggestions.append(rg.Suggestion(question_name=CATEGORIES, value=cats, score=[score] * len(cats),
                                         agent=item.teacher))
    return rg.Record(id=rec.id, fields=fields, metadata=metadata, suggestions=suggestions)
