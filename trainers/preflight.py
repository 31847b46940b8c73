"""The preflight: seconds, no model load, and the first step of every train command.

It refuses a run that cannot learn what was validated, each refusal one line naming both values:
- the snapshot is missing or does not verify (every file re-hashed);
- the method does not fit the snapshot (DPO needs preference pairs, classify class labels);
- the run's tokenizer is not the one the snapshot was validated with;
- assistant-only or last-turn loss with a template that has no `{% generation %}` markers (TRL refuses it
  at step 0 on the cluster; we refuse it here), or a messages run whose template would train the wrong
  turn of a correction sample;
- a profile that differs from the manifest's (template, max_seq_len, truncation side, loss): then every
  record is re-checked under the run's values with the validators' fast span engine, and any cut target
  refuses the run (the reference lost 3 epochs to a 1,536 window that cut all 259,829 targets);
- a DeepSpeed JSON that deepspeed's own config model rejects, or whose optimizer or scheduler block would
  silently replace the training arguments' (trainers.deepspeed).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from mashbill.curation.snapshots.snapshot import SPLITS, SnapshotError, list_dirs, resolve_snapshot, verify
from mashbill.errors import MashbillError
from mashbill.trainers.config import TrainConfig

log = logging.getLogger(__name__)

PROFILE_FIELDS = ("max_seq_len", "truncation_side", "loss")
CUT_CODES = ("SPAN001", "SPAN002", "SPAN003", "SPAN005", "SPAN010")


class PreflightError(MashbillError):
    """The run would not learn what the snapshot holds; nothing was loaded or written."""


@dataclass
class Preflight:
    config: TrainConfig
    snapshot: Path
    manifest: dict
    profile: dict  # the effective trainer profile (manifest values, overridden by the config's)
    format: str  # messages | prompt-completion | preference | classification
    chat_template: str | None  # the template the trainer renders with
    rechecked: int = 0  # records re-checked with the span engine (0: the profile equals the manifest's)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    deepspeed_path: Path | None = None  # the validated DeepSpeed JSON (resolved against the config's folder)
    teacher_path: Path | None = None  # classify distill_from, resolved against the config's folder and checked

    @property
    def snapshot_ref(self) -> dict:
        m = self.manifest
        from mashbill.curation.snapshots.snapshot import MANIFEST
        from mashbill.hashing import sha256_file

        return {"name": m["name"], "version": m["version"], "id": m["snapshot_id"],
                "manifest_sha256": sha256_file(self.snapshot / MANIFEST), "path": str(self.snapshot.resolve())}


def find_snapshot(ref: str, store: str | Path) -> Path:
    """A snapshot folder from a path, NAME@VERSION or NAME under STORE/snapshots, or a snapshot id (or a
    unique prefix of at least 12 hex digits)."""
    root = Path(store) / "snapshots"
    try:
        return resolve_snapshot(ref, root)
    except SnapshotError:
        if len(ref) >= 12 and all(c in "0123456789abcdef" for c in ref):
            from mashbill.curation.snapshots.snapshot import read_manifest

            hits = [d for d in list_dirs(root) if str(read_manifest(d).get("snapshot_id", "")).startswith(ref)]
            if len(hits) == 1:
                return hits[0]
        raise


def _method_format(cfg: TrainConfig, kind: str, loss: str) -> str:
    if cfg.method == "dpo":
        if kind != "preference":
            raise PreflightError(f"config {cfg.name}: method dpo needs a preference snapshot; {cfg.snapshot} is "
                                 f"kind {kind}")
        return "preference"
    if cfg.format == "pairs":
        if cfg.method != "classify":
            raise PreflightError(f"config {cfg.name}: format pairs is for method classify (a reward model), not "
                                 f"{cfg.method}")
        if kind != "preference":
            raise PreflightError(f"config {cfg.name}: format pairs needs a preference snapshot; {cfg.snapshot} is "
                                 f"kind {kind}")
        return "pairs"
    if cfg.method == "classify":
        if cfg.format is not None:
            raise PreflightError(f"config {cfg.name}: format {cfg.format} is for method sft; method classify takes "
                                 "no format, or pairs")
        return "classification"
    if cfg.format is not None:
        return cfg.format
    return "prompt-completion" if loss == "completion-only" else "messages"


def _tokenizer_of(cfg: TrainConfig, manifest_profile: dict, base_dir: Path):
    """The tokenizer the run uses: the config's, else the base model's own (sft/dpo), else the snapshot's."""
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer

    if cfg.profile.tokenizer:
        return load_tokenizer(cfg.profile.tokenizer, base_dir), cfg.profile.tokenizer
    if cfg.causal_lm:
        from mashbill.trainers.base_model import locate

        p = locate(cfg.base_model, base_dir)
        return load_tokenizer(str(p), base_dir), f"{cfg.base_model} (base model)"
    return load_tokenizer(manifest_profile["tokenizer"]), manifest_profile["tokenizer"]


