"""The synthesis screen against a labelled yardstick and real queries, check by check.

    .venv/bin/python bench/synth_quality.py [--half report|tune|all] [--data /work/shared/data/queries-dev]

The yardstick is tests/validators/fixtures/synth-labelled/queries.jsonl (520 queries the embedded teacher wrote and
the quickstart-queries@2 screen kept, each labelled genuine or not by eye, with a reason; see the README beside it).
For each check of the screen (the shape checks of `validators.queries.queries` and the quality checks of
`validators.queries.query_quality`) and for the whole screen: how many queries it drops, its precision (the share of
its drops that are not genuine), its recall of the non-genuine ones, the genuine share of what the screen keeps
(`genuine_precision`), and its drops on real queries of shared/data/queries-dev (the JSON Lines rows of at most 300
characters, English and German: a false drop there is a real user's request thrown away). Last line:

    half= n= genuine_before= genuine_precision= screen_recall= kept= real_n= real_false_drop= fluency_precision=
    genuine_precision_fluency= screen_recall_fluency= real_false_drop_fluency_de= seed_false_drop_fluency_de=
    fluency_ms= genuine_recall= genuine_precision_genuine= screen_recall_genuine= genuine_recall_genuine=
    real_false_drop_genuine_en= real_false_drop_genuine_de= grown3_genuine_kept= grown3_garbled_dropped=
    grown3_nongenuine_dropped= grown4_genuine_kept= grown4_garbled_dropped= grown4_nongenuine_dropped=

The fluency check (SYN013, `--fluency`, off in every spec) is measured side by side: the screen without and
with it on the same rows, its drops of real queries and of the library seeds per language, its cost per query.
So is the learned genuine check (`bench/lab/query_genuine.py`, `--genuine`, in no screen; its weights from
bench/fit_genuine.py): the screen without and with it (`*_genuine` keys; `genuine_recall` is the share of the
genuine rows kept), its drops of the held-out (odd sha256) half of the real queries per language, and on the
grown samples @3 and @4 (30 rows each, already kept by a screen) the genuine kept and the garbled dropped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "validators" / "fixtures" / "synth-labelled" / "queries.jsonl"
SPEC = ROOT / "specs" / "library" / "archive" / "quickstart" / "quickstart-queries@3.yaml"


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "validators"))
from vhelpers import real_queries  # noqa: E402  (one reader of queries-dev for the tests and this bench)


def measure(half: str = "report", data: Path | None = None, show: str = "", echo=print,
            fluency: dict[str, float] | None = None, genuine: str = "") -> dict:
    """The screen on the yardstick's `half` and on the real queries under `data`; prints the table, returns the
    figures of the last line."""
    from mashbill.specs import load_spec
    from mashbill.validators.queries.queries import quality_codes, query_screen

    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if half == "all" or r["half"] == half]
    screen = query_screen(load_spec(SPEC))
    found = []
    for r in rows:
        t, lang, kind = r["cell"].split("/")
        codes = quality_codes(screen, r["query"], lang, t, kind == "trap")
        found.append(codes)
        if show and show in codes:
            echo(f"  {show} {'GENUINE' if r['genuine'] else r['reason']:>14} | {r['query'][:110]}")
    bad = sum(not r["genuine"] for r in rows)
    echo(f"{len(rows)} labelled queries ({half} half), {len(rows) - bad} genuine, {bad} not")
    echo(f"{'check':8} {'drops':>6} {'precision':>10} {'recall':>7}  (alone, on every query)")
    for code in sorted({c for f in found for c in f}):
        drops = [r for r, f in zip(rows, found) if code in f]
        wrong = sum(r["genuine"] for r in drops)
        echo(f"{code:8} {len(drops):>6} {1 - wrong / len(drops):>10.2f} {(len(drops) - wrong) / bad:>7.2f}")
    dropped = [r for r, f in zip(rows, found) if f]
    kept = [r for r, f in zip(rows, found) if not f]
    wrong = sum(r["genuine"] for r in dropped)
    precision = sum(r["genuine"] for r in kept) / len(kept) if kept else 0.0
    recall = (len(dropped) - wrong) / bad if bad else 0.0
    echo(f"whole screen: drops {len(dropped)} ({wrong} genuine), keeps {len(kept)}, genuine share of the kept "
         f"{precision:.2f} (before {1 - bad / len(rows):.2f}), recall of the non-genuine {recall:.2f}")

    real = real_queries(data) if data is not None and data.is_dir() else []
    real_drops: dict[str, list[str]] = {}
    for text, lang in real:
        for code in quality_codes(screen, text, lang, None, False, shape=False):
            real_drops.setdefault(code, []).append(text)
    flagged = {t for v in real_drops.values() for t in v}
    echo(f"real queries-dev queries: {len(real)}; dropped by a quality check: {len(flagged)} "
         f"({len(flagged) / max(len(real), 1):.2%})")
    for code, texts in sorted(real_drops.items()):
        echo(f"  {code} {len(texts):>5}  e.g. {texts[0][:100]!r}")
    figures = {"half": half, "n": len(rows), "genuine_before": round(1 - bad / len(rows), 3),
               "genuine_precision": round(precision, 3), "screen_recall": round(recall, 3), "kept": len(kept),
               "real_n": len(real), "real_false_drop": round(len(flagged) / max(len(real), 1), 4)}
    if fluency:
        figures.update(measure_fluency(rows, found, real, fluency, echo))
    if genuine:
        figures.update(measure_genuine(rows, found, real, genuine, echo))
    return figures


GROWN = [FIXTURE.parent / f"grown-sample@{v}.jsonl" for v in (3, 4)]


def measure_genuine(rows: list[dict], found: list[list[str]], real: list[tuple[str, str]], name: str,
                    echo=print) -> dict:
    """The learned genuine check (bench/lab/query_genuine.py) side by side: the screen without and with it on the
    same rows, its drops of the held-out (odd sha256) half of the real queries per language, and on the grown
    samples (@3, @4: already kept by a screen) how many genuine it keeps and how many garbled it drops."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "lab"))
    from query_genuine import fit_half, genuine_scores, load_weights

    threshold = load_weights(name)[2]
    p = genuine_scores([r["query"] for r in rows], name)
    gl = [float(x) < threshold for x in p]
    bad = sum(not r["genuine"] for r in rows)
    out = {}
    echo(f"learned genuine check ({name}, threshold {threshold}), alone: drops {sum(gl)}, of them not genuine "
         f"{sum(d and not r['genuine'] for r, d in zip(rows, gl))}")
    echo(f"{'screen':22} {'drops':>6} {'genuine dropped':>16} {'genuine share kept':>19} {'recall':>7}")
    for key, drop in (("", [bool(f) for f in found]), ("_genuine", [bool(f) or x for f, x in zip(found, gl)])):
        kept = [r for r, d in zip(rows, drop) if not d]
        gone = [r for r, d in zip(rows, drop) if d]
        share = sum(r["genuine"] for r in kept) / max(len(kept), 1)
        rec = sum(not r["genuine"] for r in gone) / max(bad, 1)
        kept_genuine = sum(r["genuine"] for r in kept) / max(len(rows) - bad, 1)
        echo(f"{'with learned' if key else 'without learned':22} {len(gone):>6} {sum(r['genuine'] for r in gone):>16} "
             f"{share:>19.3f} {rec:>7.3f}  genuine kept {kept_genuine:.3f}")
        if key:
            out.update({"genuine_precision_genuine": round(share, 3), "screen_recall_genuine": round(rec, 3),
                        "genuine_recall_genuine": round(kept_genuine, 3)})
        else:
            out["genuine_recall"] = round(kept_genuine, 3)
    held = [(t, lg) for t, lg in real if not fit_half(t)]
    hp = genuine_scores([t for t, _ in held], name) if held else []
    for lang in ("en", "de"):
        ps = [float(x) for (t, lg), x in zip(held, hp) if lg == lang]
        drop = sum(x < threshold for x in ps)
        echo(f"learned check on held-out real {lang} queries: drops {drop} of {len(ps)}")
        out[f"real_false_drop_genuine_{lang}"] = round(drop / max(len(ps), 1), 4)
    for path in GROWN:
        g = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        gp = genuine_scores([r["query"] for r in g], name)
        keep_g = sum(r["genuine"] and x >= threshold for r, x in zip(g, gp))
        garb = [x < threshold for r, x in zip(g, gp) if r["reason"] == "garbled"]
        nong = [x < threshold for r, x in zip(g, gp) if not r["genuine"]]
        v = path.stem.split("@")[1]
        echo(f"{path.name}: keeps {keep_g} of {sum(r['genuine'] for r in g)} genuine, drops {sum(garb)} of "
             f"{len(garb)} garbled ({sum(nong)} of {len(nong)} not genuine)")
        out[f"grown{v}_genuine_kept"] = keep_g
        out[f"grown{v}_garbled_dropped"] = sum(garb)
        out[f"grown{v}_nongenuine_dropped"] = sum(nong)
    return out


