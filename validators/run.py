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
from array import array
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

from mashbill import jsontext
from mashbill.factory.records import Verdict
from mashbill.files import write_file_atomic
from mashbill.specs.model import TrainerProfile
from mashbill.validators.data.inputs import Row, read_rows
from mashbill.validators.errors import ValidationInputError
from mashbill.validators.plans.ruleset import DEFAULT_RULES, RuleSet, load_ruleset

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
        # the duplicate check's clusters (key -> the key its cluster keeps) and how they were found, kept with the
        # verdicts so that a freeze grouping the same way reads them (dedup.groups_profile)
        self.near_groups: dict[str, str] | None = None
        self.near_groups_profile: str | None = None

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


class ExampleSpan(NamedTuple):
    """One example's span results: what a span pass keeps of it. ``total``, ``target`` and ``margin`` are None for an
    example the engine could not render (a span error, among its verdicts)."""

    key: str
    verdicts: list[Verdict]
    total: int | None
    target: int | None
    margin: int | None
    cut: bool  # SPAN001 or SPAN002: its target is cut by the window
    shape: tuple  # its stratum in the audit sample


@dataclass
class SpanBatch:
    """What one batch adds to a span pass: one entry per example, in order, each row's token count (-1 for none),
    and what the engine spent on it."""

    examples: list[ExampleSpan] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)  # per row: its token count, -1 for none
    fast_s: float = 0.0
    pieces: int = 0


