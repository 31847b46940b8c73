"""Personal data in obvious forms: e-mail addresses, phone numbers, IBANs, personal names.

Deliberately conservative, because public benchmark queries should almost never be flagged (bench/triggers.py
measures the rate on ~30,000 of them): IP addresses are never flagged (subnet questions are full of them); a
digit string is a phone number only with a phone word next to it ("Tel.", "call me", "erreichbar"), so drug
codes, spec numbers and sums are not; IBANs must pass the ISO 13616 mod-97 check; a capitalised word is a name
only with name evidence: a self-introduction ("my name is", "ich heiße"), a signature ("gez.", a sign-off), a
salutation ("Sehr geehrte Frau Müller"), or a title ("Mr. Smith") in a text that also holds contact data. Cues
match whole words only ("designed" holds no "signed"); nationality and language words are never names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mashbill import jsontext
from mashbill.factory.records import Verdict
from mashbill.files import write_file_atomic
from mashbill.validators.prefilter import PatternSet

EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}(?!\w)")
PHONE = re.compile(
    r"(?<![\w+.,/])\+\d{1,3}(?:[ ./-]?\(?\d{1,5}\)?){2,5}(?![\w/]|[.,]\d)"     # +49 30 1234567, +1 (555) 123-4567
    r"|(?<![\w.,/])0\d{2,5}(?:[ /-]|\s?/\s?)?\d{3,}(?:[ -]\d{2,})*(?![\w/]|[.,]\d)"  # 030 1234567, 0171-2345678
    r"|(?<![\w-])\(?\d{3}\)?[ .-]\d{3}[.-]\d{4}(?![\w-]|[.,]\d)")               # (555) 123-4567, 555-123-4567
PHONE_CONTEXT = re.compile(r"(?i)(?<!\w)(?:tel\.?|telefon\w*|phone\w*|mobil\w*|cell|handy\w*|call|calling|anrufen|"
                           r"ruf\w*|rückruf\w*|fax|whatsapp|sms|text me|erreich\w*|reach me|hotline|durchwahl|"
                           r"kontakt\w*|contact)(?!\w)")
_PHONE_WINDOW = (60, 30)  # characters before and after a candidate in which a phone word must stand
IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,4})?(?![A-Za-z0-9])")
_CAP = r"[A-ZÄÖÜ][a-zäöüßé]+(?:-[A-ZÄÖÜ][a-zäöüßé]+)?"
_TITLE = r"(?:Herrn?|Frau|Mr\.?|Mrs\.?|Ms\.?|Dr\.|Prof\.)"
# Name evidence on its own: a self-introduction, a signature, a salutation, a sign-off
NAME = re.compile(
    rf"(?<![\w-])(?:(?i:my name is|mein name ist|ich heiße|ich heisse|hier spricht|signed|gez\.)\s+({_CAP}(?:\s+{_CAP})?)"
    rf"|(?i:dear|sehr geehrte[rn]?|liebe[rn]?|hallo|hello|hi|guten tag)\s+{_TITLE}\s+({_CAP}(?:\s+{_CAP})?)"
    rf"|(?i:regards|grüße|grüßen|gruß|cheers|best),?\s*\n\s*({_CAP}\s+{_CAP}))")
# A title and a name: personal data only next to contact data (in a word problem "Mr. Bert" is nobody's data)
TITLED = re.compile(rf"(?<![\w-]){_TITLE}\s+({_CAP}(?:\s+{_CAP})?)")
# What the names patterns must not take for a name
_NOT_NAMES = {"Doktor", "Professor", "Kollege", "Kollegin", "Kunde", "Kundin", "Nachbar", "Nachbarin", "Sie", "Ihnen",
              "Sir", "Madam", "Herr", "Frau", "The", "Der", "Die", "Das"}
# Nationality, language and religion words after a cue are no person ("signed English", "Hi Mr. German")
_NATIONALITIES = re.compile(
    r"^(?:Deutsch\w*|Englisch\w*|English|Französisch\w*|French|Italienisch\w*|Italian|Spanisch\w*|Spanish|"
    r"Amerikan\w*|American|Britisch\w*|British|Russisch\w*|Russian|Chinesisch\w*|Chinese|Japanisch\w*|Japanese|"
    r"Türkisch\w*|Turkish|Polnisch\w*|Polish|Niederländisch\w*|Dutch|Österreich\w*|Austrian|Schweizer\w*|Swiss|"
    r"Griechisch\w*|Greek|Portugiesisch\w*|Portuguese|Arabisch\w*|Arabic|Arab|Indisch\w*|Indian|Koreanisch\w*|"
    r"Korean|Schwedisch\w*|Swedish|Norwegisch\w*|Norwegian|Dänisch\w*|Danish|Finnisch\w*|Finnish|Irisch\w*|Irish|"
    r"Mexikan\w*|Mexican|Brasilian\w*|Brazilian|Kanad\w*|Canadian|Australi\w*|European|Europäisch\w*|German|"
    r"Africa\w*|Afrikan\w*|Asian|Asiatisch\w*|Latin\w*|Hispanic|Jewish|Jüdisch\w*|Muslim\w*|Christian|Christlich\w*)$")
_EXCLUDE = [re.compile(p) for p in (
    r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?:/\d{1,2})?(?![\w.])",        # IPv4 and CIDR
    r"(?<![\w.])\d{4}-\d{1,2}-\d{1,2}(?!\w)",                           # ISO dates
    r"(?<![\w.])\d{1,2}\.\s?\d{1,2}\.\s?\d{2,4}(?!\w)",                 # dotted dates
    r"(?<!\w)(?:19|20)\d{2}/\d{1,5}(?:/[A-Z]{2,7})?(?!\w)",             # directive numbers
    r"(?i)(?<!\w)(?:DIN|EN|ISO|IEC|VDI|RFC)(?:\s+(?:EN|ISO|V))*[\s-]*\d+(?:[-:./]\d+)*",
    r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,4})?(?![A-Za-z0-9])",  # IBAN-shaped
)]

# the patterns every text meets, behind one Hyperscan pass per text (validators/prefilter.py: the same answers)
_PREFILTER = PatternSet()
PHONE, IBAN, NAME, TITLED = (_PREFILTER.add(rx) for rx in (PHONE, IBAN, NAME, TITLED))

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
    if any(map(str.isdigit, text)):
        for m in PHONE.finditer(text):
            span, cand = m.span(), m.group(0)
            digits = sum(ch.isdigit() for ch in cand)
            if not 7 <= digits <= 15:
                continue
            if excluded is None:
                excluded = _excluded_spans(text)
            if _overlaps(span, excluded) or _overlaps(span, [(f.start, f.end) for f in out]):
                continue
            before, after = _PHONE_WINDOW
            if not PHONE_CONTEXT.search(text, max(0, span[0] - before), span[1] + after):
                continue
            out.append(Finding("PII002", *span, cand))
    names = list(NAME.finditer(text))
    if out:  # contact data in the text: a titled name belongs to it
        names += TITLED.finditer(text)
    seen = set()
    for m in names:
        name = next(g for g in m.groups() if g)
        first = name.split()[0]
        if first in _NOT_NAMES or _NATIONALITIES.match(first):
            continue
        start = m.start() + m.group(0).rfind(name)
        if start in seen:
            continue
        seen.add(start)
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
    """Write a redacted copy of a JSONL (or JSON array) file; rows that are not JSON, or hold a lone surrogate (no
    UTF-8 form exists for one; validation named the row), are left out. Returns (rows written, rows changed)."""
    import json
    from pathlib import Path

    data = Path(src).read_bytes()
    if data.lstrip()[:1] == b"[":
        # kept by the reader so that one such row does not lose the file; left out here (a JSONL line with one is not
        # JSON to jsontext.loads, so it never reaches the rows)
        rows = [row for row in jsontext.loads(data.decode("utf-8"), keep_lone_surrogates=True)
                if jsontext.lone_surrogate_in(row) is None]
    else:
        rows = []
        for line in data.split(b"\n"):
            if line.strip():
                try:
                    rows.append(jsontext.loads(line.decode("utf-8")))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    continue
    out, changed = [], 0
    for row in rows:
        red = redact_value(row)
        changed += red != row
        out.append(json.dumps(red, ensure_ascii=False))
    write_file_atomic(Path(dst), ("\n".join(out) + "\n").encode("utf-8"))
    return len(out), changed
