"""The HTML report: self-contained, every plot present, and rendered by a real headless Chromium."""

from __future__ import annotations

import html
import re
import shutil
import subprocess

import pytest

from mashbill.curation.reports.report import build_report
from mashbill.curation.snapshots.snapshot import freeze
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from tests.conftest import run_cli
from tests.curation.conftest import add_records
from tests.curation.selection.test_select import decide

PLOTS = ["labels", "languages", "tokens", "verdicts", "accept_rate", "latency", "review"]


@pytest.fixture
def reported(lib, tmp_path):
    spec = lib.write("plan-rep")
    store = tmp_path / "store"
    with Store.open(store) as s:
        recs = add_records(s, load_spec(spec), rejected_by_validation={"What is 17.5% of 4,360?": "HR001"},
                           parse_failures=("Wer hat die Relativitätstheorie entwickelt?",))
        decide(s, recs[0].id, "ann", "accept")
        decide(s, recs[1].id, "ann", "reject")
    snap = freeze(spec, store_path=store, name="rep", version="1")
    return store, snap


def _figures(html: str) -> dict[str, bool]:
    """plot name -> has marks (not the empty placeholder)."""
    out = {}
    for m in re.finditer(r'<figure class="plot" data-plot="([a-z_]+)"( data-empty="1")?>(.*?)</figure>', html, re.S):
        out[m.group(1)] = m.group(2) is None and "data-mark" in m.group(3)
    return out


def _self_contained(html: str) -> None:
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html, re.I)
    assert "<link" not in html and "@import" not in html and "url(" not in html
    assert "<script src" not in html


def test_snapshot_and_store_reports_hold_every_plot(reported, tmp_path):
    store, snap = reported
    out, data = build_report(snap.path, tmp_path / "snap.html")
    html = out.read_text()
    _self_contained(html)
    assert _figures(html) == {p: True for p in PLOTS}
    # the token histogram has the trainer's max_seq_len drawn on it
    assert 'data-marker="max_seq_len"' in html and "max_seq_len 1024" in html
    assert data["labels"]["train"] and set(data["languages"]) == {"train", "eval", "test"}
    assert data["review"]["reviewed"] == 2 and data["verdicts"] == {"HR001": 1, "PARSE001": 1, "REVIEW001": 1}
    out2, data2 = build_report(store, tmp_path / "store.html")
    html2 = out2.read_text()
    _self_contained(html2)
    figs = _figures(html2)
    assert all(figs[p] for p in PLOTS), figs
    assert data2["summary"]["records"] == 26 and data2["summary"]["accepted"] == 25


def test_report_cli_prints_a_summary(reported, tmp_path):
    store, snap = reported
    r = run_cli("report", "rep@1", "--store", store, "--out", tmp_path / "r.html")
    assert r.returncode == 0, r.stderr
    assert "Snapshot rep@1" in r.stdout and "top verdict codes: HR001 1, PARSE001 1, REVIEW001 1" in r.stdout
    assert f"report: {tmp_path / 'r.html'}" in r.stdout and (tmp_path / "r.html").is_file()
    r = run_cli("report", tmp_path / "nothing-here")
    assert r.returncode == 2 and "neither a store folder" in r.stderr


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _flags(tmp_path) -> list:
    return [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run",
            f"--user-data-dir={tmp_path / 'chromium-profile'}", "--enable-logging=stderr", "--v=0"]


def _dump_dom(out, tmp_path):
    """The DOM after the page's own script ran, and the data-* attributes that script left on <body>."""
    dom = subprocess.run([*_flags(tmp_path), "--window-size=800,1600", "--dump-dom", out.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", dom.stdout).group(1)
    return dom, dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_report_renders_in_headless_chromium(reported, tmp_path):
    store, snap = reported
    out, _ = build_report(snap.path, tmp_path / "snap.html")
    flags = _flags(tmp_path)
    dom, attrs = _dump_dom(out, tmp_path)
    # the page's own script ran, found marks in every plot and threw nothing
    assert attrs.get("plots-ok") == str(len(PLOTS)), (attrs, dom.stderr[-2000:])
    assert attrs.get("plots-bad") == "" and attrs.get("plots-empty") == "0" and "error" not in attrs
    assert "Uncaught" not in dom.stderr
    shot = tmp_path / "report.png"
    run = subprocess.run([*flags, f"--screenshot={shot}", "--window-size=800,1600", out.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and shot.stat().st_size > 10_000


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_two_specs_legends_do_not_overlap_and_rejects_show_why_in_chromium(lib, tmp_path):
    # two specs with long names, each with a validation reject and an output that did not parse
    store = tmp_path / "store"
    specs = ["plan-routing-moe-sovereign-german-and-english", "plan-routing-moe-sovereign-legal-and-precision"]
    with Store.open(store) as s:
        for name in specs:
            add_records(s, load_spec(lib.write(name)), rejected_by_validation={"What is 17.5% of 4,360?": "HR001"},
                        parse_failures=("Wer hat die Relativitätstheorie entwickelt?",))
    out, data = build_report(store, tmp_path / "store.html")
    assert set(data["examples"]) == {"HR001", "PARSE001"} and data["examples"]["HR001"]["records"] == 2
    dom, attrs = _dump_dom(out, tmp_path)
    assert "error" not in attrs and attrs.get("plots-bad") == "", attrs
    # labels and languages each key both specs, the accept-rate plot keys each run: no key covers another or a plot
    assert int(attrs["legend-keys"]) >= 6 and attrs["legend-overlaps"] == "", attrs
    assert attrs["examples-shown"] == "4"  # two records per code, laid out with a size
    tables = dict(re.findall(r'<table class="examples" data-code="([A-Z0-9]+)">(.*?)</table>', dom.stdout, re.S))
    assert set(tables) == {"HR001", "PARSE001"}
    assert "test finding" in tables["HR001"] and "What is 17.5% of 4,360?" in tables["HR001"]
    assert "validate · reject" in tables["HR001"] and specs[0] in tables["HR001"] and specs[1] in tables["HR001"]
    # a record whose output did not parse shows the teacher's raw text and why it was rejected
    assert "not JSON" in tables["PARSE001"] and "Relativitätstheorie" in tables["PARSE001"]
    assert html.escape('[{"task": ', quote=True) in tables["PARSE001"] or '[{"task": ' in tables["PARSE001"]


def test_store_summary_counts_records_per_code_with_verdicts_beside(lib, tmp_path):
    """Issue 26: "CPLX006 58" on 52 records counted a record's generate and validate findings (and two verdicts
    of one code) as if they were records."""
    from mashbill.curation.reports.report import summary_lines
    from mashbill.factory.records import Verdict

    rs = load_spec(lib.write("plan-r"))
    with Store.open(tmp_path / "store") as store:
        recs = add_records(store, rs, validate=False)
        a, b = recs[0].id, recs[1].id
        store.record_validation(spec_hash=rs.hash, source="store", counts={}, results={
            a: [Verdict("PLAN011", "reject", "task 1 cut", "validate"), Verdict("PLAN011", "reject", "task 2 cut",
                                                                                "validate")],
            b: [Verdict("PLAN011", "reject", "cut", "validate"), Verdict("PLAN003", "reject", "unshown", "validate")],
            **{r.id: [] for r in recs[2:]}})
    _, data = build_report(tmp_path / "store", tmp_path / "store.html")
    assert data["verdict_records"] == {"PLAN003": 1, "PLAN011": 2} and data["verdicts"]["PLAN011"] == 3
    assert "  top verdict codes (records): PLAN011 2 (3 verdicts), PLAN003 1" in summary_lines(data)