class SpanPass:
    """The token-span check over rows, a batch at a time: each batch's verdicts go into the report and its totals
    into ``row.meta``; what the report's span section sums up, and each example's shape for the audit sample, are
    kept until ``finish``. Spec mode streams the store through it in batches; file mode gives all its rows at once.
    The verdicts and the section are those of one pass over every row (the audit picks from every example)."""

    def __init__(self, opts: Options, report: Report):
        self.opts, self.report = opts, report
        self.engine = self.loaded = self.template = None
        self.totals: list[int] = []
        self.targets: list[int] = []
        self.margins: list[int] = []
        self.cut = 0
        self.examples = 0
        self.fast_s = 0.0
        self.pieces = 0  # pieces the engines tokenized (one engine per worker process when the batches are spread)
        self.shapes: dict[bool, list[tuple]] = {False: [], True: []}  # train rows first, then eval rows
        self.kept: dict[bool, list] = {False: [], True: []}  # file mode: the examples themselves, for the audit
        # each row's count (the largest of its examples'; -1: none, after a span error), in the order the rows came
        # (train rows, then eval rows: the report's keys), 4 bytes a record; stored with its validation mark under
        # `tokens_profile` so that a freeze under the same tokenizer and template reads it (issue 29)
        self.counts: dict[bool, array] = {False: array("i"), True: array("i")}
        self.tokens_profile: str | None = None
        self.audit_clean = True  # finish(): the audit sample's fast counts agreed with the trainer's way

    def load_tokens_profile(self) -> str:
        """Load the tokenizer and template now (their bytes make the profile the token counts are kept under)."""
        self._engine(())
        return self.tokens_profile

    def _engine(self, examples):
        from mashbill.validators.spans.spans import SpanEngine
        from mashbill.hashing import sha256_text
        from mashbill.validators.tokenizers.tokenizer import (load_tokenizer, resolve_chat_template, tokenizer_sha256,
                                                              tokens_profile)

        prof = self.opts.profile
        if self.engine is None:
            self.loaded = load_tokenizer(prof.tokenizer, self.opts.base_dir)
            self.template = resolve_chat_template(self.loaded, prof.chat_template, self.opts.base_dir)
            self.tokens_profile = tokens_profile(tokenizer_sha256(self.loaded),
                                                 sha256_text(self.template) if self.template else None)
        if self.template is None and any(ex.conversational for ex in examples):
            raise ValidationInputError(f"tokenizer {prof.tokenizer} has no chat template and the data is "
                                       "conversational; pass --chat-template (chatml, a .jinja file or template text)")
        if self.engine is None:
            self.engine = SpanEngine(self.loaded, self.template, loss=prof.loss)
        return self.engine

    def add(self, rows: list[Row], *, eval_rows: bool = False, keep: bool = False) -> None:
        self.take(self.measure(rows), eval_rows=eval_rows)
        if keep:
            self.kept[eval_rows] += [ex for r in rows for ex in r.examples]

    def measure(self, rows: list[Row]) -> "SpanBatch":
        """One batch's span results, with no state of this pass changed but each row's ``meta`` (its token total and
        margin, which the expectations read): what ``take`` adds. A worker process measures, the pass takes."""
        from mashbill.validators.spans.spans import judge, shape

        prof = self.opts.profile
        examples = [ex for r in rows for ex in r.examples]
        out = SpanBatch()
        if prof is None or not examples:
            out.counts = [-1] * len(rows)
            return out
        engine = self._engine(examples)
        pieces = engine.counter.encoded_pieces
        t0 = time.perf_counter()
        results = engine.fast(examples)
        out.fast_s = time.perf_counter() - t0
        out.pieces = engine.counter.encoded_pieces - pieces
        by_key: dict[str, list] = {}
        for ex, res in zip(examples, results):
            judged = judge(res, prof.max_seq_len, prof.truncation_side, prof.loss)
            by_key.setdefault(res.key, []).append(judged)
            ok = res.error is None
            out.examples.append(ExampleSpan(res.key, judged.verdicts, res.total if ok else None,
                                            res.trained if ok else None, judged.margin if ok else None,
                                            any(v.code in ("SPAN001", "SPAN002") for v in judged.verdicts),
                                            shape(ex, res)))
        for r in rows:
            outs = by_key.get(r.key)
            if outs:
                r.meta["total_tokens"] = max(o.result.total for o in outs)
                r.meta["margin"] = min(o.margin for o in outs)
            ok = outs and all(o.result.error is None for o in outs)
            out.counts.append(r.meta["total_tokens"] if ok else -1)
        return out

    def take(self, batch: "SpanBatch", *, eval_rows: bool = False) -> None:
        """Add a measured batch to the pass (its verdicts to the report), batches in the order of the rows."""
        shapes = self.shapes[eval_rows]
        for ex in batch.examples:
            if ex.total is not None:
                self.totals.append(ex.total)
                self.targets.append(ex.target)
                self.margins.append(ex.margin)
            self.cut += ex.cut
            shapes.append(ex.shape)
            self.report.add(ex.key, ex.verdicts)
        self.examples += len(batch.examples)
        self.fast_s += batch.fast_s
        self.pieces += batch.pieces
        self.counts[eval_rows].extend(batch.counts)

    def reorder(self, order: list[int], *, eval_rows: bool) -> None:
        """Put one part's rows in `order` (their positions as they came), as the report's keys are put: each row's
        count and its example's audit stratum (spec mode: one example a row)."""
        counts, shapes = self.counts[eval_rows], self.shapes[eval_rows]
        if not len(counts) == len(shapes) == len(order):
            raise RuntimeError(f"span pass: {len(order)} rows to order, {len(counts)} counts, {len(shapes)} examples")
        self.counts[eval_rows] = array("i", [counts[i] for i in order])
        self.shapes[eval_rows] = [shapes[i] for i in order]

    def counts_by_key(self, keys: list[str]) -> dict[str, int]:
        """Each record's count by key (`keys`: the report's, train rows then eval rows, as the rows came)."""
        counts = self.counts[False] + self.counts[True]
        # a row that bypassed add(), or an audit that found the fast counts wrong: keep no count rather than a wrong one
        if len(counts) != len(keys) or not self.audit_clean:
            return {}
        return {k: n for k, n in zip(keys, counts) if n >= 0}

    def finish(self, fetch: Callable[[list[int]], list] | None = None) -> None:
        """The audit of a stratified sample of every example seen, and the report's span section. ``fetch`` gives
        the examples at positions of the pass's order (train rows first); without it, the kept examples."""
        from mashbill.factory.stats import percentiles
        from mashbill.validators.spans.spans import audit_picked, stratified_pick

        if not self.examples:
            return
        prof = self.opts.profile
        t0 = time.perf_counter()
        pick = stratified_pick(self.shapes[False] + self.shapes[True], self.opts.audit_sample, self.opts.seed)
        if fetch is None:
            kept = self.kept[False] + self.kept[True]
            picked = [kept[i] for i in pick]
        else:
            picked = fetch(pick)
        engine = self._engine(picked)  # loaded here when worker processes measured every batch
        audited = audit_picked(engine, picked, engine.fast(picked))
        self.audit_clean = not audited.get("findings")
        aud = add_audit_findings(self.report, audited)
        audit_s = time.perf_counter() - t0
        self.report.warnings.extend(engine.warnings)
        n = self.examples
        self.report.sections["span"] = {
            **prof.describe(), "tokenizer_file": str(self.loaded.path), "tokenizer_source": self.loaded.facts,
            "examples": n,
            "cut_policy": engine.policy.name, "cut_policy_reason": engine.policy.reason,
            "tokens": percentiles(self.totals), "target_tokens": percentiles(self.targets),
            "margin": percentiles(self.margins),
            "share_cut": round(self.cut / n, 6) if n else 0.0,
            "pieces_tokenized": self.pieces, "fast_s": round(self.fast_s, 3),
            "audit": {**aud, "wall_s": round(audit_s, 3)},
        }


def add_audit_findings(report: Report, aud: dict) -> dict:
    """The span audit's findings (SPAN011 verdicts) into the report, each before its record's own span verdicts
    (where one pass over the records puts it, whatever the batches), its lines into the report's problems; returns
    the rest of the audit summary (what the report's span.audit section shows)."""
    aud = dict(aud)
    for key, verdict in aud.pop("findings", ()):
        have = report.verdicts.setdefault(key, [])
        have.insert(next((i for i, v in enumerate(have) if v.code.startswith("SPAN")), len(have)), verdict)
    report.problems.extend(aud.pop("lines", ()))
    return aud


