"""Real query corpora as seeds: JSONL, JSON, CSV, TSV without a header, Parquet and a local Hugging Face dataset, with
source and licence per query; bad corpora (missing columns, mixed encodings, empty rows) are named by file and row.

The realistic files are the shared queries-dev corpora (MGSM German TSV, GSM8K JSONL) where this checkout has
them beside it; small files written here cover every format everywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from mashbill.errors import SpecError
from mashbill.specs import load_spec

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / "specs" / "library" / "shared"
DEV = next((p / "data" / "queries-dev" for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared")
            if (p / "data" / "queries-dev").is_dir()), None)


def _spec(tmp_path: Path, seeds: list[dict]) -> Path:
    spec = {"name": "corpus", "version": 1, "kind": "routing", "seeds": seeds,
            "prompt": {"file": str(SHARED / "prompts" / "routing@1.yaml"),
                       "teacher": {"system": "Route it.", "user": "{{ query }}"},
                       "training": {"system": "Route it.", "user": "{{ query }}"}},
            "output_schema": str(SHARED / "schemas" / "routing@1.json")}
    path = tmp_path / "corpus@1.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def test_every_format_with_source_and_licence(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"q": "Wie spät ist es in Tokio?", "l": "de"}\n\n'
                                      '{"q": "What is 2+2?", "l": "en"}\n', encoding="utf-8")
    (tmp_path / "b.csv").write_text('question,lang,licence\n"Convert 5 miles to km, please",en,MIT\n',
                                    encoding="utf-8")
    (tmp_path / "c.tsv").write_text('Wie viel ist 3 "mal" 4?\t12\n', encoding="utf-8")
    pq.write_table(pa.table({"text": ["Translate 'hello' into German"], "lang": ["en"]}), tmp_path / "d.parquet")
    from datasets import Dataset

    Dataset.from_dict({"prompt": ["Summarise the plot of Faust."], "lang": ["en"]}).save_to_disk(tmp_path / "e")
    (tmp_path / "f.json").write_text('[{"query": "Wie weit ist es nach Graz?", "lang": "de"}]', encoding="utf-8")
    rs = load_spec(_spec(tmp_path, [
        {"path": "a.jsonl", "columns": {"query": "q", "lang": "l"}, "source": "mine", "licence": "CC0-1.0"},
        {"path": "b.csv", "columns": {"query": "question", "lang": "lang", "licence": "licence"}, "source": "b"},
        {"path": "c.tsv", "header": False, "columns": {"query": "0"}, "source": "mgsm-like", "licence": "CC-BY-4.0"},
        {"path": "d.parquet", "columns": {"query": "text", "lang": "lang"}},
        {"path": "e", "format": "hf", "columns": {"query": "prompt"}, "source": "hf", "licence": "Apache-2.0"},
        {"path": "f.json", "source": "a JSON list"},
    ]))
    assert [(s["query"], s.get("source"), s.get("licence")) for s in rs.seeds] == [
        ("Wie spät ist es in Tokio?", "mine", "CC0-1.0"), ("What is 2+2?", "mine", "CC0-1.0"),
        ("Convert 5 miles to km, please", "b", "MIT"), ('Wie viel ist 3 "mal" 4?', "mgsm-like", "CC-BY-4.0"),
        ("Translate 'hello' into German", None, None), ("Summarise the plot of Faust.", "hf", "Apache-2.0"),
        ("Wie weit ist es nach Graz?", "a JSON list", None)]
    assert set(rs.files) >= {f"seeds.{i}" for i in range(6)}  # every corpus is part of the hash


@pytest.mark.skipif(DEV is None, reason="the shared queries-dev corpora are not beside this checkout")
def test_the_shared_queries_dev_corpora(tmp_path):
    rs = load_spec(_spec(tmp_path, [
        {"path": str(DEV / "mgsm" / "mgsm_de.tsv"), "header": False, "columns": {"query": "0"},
         "source": "mgsm (google-research/url-nlp)", "licence": "CC-BY-4.0"},
        {"path": str(DEV / "gsm8k" / "test.jsonl"), "columns": {"query": "question"}, "limit": 50,
         "source": "gsm8k (openai/grade-school-math)", "licence": "MIT"}]))
    lines = [ln.split("\t")[0] for ln in (DEV / "mgsm" / "mgsm_de.tsv").read_text(encoding="utf-8").splitlines()
             if ln.strip()]
    mgsm = [s["query"] for s in rs.seeds if s["licence"] == "CC-BY-4.0"]
    assert mgsm == lines and len(rs.seeds) == len(lines) + 50  # one query per line, quotes kept as text
    assert all(s["query"].strip() for s in rs.seeds)


@pytest.mark.parametrize("content, message, row", [
    (b'{"q": "fine"}\n{"x": "no query column"}\n', "seed row 2 lacks column(s) ['q']", 2),
    (b'{"q": "fine"}\n{"q": "caf\xe9 latin-1"}\n', "row is not UTF-8", 2),
    (b'{"q": "fine"}\n{"q": ""}\n', "seed row 2 has no non-empty 'query'", 2),
    (b'{"q": "fine"}\n\n{"q": "  "}\n', "seed row 2 has no non-empty 'query'", 3),  # the file line, past a blank one
])
def test_bad_corpora_are_named_by_file_and_row(tmp_path, content, message, row):
    (tmp_path / "bad.jsonl").write_bytes(content)
    with pytest.raises(SpecError) as exc:
        load_spec(_spec(tmp_path, [{"path": "bad.jsonl", "columns": {"query": "q"}}]))
    assert message in str(exc.value) and f"bad.jsonl:{row}:" in str(exc.value)
    assert exc.value.line == row


@pytest.mark.parametrize("content, message, line", [
    (b"query,lang\nfine one,en\n,en\n", "seed row 2 has no non-empty 'query'", 3),
    (b"query,lang\nfine one,en\nonly a query\n", "row has 1 cells, the header 2", 3),  # a short row
    (b"query,lang\nfine one,en\nsome,en,extra\n", "row has 3 cells, the header 2", 3),
])
def test_bad_csv_rows_are_named_by_file_and_line(tmp_path, content, message, line):
    (tmp_path / "bad.csv").write_bytes(content)
    with pytest.raises(SpecError) as exc:
        load_spec(_spec(tmp_path, [{"path": "bad.csv", "columns": {"query": "query", "lang": "lang"}}]))
    assert message in str(exc.value) and f"bad.csv:{line}:" in str(exc.value)


def test_generate_names_a_bad_corpus_in_one_line(tmp_path):
    from tests.cli.conftest import error_lines, invoke

    (tmp_path / "bad.tsv").write_bytes(b"Wie viel ist 3 mal 4?\t12\n\t7\n")
    spec = _spec(tmp_path, [{"path": "bad.tsv", "header": False, "columns": {"query": "0"}}])
    res = invoke("generate", spec, "--store", tmp_path / "s", "--allow-unlocked", "--no-progress")
    assert res.exit_code == 2 and len(error_lines(res)) == 1, res.output
    assert "bad.tsv:2:" in res.stderr and "seed row 2 has no non-empty 'query'" in res.stderr
    assert not (tmp_path / "s").exists()


def test_a_csv_row_with_a_byte_that_is_not_utf8_is_named(tmp_path):
    (tmp_path / "bad.csv").write_bytes(b"query\nfine\ncaf\xe9\n")
    with pytest.raises(SpecError, match=r"bad.csv:3: row is not UTF-8"):
        load_spec(_spec(tmp_path, [{"path": "bad.csv"}]))


def test_a_spec_loaded_without_its_seed_rows_has_the_same_hash_and_reads_no_row(tmp_path):
    """`load_spec(seed_rows=False)` (the freeze's) hashes the seed files it does not read: the same hash and files, no
    rows from them; a changed seed file still changes the hash; a file it would refuse is not read at all."""
    from mashbill.specs import find_spec

    (tmp_path / "a.jsonl").write_text('{"q": "Wie spät ist es in Tokio?"}\n{"q": "What is 2+2?"}\n', encoding="utf-8")
    path = _spec(tmp_path, [{"path": "a.jsonl", "columns": {"query": "q"}}, {"inline": [{"query": "Hi there"}]}])
    for p, kept in ((path, ({"query": "Hi there"},)), (find_spec("quickstart-plan"), ())):  # inline rows are the spec's
        full, lean = load_spec(p), load_spec(p, seed_rows=False)
        assert lean.hash == full.hash and lean.files == full.files and lean.file_paths == full.file_paths
        assert len(full.seeds) > len(kept) and lean.seeds == kept
    before = load_spec(path, seed_rows=False).hash
    (tmp_path / "a.jsonl").write_text('{"q": "What is 3+3?"}\n', encoding="utf-8")
    assert load_spec(path, seed_rows=False).hash != before
    (tmp_path / "a.jsonl").write_bytes(b'{"q": "caf\xe9"}\n')  # not UTF-8: load_spec names the row, this never reads it
    with pytest.raises(SpecError):
        load_spec(path)
    assert load_spec(path, seed_rows=False).hash
