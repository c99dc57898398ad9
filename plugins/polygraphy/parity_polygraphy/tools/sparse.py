"""``polygraphy.tools.sparse``: ``SparsityPruner``, 2:4 structured sparsity of an ONNX model's weights.

A weight is a candidate when it feeds (directly, or through QuantizeLinear/DequantizeLinear/Cast, or a Transpose
whose ``perm`` moves the axis) the reduction axis of a MatMul (A: axis 1, B: axis 0), a Gemm (by ``transA``/
``transB``) or a Conv (the weight's input-channel axis 1), is float32, float16 or bfloat16, and that axis has a
multiple of 4 elements. Along that axis each run of 4 values is a group: ``check()`` puts the weights whose every
group has at least 2 zeros in ``sparse_tensors``; ``prune()`` returns a copy of the model where the 2 smallest
magnitudes of each group (the first ones, on a tie) are zero. The model given is never modified.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from parity_polygraphy.logger import G_LOGGER

PruneInfo = namedtuple("PruneInfo", ["name", "axis"])

# ops whose first input reaches the output element for element (the pruned axis stays where it is)
_PASS_THROUGH = {"QuantizeLinear", "DequantizeLinear", "TRT_FP8QuantizeLinear", "TRT_FP8DequantizeLinear", "Cast"}


def _float_dtypes() -> dict[int, str]:
    import onnx

    return {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.FLOAT16: "float16", onnx.TensorProto.BFLOAT16: "bfloat16"}


class SparsityPruner:
    """``SparsityPruner(model)``: ``check()`` fills ``sparse_tensors`` (the names of the candidate weights that
    are already 2:4 sparse); ``prune(weights_skip=...)`` returns the pruned model (a new ``onnx.ModelProto``)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.g = model.graph
        self.w_name2obj = {t.name: t for t in self.g.initializer}
        self.tname2producer = {out: node for node in self.g.node for out in node.output}
        self.prune_infos: dict[str, PruneInfo] = {}
        self.sparse_tensors: set[str] = set()
        self.weights_skip: set[str] = set()

    def _track(self, name: str, axis: int) -> None:
        """Follow ``name`` back to the initializer it comes from, keeping track of where ``axis`` goes."""
        seen: set[str] = set()
        while name not in self.w_name2obj:
            producer = self.tname2producer.get(name)
            if producer is None or name in seen:
                return  # a graph input (or a cycle in an invalid graph): not a weight
            seen.add(name)
            if producer.op_type in _PASS_THROUGH:
                name = producer.input[0]
            elif producer.op_type == "Transpose":
                perm = next((list(a.ints) for a in producer.attribute if a.name == "perm"), None)
                if perm is None or axis not in perm:
                    G_LOGGER.warning(f"({name}) is produced by a Transpose without a usable <perm>: not followed")
                    return
                axis, name = perm.index(axis), producer.input[0]
            else:
                G_LOGGER.ultra_verbose(f"({name}) is produced by {producer.op_type} ({producer.name}): not followed")
                return
        self.prune_infos[name] = PruneInfo(name, axis)

    def _walk_nodes(self) -> list[PruneInfo]:
        self.prune_infos = {}
        for node in self.g.node:
            if node.op_type == "MatMul":
                self._track(node.input[0], 1)
                self._track(node.input[1], 0)
            elif node.op_type == "Gemm":
                attrs = {a.name: a.i for a in node.attribute}
                self._track(node.input[0], 0 if attrs.get("transA", 0) else 1)
                self._track(node.input[1], 1 if attrs.get("transB", 0) else 0)
            elif node.op_type == "Conv" and len(node.input) > 1:
                self._track(node.input[1], 1)
        G_LOGGER.verbose(f"Collected {len(self.prune_infos)} weights candidates.")

        import onnx

        dtypes = _float_dtypes()
        eligible = []
        for info in self.prune_infos.values():
            tensor = self.w_name2obj[info.name]
            if tensor.name in self.weights_skip:
                G_LOGGER.warning(f"Skipping tensor: {tensor.name} since it was marked to skip pruning")
            elif tensor.data_type not in dtypes:
                G_LOGGER.warning(f"Skipping tensor: {tensor.name} due to unsupported type: {onnx.helper.tensor_dtype_to_string(tensor.data_type)}")
            elif tensor.data_location == onnx.TensorProto.EXTERNAL:
                G_LOGGER.warning(f"Skipping tensor: {tensor.name}: its data is in an external file that was not loaded")
            elif _stored(tensor) != int(np.prod(tensor.dims, dtype=np.int64)):
                G_LOGGER.warning(f"Skipping tensor: {tensor.name}: it holds no data for its {list(tensor.dims)} (weights stripped?)")
            elif info.axis >= len(tensor.dims) or tensor.dims[info.axis] % 4:
                G_LOGGER.verbose(f"Skipping {tensor.name}: axis {info.axis} of {list(tensor.dims)} is not a multiple of 4")
            else:
                eligible.append(info)
        G_LOGGER.info(f"Found: {len(eligible)} weight tensor(s) eligible for pruning.")
        return eligible

    def process(self, check: bool) -> Any:
        """``check``: fill ``sparse_tensors`` and return None; else return the pruned model."""
        infos = self._walk_nodes()
        if check:
            G_LOGGER.start(f"Checking the sparsity pattern of {len(infos)} tensors.")
            for info in infos:
                groups = _groups(_magnitudes(self.w_name2obj[info.name]), self.w_name2obj[info.name].dims, info.axis)
                if np.all(np.count_nonzero(groups == 0, axis=-1) >= 2):
                    G_LOGGER.info(f"Found sparse tensor: {info.name}")
                    self.sparse_tensors.add(info.name)
                else:
                    G_LOGGER.warning(f"Found non-sparse tensor: {info.name}")
            G_LOGGER.finish(f"Finished checking {len(infos)} tensors.")
            return None

        import onnx

        G_LOGGER.start(f"Pruning {len(infos)} tensors.")
        pruned = {info.name: _pruned(self.w_name2obj[info.name], info.axis) for info in infos}
        G_LOGGER.finish(f"Finished pruning {len(infos)} tensors.")
        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        for index, tensor in enumerate(model.graph.initializer):
            if tensor.name in pruned:
                model.graph.initializer[index].CopyFrom(pruned[tensor.name])
        return model

    def prune(self, weights_skip: set[str] | None = None) -> Any:
        """The model with each eligible weight (not named in ``weights_skip``) pruned to 2:4 sparsity."""
        self.weights_skip = set(weights_skip or ())
        return self.process(False)

    def check(self) -> None:
        """Fill ``sparse_tensors`` with the eligible weights that are already 2:4 sparse."""
        self.process(True)


