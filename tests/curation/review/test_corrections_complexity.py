"""A reviewer's correction of a complexity label is checked by the same complexity rules as generation (review pull
reports an invalid correction and does not use it)."""

from __future__ import annotations

import json

from mashbill.curation.review.corrections import CorrectionValidator
from mashbill.factory.records import Record, SpecRef
from mashbill.specs import find_spec, load_spec


def _record(rs, query: str, label: str) -> Record:
    return Record("r1", "complexity", {"query": query, "lang": "de"}, {"complexity": label}, None,
                  SpecRef(rs.spec.name, rs.spec.version, rs.hash), "accepted", ())


def test_a_correction_that_breaks_a_complexity_rule_is_invalid():
    rs = load_spec(find_spec("quickstart-complexity"))
    check = CorrectionValidator(rs)
    rec = _record(rs, "Weißt du noch, welche IP-Adresse ich dir vorhin genannt habe?", "memory_recall")
    bad = check.check(rec, json.dumps({"complexity": "complex"}))
    assert bad.given and bad.valid is False and "CPLX001" in {i["code"] for i in bad.issues}
    rec = _record(rs, "Weißt du noch, welche IP-Adresse ich dir vorhin genannt habe?", "complex")
    good = check.check(rec, json.dumps({"complexity": "memory_recall"}))
    assert good.given and good.valid is True and not good.issues
