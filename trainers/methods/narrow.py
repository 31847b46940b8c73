"""Width shrinking for encoder classifier students (`student_width`, `student_ffn` in a classify config).

Cutting layers (`student_layers`) stops paying at 3 of MiniLM's 6: a 2-layer student loses about 1.8 accuracy
points. At batch 1 the encoder is compute bound (per token and layer about 4*H^2 + 2*H*F multiply-adds for
hidden size H and feed-forward size F), so the next saving is width: a narrower residual stream (H), and with it
fewer attention heads (H / head size: the head size stays, so each kept head keeps its trained weights), and a
smaller feed-forward layer (F).

Which units stay is chosen from the weights alone (no data, so the choice is deterministic and free):
- hidden channels: the sum over every LayerNorm of |gain|. Each LayerNorm's gain is the scale at which a
  channel of the residual stream enters everything downstream; a channel all LayerNorms damp carries little.
- heads, per layer: the L2 norm of the head's query, key and value rows and of its output-projection columns
  (on the kept channels): a head with small weights moves the residual stream little.
- feed-forward neurons, per layer: |input row| x |output column| (on the kept channels), the neuron's largest
  possible gain through the block.
The result is a plain, smaller `BertForSequenceClassification` (config hidden_size/num_attention_heads/
intermediate_size shrunk), so saving, loading, the ONNX export and the predictor need nothing new. LayerNorm
statistics over fewer channels differ from the wide model's, so a shrunk model needs training, preferably
distillation from the wide one (trainers/methods/distill.py). transformers 5 has no head pruning (`prune_heads` is
gone), and pruned heads would keep the hidden size anyway; this slices the state dict directly.
"""

from __future__ import annotations

from mashbill.errors import MashbillError


class WidthError(MashbillError):
    """A width the base encoder cannot be shrunk to."""


