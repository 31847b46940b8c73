"""The query encoder (real all-MiniLM-L6-v2 through onnxruntime) and the embedding cache keyed by revision."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from mashbill.factory.encoders.embeddings import REVISION_KEY, EmbeddingCache, Encoder, default_encoder_dir

TEXTS = {"bread": "How do I bake sourdough bread at home?",
         "bread2": "A simple recipe for baking bread",
         "quantum": "Explain quantum entanglement to a physicist",
         "tax": "Wie viel sind 19 % Mehrwertsteuer auf 1.249 Euro?"}


@pytest.fixture
def encoder(minilm):
    return minilm


def test_minilm_embeddings_are_unit_vectors_and_semantic(encoder):
    vecs = encoder.encode(list(TEXTS.values()))
    assert vecs.shape == (4, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    sim = vecs @ vecs.T
    assert sim[0, 1] > 0.5 > sim[0, 2]  # two bread questions are close, bread and quantum physics are not
    # batching and padding do not change a text's vector
    alone = encoder.encode([TEXTS["quantum"]])
    assert np.abs(alone[0] - vecs[2]).max() < 1e-5


def test_matches_vectors_made_by_transformers_and_torch(encoder):
    # made by tests/factory/make_minilm_golden.py with the reference implementation (not with our code)
    golden = json.loads((Path(__file__).parents[1] / "fixtures" / "minilm-golden.json").read_text(encoding="utf-8"))
    ours = encoder.encode(golden["texts"])
    assert np.abs(ours - np.array(golden["vectors"], np.float32)).max() < 1e-5


def test_parity_with_transformers_when_torch_is_installed(encoder):
    torch = pytest.importorskip("torch")
    from transformers import AutoModel, AutoTokenizer

    folder = str(default_encoder_dir())
    tok, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    batch = tok(list(TEXTS.values()), padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        h = model(**batch).last_hidden_state
    m = batch["attention_mask"].unsqueeze(-1).float()
    ref = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=1).numpy()
    assert np.abs(encoder.encode(list(TEXTS.values())) - ref).max() < 1e-4


def test_cache_computes_each_query_once_per_revision(encoder, tmp_path):
    cache = EmbeddingCache(tmp_path / "emb")
    first = cache.get(encoder, dict(list(TEXTS.items())[:2]))
    assert (first.hits, first.computed) == (0, 2)
    second = cache.get(encoder, TEXTS)
    assert (second.hits, second.computed) == (2, 2)
    assert np.array_equal(second.matrix[:2], first.matrix)
    third = cache.get(encoder, TEXTS)
    assert (third.hits, third.computed, third.hit_rate) == (4, 0, 1.0)
    files = list((tmp_path / "emb" / encoder.revision).glob("part-*.parquet"))
    assert len(files) == 2 and sum(pq.read_metadata(f).num_rows for f in files) == 4


def test_changed_encoder_revision_never_reuses_stale_vectors(encoder, tmp_path):
    # a local encoder folder: the same model with a different max length is a different revision
    local = tmp_path / "enc"
    shutil.copytree(default_encoder_dir(), local)
    (local / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 8}), encoding="utf-8")
    other = Encoder.load(local, build_dir=tmp_path / "built")
    assert other.revision != encoder.revision
    cache = EmbeddingCache(tmp_path / "emb")
    cache.get(encoder, TEXTS)
    got = cache.get(other, TEXTS)
    assert got.computed == 4 and got.hits == 0  # nothing taken from the other revision's folder
    # a file of one revision copied into another revision's folder is named (EMB001), skipped and recomputed
    stray = next((tmp_path / "emb" / encoder.revision).glob("part-*.parquet"))
    shutil.copy(stray, tmp_path / "emb" / other.revision / "part-stray.parquet")
    again = cache.get(other, TEXTS)
    assert again.hits == 4 and len(again.problems) == 1
    assert "EMB001" in again.problems[0] and "part-stray.parquet" in again.problems[0]
    assert pq.read_schema(stray).metadata[REVISION_KEY].decode() == encoder.revision


def test_local_onnx_encoder_by_path(encoder, tmp_path):
    local = tmp_path / "onnx-enc"
    local.mkdir()
    shutil.copy(encoder.onnx_path, local / "model.onnx")
    shutil.copy(default_encoder_dir() / "tokenizer.json", local / "tokenizer.json")
    enc = Encoder.load(local)
    assert enc.revision != encoder.revision and enc.dims == 384
    assert np.abs(enc.encode([TEXTS["tax"]]) - encoder.encode([TEXTS["tax"]])).max() < 1e-6


def test_two_processes_building_one_cached_graph_at_once_both_succeed(monkeypatch, tmp_path):
    """Two test workers (or shards) that find the encoder cache empty build it at once: the second writer lands
    between the first's write and rename. With one fixed temp name the first rename found no file (the first
    suite run on a fresh machine stopped at collection); each writer must rename its own."""
    import os

    from mashbill.factory.encoders.onnx_bert import build_bert_onnx

    folder, out = default_encoder_dir(), tmp_path / "rev" / "model.onnx"
    real_replace, nested = os.replace, []

    def replace_after_another_writer(src, dst):
        if not nested:  # the other process writes and publishes first
            nested.append(True)
            build_bert_onnx(folder, out)
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_after_another_writer)
    assert build_bert_onnx(folder, out) == out
    monkeypatch.setattr(os, "replace", real_replace)
    assert nested and out.is_file() and sorted(p.name for p in out.parent.iterdir()) == ["model.onnx"]
    import onnxruntime as ort  # and what was published is a whole graph

    assert ort.InferenceSession(str(out)).get_outputs()[0].name == "embedding"
