"""An ONNX graph built node by node from numpy weights: what ``use_onnx`` and ``minilm_onnx`` share."""

from __future__ import annotations

from typing import Any

import numpy as np


class GraphBuilder:
    """The nodes and initialisers of a graph being built; each helper returns the name of what it added, so a
    forward pass reads as nested calls."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []

    def const(self, name: str, value: Any) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name