def masks_only_last_turn(tok, template: str) -> bool:
    """Whether the template's generation markers leave out every assistant turn but the last (rendered with
    the tokenizer, as TRL does)."""
    conv = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
            {"role": "assistant", "content": "WRONGTURN"}, {"role": "user", "content": "review it"},
            {"role": "assistant", "content": "RIGHTTURN"}]
    out = tok.apply_chat_template(conv, chat_template=template, tokenize=True, return_dict=True,
                                  return_assistant_tokens_mask=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    trained = tok.decode([i for i, m in zip(ids, mask) if m])
    return "RIGHTTURN" in trained and "WRONGTURN" not in trained


def run_preflight(cfg: TrainConfig, config_dir: Path | None = None) -> Preflight:
    """Check `cfg` against its snapshot; raise PreflightError (one line) on the first refusal."""
    t0 = time.perf_counter()
    base_dir = config_dir or Path.cwd()
    store = Path(cfg.store) if Path(cfg.store).is_absolute() else (Path.cwd() / cfg.store)
    try:
        path = find_snapshot(cfg.snapshot, store)
        manifest = verify(path)
    except SnapshotError as exc:
        raise PreflightError(f"config {cfg.name}: snapshot {cfg.snapshot}: {exc}") from None
    mp = dict(manifest.get("trainer_profile") or {})
    fmt = _method_format(cfg, manifest["kind"], cfg.profile.loss or mp.get("loss", "assistant-only"))
    ds_path = None
    if cfg.deepspeed:
        from mashbill.trainers.deepspeed import check_deepspeed

        ds_path = Path(cfg.deepspeed) if Path(cfg.deepspeed).is_absolute() else base_dir / cfg.deepspeed
        try:
            check_deepspeed(ds_path, cfg)
        except MashbillError as exc:
            raise PreflightError(f"config {cfg.name}: {exc}") from None
    pf = Preflight(cfg, path, manifest, mp, fmt, None, deepspeed_path=ds_path.resolve() if cfg.deepspeed else None)
    if cfg.student_layers is not None:
        _check_layers(cfg, base_dir)
    if cfg.student_width is not None or cfg.student_ffn is not None or cfg.distill_from is not None:
        from mashbill.trainers.narrow_preflight import check_narrow

        try:
            pf.teacher_path = check_narrow(pf, base_dir)
        except MashbillError as exc:
            raise PreflightError(str(exc)) from None
    if cfg.method == "classify":
        _check_classify(pf)
    else:
        _check_profile(pf, base_dir)
    pf.seconds = time.perf_counter() - t0
    return pf


def _check_classify(pf: Preflight) -> None:
    counts = pf.manifest["splits"]["counts"]
    if not counts.get("train"):
        raise PreflightError(f"config {pf.config.name}: snapshot {pf.manifest['ref']} has no train rows")
    if not (pf.manifest.get("classes") or {}).get("names"):
        pf.notes.append("the manifest carries no class mapping (an older snapshot): class ids come from the labels "
                        "that occurred")


def _check_layers(cfg: TrainConfig, base_dir: Path) -> None:
    """student_layers: classify only, and at most the base encoder's layer count (read from config.json)."""
    if cfg.method != "classify":
        raise PreflightError(f"config {cfg.name}: student_layers applies to method classify, not {cfg.method}")
    from mashbill.trainers.methods.classify import base_layer_count

    try:
        have = base_layer_count(cfg.base_model, base_dir)
    except MashbillError as exc:
        raise PreflightError(f"config {cfg.name}: {exc}") from None
    if cfg.student_layers > have:
        raise PreflightError(f"config {cfg.name}: student_layers {cfg.student_layers} is more than the "
                             f"{have} layers of base model {cfg.base_model}")


COLUMNS = ["example_id", "record_id", "row_kind", "prompt", "completion", "rejected", "turns", "copy",
           "class_labels", "query"]


def _any_correction(path: Path) -> bool:
    return any("correction" in pq.read_table(path / "data" / f"{s}.parquet", columns=["row_kind"])
               .column("row_kind").to_pylist() for s in SPLITS)


def _batches(path: Path, size: int = 2048):
    """(split, rows) in batches, so a 260,000-record snapshot of 2,500-token prompts never sits in memory whole."""
    for s in SPLITS:
        for batch in pq.ParquetFile(path / "data" / f"{s}.parquet").iter_batches(batch_size=size, columns=COLUMNS):
            yield s, batch.to_pylist()


def _check_profile(pf: Preflight, base_dir: Path) -> None:
    from mashbill.curation.snapshots.pull import training_template_of
    from mashbill.curation.snapshots.training_template import training_template
    from mashbill.hashing import sha256_text
    from mashbill.validators.tokenizers.tokenizer import (has_generation_markers, resolve_chat_template,
                                                          tokenizer_sha256)

    cfg, mp, name = pf.config, pf.profile, pf.config.name
    loaded, tok_ref = _tokenizer_of(cfg, mp, base_dir)
    want_tok = mp.get("tokenizer_sha256")
    have_tok = tokenizer_sha256(loaded)
    if want_tok and have_tok != want_tok:
        raise PreflightError(f"config {name}: tokenizer {tok_ref} (sha256 {have_tok[:12]}) is not the snapshot's "
                             f"{mp.get('tokenizer')} (sha256 {want_tok[:12]}); train with the tokenizer the data was "
                             "validated with")
    if not want_tok:
        pf.notes.append("the manifest carries no tokenizer hash (an older snapshot): tokenizer not compared")
    eff = {k: getattr(cfg.profile, k) if getattr(cfg.profile, k) is not None else mp.get(k) for k in PROFILE_FIELDS}
    loss = eff["loss"] or "assistant-only"
    if cfg.profile.chat_template:
        base = resolve_chat_template(loaded, cfg.profile.chat_template, base_dir)
        template = training_template(base, "last-turn") if (loss == "last-turn" and base
                                                             and has_generation_markers(base)) else base
    else:
        template = training_template_of(pf.snapshot, pf.manifest)
        if template is None:
            snap_dir = pf.snapshot / "specs"
            template = resolve_chat_template(loaded, mp.get("chat_template"), snap_dir) if mp.get(
                "chat_template") else resolve_chat_template(loaded, None)
    if template is None and pf.format != "preference":
        raise PreflightError(f"config {name}: no chat template: the snapshot ships none and tokenizer {tok_ref} has "
                             "none; set profile.chat_template")
    pf.chat_template = template
    markers = bool(template) and has_generation_markers(template)
    uses_markers = pf.format == "messages" and loss in ("assistant-only", "last-turn")
    if uses_markers and not markers:
        raise PreflightError(f"config {name}: loss {loss} needs a chat template with {{% generation %}} markers; the "
                             f"template (sha256 {sha256_text(template)[:12]}) has none, and TRL's assistant_only_loss "
                             "refuses it (use the snapshot's training template or --format prompt-completion)")
    has_corrections = any(pf.manifest["splits"].get("row_kinds", {}).get(s, {}).get("correction") for s in SPLITS) \
        or _any_correction(pf.snapshot)
    if uses_markers and has_corrections and not masks_only_last_turn(loaded.tok, template):
        raise PreflightError(
            f"config {name}: the snapshot holds correction samples and the template (sha256 "
            f"{sha256_text(template)[:12]}) marks every assistant turn, so loss {loss} would train the wrong first "
            f"plan; use the snapshot's training template (profile.loss last-turn) or --format prompt-completion")
    want_tmpl = mp.get("training_template_sha256") or mp.get("chat_template_sha256")
    diffs = {k: (eff[k], mp.get(k)) for k in PROFILE_FIELDS if eff[k] != mp.get(k)}
    if template and want_tmpl and sha256_text(template) != want_tmpl:
        diffs["chat_template"] = (sha256_text(template)[:12], want_tmpl[:12])
    if pf.format == "prompt-completion" and mp.get("loss") != "completion-only":
        diffs["format"] = ("prompt-completion", "messages")
    pf.profile = {**mp, **eff, "loss": loss}
    if not diffs:
        return
    pf.rechecked = _recheck(pf, loaded, template, eff, loss, diffs)


def _examples(fmt: str, split: str, start: int, rows: list[dict], kind: str):
    """The examples exactly as the trainer will see them (the pull's own conversion), as span-engine inputs;
    oversampled copies are the same example and are checked once."""
    from mashbill.curation.snapshots.pull import rows_for
    from mashbill.validators.spans.spans import TrainingExample

    out = []
    for i, r in enumerate(rows_for(fmt, [r for r in rows if r["copy"] == 0], kind), start):
        key = f"{split}/{i}"
        if fmt == "messages":
            out.append(TrainingExample(key, tuple(r["messages"])))
        elif fmt == "prompt-completion":
            out.append(TrainingExample(key, (*r["prompt"], *r["completion"]), prompt_len=len(r["prompt"])))
        else:
            for part in ("chosen", "rejected"):
                out.append(TrainingExample(key, (*r["prompt"], *r[part]), prompt_len=len(r["prompt"]), part=part))
    return out


PARALLEL_FROM = 20_000  # examples; below this a process pool costs more than it saves
MAX_WORKERS = 4  # each holds a span engine with its own tokenizer and piece cache
_JOB: dict = {}  # what forked workers inherit: the tokenizer, template and window


def _check_part(args) -> tuple[int, Counter, tuple | None]:
    """Check every `workers`-th batch of the snapshot, starting at `worker` (runs in a forked process or inline)."""
    from mashbill.validators.spans.spans import SpanEngine, judge

    worker, workers = args
    j = _JOB
    engine = j.get("engine") or SpanEngine(j["loaded"], j["template"], loss=j["loss"])
    j["engine"] = engine
    bad: Counter = Counter()
    first, checked = None, 0
    for bi, (split, rows) in enumerate(_batches(j["path"])):
        if bi % workers != worker:
            continue
        results = engine.fast(_examples(j["format"], f"{split}/b{bi}", 0, rows, j["kind"]))
        checked += len(results)
        for res in results:
            codes = [v for v in judge(res, j["max_len"], j["side"], j["loss"]).verdicts if v.code in CUT_CODES]
            if codes:
                bad[codes[0].code] += 1
                first = first or (res.key, codes[0].detail)
    return checked, bad, first


def _recheck(pf: Preflight, loaded, template, eff: dict, loss: str, diffs: dict) -> int:
    """Every example under the run's profile through the fast span engine; refuse if any target is cut.
    Big snapshots are split over the CPUs this process may use (forked workers, each with its own engine)."""
    from mashbill.cpus import worker_count

    _JOB.clear()
    _JOB.update(path=pf.snapshot, format=pf.format, kind=pf.manifest["kind"], loaded=loaded, template=template,
                loss="completion-only" if pf.format in ("prompt-completion", "preference") else loss,
                max_len=int(eff["max_seq_len"]), side=eff["truncation_side"] or "right")
    total = sum((pf.manifest["splits"].get("counts") or {}).values())
    workers = worker_count(total, PARALLEL_FROM, MAX_WORKERS)
    if workers > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_check_part, [(w, workers) for w in range(workers)])
    else:
        parts = [_check_part((0, 1))]
    _JOB.clear()
    checked = sum(p[0] for p in parts)
    bad: Counter = sum((p[1] for p in parts), Counter())
    first = next((p[2] for p in parts if p[2]), None)
    changed = ", ".join(f"{k} {a} (config) vs {b} (snapshot)" for k, (a, b) in diffs.items())
    if bad:
        n = sum(bad.values())
        why = ", ".join(f"{c} {k}" for c, k in sorted(bad.items()))
        raise PreflightError(f"config {pf.config.name}: {changed}: {n} of {checked} example(s) would lose "
                             f"their target ({why}); first {first[0]}: {first[1]}")
    pf.notes.append(f"profile differs ({changed}); re-checked {checked} example(s): no target cut")
    return checked
