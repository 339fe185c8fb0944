"""Sentence embeddings, loaded offline from wheels, one instance per process.

- ``models`` — the models (MiniLM, multilingual USE, multilingual E5), their loaders, and ``embed``.
- ``use_onnx`` — multilingual USE's forward pass as one ONNX graph.
"""

from memory.embeddings.models import DEFAULT_MODEL, LANGUAGE_DEFAULTS, embed_one

__all__ = ["DEFAULT_MODEL", "LANGUAGE_DEFAULTS", "embed_one"]