def check_dedup_and_leaks(rows: list[Row], opts: Options, report: Report, eval_rows: list[Row] = ()) -> None:
    eval_keys = {r.key for r in eval_rows}
    with_query = [r for r in rows if r.query is not None and r.ok and r.key not in eval_keys]
    dedup_and_leaks([r.key for r in with_query], [r.query for r in with_query],
                    [(r.key, r.query) for r in eval_rows], opts, report)


def dedup_and_leaks(keys: list[str], texts: list[str], eval_queries: list[tuple[str, str | None]], opts: Options,
                    report: Report) -> None:
    """Duplicates among the rows' queries, and leakage into the holdout files and the eval split's queries."""
    from mashbill.validators.data.dedup import dedup, groups_profile
    from mashbill.validators.data.leakage import HoldoutItem, leakage, load_holdout

    rs = opts.ruleset()
    if opts.dedup and keys:
        cfg = rs.checks.dedup
        res = dedup(keys, texts, cfg)
        for k, vs in res.verdicts.items():
            report.add(k, vs)
        report.sections["dedup"] = {"field": "query", **res.summary()}
        report.near_groups = res.groups
        report.near_groups_profile = groups_profile(cfg.threshold, shingle=cfg.shingle, num_perm=cfg.num_perm,
                                                    bands=cfg.bands)
    items: list[HoldoutItem] = []
    sources = []
    for h in opts.holdout:
        got = load_holdout(h)
        items += got
        sources.append({"file": str(h), "items": len(got)})
    for key, query in eval_queries:
        if query:
            items.append(HoldoutItem(f"eval:{key}", query))
    if eval_queries:
        sources.append({"eval_split": len(eval_queries)})
    if items and keys:
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
        return jsontext.loads(t)
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
    found = pii_found(rows, opts)
    for key, vs in found.items():
        report.add(key, vs)
    pii_section(len(found), opts, report)


def pii_found(rows: list[Row], opts: Options) -> dict[str, list[Verdict]]:
    """The PII verdicts of each row that has any ({} when the check is off)."""
    from mashbill.validators.data.pii import pii_verdicts

    if not opts.pii:
        return {}
    sev = opts.ruleset().checks.pii.severity
    out = {}
    for r in rows:
        vs = pii_verdicts({"query": r.query or "", "target": r.target or ""}, sev)
        if vs:
            out[r.key] = vs
    return out


def pii_section(flagged: int, opts: Options, report: Report) -> None:
    if opts.pii:
        report.sections["pii"] = {"records_flagged": flagged, "redact": opts.ruleset().checks.pii.redact}


def expectation_row(r: Row) -> dict | None:
    """A row's line in the dataset-expectations frame (None for a row that did not parse)."""
    if not r.ok:
        return None
    # no key: no expectation reads one, and Great Expectations hashes every column of the frame (1 of 2.1 s at
    # 439,521 rows, bench/RESULTS.md)
    d = {"query": r.query, "target_chars": len(r.target or ""), "n_messages": r.n_messages}
    if r.meta.get("lang") is not None:
        d["lang"] = r.meta["lang"]
    for k in ("total_tokens", "n_tasks", "has_precision", "has_research", "single_task", "label", "n_experts"):
        if k in r.meta:
            d[k] = r.meta[k]
    return d


def check_expectations(frame: list[dict], kind: str, opts: Options, report: Report) -> None:
    from mashbill.validators.data.expectations import run_expectations

    if not opts.expectations or not frame:
        return
    max_len = opts.profile.max_seq_len if opts.profile else None
    report.sections["expectations"] = run_expectations(frame, kind, max_seq_len=max_len)


def _progress(opts: Options, msg: str) -> None:
    if opts.progress:
        opts.progress(msg)


def run_checks(rows: list[Row], kind: str, opts: Options, report: Report, eval_rows: list[Row] = ()) -> Report:
    """File mode: every check over rows held in memory (the rules have run already)."""
    for r in rows:
        report.keys.append(r.key)
        report.add(r.key, r.problems)
        if r.problems:
            report.problems.extend(v.detail for v in r.problems[:1])
    spans = SpanPass(opts, report)
    if opts.spans and opts.profile is not None:
        _progress(opts, "token spans")
        spans.add(rows, keep=True)
        spans.finish()
    _progress(opts, "duplicates and leakage")
    check_dedup_and_leaks(rows, opts, report, eval_rows)
    _progress(opts, "personal data")
    check_pii(rows, opts, report)
    _progress(opts, "dataset expectations")
    check_expectations([d for d in map(expectation_row, rows) if d is not None], kind, opts, report)
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
