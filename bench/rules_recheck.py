"""What a newer routing rule set finds in plans a store already holds: the quick start's accepted and rejected plans
re-checked under another rule set (moe-routing@5's PLAN011 and FIT004 on quickstart-plan@4's plans).

    .venv/bin/python bench/rules_recheck.py --store DIR [--spec quickstart-plan@4] [--rules PATH] [--base-rules PATH]
                                            [--codes PLAN011,FIT004]

Each plan is checked with its spec's own rule set (or --base-rules) and with --rules (default: the latest
moe-routing); a code is new when only the second one finds it. Swap the two to see what a newer rule set no longer
rejects. Every finding of the listed codes is printed with its query and tasks, to be
read by eye: this is detection on plans a real teacher wrote, not on plans made to break a rule. The last line is
`plans=N accepted=A accepted_newly_rejected=X rejected_new_findings=Y` plus one `CODE=n` per listed code.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path


def _tasks(output) -> list:
    return [{k: v for k, v in t.items() if k in ("task", "category", "search_query", "mcp_tool", "mcp_args", "domain")}
            if isinstance(t, dict) else t for t in (output if isinstance(output, list) else [output])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--spec", default="quickstart-plan@4")
    ap.add_argument("--rules", type=Path, default=None)
    ap.add_argument("--base-rules", type=Path, default=None, help="the rule set to compare with (default: the spec's)")
    ap.add_argument("--codes", default="PLAN011,FIT004")
    ap.add_argument("--show-accepted", action="store_true",
                    help="also print every plan accepted at generation that no reject rule of --rules finds (what "
                         "`mashbill validate` would keep), to be read by eye")
    args = ap.parse_args()

    from mashbill.factory.store import Store
    from mashbill.specs import find_spec, load_spec
    from mashbill.validators.checker import RecordChecker
    from mashbill.validators.plans.ruleset import DEFAULT_RULES, load_ruleset

    rs = load_spec(find_spec(args.spec))
    old = RecordChecker.for_spec(rs, load_ruleset(args.base_rules)) if args.base_rules else RecordChecker.for_spec(rs)
    new = RecordChecker.for_spec(rs, load_ruleset(args.rules or DEFAULT_RULES))
    codes = args.codes.split(",")
    with Store.open(args.store, read_only=True) as store:
        # by name and version: a store made before the spec's files last changed holds them under an older hash
        records = [r for r in store.records(status=None)
                   if (r.spec.name, r.spec.version) == (rs.spec.name, rs.spec.version)]
    by_code: Counter = Counter()
    accepted = newly = rejected_new = kept = 0
    for rec in records:
        if rec.output is None:
            continue
        before = {v.code for v in old.check(rec.input, rec.output, rec.meta) if v.severity == "reject"}
        after = [v for v in new.check(rec.input, rec.output, rec.meta) if v.severity == "reject"]
        added = [v for v in after if v.code not in before]
        ok = rec.status == "accepted"
        accepted += ok
        if args.show_accepted and not after:
            # a plan rejected at generation that --rules passes was rejected by an older rule set, or by a check
            # outside the rules (max_tokens): printed apart
            kept += ok
            print(f"[{'kept' if ok else 'passes --rules, rejected at generation'}] {rec.input.get('query')!r}\n"
                  f"    {_tasks(rec.output)}")
        if added:
            newly += ok
            rejected_new += not ok
        for v in added:
            if v.code in codes:
                by_code[v.code] += 1
                print(f"[{v.code}] {'accepted' if ok else 'rejected'}: {rec.input.get('query')!r}\n"
                      f"    {v.detail}\n    tasks: {_tasks(rec.output)}")
    print(f"plans={len(records)} accepted={accepted} accepted_newly_rejected={newly} "
          f"rejected_new_findings={rejected_new} " + (f"kept={kept} " if args.show_accepted else "") + " ".join(f"{c}={by_code[c]}" for c in codes))


if __name__ == "__main__":
    main()