def measure_fluency(rows: list[dict], found: list[list[str]], real: list[tuple[str, str]], limits: dict[str, float],
                    echo=print, real_sample: int = 40) -> dict:
    """SYN013 side by side: the screen above without and with the fluency check (the same rows), its drops on a
    sample of `real_sample` real queries and on the library seeds per language with a limit, and its cost."""
    import random
    import time

    from mashbill.validators.queries.query_fluency import mean_nll

    t0 = time.perf_counter()
    scored = [r for r in rows if r["lang"] in limits]  # a language without a limit is not read
    nll = {id(r): mean_nll(r["query"]) for r in scored}
    per_query_s = (time.perf_counter() - t0) / max(len(scored), 1)
    fl = [id(r) in nll and nll[id(r)] > limits[r["lang"]] for r in rows]
    bad = sum(not r["genuine"] for r in rows)
    drops = [r for r, f in zip(rows, fl) if f]
    echo(f"SYN013 fluency (limits {limits}), alone: drops {len(drops)}, precision "
         f"{sum(not r['genuine'] for r in drops) / max(len(drops), 1):.2f}, recall "
         f"{sum(not r['genuine'] for r in drops) / max(bad, 1):.2f}; {per_query_s * 1000:.0f} ms per query")
    out = {}
    echo(f"{'screen':22} {'drops':>6} {'genuine dropped':>16} {'genuine share kept':>19} {'recall':>7}")
    for name, drop in (("without SYN013", [bool(f) for f in found]),
                       ("with SYN013", [bool(f) or x for f, x in zip(found, fl)])):
        kept = [r for r, d in zip(rows, drop) if not d]
        gone = [r for r, d in zip(rows, drop) if d]
        share = sum(r["genuine"] for r in kept) / max(len(kept), 1)
        rec = sum(not r["genuine"] for r in gone) / max(bad, 1)
        echo(f"{name:22} {len(gone):>6} {sum(r['genuine'] for r in gone):>16} {share:>19.3f} {rec:>7.3f}")
    out["fluency_precision"] = round(sum(not r["genuine"] for r in drops) / max(len(drops), 1), 3)
    out["genuine_precision_fluency"] = round(share, 3)
    out["screen_recall_fluency"] = round(rec, 3)
    rng = random.Random(0)
    for lang in sorted(limits):
        texts = [t for t, lg in real if lg == lang]
        texts = rng.sample(texts, real_sample) if len(texts) > real_sample else texts
        hit = [t for t in texts if mean_nll(t) > limits[lang]]
        echo(f"SYN013 on real {lang} queries: drops {len(hit)} of {len(texts)}" +
             (f", e.g. {hit[0][:90]!r}" if hit else ""))
        out[f"real_false_drop_fluency_{lang}"] = round(len(hit) / max(len(texts), 1), 4)
        seeds = [json.loads(line) for name in ("quickstart.jsonl", "moe-seeds.jsonl") for line in
                 (ROOT / "specs" / "library" / "seeds" / name).read_text(encoding="utf-8").splitlines() if line.strip()]
        seeds = [r["query"] for r in seeds if r.get("lang") == lang]
        hit = [t for t in seeds if mean_nll(t) > limits[lang]]
        echo(f"SYN013 on the library's {lang} seeds: drops {len(hit)} of {len(seeds)}" +
             (f", e.g. {hit[0][:90]!r}" if hit else ""))
        out[f"seed_false_drop_fluency_{lang}"] = round(len(hit) / max(len(seeds), 1), 4)
    out["fluency_ms"] = round(per_query_s * 1000, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--half", default="report", choices=["report", "tune", "all"])
    ap.add_argument("--data", type=Path, default=Path("/work/shared/data/queries-dev"))
    ap.add_argument("--show", default="", help="print the fixture rows a check code drops (e.g. SYN009)")
    ap.add_argument("--fluency", default="de=5.5", help="SYN013 limits to measure side by side, LANG=NATS,... "
                    "(validators.queries.query_fluency.MEASURED_LIMITS; '' to skip: it runs the model on every row)")
    ap.add_argument("--genuine", default="genuine@1", help="learned genuine-check weights "
                    "(specs/library/shared/classifiers/NAME.json) to measure side by side ('' to skip)")
    args = ap.parse_args()
    limits = {k: float(v) for k, v in (p.split("=") for p in args.fluency.split(",") if p)}
    figures = measure(args.half, args.data, args.show, fluency=limits or None, genuine=args.genuine)
    print(" ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
