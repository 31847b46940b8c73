"""Preference (DPO) pairs for plans, from three sources; every pair records its source and is checked.

1. `rule`: `chosen` is a validated plan that passes every rule; `rejected` is a minimal edit of it that
   breaks exactly one named rule (`curation.preference.preference_edits`: a precision tool replaced by an LLM category,
   `legal_get_paragraph` dropped, the research task dropped or moved after the code task, tool arguments
   broken, `domain` or `search_query` dropped, a category the record was not shown).
2. `teacher`: two or more samples per query (different seeds) from the preference spec's teacher; a sample
   that passes every rule is `chosen`, one that fails a rule (so scores lower) is `rejected`.
3. `human`: a reviewer's valid correction is `chosen`, the teacher's original output `rejected`.
5. `repair`: the teacher's real mistakes. A source-spec record accepted after a repair (`factory.generate.repair`) gives
   one pair per earlier attempt: the same prompt, the accepted repair `chosen`, the rejected attempt `rejected`,
   and the codes that separate them (the attempt's reject codes). Only selected records give one, so a chosen
   side the usability rules leave out (`factory.usable`) never makes a pair; a reviewer's correction outranks
   the repair (that record gives a `human` pair instead).
4. `judge`: the same teacher samples, ranked by the spec's judge (`mashbill judge --pairs`): every pair is
   judged in both orders; a pair whose two verdicts disagree (position bias) is dropped and counted, so is
   one whose mean score difference is below `min_judge_margin`; the judge preferring a sample that fails a
   hard rule over one that passes is a judge error, counted and dropped.

The teacher samples come from the one generate loop (`factory.generate.generate` with `samples`): resume, shards,
guards and accounting apply; this module only pairs what is stored.

The checks: `chosen` passes every rule (no reject or penalty finding), `rejected` fails at least one or
was rejected by a human, and `chosen` differs from `rejected`; identical pairs are removed. What fails a
check goes to the snapshot's rejects with a PREF code.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from mashbill.curation.preference.preference_edits import EDIT_RULES, apply_edit, edits_of
from mashbill.curation.preference.rules import failing_codes, score
from mashbill.curation.selection.select import Excluded, Selection
from mashbill.errors import MashbillError
from mashbill.factory.records import Record, Verdict
from mashbill.factory.store import Store
from mashbill.hashing import canonical_json, sha256_json
from mashbill.specs import LIBRARY, ResolvedSpec, find_spec_files, load_spec
from mashbill.validators.checker import RecordChecker

log = logging.getLogger(__name__)

PREF_CHOSEN_FAILS = "PREF001"
PREF_REJECTED_PASSES = "PREF002"
PREF_IDENTICAL = "PREF003"
PREF_NOT_MINIMAL = "PREF004"
PREF_NO_EDIT = "PREF005"
PREF_JUDGE_INCONSISTENT = "PREF006"  # the two orders of a pair disagree (position bias)
PREF_JUDGE_MARGIN = "PREF007"  # the judge's margin is below min_judge_margin
PREF_JUDGE_ERROR = "PREF008"  # the judge preferred a sample that fails a hard rule over one that passes
PREF_CHOSEN_UNUSABLE = "PREF009"  # the judge preferred a sample the usability rules leave out

DEFAULT_REVIEW_REQUEST = (
    "Check the plan above against the routing rules: an exact computation goes to precision_tools with a "
    "matching tool (PRECISION-FIRST); a cited paragraph of German law is fetched with legal_get_paragraph "
    "before legal_advisor (LEGAL \u00a7-PATTERN); implementing a known game, algorithm, protocol or parser "
    "starts with a research task before the code task (RESEARCH-BEFORE-CODE). Return the corrected plan, "
    "or the same plan if it is already right.")


@dataclass(frozen=True)
class Pair:
    pair_id: str
    source: str  # rule | teacher | human | judge
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
    return sha256_json([list(prompt), chosen_text, rejected_text])


def review_request_of(rs: ResolvedSpec) -> str:
    return rs.spec.curation.preference.review_request or DEFAULT_REVIEW_REQUEST


def source_spec_of(rs: ResolvedSpec) -> ResolvedSpec:
    ref = rs.spec.curation.preference.source_spec
    if not ref:
        raise MashbillError(f"{rs.path}: a preference spec needs curation.preference.preference.source_spec, the plan spec "
                            "whose records give the chosen plans")
    path = (rs.home / ref).resolve()
    if not path.is_file() and path.parent.parent == LIBRARY.resolve():
        # a library spec superseded since (specs/library/archive/<kind>/): its name@version still finds it
        path = next((f for f in find_spec_files(LIBRARY, archived=True) if f.name == path.name), path)
    if not path.is_file():
        raise MashbillError(f"{rs.path}: curation.preference.preference.source_spec {ref} not found (looked at {path})")
    src = load_spec(path)
    if src.spec.kind != "plan":
        raise MashbillError(f"{rs.path}: curation.preference.preference.source_spec must be a plan spec, {src.ref} is "
                            f"{src.spec.kind}")
    return src


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


def build_pairs(rs: ResolvedSpec, src_sel: Selection, samples: list[Record],
                judgments: list[dict] | None = None, unusable: Mapping[str, Any] | None = None,
                attempts: Mapping[str, list[dict]] | None = None) -> PairBuild:
    """All checked pairs of a preference spec: rule edits and human corrections of the source spec's selected
    records, and teacher samples stored under the preference spec.

    `unusable`: sample id -> its `factory.usable.Usability` for the samples the one usability answer leaves
    out (rejected by a reviewer, by their latest validation pass, by the judge). Such a sample is never
    `chosen`; it may still be `rejected`, which is what a worse sample is for."""
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
            for edit in edits_of(rs):
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
    unusable = unusable or {}
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
        no_passing = left_out = 0
        for gid in sorted(groups):
            members = sorted(groups[gid], key=lambda m: (-m[2], m[0].id))
            usable = [m for m in members if m[0].id not in unusable]
            if not usable or usable[0][1] or usable[0][0].output is None:
                no_passing += 1
                continue
            best, best_codes, best_score = usable[0]
            for rec, r_codes, r_score in members:
                if rec.id == best.id:
                    continue
                if rec.id in unusable and not r_codes:
                    left_out += 1  # passes every rule but is left out (e.g. a reviewer rejected it): no pair
                    continue
                rejected = rec.output if rec.output is not None else rec.raw
                inputs = {k: v for k, v in rec.input.items() if k != "sample"}
                pair = _make("teacher", "+".join(r_codes) or "none", best.id, inputs, best.meta, best.messages,
                             best.output, rejected, r_codes)
                if not r_codes or r_score >= best_score:
                    out.reject(pair, PREF_REJECTED_PASSES, "both samples pass every rule")
                else:
                    out.add(pair, seen)
        out.notes["teacher_queries_without_a_passing_sample"] = no_passing
        out.notes["teacher_samples_left_out"] = left_out
        out.notes["teacher_queries"] = len(groups)
    if "judge" in cfg.sources:
        judge_pairs(rs, samples, judgments or [], out, seen, unusable)
    if "repair" in cfg.sources:
        repair_pairs(src_sel, attempts or {}, out, seen)
    for s in ("rule", "teacher", "human", *(x for x in ("judge", "repair") if x in cfg.sources)):
        out.counts.setdefault(s, 0)
    return out


def repair_pairs(src_sel: Selection, attempts: Mapping[str, list[dict]], out: PairBuild, seen: set[str]) -> None:
    """Add a pair per rejected attempt of every selected record that a repair made acceptable (source 5 above)."""
    chains = 0
    for cand in src_sel.candidates:
        rec = cand.record
        rows = attempts.get(rec.id) or []
        last = rows[-1] if rows else {}
        if len(rows) < 2 or cand.origin != "teacher" or last["status"] != "accepted" or last["output"] != rec.output:
            continue  # not repaired, a reviewer's correction, or the stored record is not the chain's last attempt
        chains += 1
        for row in rows[:-1]:
            codes = sorted({v["code"] for v in row["verdicts"] if v["severity"] == "reject"})
            rejected = row["output"] if row["output"] is not None else (row["raw"] or "")
            pair = _make("repair", "+".join(codes) or "none", rec.id, rec.input,
                         {**rec.meta, "repair_attempt": row["attempt"]}, rec.messages, cand.output, rejected, codes)
            out.add(pair, seen)
    out.notes["repaired_records"] = chains


def judge_pairs(rs: ResolvedSpec, samples: list[Record], judgments: list[dict], out: PairBuild,
                seen: set[str], unusable: Mapping[str, Any] | None = None) -> None:
    """Add the judge's pairs to `out`; count what was dropped and why.

    Every two accepted samples x, y of one query were judged in both orders (`factory.generate.judge`, mode pairs):
    order 1 shows x first, order 2 shows y first. The pair is kept when both orders prefer the same sample
    (otherwise PREF006: position bias), the mean difference of the two orders reaches `min_judge_margin`
    (PREF007), and the preferred sample does not fail a hard rule that the other passes (PREF008, a judge
    error); a preferred sample that the usability rules leave out (`unusable`, see `build_pairs`) is dropped
    (PREF009).
    """
    cfg = rs.spec.curation.preference
    unusable = unusable or {}
    by_id = {r.id: r for r in samples if r.status == "accepted" and r.output is not None}
    checker = RecordChecker.for_spec(rs)
    hard = {rid: failing_codes(checker.check(r.input, r.output, r.meta)) for rid, r in by_id.items()}
    orders: dict[tuple[str, str], dict[str, float]] = {}
    for j in judgments:
        if j["a"] not in by_id or j["b"] not in by_id:
            continue
        if not isinstance(j["score_a"], (int, float)) or not isinstance(j["score_b"], (int, float)):
            continue
        key = tuple(sorted((j["a"], j["b"])))
        x = key[0]
        # the difference in favour of x, as seen in this order
        diff = (j["score_a"] - j["score_b"]) if j["a"] == x else (j["score_b"] - j["score_a"])
        orders.setdefault(key, {})["x_first" if j["a"] == x else "y_first"] = diff
    notes = {"judge_pairs_judged": 0, "judge_inconsistent": 0, "judge_below_margin": 0, "judge_errors": 0,
             "judge_single_order": 0}
    for (x, y), d in sorted(orders.items()):
        if len(d) < 2:
            notes["judge_single_order"] += 1  # the other order is not judged (yet)
            continue
        notes["judge_pairs_judged"] += 1
        d1, d2 = d["x_first"], d["y_first"]
        win, lose = (x, y) if d1 + d2 > 0 else (y, x)
        rw, rl = by_id[win], by_id[lose]
        inputs = {k: v for k, v in rw.input.items() if k != "sample"}
        pair = _make("judge", f"margin {abs(d1 + d2) / 2:g}", rw.id, inputs, rw.meta, rw.messages, rw.output,
                     rl.output, hard[lose])
        if (d1 > 0) != (d2 > 0) or d1 == 0 or d2 == 0:
            notes["judge_inconsistent"] += 1
            out.reject(pair, PREF_JUDGE_INCONSISTENT, f"the two orders disagree ({d1:+g} vs {d2:+g})")
        elif abs(d1 + d2) / 2 < cfg.min_judge_margin:
            notes["judge_below_margin"] += 1
            out.reject(pair, PREF_JUDGE_MARGIN, f"margin {abs(d1 + d2) / 2:g} < {cfg.min_judge_margin:g}")
        elif hard[win] and not hard[lose]:
            notes["judge_errors"] += 1
            out.reject(pair, PREF_JUDGE_ERROR, f"the judge preferred a plan failing {hard[win]} over one that passes")
        elif hard[win]:
            out.reject(pair, PREF_CHOSEN_FAILS, f"both samples fail a rule; the preferred one fails {hard[win]}")
        elif win in unusable:
            u = unusable[win]
            out.reject(pair, PREF_CHOSEN_UNUSABLE, f"the preferred sample is left out at {u.stage} "
                                                   f"({', '.join(u.codes)})")
        else:
            out.add(pair, seen)
    for k, v in notes.items():
        out.notes[k] = out.notes.get(k, 0) + v


def correction_turns(pair: Pair, review_request: str) -> list[dict]:
    """(system, user, wrong plan, review request, corrected plan): the wrong turn must never be trained."""
    return [*pair.prompt, {"role": "assistant", "content": pair.rejected_text},
            {"role": "user", "content": review_request}, {"role": "assistant", "content": pair.chosen_text}]


def check_correction_loss(rs: ResolvedSpec) -> None:
    loss = rs.spec.trainer_profile.loss
    if loss == "assistant-only":
        raise MashbillError(
            f"{rs.path}: curation.preference.preference.correction_samples needs a trainer profile whose loss leaves out the "
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
                      on_progress: Callable | None = None) -> SampleSummary:
    """Ask the teacher for `samples_per_query` plans per seed query through the generate loop (seed
    sampling.seed + k for sample k; all samples of a query share one rendered prompt), then check every new
    accepted sample with the rules and record that validation.

    Already stored samples are skipped; a re-run completes the work.
    """
    from mashbill.factory.generate.generate import generate

    cfg = rs.spec.curation.preference
    if rs.spec.kind != "preference":
        raise MashbillError(f"{rs.ref} is a {rs.spec.kind} spec; teacher samples are for preference specs")
    checker = RecordChecker.for_spec(rs)
    summary = generate(rs, store, teacher, limit=limit, samples=cfg.samples_per_query, on_progress=on_progress,
                       args={"preference_samples": cfg.samples_per_query, "limit": limit})
    new = store.records(spec_hash=rs.hash, status="accepted")
    covered = store.validated_ids(rs.hash)
    results = {r.id: checker.check(r.input, r.output, r.meta) for r in new if r.id not in covered}
    passing = sum(not failing_codes(vs) for vs in results.values())
    validation_id = None
    if results:
        counts: dict[str, int] = {}
        for vs in results.values():
            for v in vs:
                counts[v.code] = counts.get(v.code, 0) + 1
        validation_id = store.record_validation(spec_hash=rs.hash, source=f"curation.preference.preference:{checker.engine}",
                                                results=results, counts=counts)
    stored = summary.accepted + summary.rejected + summary.failed
    queries = summary.requested // cfg.samples_per_query if summary.requested else 0
    return SampleSummary(summary.run_id, queries, summary.requested, stored, passing, len(results) - passing,
                         validation_id)
