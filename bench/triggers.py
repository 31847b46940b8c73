"""Recall and false triggers of precision-first (HR001) on real public queries, false rejects of correct-tool
plans, and the PII false-flag rate.

    .venv/bin/python bench/triggers.py [--queries DIR] [--show N] [--suite] [--rules FILE]

The labelled set is built from DIR (default $MASHBILL_QUERIES_DIR or /work/shared/data/queries-dev) by
bench/trigger_set.py; point --queries at another half of the same sources to measure on unseen queries.

- hr001_recall: share of the queries that need a tool on which HR001 fires AND one of the tools it demands is the
  labelled one (firing with the wrong tool counts as a miss);
- hr001_false_trigger: share of the queries that need no tool on which HR001 fires;
- correct_plan_false_reject: share of the correct-tool plans (built from the sources' gold slots and calculator
  calls) that the tool-routing rules (HR*) or the plan contract (PLAN*) reject; their arguments and task texts
  are schematic, so argument-fidelity and drift rejects are printed apart, not counted;
- pii_false_flag_rate: share of all public query texts with any PII finding (they hold no personal data);
- ddg_compute_recall: hr001_recall on the DuckDuckGo tool queries that state something to compute (a number in
  digits or words; not a bare widget name such as "calculator" or "kg").

One line per split (tune = even rows of each source, report = odd rows) and per source, then the last line over
all rows: `hr001_recall=R hr001_false_trigger=F correct_plan_false_reject=X pii_false_flag_rate=P rows=N`.

--suite adds the paraphrase suite (bench/paraphrase_suite.py, its default seed): requests written from classes of
phrasing in English and German, with gold tools and operands. One line per language and per class, and the last
line gains `suite_recall=R suite_false_trigger=F suite_arg_false_reject=A` (A: the suite's gold plans, which call
the gold tool with the stated operands, rejected by an argument check ARG001-ARG004). A rate with an empty
denominator prints as n/a.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import trigger_set  # noqa: E402


def _tally(stats, keys, what: str, hit) -> None:
    """One more row under each key of `keys` for the rate `what`, a hit when `hit` is true."""
    for k in keys:
        stats[k, what][0] += bool(hit)
        stats[k, what][1] += 1

def _rate(a: int, b: int) -> str:
    """a/b to four places, or n/a when nothing was counted (0.0000 would read as a measured zero)."""
    return f"{a / b:.4f}" if b else "n/a"


def suite_stats(rules, trig, catalog, shown, show: int = 0) -> tuple[dict, list[str]]:
    """Recall, false triggers and argument false rejects on the paraphrase suite: {(key, metric): [hits, total]}
    with key "suite", the language or "lang:class", and the lines of misses to print."""
    import paraphrase_suite

    from mashbill.validators.plans.routing import check_plan

    stats = defaultdict(lambda: [0, 0])
    bad: list[str] = []
    for r in paraphrase_suite.suite():
        a = trig.analyze(r["query"])
        keys = ("suite", r["lang"], f"{r['lang']}:{r['class']}")
        if r["side"] == "tool":
            ok = r["tool"] in {t for ts in a.intents.values() for t in ts}
            _tally(stats, keys, "recall", ok)
            if not ok:
                bad.append(f"[suite miss] {r['class']}: {r['query']!r} -> {sorted(a.intents)}")
            verdicts = check_plan(rules, r["query"], r["plan"], shown, catalog, a)
            arg = [v for v in verdicts if v.severity == "reject" and v.code.startswith("ARG")]
            _tally(stats, keys, "arg", bool(arg))
            if arg:
                bad.append(f"[suite arg] {r['class']}: {r['query']!r}: {arg[0].code} {arg[0].detail[:110]}")
        else:
            fired = bool(a.intents)
            _tally(stats, keys, "false", fired)
            if fired:
                bad.append(f"[suite false] {r['class']}: {r['query']!r} -> {a.evidence}")
    return stats, bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=Path, default=trigger_set.DEFAULT_DIR)
    ap.add_argument("--show", type=int, default=0, help="print up to N misses, false triggers and false rejects")
    ap.add_argument("--suite", action="store_true", help="also measure the paraphrase suite (bench/paraphrase_suite.py)")
    ap.add_argument("--rules", type=Path, default=None, help="routing rule set file (default: the latest)")
    args = ap.parse_args()

    from mashbill.specs.loader import LIBRARY, load_catalog
    from mashbill.validators.data.pii import find_pii
    from mashbill.validators.plans.plans import Shown
    from mashbill.validators.plans.routing import check_plan
    from mashbill.validators.plans.ruleset import load_ruleset
    from mashbill.validators.plans.triggers import triggers_for

    rules = load_ruleset(args.rules) if args.rules else load_ruleset()
    catalog = load_catalog(LIBRARY / "shared" / "tools" / "precision-tools@2.yaml")
    trig = triggers_for(rules)
    shown = Shown(None)
    data = trigger_set.labelled(args.queries)

    t0 = time.perf_counter()
    analysed = [trig.analyze(r["query"]) for r in data]
    trig_s = time.perf_counter() - t0

    stats = defaultdict(lambda: [0, 0])  # (split|source, metric) -> [hits, total]
    shown_bad: dict[str, list[str]] = defaultdict(list)
    other: dict[str, int] = {}
    for r, a in zip(data, analysed):
        keys = ("all", r["split"], r["source"])
        if r["need"] and r["source"].startswith("ddg:") and trigger_set.states_quantity(r["query"]):
            keys += ("ddg_compute",)
        if r["need"]:
            tools = {t for ts in a.intents.values() for t in ts}
            ok = any(n in tools for n in r["need"].split("|"))
            _tally(stats, keys, "recall", ok)
            if not ok:
                shown_bad["miss"].append(f"{r['source']}: {r['query'][:140]!r} -> {sorted(a.intents)}")
            if not r["plan"]:
                continue
            verdicts = check_plan(rules, r["query"], r["plan"], shown, catalog, a)
            # Tool routing (HR*) and the plan contract (PLAN*) judge these plans; their arguments and task texts are
            # schematic (an intermediate GSM8K result, a fixed base date), so argument-fidelity and drift verdicts
            # are counted apart, not as false rejects
            rejects = [v for v in verdicts if v.severity == "reject"]
            bad = [v for v in rejects if v.code.startswith(("HR", "PLAN"))]
            for v in rejects:
                if v not in bad:
                    other[v.code] = other.get(v.code, 0) + 1
            _tally(stats, keys, "reject", bool(bad))
            if bad:
                shown_bad["reject"].append(f"{r['source']}: {r['query'][:100]!r}: {bad[0].code} {bad[0].detail[:120]}")
        else:
            fired = bool(a.intents)
            _tally(stats, keys, "false", fired)
            if fired:
                shown_bad["false"].append(f"{r['source']}: {r['query'][:140]!r} -> {a.evidence}")

    t1 = time.perf_counter()
    texts = list(trigger_set.pii_corpus(args.queries))
    flagged = []
    for t in texts:
        f = find_pii(t)
        if f:
            flagged.append(f"{f[0].code} {f[0].text!r} in {t[:120]!r}")
    pii_s = time.perf_counter() - t1

    for kind in ("miss", "false", "reject", "pii"):
        items = flagged if kind == "pii" else shown_bad[kind]
        for line in items[:args.show]:
            print(f"[{kind}] {line}")

    def line(k: str) -> str:
        rec, fal, rej = stats[k, "recall"], stats[k, "false"], stats[k, "reject"]
        return (f"recall={_rate(*rec)} ({rec[0]}/{rec[1]}) false_trigger={_rate(*fal)} ({fal[0]}/{fal[1]}) "
                f"false_reject={_rate(*rej)} ({rej[0]}/{rej[1]})")

    for src in sorted({r["source"] for r in data}):
        print(f"{src:28s} {line(src)}")
    for split in ("tune", "report"):
        print(f"split={split:22s} {line(split)}")
    print(f"ddg_compute (DuckDuckGo tool queries that state a number) {line('ddg_compute')}")
    print(f"not counted (schematic plan arguments/texts): {dict(sorted(other.items()))}")
    print(f"triggers_per_s={len(data) / trig_s:.0f} pii_texts_per_s={len(texts) / pii_s:.0f} "
          f"pii_flags={len(flagged)}/{len(texts)}")
    tail = ""
    if args.suite:
        ss, bad = suite_stats(rules, trig, catalog, shown)
        for kind in ("[suite miss]", "[suite false]", "[suite arg]"):
            for b in [b for b in bad if b.startswith(kind)][:args.show]:
                print(b)
        for k in sorted({k for k, _ in ss if ":" in k}) + ["en", "de"]:
            rec, fal, arg = ss[k, "recall"], ss[k, "false"], ss[k, "arg"]
            print(f"suite {k:26s} recall={_rate(*rec)} ({rec[0]}/{rec[1]}) false_trigger={_rate(*fal)} "
                  f"({fal[0]}/{fal[1]}) arg_false_reject={_rate(*arg)} ({arg[0]}/{arg[1]})")
        tail = (f" suite_recall={_rate(*ss['suite', 'recall'])} suite_false_trigger={_rate(*ss['suite', 'false'])} "
                f"suite_arg_false_reject={_rate(*ss['suite', 'arg'])}")
    a = stats
    print(f"hr001_recall={_rate(*a['all', 'recall'])} hr001_false_trigger={_rate(*a['all', 'false'])} "
          f"correct_plan_false_reject={_rate(*a['all', 'reject'])} "
          f"pii_false_flag_rate={_rate(len(flagged), len(texts))} rows={len(data)}{tail} "
          f"ddg_compute_recall={_rate(*a['ddg_compute', 'recall'])}")


if __name__ == "__main__":
    main()