def width_plan(config, hidden: int | None, ffn: int | None) -> dict:
    """{"hidden", "heads", "head_size", "ffn"} for shrinking a BERT-like `config`; WidthError when impossible.

    hidden None keeps the hidden size; ffn None scales the feed-forward size with the hidden size."""
    have_h, have_f = config.hidden_size, config.intermediate_size
    head = have_h // config.num_attention_heads
    hidden = have_h if hidden is None else hidden
    if not head <= hidden <= have_h or hidden % head:
        raise WidthError(f"student_width {hidden}: expected a multiple of the head size {head} between {head} and "
                         f"the base hidden size {have_h}")
    ffn = (have_f * hidden) // have_h if ffn is None else ffn
    if not 1 <= ffn <= have_f:
        raise WidthError(f"student_ffn {ffn}: expected 1..{have_f} (the base feed-forward size)")
    return {"hidden": hidden, "heads": hidden // head, "head_size": head, "ffn": ffn}


def check_base(config) -> None:
    """Only BERT-style encoders (the MiniLM family) are shrunk: refuse others by their model type."""
    if getattr(config, "model_type", None) not in ("bert",):
        raise WidthError(f"student_width/student_ffn: supported for BERT-style encoders (model_type bert), "
                         f"not {getattr(config, 'model_type', None)!r}")


def _top(scores, k: int):
    import torch

    return torch.sort(torch.topk(scores, k).indices).values


def choose_units(model, plan: dict) -> dict:
    """{"hidden": idx, "heads": [idx per layer], "ffn": [idx per layer]} (sorted indices to keep)."""
    import torch

    bert = model.base_model
    hd = plan["head_size"]
    with torch.no_grad():
        norms = [bert.embeddings.LayerNorm.weight.abs()]
        for layer in bert.encoder.layer:
            norms += [layer.attention.output.LayerNorm.weight.abs(), layer.output.LayerNorm.weight.abs()]
        hidden = _top(torch.stack(norms).sum(0), plan["hidden"])
        heads, ffn = [], []
        for layer in bert.encoder.layer:
            att = layer.attention
            n = att.self.query.weight.shape[0] // hd
            qkv = torch.cat([getattr(att.self, m).weight[:, hidden] for m in ("query", "key", "value")], 1)
            out = att.output.dense.weight[hidden].T  # (attention dim, kept hidden)
            score = (qkv.reshape(n, hd, -1).pow(2).sum((1, 2)) + out.reshape(n, hd, -1).pow(2).sum((1, 2))).sqrt()
            heads.append(_top(score, plan["heads"]))
            w_in = layer.intermediate.dense.weight[:, hidden]
            w_out = layer.output.dense.weight[hidden]
            ffn.append(_top(w_in.norm(dim=1) * w_out.norm(dim=0), plan["ffn"]))
    return {"hidden": hidden, "heads": heads, "ffn": ffn}


def _sliced_state(model, keep: dict, head_size: int) -> dict:
    """The wide model's state dict cut to the kept units, keyed as the narrow model names them."""
    import torch

    h = keep["hidden"]
    pre = model.base_model_prefix + "."
    out = {}
    for name, t in model.state_dict().items():
        local = name[len(pre):] if name.startswith(pre) else name
        parts = local.split(".")
        if local.startswith("embeddings."):
            if parts[1] == "LayerNorm":
                t = t[h]
            elif parts[1].endswith("_embeddings"):  # word/position/token-type tables: (rows, hidden)
                t = t[:, h]
        elif local.startswith("encoder.layer."):
            i, rest = int(parts[2]), ".".join(parts[3:])
            att = torch.cat([torch.arange(j * head_size, (j + 1) * head_size) for j in keep["heads"][i].tolist()])
            f = keep["ffn"][i]
            if rest.startswith("attention.self."):
                t = t[att][:, h] if t.dim() == 2 else t[att]
            elif rest.startswith("attention.output.dense."):
                t = t[h][:, att] if t.dim() == 2 else t[h]
            elif rest.startswith("intermediate.dense."):
                t = t[f][:, h] if t.dim() == 2 else t[f]
            elif rest.startswith("output.dense."):
                t = t[h][:, f] if t.dim() == 2 else t[h]
            elif "LayerNorm" in rest:
                t = t[h]
        elif local.startswith("pooler.dense."):
            t = t[h][:, h] if t.dim() == 2 else t[h]
        elif local.startswith("classifier.") and t.dim() == 2:
            t = t[:, h]
        elif "position_ids" in local or "token_type_ids" in local:
            pass
        elif not local.startswith("classifier."):
            raise WidthError(f"student_width: no rule to shrink weight {name!r}")
        out[name] = t.clone()
    return out


def shrink_width(model, hidden: int | None = None, ffn: int | None = None):
    """A new, narrower copy of a loaded BERT sequence classifier: (model, info). The wide model is unchanged.

    The narrow config records what was kept (`mashbill_width`: base sizes, kept hidden channels and heads)."""
    import copy

    check_base(model.config)
    plan = width_plan(model.config, hidden, ffn)
    keep = choose_units(model, plan)
    state = _sliced_state(model, keep, plan["head_size"])
    conf = copy.deepcopy(model.config)
    base = {"hidden": conf.hidden_size, "heads": conf.num_attention_heads, "ffn": conf.intermediate_size}
    conf.hidden_size, conf.num_attention_heads, conf.intermediate_size = plan["hidden"], plan["heads"], plan["ffn"]
    info = {"base": base, "hidden": plan["hidden"], "heads": plan["heads"], "ffn": plan["ffn"],
            "kept_heads": [x.tolist() for x in keep["heads"]]}
    conf.mashbill_width = info
    narrow = type(model)(conf)
    missing, unexpected = narrow.load_state_dict(state, strict=False)
    missing = [m for m in missing if "position_ids" not in m]
    if missing or unexpected:
        raise WidthError(f"student_width: shrunk weights do not fit the narrow model (missing {missing[:3]}, "
                         f"unexpected {unexpected[:3]})")
    narrow.train(model.training)
    return narrow, info


def encoder_macs(hidden: int, ffn: int, layers: int, tokens: int) -> int:
    """Multiply-adds of the encoder's dense layers for one sequence (attention scores excluded: small at 64)."""
    return layers * tokens * (4 * hidden * hidden + 2 * hidden * ffn)


def check_width_config(cfg, base_config_json: dict) -> None:
    """The preflight's check of student_width/student_ffn against the base's config.json (no model load)."""
    from types import SimpleNamespace

    conf = SimpleNamespace(**{k: base_config_json.get(k) for k in
                              ("hidden_size", "num_attention_heads", "intermediate_size", "model_type")})
    if not all(isinstance(getattr(conf, k), int) for k in ("hidden_size", "num_attention_heads", "intermediate_size")):
        raise WidthError("student_width: the base model's config.json has no hidden_size/num_attention_heads/"
                         "intermediate_size")
    check_base(conf)
    width_plan(conf, cfg.student_width, cfg.student_ffn)
