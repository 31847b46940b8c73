"""`mashbill report`: one self-contained HTML file (inline SVG, a few lines of inline JS, nothing fetched).

Plots: label cells per split, languages, token lengths with the trainer's max_seq_len drawn on them,
verdict codes, accept rate over each run, teacher latency, and review progress when there is any; a store's
report ends with a few example records per verdict code (detail, input, output). Legends are HTML that the
browser flows into rows, so series names never overlap. The inline script checks that every plot rendered
marks, that no legend key covers another or its plot, and that the examples are laid out, and records the
result on <body> (data-plots-ok, data-legend-overlaps, data-examples-shown, data-error), which is what the
headless-Chromium test reads.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from mashbill.errors import MashbillError
from mashbill.files import write_file_atomic

PALETTE = ["#3b6ea8", "#e08a2c", "#4c9a5b", "#b8473d", "#7d5ba6", "#8c6d46", "#c861a6", "#6b6b6b"]
W = 720


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _svg(height: int, body: str, label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" viewBox="0 0 {W} {height}" '
            f'role="img" aria-label="{_e(label)}">{body}</svg>')


def legend(items: list[tuple[str, str]]) -> str:
    """Series names as HTML (name, colour): the browser flows them into rows, so long names never run into each
    other or into the plot, as fixed offsets inside the SVG did with two specs."""
    return '<div class="legend">' + "".join(
        f'<span class="key" data-legend="1"><i style="background:{c}"></i>{_e(n)}</span>' for n, c in items) + "</div>"


def grouped_bars(data: dict[str, dict[str, int]], label: str, limit: int = 30, *, keys: bool = True) -> str:
    """Horizontal bars: one row per category, one bar per group (split or spec)."""
    groups = list(data)
    totals: dict[str, int] = {}
    for g in groups:
        for k, v in data[g].items():
            totals[k] = totals.get(k, 0) + v
    cats = sorted(totals, key=lambda k: (-totals[k], k))[:limit]
    if not cats:
        return ""
    vmax = max(max(data[g].get(c, 0) for g in groups) for c in cats) or 1
    left, bar_h, gap = 230, 12, 8
    row_h = bar_h * len(groups) + gap
    height = 8 + row_h * len(cats) + 10
    parts = []
    for ci, c in enumerate(cats):
        y0 = 4 + ci * row_h
        parts.append(f'<text x="{left - 6}" y="{y0 + row_h / 2}" font-size="11" text-anchor="end">{_e(c)}</text>')
        for gi, g in enumerate(groups):
            v = data[g].get(c, 0)
            w = (W - left - 60) * v / vmax
            y = y0 + gi * bar_h
            parts.append(f'<rect data-mark="1" x="{left}" y="{y}" width="{w:.1f}" height="{bar_h - 2}" '
                         f'fill="{PALETTE[gi % len(PALETTE)]}"><title>{_e(g)} · {_e(c)}: {v}</title></rect>'
                         f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 3}" font-size="10">{v}</text>')
    if len(totals) > limit:
        parts.append(f'<text x="{left}" y="{height - 2}" font-size="10" fill="#666">top {limit} of {len(totals)}</text>')
    keyed = legend([(g, PALETTE[gi % len(PALETTE)]) for gi, g in enumerate(groups)])
    return (keyed if keys else "") + _svg(height, "".join(parts), label)


def bars(data: dict[str, int], label: str) -> str:
    return grouped_bars({"count": data}, label, keys=False) if data else ""


def histogram(values: list[float], label: str, bins: int = 30, marker: float | None = None,
              marker_label: str = "", unit: str = "") -> str:
    if not values:
        return ""
    lo = 0.0
    hi = max(max(values), marker or 0) * 1.05 or 1.0
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width))] += 1
    left, top, plot_w, plot_h = 50, 20, W - 70, 180
    cmax = max(counts) or 1
    parts = [f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#999"/>']
    for i, c in enumerate(counts):
        if not c:
            continue
        h = plot_h * c / cmax
        x = left + plot_w * i / bins
        parts.append(f'<rect data-mark="1" x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{plot_w / bins - 1:.1f}" '
                     f'height="{h:.1f}" fill="{PALETTE[0]}"><title>{lo + i * width:.3g}–{lo + (i + 1) * width:.3g}'
                     f'{unit}: {c}</title></rect>')
    for frac in (0, 0.25, 0.5, 0.75, 1):
        x = left + plot_w * frac
        parts.append(f'<text x="{x:.1f}" y="{top + plot_h + 14}" font-size="10" text-anchor="middle">'
                     f'{lo + (hi - lo) * frac:.4g}</text>')
    parts.append(f'<text x="{left - 6}" y="{top + 8}" font-size="10" text-anchor="end">{cmax}</text>')
    if marker is not None:
        x = left + plot_w * (marker - lo) / (hi - lo)
        over = sum(v > marker for v in values)
        parts.append(f'<line data-marker="max_seq_len" x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{top + plot_h}" '
                     f'stroke="#c0392b" stroke-width="2" stroke-dasharray="5,3"/>'
                     f'<text x="{x - 4:.1f}" y="{top + 4}" font-size="11" fill="#c0392b" text-anchor="end">'
                     f'{_e(marker_label)} {marker:g} ({over} over)</text>')
    return _svg(top + plot_h + 24, "".join(parts), label)


def lines(series: list[dict], label: str) -> str:
    """Accept rate (0..1) against the record index, one line per run."""
    series = [s for s in series if s.get("points")]
    if not series:
        return ""
    left, top, plot_w, plot_h = 50, 20, W - 70, 180
    xmax = max(p[0] for s in series for p in s["points"]) or 1
    parts = [f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#999"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#999"/>']
    for frac in (0, 0.5, 1):
        y = top + plot_h * (1 - frac)
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{frac:.0%}</text>'
                     f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eee"/>')
    parts.append(f'<text x="{left + plot_w}" y="{top + plot_h + 14}" font-size="10" text-anchor="end">'
                 f'{xmax} records</text>')
    keys = []
    for i, s in enumerate(series[:8]):
        pts = " ".join(f"{left + plot_w * x / xmax:.1f},{top + plot_h * (1 - y):.1f}" for x, y in s["points"])
        color = PALETTE[i % len(PALETTE)]
        if len(s["points"]) == 1:
            x, y = s["points"][0]
            parts.append(f'<circle data-mark="1" cx="{left + plot_w * x / xmax:.1f}" cy="{top + plot_h * (1 - y):.1f}" '
                         f'r="3" fill="{color}"><title>{_e(s["run_id"])}</title></circle>')
        else:
            parts.append(f'<polyline data-mark="1" points="{pts}" fill="none" stroke="{color}" stroke-width="2">'
                         f'<title>{_e(s["spec"])} run {_e(s["run_id"])}: {s["accepted"]}/{s["n"]} accepted</title>'
                         '</polyline>')
        keys.append((f'{s["spec"]} · {s["run_id"]} · {s["accepted"]}/{s["n"]}', color))
    return legend(keys) + _svg(top + plot_h + 20, "".join(parts), label)


def stacked(parts_: dict[str, int], label: str) -> str:
    total = sum(parts_.values())
    if not total:
        return ""
    left, plot_w = 20, W - 40
    x = left
    out = []
    for i, (k, v) in enumerate(parts_.items()):
        w = plot_w * v / total
        if v:
            out.append(f'<rect data-mark="1" x="{x:.1f}" y="10" width="{w:.1f}" height="28" '
                       f'fill="{PALETTE[i % len(PALETTE)]}"><title>{_e(k)}: {v}</title></rect>')
        x += w
    keys = legend([(f"{k} {v}", PALETTE[i % len(PALETTE)]) for i, (k, v) in enumerate(parts_.items())])
    return keys + _svg(48, "".join(out), label)


SCRIPT = """
(function () {
  try {
    var figs = document.querySelectorAll('figure.plot');
    var ok = 0, empty = 0, bad = [];
    figs.forEach(function (f) {
      if (f.dataset.empty === '1') { empty++; return; }
      var svg = f.querySelector('svg');
      var marks = svg ? svg.querySelectorAll('[data-mark]').length : 0;
      var box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
      if (marks > 0 && box.width > 0 && box.height > 0) { ok++; f.dataset.marks = marks; }
      else { bad.push(f.dataset.plot); }
    });
    document.body.dataset.plotsOk = ok;
    document.body.dataset.plotsEmpty = empty;
    document.body.dataset.plotsBad = bad.join(',');
    // legend keys must not cover each other or their plot
    var keys = 0, overlaps = [];
    function hit(a, b) { return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom; }
    figs.forEach(function (f) {
      var rs = Array.prototype.map.call(f.querySelectorAll('[data-legend]'), function (k) {
        return k.getBoundingClientRect(); });
      var svg = f.querySelector('svg');
      var plot = svg ? svg.getBoundingClientRect() : null;
      keys += rs.length;
      rs.forEach(function (r, i) {
        if (r.width === 0 || r.height === 0) { overlaps.push(f.dataset.plot + ':hidden'); }
        if (plot && hit(r, plot)) { overlaps.push(f.dataset.plot + ':plot'); }
        for (var j = i + 1; j < rs.length; j++) { if (hit(r, rs[j])) { overlaps.push(f.dataset.plot + ':key'); } }
      });
    });
    document.body.dataset.legendKeys = keys;
    document.body.dataset.legendOverlaps = overlaps.join(',');
    var shown = 0;
    document.querySelectorAll('[data-example]').forEach(function (x) {
      var b = x.getBoundingClientRect(); if (b.width > 0 && b.height > 0) { shown++; } });
    document.body.dataset.examplesShown = shown;
  } catch (e) {
    document.body.dataset.error = String(e);
  }
})();
"""

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:780px;color:#222}
h1{font-size:22px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
table.summary{border-collapse:collapse;font-size:13px}table.summary td{padding:2px 12px 2px 0}
table.summary td:first-child{color:#555}figure{margin:8px 0}figcaption{font-size:12px;color:#555}
.empty{color:#888;font-size:13px;font-style:italic}.warn{color:#b8473d;font-size:13px}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;font-size:11px;margin:4px 0 6px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
table.examples{border-collapse:collapse;font-size:12px;width:100%;table-layout:fixed;margin-bottom:10px}
table.examples td,table.examples th{border-top:1px solid #eee;padding:3px 6px 3px 0;vertical-align:top;text-align:left}
table.examples th{color:#555;font-weight:normal}
table.examples pre{margin:0;white-space:pre-wrap;word-break:break-word;font-size:11px}
"""


