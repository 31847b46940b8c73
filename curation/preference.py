"""Preference (DPO) pairs for plans, from three sources; every pair records its source and is checked.

1. `rule`: `chosen` is a validated plan that passes every rule; `rejected` is a minimal edit of it that
   breaks exactly one named rule (a precision tool replaced by an LLM category, `legal_get_paragraph`
   dropped, the research task dropped or moved after the code task, tool arguments broken, `domain`
   dropped).
2. `teacher`: two or more samples per query (different seeds) from the preference spec's teacher; a sample
   that passes every rule is `chosen`, one that fails a rule (so scores lower) is `rejected`.
3. `human`: a reviewer's valid correction is `chosen`, the teacher's original output `rejected`.

The checks: `chosen` passes every rule (no reject or penalty finding), `rejected` fails at least one or
was rejected by a human, and `chosen` differs from `rejected`; identical pairs are removed. What fails a
check goes to the snapshot's rejects with a PREF code.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import jsonschema

from mashbill.curation.rules import failing_codes, score
from mashbill.validators.checker import RecordChecker
from mashbill.curation.select import Excluded, Selection
from mashbill.errors import MashbillError
from mashbill.factory.records import Record, SpecRef, TeacherCall, Verdict, record_id
from mashbill.factory.store import Store
from mashbill.specs import ResolvedSpec, canonical_json, load_spec, render_prompt

log = logging.getLogger(__name__)

PREF_CHOSEN_FAILS = "PREF001"
PREF_REJECTED_PASSES = "PREF002"
PREF_IDENTICAL = "PREF003"
PREF_NOT_MINIMAL = "PREF004"
PREF_NO_EDIT = "PREF005"

# edit -> (the rule id it breaks, rule ids that may break with it because they test the same thing)
EDIT_RULES = {
    "precision-to-llm": ("precision-first", {"precision-tool-match"}),
    "drop-legal-paragraph": ("legal-paragraph", {"legal-order", "legal-args"}),
    "drop-research": ("research-before-code", set()),
    "research-after-code": ("research-order", set()),
    "break-tool-args": ("tool-args", set()),
    "drop-domain": ("dynamic-domain", set()),
}


@dataclass(frozen=True)
class Pair:
    pair_id: str
    source: str  # rule | teacher | human
    rule: str  # the edit, or the codes the rejected sample failed, or "human-rejected"
    record_id: str  # the record the chosen plan came from
    inputs: dict
    meta: dict
    prompt: tuple[dict, ...]
    chosen: Any
    rejected: Any  # parsed plan, or the raw text when the sample did not parse
    rejected_codes: tuple[str, ...]

    @property
    def chosen_text(self) -> str:
        return canonical_json(self.chosen)

    @property
    def rejected_text(self) -> str:
        return self.rejected if isinstance(self.rejected, str) else canonical_json(self.rejected)


def pair_id(prompt, chosen_text: str, rejected_text: str) -> str:
    return hashlib.sha256(canonical_json([list(prompt), chosen_text, rejected_text]).encode()).hexdigest()


def source_spec_of(rs: ResolvedSpec) -> ResolvedSpec:
    ref = rs.spec.curation.preference.source_spec
    if not ref:
        raise MashbillError(f"{rs.path}: a preference spec needs curation.preference.source_spec, the plan spec "
                            "whose records give the chosen plans")
    path = (rs.path.parent / ref).resolve()
    if not path.is_file():
        raise MashbillError(f"{rs.path}: curation.preference.source_spec {ref} not found (looked at {path})")
    src = load_spec(path)
    if src.spec.kind != "plan":
        raise MashbillError(f"{rs.path}: curation.preference.source_spec must be a plan spec, {src.ref} is "
                            f"{src.spec.kind}")
    return src


# ---------------------------------------------------------------- rule-derived edits


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
    raise MashbillError(f"unknown preference edit {edit!r}")


def _drop_refs(kept: list, original: list) -> list:
    ids = {t.get("id") for t in kept if isinstance(t, dict)}
    for t in kept:
        if isinstance(t, dict) and t.get("depends_on") and t["depends_on"] not in ids:
            t.pop("depends_on")
    return kept


# ---------------------------------------------------------------- building the pairs


@dataclass
class PairBuild:
    pairs: list[Pair] = field(default_factory=list)
    excluded: list[Excluded] = field(default_factory=list)
    counts: dict = field(default_factory=dict)  # source -> pairs kept
    notes: dict = field(default_factory=dict)
    engine: str = ""

    def add(self, pair: Pair, seen: set[str]) -> bool:
        if pair.chosen_text == pair.rejected_text or pair.pair_id in seen:
            self.reject(pair, PREF_IDENTICAL, "chosen equals rejected" if pair.chosen_text == pair.rejected_text
                        else "the same pair again")
            return False
        seen.add(pair.pair_id)
        self.pairs.append(pair)
        self.counts[pair.source] = self.counts.get(pair.source, 0) + 1
        return True

    def reject(self, pair: Pair, code: str, detail: str) -> None:
        self.excluded.append(Excluded(pair.record_id, f"{pair.source}:{pair.rule}", "preference", (code,), detail,
                                      pair.inputs.get("query"), pair.rejected_text))


def _make(source: str, rule: str, rec_id: str, inputs: dict, meta: dict, prompt, chosen, rejected,
          codes) -> Pair:
    chosen_text = canonical_json(chosen)
    rejected_text = rejected if isinstance(rejected, str) else canonical_json(rejected)
    return Pair(pair_id(prompt, chosen_text, rejected_text), source, rule, rec_id, inputs, meta, tuple(prompt),
                chosen, rejected, tuple(codes))


def build_pairs(rs: ResolvedSpec, src_sel: Selection, samples: list[Record]) -> PairBuild:
    """All checked pairs of a preference spec: rule edits and human corrections of the source spec's selected
    records, and teacher samples stored under the preference spec."""
    cfg = rs.spec.curation.preference
    src = src_sel.rs
    checker = RecordChecker.for_spec(src)
    if checker.ruleset is None:
        raise MashbillError(f"{src.path}: preference pairs for plans need a rule file (`rules:`)")
    codes = checker.rule_codes()
    out = PairBuild(engine=checker.engine)
    seen: set[str] = set()
    if "rule" in cfg.sources:
        for cand in src_sel.candidates:
            rec = cand.record
            chosen_findings = checker.check(rec.input, cand.output, rec.meta)
            for edit in cfg.edits:
                rejected = apply_edit(edit, cand.output, src, rec.meta)
                if rejected is None:
                    continue
                target, companions = EDIT_RULES[edit]
                r_codes = failing_codes(checker.check(rec.input, rejected, rec.meta))
                pair = _make("rule", edit, rec.id, rec.input, rec.meta, rec.messages, cand.output, rejected, r_codes)
                allowed = {codes[r] for r in {target, *companions} if r in codes}
                if failing_codes(chosen_findings):
                    out.reject(pair, PREF_CHOSEN_FAILS, f"chosen fails {failing_codes(chosen_findings)}")
                elif codes.get(target) not in r_codes:
                    out.reject(pair, PREF_REJECTED_PASSES if not r_codes else PREF_NOT_MINIMAL,
                               f"the edit does not break {target} ({codes.get(target)}); fails {r_codes}")
                elif not set(r_codes) <= allowed:
                    out.reject(pair, PREF_NOT_MINIMAL, f"the edit breaks more than {target}: {r_codes}")
                else:
                    out.add(pair, seen)
    if "human" in cfg.sources:
        for rec, corrected in src_sel.corrections:
            chosen_codes = failing_codes(checker.check(rec.input, corrected, rec.meta))
            rejected = rec.output if rec.output is not None else (rec.raw or "")
            r_codes = failing_codes(checker.check(rec.input, rec.output, rec.meta)) if rec.output is not None else []
            pair = _make("human", "human-rejected", rec.id, rec.input, rec.meta, rec.messages, corrected, rejected,
                         r_codes)
            if chosen_codes:
                out.reject(pair, PREF_CHOSEN_FAILS, f"the correction fails {chosen_codes}")
            else:
                out.add(pair, seen)  # the reviewer's correction is the human rejection of the original
    if "teacher" in cfg.sources:
        pchecker = RecordChecker.for_spec(rs)
        groups: dict[str, list[tuple[Record, list[str], int]]] = {}
        for rec in samples:
            if int(rec.input.get("sample", 0)) >= cfg.samples_per_query:
                continue  # stored under an earlier, larger samples_per_query
            if rec.output is None:
                findings = [Verdict("PARSE001", "reject", "did not parse")] if rec.raw else []
            else:
                findings = pchecker.check(rec.input, rec.output, rec.meta)
            if rec.output is None and not rec.raw:
                continue
            groups.setdefault(rec.meta.get("group", rec.id), []).append((rec, failing_codes(findings), score(findings)))
        no_passing = 0
        for gid in sorted(groups):
            members = sorted(groups[gid], key=lambda m: (-m[2], m[0].id))
            best, best_codes, best_score = members[0]
            if best_codes or best.output is None:
                no_passing += 1
                continue
            for rec, r_codes, r_score in members[1:]:
                rejected = rec.output if rec.output is not None else rec.raw
                inputs = {k: v for k, v in rec.input.items() if k != "sample"}
                pair = _make("teacher", "+".join(r_codes) or "none", best.id, inputs, best.meta, best.messages,
                             best.output, rejected, r_codes)
                if not r_codes or r_score >= best_score:
                    out.reject(pair, PREF_REJECTED_PASSES, "both samples pass every rule")
                else:
                    out.add(pair, seen)
        out.notes["teacher_queries_without_a_passing_sample"] = no_passing
        out.notes["teacher_queries"] = len(groups)
    for s in ("rule", "teacher", "human"):
        out.counts.setdefault(s, 0)
    return out


def correction_turns(pair: Pair, review_request: str) -> list[dict]:
    """(system, user, wrong plan, review request, corrected plan): the wrong turn must never be trained."""
    return [*pair.prompt, {"role": "assistant", "content": pair.rejected_text},
            {"role": "user", "content": review_request}, {"role": "assistant", "content": pair.chosen_text}]


def check_correction_loss(rs: ResolvedSpec) -> None:
    loss = rs.spec.trainer_profile.loss
    if loss == "assistant-only":
        raise MashbillError(
            f"{rs.path}: curation.preference.correction_samples needs a trainer profile whose loss leaves out the "
            f"wrong assistant turn (trainer_profile.loss: last-turn or completion-only); with {loss} the wrong "
            "plan would be trained. Nothing was written.")


# ---------------------------------------------------------------- teacher samples


@dataclass
class SampleSummary:
    run_id: str
    queries: int
    samples: int
    stored: int
    passing: int
    failing: int
    validation_id: str | None


def sample_candidates(rs: ResolvedSpec, store: Store, teacher, *, limit: int | None = None,
                      on_progress: Callable[[int], None] | None = None) -> SampleSummary:
    """Ask the teacher for `samples_per_query` plans per seed query (the spec's teacher sampling, with seed
    sampling.seed + k for sample k), store each as a record of the preference spec, check every one with the
    rules and record that validation.

    All samples of a query share one rendered prompt (framing and taxonomy), so they are comparable.
    Already stored samples are skipped; a re-run completes the work.
    """
    from mashbill.factory.generate import parse_output, select_inputs

    cfg = rs.spec.curation.preference
    if rs.spec.kind != "preference":
        raise MashbillError(f"{rs.ref} is a {rs.spec.kind} spec; teacher samples are for preference specs")
    schema_validator = jsonschema.validators.validator_for(rs.output_schema)(rs.output_schema)
    checker = RecordChecker.for_spec(rs)
    base = dict(rs.spec.teacher.sampling.model_dump())
    ref = SpecRef(rs.spec.name, rs.spec.version, rs.hash)
    done = store.finished_ids(rs.hash)
    todo = []
    for gid, inputs in select_inputs(rs, limit=limit):
        prompt = render_prompt(rs, inputs, gid)
        for k in range(cfg.samples_per_query):
            sample_inputs = {**inputs, "sample": k}
            rid = record_id(rs.hash, sample_inputs)
            if rid in done:
                continue
            sampling = {**base, "seed": base["seed"] + k}
            todo.append((rid, gid, k, sample_inputs, prompt, sampling))
    info = teacher.info()
    run_id = store.begin_run(spec_name=rs.spec.name, spec_version=rs.spec.version, spec_hash=rs.hash,
                             kind=rs.spec.kind, backend=teacher.backend, model=teacher.model,
                             model_sha256=info.get("sha256"), model_info=info, sampling=base,
                             args={"preference_samples": cfg.samples_per_query, "limit": limit})
    from mashbill.factory.teachers.base import TeacherRequest

    schema = rs.output_schema if rs.spec.teacher.constrained else None
    records, verdicts, calls, results = [], {}, [], {}
    passing = failing = 0
    by_id = {t[0]: t for t in todo}
    requests = [TeacherRequest(rid, prompt.teacher_messages, schema, sampling)
                for rid, gid, k, inp, prompt, sampling in todo]
    status = "completed"
    try:
        for n, result in enumerate(teacher.generate(requests), 1):
            rid, gid, k, inputs, prompt, sampling = by_id[result.request.record_id]
            meta = {**prompt.meta(), "lang": inputs.get("lang"), "group": gid, "sample": k, "seed": sampling["seed"],
                    "finish_reason": result.finish_reason}
            if result.text is None:
                rec = Record(rid, rs.spec.kind, inputs, None, None, ref, "failed", prompt.training_messages, meta)
                vs = [Verdict("TEACHER001", "reject", (result.error or "")[:300])]
            else:
                output, vs = parse_output(result.text, result.finish_reason, schema_validator)
                status_ = "rejected" if any(v.severity == "reject" for v in vs) else "accepted"
                rec = Record(rid, rs.spec.kind, inputs, output, result.text, ref, status_, prompt.training_messages,
                             meta)
                if status_ == "accepted":
                    found = checker.check(inputs, output, meta)
                    results[rid] = found
                    if failing_codes(found):
                        failing += 1
                    else:
                        passing += 1
            records.append(rec)
            verdicts[rid] = vs
            calls.extend(TeacherCall(rid, result.request.payload_hash, i + 1, teacher.backend, teacher.model,
                                     a.latency_s, a.prompt_tokens, a.cached_tokens, a.completion_tokens,
                                     a.finish_reason, a.error) for i, a in enumerate(result.attempts))
            if on_progress:
                on_progress(n)
    except BaseException:
        status = "interrupted"
        raise
    finally:
        store.write_batch(run_id, records, verdicts, calls)
        store.finish_run(run_id, status, {"requested": len(todo), "accepted": sum(r.status == "accepted" for r in records),
                                          "rejected": sum(r.status == "rejected" for r in records),
                                          "failed": sum(r.status == "failed" for r in records)})
    validation_id = None
    if results:
        counts: dict[str, int] = {}
        for vs in results.values():
            for v in vs:
                counts[v.code] = counts.get(v.code, 0) + 1
        validation_id = store.record_validation(spec_hash=rs.hash, source=f"curation.preference:{checker.engine}",
                                                results=results, counts=counts)
    return SampleSummary(run_id, len({t[1] for t in todo}), len(todo), len(records), passing, failing, validation_id)


def source_path(rs: ResolvedSpec) -> Path | None:
    ref = rs.spec.curation.preference.source_spec
    return (rs.path.parent / ref).resolve() if ref else None
