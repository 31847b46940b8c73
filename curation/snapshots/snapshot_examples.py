"""The examples a snapshot holds, built from the store's selection: one SFT example per usable record, or
preference pairs (and multi-turn correction samples) for a preference spec."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from mashbill.curation.selection.labels import cell_name, class_list, classification_label, dims_for, labels_of
from mashbill.curation.selection.select import Excluded, Selection, select_records
from mashbill.curation.snapshots.snapshot_columns import from_examples, paths_for, sft_table
from mashbill.errors import MashbillError
from mashbill.factory.records import sft_key
from mashbill.factory.store import Store
from mashbill.hashing import canonical_json
from mashbill.specs import ResolvedSpec

@dataclass
class Example:
    key: str
    record_id: str
    row_kind: str  # sft | preference | correction
    spec: str
    source: str
    rule: str | None
    query: str
    lang: str
    labels: dict
    cell: str
    class_labels: list[str]
    prompt: list[dict]
    completion: str
    rejected: str | None = None
    rejected_codes: list[str] = field(default_factory=list)
    turns: list[dict] | None = None
    group_links: list[str] = field(default_factory=list)  # other keys this example must share a split with
    inputs: dict = field(default_factory=dict)  # the record's input (for curation.group_by), not written

    @property
    def conversation(self) -> list[dict]:
        return self.turns or [*self.prompt, {"role": "assistant", "content": self.completion}]


def example_key(*parts: Any) -> str:
    return hashlib.sha256(canonical_json(list(parts)).encode()).hexdigest()


def sft_examples(sel: Selection, dims: list[str]) -> list[Example]:
    spec = sel.rs.spec
    out = []
    shared: dict[tuple[str, str], str] = {}
    for cand in sel.candidates:
        rec = cand.record
        completion = canonical_json(cand.output)
        labels = labels_of(dims, spec.kind, rec.input, cand.output, rec.meta)
        out.append(Example(
            sft_key(rec.messages, completion, shared), rec.id, "sft", spec.ref, cand.origin, None,
            rec.input.get("query", ""), labels.get("lang") or rec.input.get("lang") or rec.meta.get("lang") or "none",
            labels, cell_name(labels, dims), class_list(classification_label(spec.kind, cand.output, rec.meta)),
            list(rec.messages), completion, inputs=rec.input))
    return out


def lang_of(inputs: dict, meta: dict) -> str:
    return inputs.get("lang") or meta.get("lang") or "none"


@dataclass
class Built:
    examples: Any  # pa.Table of snapshot_columns.EXAMPLES rows
    excluded: list[Excluded]
    verdicts: dict[str, int]
    review: dict
    run_ids: list[str]
    validation_ids: list[str]
    specs: list[tuple[str, ResolvedSpec]]  # (role, spec)
    rules_engine: str | None
    preference: dict | None
    records_seen: int
    spec_hashes: list[str]
    dims: list[str]
    judge: dict | None = None  # judge scores of the selected records (curation.preference.judging.judge_export)
    # validation's near-duplicate clusters (Store.near_groups: record_id, near_group) where one validation run covered
    # every selected record and clustered as the freeze would; None: the freeze finds the clusters itself
    near_groups: Any = None


def validation_groups(store: Store, rs: ResolvedSpec, validation_ids: list[str]):
    """The near-duplicate clusters of the one validation run behind a selection, made the way `rs`'s freeze groups
    (its `curation.near_duplicate_threshold`, the defaults of `near_duplicate_clusters`), else None. Several runs
    clustered different sets of records, so their clusters are not one answer."""
    from mashbill.validators.data.dedup import groups_profile

    if len(validation_ids) != 1:
        return None
    return store.near_groups(validation_ids[0], groups_profile(rs.spec.curation.near_duplicate_threshold))


def build(store: Store, rs: ResolvedSpec, tokens_profile: str | None = None) -> Built:
    """The examples of a snapshot of `rs`; a plain record's `n_tokens` is the count its validation kept under
    `tokens_profile` (the freeze's tokenizer and template), else left to the writer to count."""
    spec = rs.spec
    dims = dims_for(spec.kind, spec.curation.quotas.dims)
    if spec.kind != "preference":
        sel = select_records(store, rs, columnar=True, paths=paths_for(spec.kind, dims), key_label="sft",
                             tokens_profile=tokens_profile)
        table = sft_table(sft_examples(sel, dims), sel.plain, spec.kind, dims, spec.ref,
                          inputs=bool(spec.curation.group_by))
        return Built(table, sel.excluded, sel.verdict_counts, sel.review, sel.run_ids, sel.validation_ids,
                     [("snapshot", rs)], None, None, sel.review["records"], [rs.hash], dims,
                     near_groups=validation_groups(store, rs, sel.validation_ids))
    from mashbill.curation.preference.preference import (build_pairs, check_correction_loss, correction_turns, edits_of,
                                              review_request_of, source_spec_of)

    cfg = spec.curation.preference
    if cfg.correction_samples:
        check_correction_loss(rs)
    src = source_spec_of(rs)
    src_sel = select_records(store, src)
    # the samples with the one usability answer (factory.usable): a left-out sample is never `chosen`
    states = [st for st in store.usable(rs.hash) if st.record.status != "failed"] \
        if {"teacher", "judge"} & set(cfg.sources) else []
    samples = [st.record for st in states]
    unusable = {st.record.id: st.usability for st in states if not st.usability.usable}
    unvalidated = [st.record.id for st in states if st.record.status == "accepted" and st.mark is None]
    if unvalidated:
        raise MashbillError(f"store {store.root}: {len(unvalidated)} teacher sample(s) of {rs.ref} were never "
                            f"checked by a validation run (first: {unvalidated[0][:16]}). Nothing was written.")
    judgments = []
    if "judge" in cfg.sources:
        from mashbill.factory.generate.judge import pair_judgments

        judgments = pair_judgments(store, rs)
    attempts: dict[str, list[dict]] = {}
    if "repair" in cfg.sources:  # the source spec's repair chains (factory.generate.repair)
        for row in store.attempts(spec_hash=src.hash):
            attempts.setdefault(row["record_id"], []).append(row)
    pb = build_pairs(rs, src_sel, samples, judgments, unusable, attempts)
    examples: list[Example] = []
    for p in pb.pairs:
        labels = labels_of(dims, "preference", p.inputs, p.chosen, p.meta, p.source)
        examples.append(Example(
            p.pair_id, p.record_id, "preference", rs.ref, p.source, p.rule, p.inputs.get("query", ""),
            lang_of(p.inputs, p.meta), labels, cell_name(labels, dims),
            class_list(classification_label("plan", p.chosen, p.meta)), list(p.prompt), p.chosen_text, p.rejected_text,
            list(p.rejected_codes), inputs=p.inputs))
    corrections = 0
    if cfg.correction_samples:
        order = {"human": 0, "rule": 1, "repair": 2, "teacher": 3, "judge": 4}
        first: dict[str, Example] = {}
        for ex, p in sorted(zip(examples, pb.pairs), key=lambda t: (order[t[1].source], t[0].key)):
            first.setdefault(p.record_id, ex)
        by_key = {p.pair_id: p for p in pb.pairs}
        for ex in sorted(first.values(), key=lambda e: e.key):
            turns = correction_turns(by_key[ex.key], review_request_of(rs))
            examples.append(Example(example_key("correction", turns), ex.record_id, "correction", rs.ref, ex.source, ex.rule,
                                    ex.query, ex.lang, ex.labels, ex.cell, ex.class_labels, ex.prompt,
                                    ex.completion, ex.rejected, ex.rejected_codes, turns, [ex.key], ex.inputs))
            corrections += 1
    verdicts = Counter(src_sel.verdict_counts)
    verdicts.update(store.verdict_counts(rs.hash))
    sample_runs = store.run_ids(rs.hash) if samples else []
    sample_validations = store.validation_ids(rs.hash) if samples else []
    pref = {"sources": cfg.sources, "pairs": dict(pb.counts), "correction_samples": corrections,
            "edits": edits_of(rs), "samples_per_query": cfg.samples_per_query, "source_spec": src.ref,
            "rules_engine": pb.engine, "rejected_pairs": dict(Counter(e.codes[0] for e in pb.excluded)),
            **pb.notes}
    return Built(from_examples(examples), src_sel.excluded + pb.excluded, dict(sorted(verdicts.items())), src_sel.review,
                 sorted(set(src_sel.run_ids) | set(sample_runs)),
                 sorted(set(src_sel.validation_ids) | set(sample_validations)),
                 [("snapshot", rs), ("source", src)], pb.engine, pref, src_sel.review["records"] + len(samples),
                 [rs.hash, src.hash], dims)
