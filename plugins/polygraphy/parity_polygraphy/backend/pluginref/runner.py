"""``PluginRefRunner``: evaluates an onnx-graphsurgeon graph node by node with the NumPy references in
``references.OP_REGISTRY`` (a node without one fails naming its op)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from parity.api import invoke_if_callable
from parity_polygraphy.backend.base import BaseRunner
from parity_polygraphy.backend.pluginref.references import OP_REGISTRY
from parity_polygraphy.common import TensorMetadata
from parity_polygraphy.exception import PolygraphyException


def _numpy_dtype(dtype: Any) -> Any:
    """A graphsurgeon tensor's dtype as NumPy's: it holds a NumPy dtype, or an ONNX type number for types NumPy
    lacks (then the ONNX helper's mapping, or None where there is none)."""
    import numpy as np

    if dtype is None:
        return None
    if isinstance(dtype, int):
        import onnx

        try:
            return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(dtype))
        except (KeyError, TypeError):
            return None
    return np.dtype(dtype)


class PluginRefRunner(BaseRunner):
    """Runs inference with CPU (NumPy) reference implementations of plugin ops.

    ``graph``: an ``onnx_graphsurgeon.Graph`` or a loader returning one (called on activation)."""

    def __init__(self, graph: Any, name: str | None = None) -> None:
        super().__init__(name=name, prefix="pluginref-runner")
        self._graph = graph
        self.graph: Any = None

    def activate_impl(self) -> None:
        self.graph, _ = invoke_if_callable(self._graph)

    def get_input_metadata_impl(self) -> Any:
        meta = TensorMetadata()
        for tensor in self.graph.inputs:
            meta.add(tensor.name, dtype=_numpy_dtype(tensor.dtype), shape=None if tensor.shape is None else list(tensor.shape))
        return meta

    def infer_impl(self, feed_dict: Mapping[str, Any]) -> OrderedDict[str, Any]:
        start = time.perf_counter()
        tensors = dict(feed_dict)
        for node in self.graph.nodes:  # graphsurgeon keeps an imported graph's nodes in topological order
            evaluate = OP_REGISTRY.get(node.op)
            if evaluate is None:
                raise PolygraphyException(f"Op: {node.op} does not have a reference implementation registered!")
            tensors.update(evaluate(node, tensors))
        outputs = OrderedDict((tensor.name, tensors[tensor.name]) for tensor in self.graph.outputs)
        self.inference_time = time.perf_counter() - start
        return outputs

    def deactivate_impl(self) -> None:
        self.graph = None