def _stored(tensor: Any) -> int:
    """How many values the tensor holds (a weight-stripped one holds none)."""
    if tensor.raw_data:
        return len(tensor.raw_data) // (4 if tensor.data_type == 1 else 2)  # FLOAT: 4 bytes; FLOAT16, BFLOAT16: 2
    return len(tensor.float_data) or len(tensor.int32_data)


def _bf16_bits(tensor: Any) -> np.ndarray:
    # ONNX keeps bfloat16 as raw little-endian 16-bit words, or one value per int32_data entry (its low 16 bits)
    if tensor.raw_data:
        return np.frombuffer(tensor.raw_data, dtype="<u2").copy()
    return (np.asarray(tensor.int32_data, dtype=np.uint32) & 0xFFFF).astype(np.uint16)


def _values(tensor: Any) -> np.ndarray:
    """The weight's values, flat: float32/float16, or bfloat16 as its 16-bit words (NumPy has no bfloat16)."""
    import onnx
    from onnx import numpy_helper

    if tensor.data_type == onnx.TensorProto.BFLOAT16:
        return _bf16_bits(tensor)
    return np.asarray(numpy_helper.to_array(tensor)).reshape(-1)


def _magnitudes(tensor: Any) -> np.ndarray:
    import onnx

    values = _values(tensor)
    if tensor.data_type == onnx.TensorProto.BFLOAT16:  # a bfloat16 is the upper half of a float32
        values = (values.astype(np.uint32) << 16).view(np.float32)
    return np.abs(values.astype(np.float32))


def _groups(flat: np.ndarray, dims: Any, axis: int) -> np.ndarray:
    """``flat`` as (outer, groups along ``axis``, inner, 4): each [o, g, i] is one group of 4 along ``axis``."""
    dims = list(dims)
    outer = int(np.prod(dims[:axis], dtype=np.int64))
    inner = int(np.prod(dims[axis + 1 :], dtype=np.int64))
    return np.moveaxis(flat.reshape(outer, dims[axis] // 4, 4, inner), 3, 2)


def _pruned(tensor: Any, axis: int) -> Any:
    """A copy of ``tensor`` whose 2 smallest magnitudes in each group of 4 along ``axis`` are zero."""
    import onnx

    values = _values(tensor).copy()
    order = np.argsort(_groups(_magnitudes(tensor), tensor.dims, axis), axis=-1, kind="stable")
    zero = np.zeros(order.shape, dtype=bool)
    np.put_along_axis(zero, order[..., :2], True, axis=-1)
    view = _groups(values, tensor.dims, axis)  # a view of ``values``: writing it writes them
    view[zero] = 0
    out = onnx.TensorProto()
    out.CopyFrom(tensor)
    out.ClearField("float_data")
    out.ClearField("int32_data")
    little = values.astype(values.dtype.newbyteorder("<"), copy=False)
    out.raw_data = little.tobytes()
    return out


__all__ = ["PruneInfo", "SparsityPruner"]
