"""NumPy reference implementations, by ONNX op type, for ``PluginRefRunner``: ``Identity``,
``InstanceNormalization`` and ``MeanVarianceNormalization`` (the ops Polygraphy 0.53.6 covers).

``register(op)`` adds one: the function takes the node's attributes and its input arrays (``None`` for an omitted
optional input) and returns the list of its output arrays, in the node's output order."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from parity_polygraphy.exception import PolygraphyInternalException

Reference = Callable[..., Sequence[Any]]
# op type -> f(node, tensors by name) -> {output name: array}
OP_REGISTRY: dict[str, Callable[[Any, Mapping[str, Any]], dict[str, Any]]] = {}


def _input_values(node: Any, tensors: Mapping[str, Any]) -> list[Any]:
    import onnx_graphsurgeon as gs

    values = []
    for tensor in node.inputs:
        if tensor.is_empty():
            values.append(None)
        elif isinstance(tensor, gs.Constant):
            values.append(tensor.values)
        elif tensor.name in tensors:
            values.append(tensors[tensor.name])
        else:  # the graph is evaluated in topological order: a missing value is a bug, not bad input
            raise PolygraphyInternalException(f"{node.op} node {node.name!r}: input {tensor.name!r} is neither a constant nor computed yet")
    return values


def register(op: str) -> Callable[[Reference], Reference]:
    """Register ``func(attrs, *inputs) -> [outputs]`` as the reference implementation of ONNX op ``op``."""

    def decorate(func: Reference) -> Reference:
        def evaluate(node: Any, tensors: Mapping[str, Any]) -> dict[str, Any]:
            outputs = list(func(node.attrs, *_input_values(node, tensors)))
            if len(outputs) != len(node.outputs):
                raise PolygraphyInternalException(f"The {op} reference returned {len(outputs)} output(s); the node has {len(node.outputs)}")
            return {tensor.name: value for tensor, value in zip(node.outputs, outputs)}

        OP_REGISTRY[op] = evaluate
        return func

    return decorate


@register("Identity")
def identity(attrs: Mapping[str, Any], x: Any) -> list[Any]:
    return [x]


@register("InstanceNormalization")
def instance_normalization(attrs: Mapping[str, Any], x: Any, scale: Any, bias: Any) -> list[Any]:
    import numpy as np

    epsilon = attrs.get("epsilon", 1e-5)
    spatial = tuple(range(2, x.ndim))  # normalise each (sample, channel) over its spatial dims
    per_channel = (-1,) + (1,) * (x.ndim - 2)
    mean = x.mean(axis=spatial, keepdims=True)
    var = x.var(axis=spatial, keepdims=True)
    return [scale.reshape(per_channel) * (x - mean) / np.sqrt(var + epsilon) + bias.reshape(per_channel)]


@register("MeanVarianceNormalization")
def mean_variance_normalization(attrs: Mapping[str, Any], x: Any) -> list[Any]:
    import numpy as np

    axes = tuple(attrs.get("axes", (0, 2, 3)))
    mean = x.mean(axis=axes, keepdims=True)
    # std as sqrt(E[x^2] - E[x]^2), the ONNX function's definition, with its 1e-9 guard added to the std
    std = np.sqrt(np.mean(x * x, axis=axes, keepdims=True) - mean * mean)
    return [(x - mean) / (std + 1e-9)]