def _figure(key: str, title: str, svg: str, caption: str = "", empty_note: str = "no data") -> str:
    if not svg:
        return (f'<h2>{_e(title)}</h2><figure class="plot" data-plot="{key}" data-empty="1">'
                f'<p class="empty">{_e(empty_note)}</p></figure>')
    return (f'<h2>{_e(title)}</h2><figure class="plot" data-plot="{key}">{svg}'
            f'<figcaption>{_e(caption)}</figcaption></figure>')


def _short(value, limit: int = 600) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def examples_html(examples: dict[str, dict]) -> list[str]:
    """Per verdict code, a few records with the verdict's detail, the record's input and the teacher's output."""
    if not examples:
        return []
    body = ["<h2>Examples per verdict code</h2>"]
    for code, entry in sorted(examples.items()):
        body.append(f'<h3 id="code-{_e(code)}">{_e(code)} <small>({entry["records"]} records, '
                    f'{len(entry["examples"])} shown)</small></h3><table class="examples" data-code="{_e(code)}">'
                    '<tr><th style="width:22%">record · verdict</th><th style="width:26%">detail</th>'
                    '<th style="width:26%">input</th><th>output</th></tr>')
        for x in entry["examples"]:
            body.append(f'<tr data-example="{_e(code)}"><td>{_e(x["record_id"][:12])}<br>{_e(x["spec"])} · '
                        f'{_e(x["status"])}<br>{_e(x["stage"])} · {_e(x["severity"])}</td>'
                        f'<td>{_e(x["detail"] or "")}</td><td><pre>{_e(_short(x["input"]))}</pre></td>'
                        f'<td><pre>{_e(_short(x["output"]) if x["output"] is not None else "(no output)")}</pre>'
                        '</td></tr>')
        body.append("</table>")
    return body


