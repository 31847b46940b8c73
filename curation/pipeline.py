"""The end of the quick start: freeze each spec's validated records into a snapshot and write the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mashbill.curation.reports.report import build_report, summary_lines
from mashbill.curation.snapshots.snapshot import FreezeResult, SnapshotError, freeze
from mashbill.specs import find_spec, load_spec


@dataclass
class FreezeAndReport:
    snapshots: list[FreezeResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # spec -> why nothing was frozen
    report: Path | None = None
    summary: list[str] = field(default_factory=list)


def freeze_and_report(store_path: str | Path, spec_refs: list[str | Path], *, out_html: str | Path | None = None,
                      tokens: bool = True) -> FreezeAndReport:
    """Freeze every spec in `spec_refs` (names, name@version or paths) as `<spec name>@<next version>` under
    STORE/snapshots, reusing the latest version when its content is identical (so re-running the quick start
    adds nothing), then write STORE/report.html (or `out_html`) for the store.

    A spec with nothing to freeze is skipped with its reason; a store whose accepted records were never
    validated raises (run the validators first).
    """
    store_path = Path(store_path)
    out = FreezeAndReport()
    for ref in spec_refs:
        rs = load_spec(find_spec(str(ref)))
        try:
            out.snapshots.append(freeze(rs, store_path=store_path, name=rs.spec.name, version=None, tokens=tokens,
                                        reuse_identical=True))
        except SnapshotError as exc:
            if "nothing to freeze" not in str(exc):
                raise
            out.skipped[rs.ref] = str(exc)
    out.report, data = build_report(store_path, out_html or store_path / "report.html")
    out.summary = summary_lines(data) + [
        f"snapshot {r.manifest['ref']}: id {r.snapshot_id[:12]}, " + ", ".join(
            f"{k} {v}" for k, v in r.manifest["splits"]["counts"].items()) for r in out.snapshots]
    return out
