"""Personal data in obvious forms, and what must not be flagged."""

from __future__ import annotations

import pytest

from mashbill.validators.data.pii import find_pii, iban_valid, pii_verdicts, redact


@pytest.mark.parametrize("text,code,found", [
    ("Schreib an max.mustermann@example.de zurück.", "PII001", "max.mustermann@example.de"),
    ("Meine Telefonnummer ist 0171-2345678, ruf mich an.", "PII002", "0171-2345678"),
    ("Call me at +49 30 1234567 tomorrow.", "PII002", "+49 30 1234567"),
    ("Call 555-123-4567 after five.", "PII002", "555-123-4567"),
    ("Tel. 030/1234567.", "PII002", "030/1234567"),
    ("Überweise auf DE89 3704 0044 0532 0130 00 bitte.", "PII003", "DE89 3704 0044 0532 0130 00"),
    ("Mein Name ist Anna Schmidt und ich wohne in Köln.", "PII004", "Anna Schmidt"),
    ("Hi, my name is John Miller.", "PII004", "John Miller"),
    ("Sehr geehrte Frau Müller, anbei die Unterlagen.", "PII004", "Müller"),
])
def test_flagged(text, code, found):
    hits = [(f.code, f.text) for f in find_pii(text)]
    assert (code, found) in hits, hits


@pytest.mark.parametrize("text", [
    "What is the broadcast address of 192.168.1.0/24?",
    "Wie viele Hosts hat das Netz 10.20.30.0/26 und welche ist die erste Adresse 10.20.30.1?",
    "Was ist 1234 - 5678?",
    "Berechne 0171 * 3 + 4.",
    "What is 2024 * 365 + 12345678?",
    "Welcher Wochentag war der 15.07.2024?",
    "Wie viele Tage liegen zwischen 2024-03-01 und 2024-12-24?",
    "Welche Pflichten stehen in der Richtlinie 2001/83/EG?",
    "Der Heizwärmebedarf nach DIN V 4108-6 beträgt 12345 kWh.",
    "Überweise auf DE89 3704 0044 0532 0130 01 bitte.",  # fails the IBAN checksum
    "Explain how Dijkstra's algorithm works.",
])
def test_not_flagged(text):
    assert find_pii(text) == []


def test_iban_checksum():
    assert iban_valid("GB82 WEST 1234 5698 7654 32")
    assert not iban_valid("GB82 WEST 1234 5698 7654 33")


def test_redact_and_verdicts():
    text = "Mail max@example.org oder ruf 0171-2345678 an, Frau Weber."
    assert redact(text) == "Mail [EMAIL] oder ruf [PHONE] an, Frau [NAME]."
    vs = pii_verdicts({"query": text, "target": "[]"})
    assert sorted(v.code for v in vs) == ["PII001", "PII002", "PII004"]
    assert all(v.severity == "flag" and v.stage == "validate" for v in vs)
    assert all("max@example.org" not in v.detail for v in vs)  # reports do not copy the data


def test_redacted_copy_via_cli(tmp_path):
    import json

    from click.testing import CliRunner

    from mashbill.cli import main

    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"messages": [{"role": "user", "content": "Ich bin erreichbar unter 0171-2345678."},
                                            {"role": "assistant", "content": "Notiert."}]}) + "\n"
                   + json.dumps({"messages": [{"role": "user", "content": "Subnetz 10.0.0.0/8?"},
                                              {"role": "assistant", "content": "[]"}]}) + "\n", encoding="utf-8")
    out = tmp_path / "clean.jsonl"
    # --no-rules: this checks redaction; file mode now also applies the routing rules (an empty plan is a finding)
    res = CliRunner().invoke(main, ["validate", str(src), "--format", "messages", "--no-spans", "--no-expectations",
                                    "--no-rules", "--redact-to", str(out), "-q"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert rows[0]["messages"][0]["content"] == "Ich bin erreichbar unter [PHONE]."
    assert rows[1]["messages"][0]["content"] == "Subnetz 10.0.0.0/8?"
    assert "PII002" in res.output


@pytest.mark.parametrize("text", [
    "Who designed Salamanca?",  # "signed" inside a word is no cue
    "The cosigned Loan Agreement was filed.",
    "Mr. Bert gives six tests each semester. How many tests does he give in 3 years?",  # a title in a word problem
    "Dr. Jones, a clinical psychologist, has been seeing Lisa in therapy for one month.",
    "Hi Mr. German, what does this mean?",  # a nationality word is no name
    "The drug code is 0123-4567890 on the label.",  # no phone word next to the digits
    "Spec number 0421 555 1234 defines the connector.",
    "This is America.",
])
def test_public_query_shapes_not_flagged(text):
    assert find_pii(text) == []


def test_titled_name_is_personal_data_next_to_contact_data():
    hits = [(f.code, f.text) for f in find_pii("Please call Mr. Weber back at 030 1234567.")]
    assert ("PII004", "Weber") in hits and ("PII002", "030 1234567") in hits


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_a_redacted_copy_leaves_out_a_row_with_a_lone_surrogate(tmp_path, suffix):
    """Validation names such a row (FMT001); its redacted copy cannot hold it (no UTF-8 form exists), nor crash."""
    import json

    from click.testing import CliRunner

    from mashbill.cli import main

    good = {"instruction": "Ruf 0171-2345678 an.", "output": "Notiert."}
    texts = [json.dumps(good), '{"instruction": "x \\ud800", "output": "y"}', json.dumps(good)]
    src = tmp_path / f"d{suffix}"
    src.write_text("\n".join(texts) + "\n" if suffix == ".jsonl" else "[" + ",\n".join(texts) + "]", encoding="utf-8")
    out = tmp_path / "clean.jsonl"
    res = CliRunner().invoke(main, ["validate", str(src), "--format", "alpaca", "--no-spans", "--no-expectations",
                                    "--no-rules", "--redact-to", str(out)])
    assert res.exit_code == 1 and "FMT001" in res.output and f"d{suffix}:2" in res.output, res.output
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert rows == [{"instruction": "Ruf [PHONE] an.", "output": "Notiert."}] * 2
