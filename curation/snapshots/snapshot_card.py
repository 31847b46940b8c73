"""The dataset card (README.md) of a snapshot, generated from its manifest."""

from __future__ import annotations

from mashbill.curation.selection.split import SPLITS
from mashbill.hashing import canonical_json

def dataset_card(m: dict) -> str:
    langs = sorted({k.split("/")[-1] for s in m["cells"]["counts"].values() for k in s} - {"none"}) \
        if m["cells"]["dims"] and m["cells"]["dims"][-1] == "lang" else []
    lines = ["---", f"pretty_name: {m['ref']}"]
    if langs:
        lines += ["language:"] + [f"- {x}" for x in langs]
    lines += ["configs:", "- config_name: default", "  data_files:"]
    lines += [f"  - split: {s}\n    path: data/{s}.parquet" for s in SPLITS]
    lines += ["---", "", f"# {m['ref']}", "",
              f"A Mashbill snapshot of {m['kind']} examples. Snapshot id `{m['snapshot_id']}`.", ""]
    if m.get("description"):
        lines += [m["description"].strip(), ""]
    lines += ["## Load it", "", "```bash", f"mashbill snapshot verify {m['ref']}",
              f"mashbill snapshot pull {m['ref']} --format "
              f"{'preference' if m['kind'] == 'preference' else 'messages'} --out ./{m['name']}", "```", "",
              "```python", "from mashbill.curation.snapshots.pull import load_snapshot",
              f"ds = load_snapshot(\"{m['ref']}\", format=\"{'preference' if m['kind'] == 'preference' else 'messages'}\", "
              f"store=\"{m['store']['path']}\")",
              "```", "", "## Splits", "", "| split | examples |", "|---|---|"]
    lines += [f"| {s} | {m['splits']['counts'][s]} |" for s in SPLITS]
    leak = m["splits"]["leakage"]
    lines += ["", f"Near-duplicate clusters and paraphrase groups stay on one side ({m['splits']['groups']['groups']} "
                  f"groups, {m['splits']['groups']['multi_record_groups']} with more than one example). Leakage "
                  f"checks after the split: {leak['groups_across_splits']} groups and "
                  f"{leak['identical_queries_across_splits']} identical queries across splits.", "",
              f"## Label cells ({' × '.join(m['cells']['dims'])})", "", "| cell | train | eval | test |",
              "|---|---|---|---|"]
    all_cells = sorted({c for s in m["cells"]["counts"].values() for c in s})
    for c in all_cells:
        lines.append(f"| {c} | " + " | ".join(str(m["cells"]["counts"][s].get(c, 0)) for s in SPLITS) + " |")
    below = m["cells"]["below_quota"]
    lines += [""]
    if below:
        lines += ["**Cells below quota** (shipped as they are, not hidden):", ""]
        lines += [f"- {c}: {v['kept']} of {v['target'] or m['cells']['quotas']['min_per_cell']}" for c, v in
                  sorted(below.items())]
        lines += [""]
    lines += ["## Provenance", ""]
    for s in m["specs"]:
        lines.append(f"- spec `{s['name']}@{s['version']}` ({s['kind']}, {s['role']}), hash `{s['hash']}`")
    for t in m["teacher"]:
        lines.append(f"- teacher run `{t['run_id']}`: {t['backend']} `{t['model']}`"
                     + (f" (sha256 `{t['model_sha256'][:16]}…`)" if t.get("model_sha256") else "")
                     + f", sampling {canonical_json(t['sampling'])}")
    tp = m["trainer_profile"]
    lines += [f"- trainer profile: tokenizer `{tp['tokenizer']}`, max_seq_len {tp['max_seq_len']}, loss {tp['loss']}, "
              f"chat template sha256 `{tp.get('chat_template_sha256') or 'unknown'}`",
              f"- store `{m['store']['path']}`, {len(m['store']['run_ids'])} run(s), "
              f"{len(m['store']['validation_ids'])} validation run(s); tool version {m['tool_version']}", ""]
    if m.get("tokens"):
        t = m["tokens"]
        lines += ["## Token lengths", "", f"p50 {t['p50']}, p95 {t['p95']}, p99 {t['p99']}, max {t['max']}; "
                  f"{t['over_max_seq_len']} example(s) over max_seq_len {tp['max_seq_len']}.", ""]
    if m.get("preference"):
        p = m["preference"]
        lines += ["## Preference pairs", "", "| source | pairs |", "|---|---|"]
        lines += [f"| {k} | {p['pairs'].get(k, 0)} |" for k in ("rule", "teacher", "human")]
        lines += ["", f"Multi-turn correction samples: {p['correction_samples']} (loss `{tp['loss']}`: the wrong "
                      "turn is not trained).", ""]
    r = m["review"]
    lines += ["## Review", "", f"{r['reviewed']} of {r['records']} records reviewed: {r['accepted']} accepted, "
              f"{r['corrected']} corrected, {r['rejected']} rejected, {r['disagreements']} disagreements"
              f"{' (review required)' if r['require_review'] else ''}.", "", "## Left out", ""]
    if m["rejects"]["by_code"]:
        lines += ["| code | records |", "|---|---|"] + [f"| {c} | {n} |" for c, n in m["rejects"]["by_code"].items()]
    else:
        lines.append("Nothing.")
    lines += ["", "Every left-out record is in `rejects.parquet` with its codes. `manifest.json` holds the sha256 of "
                  "every file; `mashbill snapshot verify` re-checks them.", ""]
    return "\n".join(lines)
