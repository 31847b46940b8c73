"""Personal data in obvious forms: e-mail addresses, phone numbers, IBANs, personal names.

Deliberately conservative: IP addresses are never flagged (subnet questions are full of them), and digits that
belong to dates, times, directive numbers, standards, arithmetic or CIDR blocks are not phone numbers. IBANs must
pass the ISO 13616 mod-97 check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mashbill.factory.records import Verdict

EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}(?!\w)")
PHONE = re.compile(
    r"(?<![\w+.,/])\+\d{1,3}(?:[ ./-]?\(?\d{1,5}\)?){2,5}(?![\w/]|[.,]\d)"     # +49 30 1234567, +1 (555) 123-4567
    r"|(?<![\w.,/])0\d{2,5}(?:[ /-]|\s?/\s?)?\d{3,}(?:[ -]\d{2,})*(?![\w/]|[.,]\d)"  # 030 1234567, 0171-2345678
    r"|(?<![\w-])\(?\d{3}\)?[ .-]\d{3}[.-]\d{4}(?![\w-]|[.,]\d)")               # (555) 123-4567, 555-123-4567
PHONE_CONTEXT = re.compile(r"(?i)(?<!\w)(?:tel\.?|telefon\w*|phone|mobil\w*|handy\w*|call|anrufen|ruf\w*|"
                           r"nummer|number|fax|whatsapp|erreichbar|reach me)(?!\w)")
ARITH_NEIGHBOUR = re.compile(r"[-+*/×÷=^]\s*\d|\d\s*[-+*/×÷=^]")
IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,4})?(?![A-Za-z0-9])")
_CAP = r"[A-ZÄÖÜ][a-zäöüßé]+(?:-[A-ZÄÖÜ][a-zäöüßé]+)?"
NAME = re.compile(
    rf"(?:(?i:my name is|mein name ist|ich heiße|ich heisse|this is|hier spricht|signed|gez\.)\s+({_CAP}(?:\s+{_CAP})?)"
    rf"|(?:Herrn?|Frau|Mr\.|Mrs\.|Ms\.|Dr\.|Prof\.)\s+({_CAP}(?:\s+{_CAP})?)"
    rf"|(?i:regards|grüße|grüßen|gruß|cheers|best),?\s*\n\s*({_CAP}\s+{_CAP}))")
# What the names pattern must not take for a name
_NOT_NAMES = {"Doktor", "Professor", "Kollege", "Kollegin", "Kunde", "Kundin", "Nachbar", "Nachbarin", "Sie", "Ihnen"}
_EXCLUDE = [re.compile(p) for p in (
    r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?:/\d{1,2})?(?![\w.])",        # IPv4 and CIDR
    r"(?<![\w.])\d{4}-\d{1,2}-\d{1,2}(?!\w)",                           # ISO dates
    r"(?<![\w.])\d{1,2}\.\s?\d{1,2}\.\s?\d{2,4}(?!\w)",                 # dotted dates
    r"(?<!\w)(?:19|20)\d{2}/\d{1,5}(?:/[A-Z]{2,7})?(?!\w)",             # directive numbers
    r"(?i)(?<!\w)(?:DIN|EN|ISO|IEC|VDI|RFC)(?:\s+(?:EN|ISO|V))*[\s-]*\d+(?:[-:./]\d+)*",
    r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,4})?(?![A-Za-z0-9])",  # IBAN-shaped
)]

KINDS = {"PII001": "e-mail address", "PII002": "phone number", "PII003": "IBAN", "PII004": "personal name"}
PLACEHOLDER = {"PII001": "[EMAIL]", "PII002": "[PHONE]", "PII003": "[IBAN]", "PII004": "[NAME]"}


@dataclass(frozen=True)
class Finding:
    code: str
    start: int
    end: int
    text: str


def iban_valid(candidate: str) -> bool:
    s = candidate.replace(" ", "")
    if not 15 <= len(s) <= 34:
        return False
    moved = s[4:] + s[:4]
    digits = "".join(str(int(ch, 36)) for ch in moved)
    return int(digits) % 97 == 1


def _excluded_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for rx in _EXCLUDE for m in rx.finditer(text)]


def _overlaps(span, spans) -> bool:
    return any(span[0] < e and s < span[1] for s, e in spans)


def find_pii(text: str) -> list[Finding]:
    if not text:
        return []
    out: list[Finding] = []
    if "@" in text:
        out.extend(Finding("PII001", *m.span(), m.group(0)) for m in EMAIL.finditer(text))
    excluded = None
    for m in IBAN.finditer(text):
        if iban_valid(m.group(0)):
            out.append(Finding("PII003", *m.span(), m.group(0)))
    if any(ch.isdigit() for ch in text):
        for m in PHONE.finditer(text):
            span, cand = m.span(), m.group(0)
            digits = sum(ch.isdigit() for ch in cand)
            if not 7 <= digits <= 15:
                continue
            if excluded is None:
                excluded = _excluded_spans(text)
            if _overlaps(span, excluded) or _overlaps(span, [(f.start, f.end) for f in out]):
                continue
            around = text[max(0, span[0] - 3):span[0]] + "#" + text[span[1]:span[1] + 3]
            if ARITH_NEIGHBOUR.search(around.replace("#", " ")) and not PHONE_CONTEXT.search(text):
                continue
            out.append(Finding("PII002", *span, cand))
    for m in NAME.finditer(text):
        name = next(g for g in m.groups() if g)
        if name.split()[0] in _NOT_NAMES:
            continue
        start = m.start() + m.group(0).rfind(name)
        out.append(Finding("PII004", start, start + len(name), name))
    out.sort(key=lambda f: f.start)
    return out


def redact(text: str, findings: list[Finding] | None = None) -> str:
    findings = find_pii(text) if findings is None else findings
    out, pos = [], 0
    for f in sorted(findings, key=lambda f: f.start):
        if f.start < pos:
            continue
        out.append(text[pos:f.start])
        out.append(PLACEHOLDER[f.code])
        pos = f.end
    out.append(text[pos:])
    return "".join(out)


def pii_verdicts(texts: dict[str, str], severity: str = "flag") -> list[Verdict]:
    """Verdicts for the named texts of one record (e.g. {"query": ..., "target": ...}); one per kind and text."""
    out = []
    for where, text in texts.items():
        seen: dict[str, list[str]] = {}
        for f in find_pii(text or ""):
            seen.setdefault(f.code, []).append(f.text)
        for code, items in seen.items():
            shown = ", ".join(_mask(i) for i in items[:3])
            out.append(Verdict(code, severity, f"{KINDS[code]} in {where}: {shown}", "validate"))
    return out


def _mask(item: str) -> str:
    """Enough to find the item again, not enough to copy it into a report."""
    if len(item) <= 4:
        return item[0] + "…"
    return item[:3] + "…" + item[-2:]


def redact_value(value):
    """A copy of a JSON value with every string redacted (keys are left alone)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    return value


def redact_file(src, dst) -> tuple[int, int]:
    """Write a redacted copy of a JSONL (or JSON array) file; rows that are not JSON are left out.
    Returns (rows written, rows changed)."""
    import json
    from pathlib import Path

    data = Path(src).read_bytes()
    if data.lstrip()[:1] == b"[":
        rows = json.loads(data.decode("utf-8"))
    else:
        rows = []
        for line in data.split(b"\n"):
            if line.strip():
                try:
                    rows.append(json.loads(line.decode("utf-8")))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    continue
    out, changed = [], 0
    for row in rows:
        red = redact_value(row)
        changed += red != row
        out.append(json.dumps(red, ensure_ascii=False))
    tmp = Path(str(dst) + ".tmp")
    tmp.write_text("\n".join(out) + "\n", encoding="utf-8")
    tmp.replace(dst)
    return len(out), changed
