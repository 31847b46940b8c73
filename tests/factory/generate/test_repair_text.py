"""The repair turn's words: every code a repair section may name has German plain words, and the turn states each
reject verdict (code, meaning, detail) in the request's language."""

from __future__ import annotations

from mashbill.factory.codes import CODES, not_repairable
from mashbill.factory.generate.repair_text import MEANING_DE, feedback
from mashbill.factory.records import Verdict


def test_every_repairable_code_has_german_words_and_no_other_code_does():
    repairable = {c for c in CODES if not_repairable(c) is None}
    assert repairable == set(MEANING_DE)


def test_the_turn_states_every_reject_in_the_request_language_and_leaves_flags_out():
    vs = [Verdict("PLAN003", "reject", "category 'cooking' was not shown"), Verdict("CPLX006", "flag", "heuristic"),
          Verdict("ARG001", "reject", "calculate uses 1.5")]
    en, de, fr = feedback(vs, "en", 1, 3), feedback(vs, "de", 2, 3), feedback(vs, "fr", 1, 1)
    assert "repair 1 of 3" in en and "Korrektur 2 von 3" in de and "repair 1 of 1" in fr
    assert "- PLAN003 (a category was not in the taxonomy shown for this record): category 'cooking' was not shown" in en
    assert f"- ARG001 ({MEANING_DE['ARG001']}): calculate uses 1.5" in de
    assert "CPLX006" not in en + de


def test_a_restart_states_each_reject_in_plain_words_without_its_code():
    vs = [Verdict("PLAN003", "reject", "category 'cooking' was not shown"), Verdict("CPLX006", "flag", "heuristic")]
    en, de = feedback(vs, "en", 1, 1, restart=True), feedback(vs, "de", 1, 2, restart=True)
    assert en.startswith("An earlier answer to this request was rejected (repair 1 of 1)")
    assert "- a category was not in the taxonomy shown for this record: category 'cooking' was not shown" in en
    assert de.startswith("Eine frühere Antwort auf diese Anfrage wurde abgelehnt (Korrektur 1 von 2)")
    assert f"- {MEANING_DE['PLAN003']}: category 'cooking' was not shown" in de
    assert "PLAN003" not in en + de and "CPLX006" not in en + de
