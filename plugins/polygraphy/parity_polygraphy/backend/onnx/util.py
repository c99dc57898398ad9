"""``polygraphy.backend.onnx.util``: questions about ONNX models and onnx-graphsurgeon graphs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from parity_polygraphy.common import TensorMetadata
from parity_polygraphy.datatype import DataType, DataTypeEntry

# ops whose output size is set by the values of one input (its index): with a runtime value there, the output's
# size is data-dependent and unbounded unless something (a Min) bounds that input
_SIZE_INPUTS = {"Range": 1, "Pad": 1, "Resize": 3, "Tile": 1, "Expand": 1}


def _graphs(graph: Any) -> Iterator[Any]:
    """``graph`` and every subgraph in its nodes' attributes (If, Loop, Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _graphs(attr.g)
            for sub in attr.graphs:
                yield from _graphs(sub)


def all_tensors(model: Any) -> Iterator[Any]:
    """Every TensorProto of the model: initializers and Constant values, subgraphs included."""
    for graph in _graphs(model.graph):
        yield from graph.initializer
        for node in graph.node:
            for attr in node.attribute:
                if attr.HasField("t"):
                    yield attr.t


def get_num_nodes(model: Any) -> int:
    """The number of nodes, counting those inside subgraphs."""
    return sum(len(graph.node) for graph in _graphs(model.graph))


def all_tensor_names(model: Any, include_inputs: bool = False) -> list[str]:
    """Names of the tensors the main graph's nodes produce (and its inputs when ``include_inputs``), in order."""
    names = [i.name for i in model.graph.input] if include_inputs else []
    names += [out for node in model.graph.node for out in node.output if out]
    return list(dict.fromkeys(names))


def numpy_dtype(dtype: Any) -> Any:
    """A NumPy dtype from a Polygraphy ``DataType``, a NumPy dtype or type, or an ONNX TensorProto type."""
    import numpy as np

    if isinstance(dtype, DataTypeEntry):
        return np.dtype(DataType.to_dtype(dtype, "numpy"))
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        import onnx

        return onnx.helper.tensor_dtype_to_np_dtype(dtype)
    return np.dtype(dtype)


def get_dtype(tensor: Any) -> Any:
    """The ``DataType`` of a TensorProto or a ValueInfoProto (None where the value info has no type)."""
    import onnx

    elem = tensor.data_type if isinstance(tensor, onnx.TensorProto) else tensor.type.tensor_type.elem_type
    return DataType.from_dtype(elem, source_module="onnx") if elem else None


def _metadata(values: Any) -> Any:
    import onnx

    meta = TensorMetadata()
    for value in values:
        tensor_type = value.type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type) if tensor_type.elem_type else None
        shape = [d.dim_param or (d.dim_value if d.HasField("dim_value") else None) for d in tensor_type.shape.dim] if tensor_type.HasField("shape") else None
        meta.add(value.name, dtype=dtype, shape=shape)
    return meta


def get_input_metadata(graph: Any) -> Any:
    """The graph's real inputs (not initializers) as ``TensorMetadata``; dynamic dims are names or None."""
    initializers = {t.name for t in graph.initializer}
    return _metadata([i for i in graph.input if i.name not in initializers])


def get_output_metadata(graph: Any) -> Any:
    """The graph's outputs as ``TensorMetadata``."""
    return _metadata(graph.output)


def get_unbounded_dds_tensors(graph: Any) -> list[Any]:
    """The tensors (of an onnx-graphsurgeon graph) that make a node's output size data-dependent and unbounded:
    a runtime value feeding the size input of Range, Pad, Resize, Tile or Expand, where that node's output
    introduces a new symbolic dimension or has no known shape, and the value is not already a Min's output."""
    import onnx_graphsurgeon as gs

    graph.toposort()
    known_dims = {dim for tensor in graph.inputs for dim in (tensor.shape or ()) if isinstance(dim, str)}
    found: dict[str, Any] = {}
    for node in graph.nodes:
        new_dim = False
        for out in node.outputs:
            if out.shape is None:
                new_dim = True
                continue
            fresh = {dim for dim in out.shape if isinstance(dim, str)} - known_dims
            known_dims |= fresh
            new_dim = new_dim or bool(fresh)
        index = _SIZE_INPUTS.get(node.op)
        if not new_dim or index is None or index >= len(node.inputs):
            continue
        size = node.inputs[index]
        if not isinstance(size, gs.Constant) and size.inputs and size.inputs[0].op != "Min":
            found.setdefault(size.name, size)
    return list(found.values())
