"""The base of every encoder memdesk loads: sentence-transformers' ``encode`` (one text or many, in batches,
unit length), written once; a model supplies only how one batch of texts becomes vectors (``_encode_batch``).
Also what the models share: their threads setting, and the check that refuses the retired backend's setting."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

#: How a text is used: a stored memory (``passage``) or a search query (``query``); e5 prefixes each its own way.
KINDS = ("query", "passage")


class Encoder:
    """sentence-transformers' ``encode`` over ``_encode_batch``. ``dim``: the vectors' width; ``takes_kind``:
    whether the model reads ``kind`` (e5's prefixes), else ``kind`` is checked and ignored."""

    dim: int
    takes_kind = False

    def get_sentence_embedding_dimension(self) -> int:
        return self.dim

    def _encode_batch(self, texts: list[str], *, kind: str) -> np.ndarray:
        """``texts`` as one ``(len(texts), dim)`` float32 array, not yet normalised."""
        raise NotImplementedError

    #: The most texts one ``_encode_batch`` call gets, whatever the caller's ``batch_size``.
    max_batch: int | None = None

    def _order(self, texts: list[str]) -> list[int]:
        """The order the texts are batched in (their own, unless a model pads less another way)."""
        return list(range(len(texts)))

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
        step = max(1, int(batch_size))
        if self.max_batch is not None:
            step = min(step, self.max_batch)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = self._order(texts)
        for start in range(0, len(order), step):
            chunk = order[start : start + step]
            out[chunk] = self._encode_batch([texts[i] for i in chunk], kind=kind)
        if normalize_embeddings and len(out):
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out[0] if single else out


def threads_setting(variable: str) -> int:
    raw = os.environ.get(variable, "1")
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{variable} must be a positive integer, not {raw!r}")
    return value


def check_retired_settings() -> None:
    """Refuse the settings of the retired PyTorch backend, naming what to do: every model runs on onnxruntime."""
    backend = os.environ.get("MEMDESK_EMBEDDING_BACKEND", "onnx").strip().lower() or "onnx"
    if backend != "onnx":
        raise ValueError(
            f"MEMDESK_EMBEDDING_BACKEND={backend!r}: the PyTorch backend is retired and MiniLM and multilingual "
            "USE run on onnxruntime only (the same vectors); remove the variable"
        )
