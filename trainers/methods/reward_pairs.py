"""Plan-vs-correct pairs for a reward model: `train classify` on a preference snapshot with `format: pairs`.

Each preference pair (prompt, chosen, rejected) gives two cross-encoder examples: (the request, the accepted
plan) labelled `correct` and (the request, the rule-breaking plan) labelled `wrong`. The request is the last
user turn of the pair's prompt (the training prompt's user message is the query itself). The same (request,
plan) is kept once per split, so a plan that is chosen in several pairs does not outweigh the rest. Correction
samples are not pairs and are not used (the preference pull leaves them out).
"""

from __future__ import annotations

from pathlib import Path

LABELS = ("wrong", "correct")


def label_info() -> dict:
    return {"id2label": dict(enumerate(LABELS)), "label2id": {n: i for i, n in enumerate(LABELS)},
            "problem_type": "single_label_classification"}


def pair_rows(rows: list[dict]) -> list[dict]:
    """{text: request, text_pair: plan, label: 0|1} from preference rows, each (request, plan) once."""
    out, seen = [], set()
    for r in rows:
        request = next(m["content"] for m in reversed(r["prompt"]) if m["role"] == "user")
        for side, label in (("chosen", 1), ("rejected", 0)):
            plan = r[side][-1]["content"]
            if (request, plan) in seen:
                continue
            seen.add((request, plan))
            out.append({"text": request, "text_pair": plan, "label": label})
    return out


def load_pairs(snapshot: str | Path):
    """The snapshot's preference pull as a DatasetDict of pair rows, with `label_info` like the classification
    pull's (so `train classify` and `AutoModelForSequenceClassification` take it as it is)."""
    import datasets as ds

    from mashbill.curation.snapshots.pull import load_snapshot

    pref = load_snapshot(snapshot, "preference")
    features = ds.Features({"text": ds.Value("string"), "text_pair": ds.Value("string"),
                            "label": ds.ClassLabel(names=list(LABELS))})
    out = {}
    for split, d in pref.items():
        rows = pair_rows(d.to_list())
        out[split] = ds.Dataset.from_dict({k: [r[k] for r in rows] for k in features}, features=features, split=split)
    dd = ds.DatasetDict(out)
    dd.manifest = pref.manifest
    dd.trainer_profile = pref.trainer_profile
    dd.chat_template = None
    dd.label_info = label_info()
    return dd