def render_html(d: dict) -> str:
    body = [f"<h1>{_e(d['title'])}</h1>", '<table class="summary">']
    body += [f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in d["summary"].items()]
    body.append("</table>")
    if d.get("below_quota"):
        body.append('<p class="warn">Cells below quota: ' + ", ".join(
            f"{_e(c)} ({v['kept']}/{v['target'] if v['target'] is not None else v['kept'] + v['short']})"
            for c, v in sorted(d["below_quota"].items())) + "</p>")
    groups = "split" if d["source"] == "snapshot" else "spec"
    body.append(_figure("labels", f"Label cells per {groups} ({' × '.join(d['dims'])})",
                        grouped_bars(d["labels"], "label distribution"), "examples per label cell"))
    body.append(_figure("languages", f"Languages per {groups}", grouped_bars(d["languages"], "languages")))
    t = d.get("tokens")
    body.append(_figure(
        "tokens", "Token lengths",
        histogram(t["values"], "token lengths", marker=t["max_seq_len"], marker_label="max_seq_len") if t else "",
        (f"tokens per training example ({t['tokenizer']}, rendered with the chat template)"
         + (", a sample" if t.get("sampled") else "")) if t else "",
        "token lengths unavailable (install the validate extra for the tokenizer)"))
    body.append(_figure("verdicts", "Verdict codes", bars(d.get("verdicts") or {}, "verdict codes"),
                        "findings of every severity on the records", "no verdicts"))
    body.append(_figure("accept_rate", "Accept rate over the run", lines(d.get("accept_rate") or [], "accept rate"),
                        "cumulative share of accepted records, in the order they were stored"))
    lat = d.get("latency") or {}
    body.append(_figure("latency", "Teacher latency",
                        histogram(lat.get("values") or [], "teacher latency", unit=" s"),
                        f"seconds per teacher call: p50 {lat.get('p50', 0):.3g}, p95 {lat.get('p95', 0):.3g}, "
                        f"max {lat.get('max', 0):.3g} ({lat.get('n', 0)} calls)" if lat.get("n") else "",
                        "no teacher calls recorded"))
    rv = d.get("review")
    if rv:
        body.append(_figure("review", "Review progress", stacked(
            {k: rv.get(k, 0) for k in ("accepted", "corrected", "rejected", "disagreements", "unreviewed")},
            "review progress"), f"{rv.get('reviewed', 0)} of {rv.get('records', 0)} records reviewed"))
    if d.get("preference"):
        p = d["preference"]
        body.append(_figure("preference", "Preference pairs by source", bars(p["pairs"] and
                            {k: p["pairs"].get(k, 0) for k in ("rule", "teacher", "human", "judge")},
                            "pairs by source")))
    from mashbill.curation.reports.report_synth_html import judge_html, synthesis_html

    body += synthesis_html(d.get("synthesis") or [], _figure, grouped_bars, bars, histogram, _e)
    body += judge_html(d.get("judge") or [], _figure, bars, _e)
    body += examples_html(d.get("examples") or {})
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(d['title'])}</title><style>{CSS}</style></head><body>"
            + "".join(body) + f"<script>{SCRIPT}</script></body></html>")


