"""Running all checks over a set of rows, and the report they produce.

Two entry points: ``validate_file`` for datasets Mashbill did not make, and ``validate_spec_records`` for a spec's
stored records (which also writes the verdicts to the store, replacing that stage's earlier ones). Both return a
``Report``: verdicts per record, counts per code, a few examples per code, and one section per check.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from mashbill.factory.records import Verdict
from mashbill.files import write_file_atomic
from mashbill.specs.model import TrainerProfile
from mashbill.validators.data.inputs import Row, guess_lang, read_rows
from mashbill.validators.errors import ValidationInputError
from mashbill.validators.plans.ruleset import DEFAULT_RULES, RuleSet, load_rules, load_ruleset

log = logging.getLogger(__name__)

STAGE = "validate"
EXAMPLES_PER_CODE = 3


@dataclass
class Options:
    profile: TrainerProfile | None = None  # the trainer's view of the data; None: no span checks
    rules: RuleSet | None = None
    audit_sample: int = 200
    spans: bool = True
    apply_rules: bool = True  # file mode: the routing rules on rows whose target is a JSON plan
    dedup: bool = True
    pii: bool = True
    expectations: bool = True
    holdout: list[str] = field(default_factory=list)
    eval_files: list[str] = field(default_factory=list)
    base_dir: Path | None = None
    spec: object = None  # file mode: the resolved --spec (its catalog, taxonomy and worked examples)
    seed: int = 0
    progress: Callable[[str], None] | None = None

    def ruleset(self) -> RuleSet:
        return self.rules or load_ruleset(DEFAULT_RULES)


class Report:
    def __init__(self, source: str, kind: str):
        self.source = source
        self.kind = kind
        self.keys: list[str] = []
        self.verdicts: dict[str, list[Verdict]] = {}
        self.sections: dict[str, dict] = {}
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self.started = time.time()

    def add(self, key: str, verdicts: Iterable[Verdict]) -> None:
        vs = list(verdicts)
        if vs:
            self.verdicts.setdefault(key, []).extend(vs)

    def counts(self) -> dict[str, int]:
        c = Counter(v.code for vs in self.verdicts.values() for v in vs)
        return dict(sorted(c.items()))

    def records_by_code(self) -> dict[str, int]:
        c = Counter(code for vs in self.verdicts.values() for code in {v.code for v in vs})
        return dict(sorted(c.items()))

    def severity(self) -> dict[str, str]:
        out = {}
        for vs in self.verdicts.values():
            for v in vs:
                prev = out.get(v.code)
                if prev is None or _rank(v.severity) > _rank(prev):
                    out[v.code] = v.severity
        return dict(sorted(out.items()))

    def examples(self) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for key in self.keys:
            for v in self.verdicts.get(key, ()):
                lst = out.setdefault(v.code, [])
                if len(lst) < EXAMPLES_PER_CODE:
                    lst.append({"record": key, "detail": v.detail})
        return dict(sorted(out.items()))

    @property
    def rejected(self) -> list[str]:
        return [k for k in self.keys if any(v.severity == "reject" for v in self.verdicts.get(k, ()))]

    @property
    def has_rejects(self) -> bool:
        return any(v.severity == "reject" for vs in self.verdicts.values() for v in vs)

    def to_dict(self) -> dict:
        return {
            "source": self.source, "kind": self.kind, "records": len(self.keys),
            "counts": self.counts(), "records_by_code": self.records_by_code(), "severity": self.severity(),
            "rejected_records": len(self.rejected), "ok": not self.has_rejects,
            "examples": self.examples(), **self.sections,
            "problems": self.problems, "warnings": self.warnings,
            "wall_s": round(time.time() - self.started, 2),
        }

    def write(self, path: str | Path) -> None:
        write_file_atomic(Path(path), (json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def _rank(sev: str) -> int:
    return {"flag": 0, "penalty": 1, "reject": 2}.get(sev, 0)


# ---------------------------------------------------------------- the checks


def check_spans(rows: list[Row], opts: Options, report: Report) -> None:
    from mashbill.factory.stats import percentiles
    from mashbill.validators.spans.spans import SpanEngine, audit, judge
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer, resolve_chat_template

    prof = opts.profile
    examples = [ex for r in rows for ex in r.examples]
    if prof is None or not examples:
        return
    loaded = load_tokenizer(prof.tokenizer, opts.base_dir)
    template = resolve_chat_template(loaded, prof.chat_template, opts.base_dir)
    if template is None and any(ex.conversational for ex in examples):
        raise ValidationInputError(f"tokenizer {prof.tokenizer} has no chat template and the data is "
                                   "conversational; pass --chat-template (chatml, a .jinja file or template text)")
    engine = SpanEngine(loaded, template, loss=prof.loss)
    t0 = time.perf_counter()
    results = engine.fast(examples)
    fast_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    aud = add_audit_findings(report, audit(engine, examples, results, sample=opts.audit_sample, seed=opts.seed))
    audit_s = time.perf_counter() - t0
    by_key: dict[str, list] = {}
    totals, targets, margins, cut = [], [], [], 0
    for res in results:
        out = judge(res, prof.max_seq_len, prof.truncation_side, prof.loss)
        by_key.setdefault(res.key, []).append(out)
        if res.error is None:
            totals.append(res.total)
            targets.append(res.trained)
            margins.append(out.margin)
        if any(v.code in ("SPAN001", "SPAN002") for v in out.verdicts):
            cut += 1
        report.add(res.key, out.verdicts)
    for r in rows:
        outs = by_key.get(r.key)
        if outs:
            r.meta["total_tokens"] = max(o.result.total for o in outs)
            r.meta["margin"] = min(o.margin for o in outs)
    report.warnings.extend(engine.warnings)
    report.sections["span"] = {
        **prof.describe(), "tokenizer_file": str(loaded.path), "tokenizer_source": loaded.facts,
        "examples": len(results),
        "cut_policy": engine.policy.name, "cut_policy_reason": engine.policy.reason,
        "tokens": percentiles(totals), "target_tokens": percentiles(targets), "margin": percentiles(margins),
        "share_cut": round(cut / len(results), 6) if results else 0.0,
        "pieces_tokenized": engine.counter.encoded_pieces, "fast_s": round(fast_s, 3),
        "audit": {**aud, "wall_s": round(audit_s, 3)},
    }


def add_audit_findings(report: Report, aud: dict) -> dict:
    """The span audit's findings (SPAN011 verdicts) into the report, its lines into the report's problems; returns
    the rest of the audit summary (what the report's span.audit section shows)."""
    aud = dict(aud)
    for key, verdict in aud.pop("findings", ()):
        report.add(key, [verdict])
    report.problems.extend(aud.pop("lines", ()))
    return aud


def check_dedup_and_leaks(rows: list[Row], opts: Options, report: Report, eval_rows: list[Row] = ()) -> None:
    from mashbill.validators.data.dedup import dedup
    from mashbill.validators.data.leakage import HoldoutItem, leakage, load_holdout

    rs = opts.ruleset()
    eval_keys = {r.key for r in eval_rows}
    with_query = [r for r in rows if r.query is not None and r.ok and r.key not in eval_keys]
    keys, texts = [r.key for r in with_query], [r.query for r in with_query]
    if opts.dedup and with_query:
        res = dedup(keys, texts, rs.checks.dedup)
        for k, vs in res.verdicts.items():
            report.add(k, vs)
        report.sections["dedup"] = {"field": "query", **res.summary()}
    items: list[HoldoutItem] = []
    sources = []
    for h in opts.holdout:
        got = load_holdout(h)
        items += got
        sources.append({"file": str(h), "items": len(got)})
    for r in eval_rows:
        if r.query:
            items.append(HoldoutItem(f"eval:{r.key}", r.query))
    if eval_rows:
        sources.append({"eval_split": len(eval_rows)})
    if items and with_query:
        verdicts, summary = leakage(keys, texts, items, rs.checks.leakage, rs.checks.dedup)
        for k, vs in verdicts.items():
            report.add(k, vs)
        report.sections["leakage"] = {**summary, "sources": sources}


_REQUEST = re.compile(r"(?:\nRequest:|<\|im_start\|>user\n|\n(?:User|Human):)\s*", re.IGNORECASE)


def _system_and_query(row: Row) -> tuple[str | None, str | None]:
    """The system prompt of a file row (where its taxonomy and examples are) and the request itself."""
    ex = row.examples[0] if row.examples else None
    if ex is not None and ex.messages:
        system = next((m.get("content") for m in ex.messages if m.get("role") == "system"), None)
        return system, row.query
    if ex is not None and ex.text_prompt:  # a plain-text prompt: the request follows its last request marker
        parts = _REQUEST.split(ex.text_prompt)
        if len(parts) > 1:
            return ex.text_prompt, parts[-1].split("<|im_end|>")[0].strip()
        return ex.text_prompt, row.query
    return None, row.query


def _plan_of(row: Row):
    t = (row.target or "").strip()
    if not t[:1] in ("[", "{"):
        return None
    try:
        return json.loads(t)
    except json.JSONDecodeError:
        return None


def _history_turns(row: Row) -> int:
    """Messages before the last user turn, system prompt aside (the complexity rules' history, DOMAIN §6.2)."""
    msgs = [m for m in (row.examples[0].messages or ()) if m.get("role") != "system"] if row.examples else []
    users = [i for i, m in enumerate(msgs) if m.get("role") == "user"]
    return users[-1] if users else 0


def check_rules(rows: list[Row], opts: Options, report: Report) -> None:
    """File mode: the routing rules on every row whose target is a JSON plan (or, with a complexity spec or rule
    set, the complexity rules on every JSON label), through the one record checker."""
    from mashbill.validators.checker import RecordChecker

    spec = opts.spec
    if not opts.apply_rules:
        report.sections["rules"] = {"rule_set": None, "skipped": ["all rules: --no-rules"]}
        return
    complexity = getattr(opts.rules, "kind", None) == "complexity"
    if spec is not None and spec.spec.kind != "plan" and not complexity:
        report.sections["rules"] = {"rule_set": None, "skipped": [f"all rules: --spec {spec.ref} is a "
                                                                  f"{spec.spec.kind} spec, not a plan spec"]}
        return
    plans = [(r, _plan_of(r)) for r in rows if r.ok]
    if spec is None and opts.rules is None and not any(p is not None for _, p in plans):
        report.sections["rules"] = {"rule_set": None, "skipped": ["all rules: no --spec or --rules, and no row's "
                                                                  "target is a JSON plan"]}
        return
    checker = RecordChecker.for_file(opts.ruleset(), spec)
    counts: Counter = Counter()
    for row, plan in plans:
        system, query = _system_and_query(row)
        if plan is None or not query:
            checker.not_a_plan()
            continue
        meta = {"history_turns": _history_turns(row)} if complexity else None
        found = checker.check(query, plan, meta, system=system)
        counts.update(v.code for v in found)
        report.add(row.key, found)
    report.sections["rules"] = {**checker.summary(), "counts": dict(counts)}


def check_pii(rows: list[Row], opts: Options, report: Report) -> None:
    from mashbill.validators.data.pii import pii_verdicts

    if not opts.pii:
        return
    sev = opts.ruleset().checks.pii.severity
    n = 0
    for r in rows:
        vs = pii_verdicts({"query": r.query or "", "target": r.target or ""}, sev)
        if vs:
            n += 1
            report.add(r.key, vs)
    report.sections["pii"] = {"records_flagged": n, "redact": opts.ruleset().checks.pii.redact}


def check_expectations(rows: list[Row], kind: str, opts: Options, report: Report) -> None:
    from mashbill.validators.data.expectations import run_expectations

    if not opts.expectations or not rows:
        return
    frame = []
    for r in rows:
        if not r.ok:
            continue
        d = {"key": r.key, "query": r.query, "target_chars": len(r.target or ""), "n_messages": r.n_messages}
        if r.meta.get("lang") is not None:
            d["lang"] = r.meta["lang"]
        for k in ("total_tokens", "n_tasks", "has_precision", "has_research", "single_task", "label", "n_experts"):
            if k in r.meta:
                d[k] = r.meta[k]
        frame.append(d)
    if not frame:
        return
    max_len = opts.profile.max_seq_len if opts.profile else None
    report.sections["expectations"] = run_expectations(frame, kind, max_seq_len=max_len)


def _progress(opts: Options, msg: str) -> None:
    if opts.progress:
        opts.progress(msg)


def run_checks(rows: list[Row], kind: str, opts: Options, report: Report, eval_rows: list[Row] = ()) -> Report:
    for r in rows:
        report.keys.append(r.key)
        report.add(r.key, r.problems)
        if r.problems:
            report.problems.extend(v.detail for v in r.problems[:1])
    if opts.spans and opts.profile is not None:
        _progress(opts, "token spans")
        check_spans(rows, opts, report)
    _progress(opts, "duplicates and leakage")
    check_dedup_and_leaks(rows, opts, report, eval_rows)
    _progress(opts, "personal data")
    check_pii(rows, opts, report)
    _progress(opts, "dataset expectations")
    check_expectations(rows, kind, opts, report)
    return report


# ---------------------------------------------------------------- files


def validate_file(path: str | Path, fmt: str, opts: Options) -> Report:
    rows = read_rows(path, fmt)
    report = Report(str(path), fmt)
    report.sections["format"] = fmt
    eval_rows: list[Row] = []
    for e in opts.eval_files:
        eval_rows += [r for r in read_rows(e, fmt) if r.ok]
    kind = "messages" if fmt == "messages" else fmt
    _progress(opts, "routing rules")
    check_rules(rows, opts, report)
    return run_checks(rows, kind, opts, report, eval_rows)


# ---------------------------------------------------------------- a spec's stored records

EVAL_SPLITS = {"eval", "test", "validation", "holdout"}


def _plan_meta(output) -> dict:
    tasks = output if isinstance(output, list) else output.get("tasks") if isinstance(output, dict) else None
    if not isinstance(tasks, list):
        return {}
    cats = [t.get("category") for t in tasks if isinstance(t, dict)]
    return {"n_tasks": len(tasks), "has_precision": float("precision_tools" in cats),
            "has_research": float("research" in cats), "single_task": float(len(tasks) == 1)}


def validate_spec_records(rs, store, opts: Options, *, include_all: bool = False, write: bool = True,
                          run_id: str | None = None) -> Report:
    """Validate a spec's stored records and (by default) write the verdicts to the store."""
    from mashbill.hashing import canonical_json
    from mashbill.validators.checker import RecordChecker
    from mashbill.validators.spans.spans import TrainingExample

    records = store.records(spec_hash=rs.hash, status=None if include_all else "accepted")
    if not records:
        held = store.spec_status_counts(rs.spec.name, rs.spec.version)
        same = {status: n for h, status, n in held if h == rs.hash}
        other = sum(n for h, _, n in held if h != rs.hash)
        hint = ""
        if same:
            hint = ("; its records under this hash are all " +
                    ", ".join(f"{k} ({v})" for k, v in sorted(same.items())) +
                    " (--all validates those too)")
        elif other:
            hint = (f"; the store holds {other} record(s) of {rs.ref} under other content "
                    f"hashes (the spec or a file it references changed since they were generated)")
        raise ValidationInputError(f"no {'' if include_all else 'accepted '}records of {rs.ref} "
                                   f"(hash {rs.hash[:12]}) in {store.root}{hint}")
    report = Report(f"{rs.ref} in {store.root}", rs.spec.kind)
    if opts.rules is None and rs.spec.rules:
        opts.rules = load_rules(rs.file_paths["rules"])  # a routing or a complexity rule set
    checker = RecordChecker.for_spec(rs, opts.rules if rs.spec.rules else None)
    rows, eval_rows = [], []
    rule_counts: Counter = Counter()
    for rec in records:
        meta = rec.meta or {}
        query = rec.input.get("query") if isinstance(rec.input, dict) else None
        target = canonical_json(rec.output) if rec.output is not None else rec.raw
        row = Row(rec.id, query=query, target=target, n_messages=len(rec.messages) + 1)
        row.meta["lang"] = rec.input.get("lang") or guess_lang(query) if isinstance(rec.input, dict) else None
        verdicts: list[Verdict] = []
        if rec.output is None:
            verdicts.append(Verdict("SCHEMA002", "reject", "the output is missing or did not parse as JSON", STAGE))
        else:
            found = checker.check(rec.input if isinstance(rec.input, dict) else {}, rec.output, meta)
            rule_counts.update(v.code for v in found if v.code != "SCHEMA001")
            verdicts += found
            if rs.spec.kind == "plan":
                row.meta.update(_plan_meta(rec.output))
            elif isinstance(rec.output, dict):
                if "complexity" in rec.output:
                    row.meta["label"] = rec.output["complexity"]
                if isinstance(rec.output.get("experts"), list):
                    row.meta["n_experts"] = len(rec.output["experts"])
        row.problems = []
        report.add(rec.id, verdicts)
        row.examples.append(TrainingExample(rec.id, tuple(rec.training_messages)))
        if str(meta.get("split", "")).lower() in EVAL_SPLITS:
            eval_rows.append(row)
        else:
            rows.append(row)
    if checker.ruleset is not None:
        report.sections["rules"] = {**checker.summary(), "counts": dict(rule_counts)}
    report.sections["records_by_status"] = dict(Counter(r.status for r in records))
    if eval_rows:
        report.sections["eval_split"] = len(eval_rows)
    run_checks(rows + eval_rows, rs.spec.kind, opts, report, eval_rows=eval_rows if rows else [])
    if write and not store.read_only:
        write_verdicts(store, report, spec_hash=rs.hash)
    return report


def write_verdicts(store, report: Report, spec_hash: str | None = None, source: str = "store") -> str:
    """Store this validation pass in one transaction: replace the records' earlier 'validate' verdicts, mark
    every record covered (snapshots only take validated records), and keep the summary, expectation results
    included, in validation_runs. Returns the validation id."""
    summary = report.to_dict()
    summary.pop("examples", None)
    results = {k: [v for v in report.verdicts.get(k, ()) if v.stage == STAGE] for k in report.keys}
    return store.record_validation(spec_hash=spec_hash, source=source, results=results, counts=report.counts(),
                                   report=summary)


def spec_options(rs, **overrides) -> Options:
    """Validation options from a spec: its trainer profile, holdout files and folder."""
    opts = Options(profile=rs.spec.trainer_profile,
                   holdout=[str(p) for k, p in rs.file_paths.items() if k.startswith("holdout.")],
                   base_dir=rs.home)
    for key, value in overrides.items():
        setattr(opts, key, value)
    return opts
