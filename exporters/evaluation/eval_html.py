"""eval.html: one self-contained page per target, one section per set, with the confusion matrix drawn (cells
shaded by their share of the gold row) beside the student's, the teacher's and the baselines' figures."""

from __future__ import annotations

from html import escape


def _matrix(conf: dict) -> str:
    classes, matrix = conf["classes"], conf.get("matrix")
    if matrix is None:  # multi-label: one tp/fp/fn/tn row per label
        rows = "".join(f"<tr><th>{escape(c)}</th>" + "".join(f"<td>{v[k]}</td>" for k in ("tp", "fp", "fn", "tn"))
                       + "</tr>" for c, v in conf["per_label"].items())
        return f"<table class=m><tr><th>label</th><th>tp</th><th>fp</th><th>fn</th><th>tn</th></tr>{rows}</table>"
    head = "<tr><th>gold \\ predicted</th>" + "".join(f"<th>{escape(c)}</th>" for c in classes) + "</tr>"
    body = []
    for c, row in zip(classes, matrix):
        total = sum(row) or 1
        cells = "".join(
            f"<td style=\"background:rgba({'40,140,60' if i == j else '200,60,40'},{v / total:.2f})\">{v}</td>"
            for j, v in enumerate(row) for i in [classes.index(c)])
        body.append(f"<tr><th>{escape(c)}</th>{cells}</tr>")
    return f"<table class=m>{head}{''.join(body)}</table>"


def _figures(res: dict) -> str:
    rows = []
    st = res["student"]
    keys = [k for k in ("accuracy", "macro_f1", "ece", "schema_valid_rate", "rule_pass_rate", "categories_right",
                        "tool_right", "operands_right") if k in st]
    rows.append("<tr><th></th>" + "".join(f"<th>{k}</th>" for k in keys) + "<th>rows</th></tr>")
    refs = [("student", st)] + [("teacher", res.get("teacher") or {})] + \
        [(f"baseline: {n}", b) for n, b in (res.get("baselines") or {}).items()]
    for name, m in refs:
        rows.append(f"<tr><th>{escape(name)}</th>" + "".join(f"<td>{m.get(k, '')}</td>" for k in keys) +
                    f"<td>{m.get('n', m.get('rows', ''))}</td></tr>")
    return f"<table>{''.join(rows)}</table>"


def render(doc: dict) -> str:
    parts = [f"<h1>mashbill eval: {escape(doc['target']['path'])}</h1>",
             f"<p>{escape(doc['target']['form'])} {escape(doc['target']['kind'])}, evaluated "
             f"{escape(doc['evaluated_at'])}</p>"]
    for name, res in doc["sets"].items():
        parts.append(f"<h2>{escape(name)}</h2><p>{res['rows']} rows, sha256 <code>{res['sha256']}</code></p>")
        parts.append(_figures(res))
        conf = res["student"].get("confusion")
        if conf:
            parts.append("<h3>confusion matrix (student)</h3>" + _matrix(conf))
    style = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}")
    return (f"<!doctype html><html><head><meta charset=utf-8><title>mashbill eval</title><style>{style}</style>"
            f"</head><body>{''.join(parts)}</body></html>\n")
