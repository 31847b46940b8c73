"""Retrieved examples: the k verified bank rows nearest to a request, shown to the teacher in place of a fixed example.

A spec's ``examples: {bank, k}`` section (specs.examples) names a bank of verified examples. At generate time the
bank is embedded once per run with the MiniLM encoder the router cache uses (``factory.encoders.embeddings``; the
vectors go to the store's embedding cache, keyed by the text's hash, so a later run reads them back), each request
is embedded, and the k rows with the highest cosine similarity are rendered into ``{{ retrieved_examples }}``
(nearest last: the 135M teacher follows the last example most), ties broken by row id.

Never shown:

- the request itself: a row with the same normalized query text, or whose ``record_id`` is the request's record id;
- a row whose ``split`` is not ``train`` (eval, test, held-out);
- a row whose query is in the spec's holdout set (its ``holdout`` files): equal after normalization, one containing
  the other (at least 12 characters and half the other's length, as the leakage check counts a benchmark query
  with words added), or character 5-gram Jaccard at or above 0.8.

The record stores what it was shown (``meta.examples``: the bank file's name, its sha256 and the row ids, in the
order shown), so ``rebuild_prompt`` renders the same prompt again from the record alone, without the encoder.
"""

from __future__ import annotations

from pathlib import Path

from mashbill.errors import MashbillError
from mashbill.hashing import sha256_text
from mashbill.specs.examples import SHOWN_SPLITS
from mashbill.specs.holdout import MIN_CONTAINED, MIN_SHARE, normalize, read_holdout
from mashbill.specs.prompting import render_prompt

HOLDOUT_JACCARD = 0.8


def _grams(text: str, n: int = 5) -> set[str]:
    return {text[i:i + n] for i in range(max(1, len(text) - n + 1))}


def holdout_texts(rs) -> list[str]:
    """Normalized queries of the spec's holdout files, read as the leakage check reads them."""
    return [normalize(item.text) for role, path in sorted(rs.file_paths.items()) if role.startswith("holdout.")
            for item in read_holdout(path)]


def is_held_out(query: str, holdout: list[str]) -> bool:
    """The leakage check's three tests (equal, contained, near by 5-gram Jaccard) against normalized holdout texts."""
    q = normalize(query)
    if not q:
        return False
    qs, qg = q.replace(" ", ""), _grams(q)
    for h in holdout:
        if q == h:
            return True
        hs = h.replace(" ", "")
        short, long_ = (qs, hs) if len(qs) <= len(hs) else (hs, qs)
        if len(short) >= MIN_CONTAINED and len(short) >= MIN_SHARE * len(long_) and short in long_:
            return True
        hg = _grams(h)
        if len(qg & hg) / len(qg | hg) >= HOLDOUT_JACCARD:
            return True
    return False


class Retriever:
    """The k nearest shown-able bank rows of a spec's requests (one per run: the bank is embedded once)."""

    def __init__(self, rs, *, cache_root: str | Path | None = None, encoder=None):
        if rs.spec.examples is None:
            raise MashbillError(f"{rs.ref} has no examples section")
        self.rs = rs
        self.k = rs.spec.examples.k
        self.bank_path = rs.file_paths["examples.bank"]
        self.bank_sha256 = rs.files["examples.bank"]
        holdout = holdout_texts(rs)
        # rows that may ever be shown; the request itself is left out per request
        self.rows = [r for r in rs.bank if r.split in SHOWN_SPLITS and not is_held_out(r.query, holdout)]
        self._normalized = [normalize(r.query) for r in self.rows]  # once, not once per request
        self._encoder = encoder
        self._cache_root = Path(cache_root) if cache_root is not None else None
        self._matrix = None

    @property
    def encoder(self):
        if self._encoder is None:
            from mashbill.factory.encoders.embeddings import Encoder

            self._encoder = Encoder.load()
        return self._encoder

    def _vectors(self, texts: list[str], *, cached: bool = False):
        """Unit vectors of `texts`; `cached`: through the store's embedding cache (the bank: read back by later runs;
        a request is encoded directly, so the cache does not grow a file per request)."""
        import numpy as np

        if cached and self._cache_root is not None:
            from mashbill.factory.encoders.embeddings import EmbeddingCache

            ids = {f"text:{sha256_text(t)}": t for t in texts}
            got = EmbeddingCache(self._cache_root).get(self.encoder, ids)
            index = {q: i for i, q in enumerate(got.ids)}
            mat = got.matrix[[index[f"text:{sha256_text(t)}"] for t in texts]] if texts else got.matrix
        else:
            mat = self.encoder.encode(texts)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        return mat / np.maximum(norms, 1e-12)

    def bank_matrix(self):
        if self._matrix is None:
            self._matrix = self._vectors([r.query for r in self.rows], cached=True)
        return self._matrix

    def nearest(self, query: str, record_id: str | None = None) -> list:
        """The k rows nearest to `query` (most similar last), never the request itself."""
        if not self.rows:
            return []
        sims = self.bank_matrix() @ self._vectors([query])[0]
        own = normalize(query)
        keep = [i for i, r in enumerate(self.rows) if self._normalized[i] != own and r.record_id != record_id]
        top = sorted(keep, key=lambda i: (-float(sims[i]), self.rows[i].id))[: self.k]
        return [self.rows[i] for i in reversed(top)]

    def meta(self, rows) -> dict:
        return {"bank": self.bank_path.name, "bank_sha256": self.bank_sha256, "ids": [r.id for r in rows]}

    def prompt(self, inputs: dict, record_id: str, prompt_key: str | None = None):
        rows = self.nearest(str(inputs.get("query") or ""), record_id)
        return render_prompt(self.rs, inputs, prompt_key or record_id, examples=tuple(rows),
                             examples_meta=self.meta(rows))


def rebuild_prompt(rs, inputs: dict, prompt_key: str, meta: dict):
    """The prompt a record was shown, from its stored meta (``meta.examples``) and the spec; refuses a changed bank."""
    shown = (meta or {}).get("examples")
    if rs.spec.examples is None or shown is None:
        return render_prompt(rs, inputs, prompt_key)
    if shown.get("bank_sha256") != rs.files["examples.bank"]:
        raise MashbillError(f"the record was shown rows of bank {shown.get('bank')} sha256 "
                            f"{str(shown.get('bank_sha256'))[:12]}, the spec's bank is {rs.files['examples.bank'][:12]}")
    by_id = {r.id: r for r in rs.bank}
    missing = [i for i in shown.get("ids", []) if i not in by_id]
    if missing:
        raise MashbillError(f"bank rows {missing} are not in {rs.file_paths['examples.bank']}")
    return render_prompt(rs, inputs, prompt_key, examples=tuple(by_id[i] for i in shown["ids"]),
                         examples_meta=dict(shown))
