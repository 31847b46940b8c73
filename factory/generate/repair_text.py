"""The user turn that asks the teacher to repair its answer: each reject verdict in plain words, its code and
its detail, in the request's language (English and German; any other language gets English).

The plain words are the code registry's meaning (``factory.codes``); German ones are kept here for the codes a
repair section may name. The detail is the checker's own line, as stored with the verdict.
"""

from __future__ import annotations

from typing import Sequence

from mashbill.factory.codes import describe
from mashbill.factory.records import Verdict

FRAME = {
    "en": ("Your answer was rejected (repair {n} of {of}). Fix every problem below and answer again with the "
           "complete corrected JSON, nothing else.", "Problems:"),
    "de": ("Deine Antwort wurde abgelehnt (Korrektur {n} von {of}). Behebe jedes Problem unten und antworte erneut "
           "nur mit dem vollständigen, korrigierten JSON.", "Probleme:"),
}

# `repair.mode: restart`: the request is asked afresh, its rejected answer not shown, the verdicts beside it
RESTART_FRAME = {
    "en": ("An earlier answer to this request was rejected (repair {n} of {of}). Answer the request again with the "
           "complete JSON, nothing else, and avoid every problem below.", "Problems of the earlier answer:"),
    "de": ("Eine frühere Antwort auf diese Anfrage wurde abgelehnt (Korrektur {n} von {of}). Beantworte die Anfrage "
           "erneut nur mit dem vollständigen JSON und vermeide jedes Problem unten.",
           "Probleme der früheren Antwort:"),
}

MEANING_DE = {
    "PARSE001": "die Ausgabe ist kein JSON",
    "PARSE002": "die Ausgabe ist leer",
    "TRUNC001": "die Ausgabe brach am Token-Limit ab, bevor sie fertig war",
    "SCHEMA001": "die Ausgabe passt nicht zum Ausgabeschema",
    "PLAN001": "der Plan hat zu wenige oder zu viele Aufgaben (oder ist kein Plan)",
    "PLAN002": "eine Aufgabe ist kein Objekt mit Aufgabentext und Kategorie",
    "PLAN003": "eine Kategorie stand nicht in der gezeigten Taxonomie",
    "PLAN004": "eine Rechercheaufgabe hat keine search_query",
    "PLAN005": "eine dynamische Aufgabe hat keine domain",
    "PLAN006": "eine precision_tools-Aufgabe nennt kein oder ein unbekanntes Werkzeug",
    "PLAN007": "die mcp_args eines Präzisionswerkzeugs passen nicht zu seinem Argumentschema",
    "PLAN008": "doppelte Aufgaben-IDs, ein depends_on ohne Aufgabe oder ein Abhängigkeitszyklus",
    "PLAN009": "die search_query einer Rechercheaufgabe ist ein zusammengeschriebener Bezeichner",
    "PLAN010": "zwei Aufgaben des Plans haben denselben Text",
    "PLAN011": "der Text einer Aufgabe ist abgeschnitten",
    "PLAN012": "eine Aufgabe, die nicht precision_tools ist, trägt mcp_tool oder mcp_args",
    "HR001": "PRÄZISION ZUERST: eine exakte Berechnung braucht eine precision_tools-Aufgabe",
    "HR002": "die Präzisionsaufgabe nutzt ein Werkzeug, das nicht zur Anfrage passt",
    "HR003": "ein zitierter § deutschen Rechts wird nicht mit legal_get_paragraph geholt",
    "HR004": "die legal_advisor-Aufgabe fehlt oder steht vor dem Abruf",
    "HR006": "die Umsetzung eines bekannten Spiels/Algorithmus/Formats hat keine Recherche- oder Code-Aufgabe",
    "HR009": "ein Werkzeugaufruf bei einer Anfrage, die keine Berechnung verlangt, ohne ein Argument aus der Anfrage",
    "FIT001": "eine eindeutige Bitte um kreatives Schreiben hat keine creative_writer-Aufgabe",
    "FIT002": "eine eindeutige Übersetzungsbitte hat keine translation-Aufgabe",
    "FIT003": "eine Frage zu einem früheren Gesprächszug hat keine memory_recall-Aufgabe",
    "FIT004": "eine Anfrage braucht eindeutig eine gezeigte Kategorie, die keine Aufgabe hat",
    "ARG001": "ein Argument eines Präzisionswerkzeugs enthält eine Zahl, die nicht in der Anfrage steht",
    "ARG002": "der Ausdruck berechnet nicht, was die Anfrage verlangt (eine Rechenart fehlt)",
    "ARG003": "die Einheiten oder Daten sind nicht die der Anfrage",
    "ARG004": "der Ausdruck eines Präzisionswerkzeugs ist nicht lesbar",
    "COPY001": "der Plan gibt ein Beispiel aus dem Prompt wieder, nicht die Anfrage",
    "COPY002": "eine Aufgabe wiederholt die Anweisungen des Prompts, nicht die Anfrage",
    "COPY003": "eine Aufgabe schreibt die Anfrage ab, aber eines ihrer Wörter als ein anderes",
    "DRIFT001": "eine Aufgabe hat nichts mit der Anfrage gemein",
    "CPLX001": "eine Frage nach einem früheren Gesprächszug ist nicht als memory_recall eingestuft",
    "CPLX002": "eine interne Hilfsanfrage (Titel, Themenprüfung) ist nicht als trivial eingestuft",
    "CPLX003": "eine Anfrage mit 80 oder mehr Wörtern ist als trivial eingestuft",
    "CPLX004": "memory_recall ohne Rückbezug und ohne Verlauf",
    "CPLX005": "eine kurze Faktenfrage oder ein Gruß ist als complex eingestuft",
    "CPLX007": "complex ohne Hinweis auf Komplexität (eine kurze Einzelaufgabe)",
    "CPLX008": "trivial bei einer Anfrage, die Arbeit verlangt (Rechnung, Code, Text, Anleitung)",
    "CPLX009": "moderate bei langer Eingabe (complex) oder kurzer Faktenfrage ohne Arbeit (trivial)",
}


def meaning(code: str, lang: str | None) -> str:
    if lang == "de" and code in MEANING_DE:
        return MEANING_DE[code]
    c = describe(code)
    return c.meaning if c is not None else code


def feedback(verdicts: Sequence[Verdict], lang: str | None, n: int, of: int, restart: bool = False) -> str:
    """The repair turn for repair `n` of `of`: every reject verdict, as `- CODE (meaning): detail`; with `restart`,
    the words that follow the request asked afresh, each verdict as `- meaning: detail`."""
    frames = RESTART_FRAME if restart else FRAME
    head, problems = frames.get(lang or "en", frames["en"])
    lines = [head.format(n=n, of=of), problems]
    for v in verdicts:
        if v.severity == "reject":
            # restart: plain words only; the 135M teacher asked afresh writes a code it is shown as a task text
            said = meaning(v.code, lang) if restart else f"{v.code} ({meaning(v.code, lang)})"
            lines.append(f"- {said}" + (f": {v.detail}" if v.detail else ""))
    return "\n".join(lines)