def build_report(target: str | Path, out: str | Path | None = None, *, snapshots_root: str | Path | None = None
                 ) -> tuple[Path, dict]:
    """Write the HTML report for a store folder or a snapshot (folder or NAME@VERSION under snapshots_root)."""
    from mashbill.curation.reports.report_data import from_snapshot, from_store
    from mashbill.curation.snapshots.snapshot import MANIFEST, resolve_snapshot
    from mashbill.factory.store import DB_NAME

    p = Path(target)
    if p.is_dir() and (p / MANIFEST).exists():
        data = from_snapshot(p)
    elif p.is_dir() and (p / DB_NAME).is_file():
        data = from_store(p)
    elif "@" in str(target) and snapshots_root is not None:
        p = resolve_snapshot(str(target), snapshots_root)
        data = from_snapshot(p)
    else:
        raise MashbillError(f"{target}: neither a store folder (with {DB_NAME}) nor a snapshot (with {MANIFEST})")
    out = Path(out) if out else (p / "report.html" if data["source"] == "store" else Path(f"{p.name}.report.html"))
    write_file_atomic(out, render_html(data).encode("utf-8"))
    return out, data


def summary_lines(d: dict) -> list[str]:
    out = [d["title"]]
    out += [f"  {k}: {v}" for k, v in d["summary"].items()]
    if d.get("verdict_records"):  # a store: records per code, verdicts beside where they differ
        top = sorted(d["verdict_records"].items(), key=lambda kv: -kv[1])[:5]
        verdicts = d.get("verdicts") or {}
        out.append("  top verdict codes (records): " + ", ".join(
            f"{c} {n}" + (f" ({verdicts[c]} verdicts)" if verdicts.get(c, n) != n else "") for c, n in top))
    elif d.get("verdicts"):
        top = sorted(d["verdicts"].items(), key=lambda kv: -kv[1])[:5]
        out.append("  top verdict codes: " + ", ".join(f"{c} {n}" for c, n in top))
    if d.get("tokens"):
        v = sorted(d["tokens"]["values"])
        over = sum(x > (d["tokens"]["max_seq_len"] or 1 << 60) for x in v)
        out.append(f"  tokens: p50 {v[len(v) // 2]}, max {v[-1]}, {over} over max_seq_len {d['tokens']['max_seq_len']}")
    if d.get("below_quota"):
        out.append(f"  cells below quota: {', '.join(sorted(d['below_quota']))}")
    from mashbill.curation.reports.report_synth import summary_lines as synth_lines

    return out + synth_lines(d.get("synthesis") or [], d.get("judge") or [])


__all__ = ["build_report", "render_html", "summary_lines"]
