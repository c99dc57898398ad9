"""2:4 structured sparsity of an ONNX model's weights (``parity surgeon prune``, and the SPARSE_2_4 marks of
``parity surgeon weight-strip``/``weight-reconstruct``).

A weight is a candidate when it feeds the reduction axis of a MatMul (A: axis 1, B: axis 0), a Gemm (by
``transA``/``transB``) or a Conv (the weight's input-channel axis 1), directly or through
QuantizeLinear/DequantizeLinear/Cast (the axis stays) or a Transpose (the weight's axis is ``perm[axis]``). It is
eligible when it is float32, float16 or bfloat16, holds its data, and that axis has a multiple of 4 elements.
Along the axis each run of 4 values is a group: a weight is 2:4 sparse when every group has at least 2 zeros;
pruning zeroes the 2 smallest magnitudes of each group (the first ones on a tie), which is what TensorRT's
sparse kernels need. Models are never modified in place: pruning returns a copy.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from parity.api import names_preview, onnx_external

# ops whose first input reaches the output element for element: the pruned axis stays where it is
_PASS_THROUGH = frozenset({"QuantizeLinear", "DequantizeLinear", "TRT_FP8QuantizeLinear", "TRT_FP8DequantizeLinear", "Cast"})
FLOAT, FLOAT16, BFLOAT16 = 1, 10, 16  # onnx.TensorProto's element types (no onnx import for three constants)
_ITEM_BYTES = {FLOAT: 4, FLOAT16: 2, BFLOAT16: 2}
_TYPE_NAMES = {FLOAT: "float32", FLOAT16: "float16", BFLOAT16: "bfloat16"}


@dataclass
class SparsityReport:
    """What a pass over a model's candidate weights found: ``eligible`` maps each weight to its pruned axis;
    ``skipped`` holds one line per candidate left alone and why."""

    eligible: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def candidates(model: Any) -> dict[str, int]:
    """Weight name (an initializer's, or a Constant node's output) -> the axis 2:4 sparsity runs along, for each
    weight that a MatMul, Gemm or Conv reduces over (in node order; a weight met twice keeps its last axis)."""
    weights = {t.name for t in model.graph.initializer}
    producer = {out: node for node in model.graph.node for out in node.output}
    found: dict[str, int] = {}

    def track(name: str, axis: int) -> None:
        seen: set[str] = set()
        while name not in weights:
            node = producer.get(name)
            if node is None or name in seen:
                return  # a graph input, or a cycle in an invalid graph: not a weight
            seen.add(name)
            if node.op_type == "Constant":
                break  # a weight held by a Constant node: eligible() names it, skipped, with the way to fold it
            if node.op_type in _PASS_THROUGH and node.input:
                name = node.input[0]
            elif node.op_type == "Transpose":
                perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
                if perm is None or axis >= len(perm):
                    return
                # output axis a is input axis perm[a] (Polygraphy 0.53.6 takes perm.index(a): the same for a swap)
                axis, name = perm[axis], node.input[0]
            else:
                return
        found[name] = axis

    for node in model.graph.node:
        if node.op_type == "MatMul" and len(node.input) >= 2:
            track(node.input[0], 1)
            track(node.input[1], 0)
        elif node.op_type == "Gemm" and len(node.input) >= 2:
            attrs = {a.name: a.i for a in node.attribute}
            track(node.input[0], 0 if attrs.get("transA", 0) else 1)
            track(node.input[1], 1 if attrs.get("transB", 0) else 0)
        elif node.op_type == "Conv" and len(node.input) >= 2:
            track(node.input[1], 1)
    return found


def _is_external(tensor: Any) -> bool:
    return tensor.data_location == 1  # onnx.TensorProto.EXTERNAL


def holds_data(tensor: Any) -> bool:
    """Whether the tensor has values for all of its dims (a weight-stripped one has none)."""
    if _is_external(tensor):
        return True
    count = int(np.prod(tensor.dims, dtype=np.int64))
    item = _ITEM_BYTES.get(tensor.data_type)
    if tensor.raw_data:
        return item is None or len(tensor.raw_data) == count * item
    stored = len(tensor.float_data) or len(tensor.int32_data) or len(tensor.int64_data) or len(tensor.double_data)
    stored = stored or len(tensor.uint64_data) or len(tensor.string_data)
    return stored == count


def eligible(model: Any, skip: Iterable[str] = ()) -> SparsityReport:
    """The candidates that can be pruned (see the module's docstring); the others, with the reason, in ``skipped``."""
    skip = set(skip)
    by_name = {t.name: t for t in model.graph.initializer}
    report = SparsityReport()
    held: list[str] = []  # exporters such as Paddle's keep weights in Constant nodes; TensorRT prunes initializers
    for name, axis in candidates(model).items():
        tensor = by_name.get(name)
        if tensor is None:
            held.append(name)
            continue
        dims = list(tensor.dims)
        if name in skip:
            report.skipped.append(f"{name}: marked to skip")
        elif tensor.data_type not in _TYPE_NAMES:
            report.skipped.append(f"{name}: element type {tensor.data_type} is not float32, float16 or bfloat16")
        elif not holds_data(tensor):
            report.skipped.append(f"{name}: holds no data for its shape {dims} (weights stripped?)")
        elif axis >= len(dims) or dims[axis] % 4:
            report.skipped.append(f"{name}: axis {axis} of {dims} is not a multiple of 4")
        else:
            report.eligible[name] = axis
    if held:
        report.skipped.append(
            f"{names_preview(held)}: {len(held)} weight(s) held by Constant nodes; 'parity surgeon sanitize --fold-constants' makes them initializers"
        )
    return report


def values(tensor: Any, base_dir: str | Path | None = None) -> np.ndarray:
    """The weight's values, flat: float32/float16, or bfloat16 as its 16-bit words (NumPy has no bfloat16).
    An external tensor is read from ``base_dir`` (a read-only memory map)."""
    with onnx_external.WeightReader(base_dir) as reader:
        if tensor.data_type == BFLOAT16:
            if _is_external(tensor):
                return np.frombuffer(reader.buffer(tensor), dtype="<u2").copy()
            if tensor.raw_data:
                return np.frombuffer(tensor.raw_data, dtype="<u2").copy()
            # one bfloat16 per int32_data entry, in its low 16 bits
            return (np.asarray(tensor.int32_data, dtype=np.uint32) & 0xFFFF).astype(np.uint16)
        return np.array(reader.array(tensor)).reshape(-1)


def magnitudes(flat: np.ndarray, data_type: int) -> np.ndarray:
    """``|values|`` as float32 (a bfloat16 word is the upper half of a float32)."""
    if data_type == BFLOAT16:
        flat = (flat.astype(np.uint32) << 16).view(np.float32)
    return np.abs(flat.astype(np.float32))


def groups(flat: np.ndarray, dims: Iterable[int], axis: int) -> np.ndarray:
    """A view of ``flat`` as (outer, groups along ``axis``, inner, 4): each [o, g, i] is one group of 4."""
    dims = list(dims)
    outer = int(np.prod(dims[:axis], dtype=np.int64))
    inner = int(np.prod(dims[axis + 1 :], dtype=np.int64))
    return np.moveaxis(flat.reshape(outer, dims[axis] // 4, 4, inner), 3, 2)


def is_sparse(flat: np.ndarray, dims: Iterable[int], axis: int, data_type: int = FLOAT) -> bool:
    """Whether every group of 4 along ``axis`` has at least 2 zeros."""
    zeros = groups(magnitudes(flat, data_type), dims, axis) == 0
    return bool(np.all(np.count_nonzero(zeros, axis=-1) >= 2))


def pruned(flat: np.ndarray, dims: Iterable[int], axis: int, data_type: int = FLOAT) -> np.ndarray:
    """A copy of ``flat`` whose 2 smallest magnitudes in each group of 4 along ``axis`` are zero."""
    dims = list(dims)
    out = np.array(flat, copy=True)
    order = np.argsort(groups(magnitudes(flat, data_type), dims, axis), axis=-1, kind="stable")
    zero = np.zeros(order.shape, dtype=bool)
    np.put_along_axis(zero, order[..., :2], True, axis=-1)
    groups(out, dims, axis)[zero] = 0  # a view of ``out``: writing it writes ``out``
    return out


def pruned_tensor(tensor: Any, axis: int, base_dir: str | Path | None = None) -> Any:
    """A copy of the TensorProto with its values pruned along ``axis``, stored inline as raw data."""
    import onnx

    flat = pruned(values(tensor, base_dir), tensor.dims, axis, tensor.data_type)
    out = onnx.TensorProto()
    out.CopyFrom(tensor)
    for name in ("float_data", "int32_data", "external_data"):
        out.ClearField(name)
    out.data_location = onnx.TensorProto.DEFAULT
    out.raw_data = flat.astype(flat.dtype.newbyteorder("<"), copy=False).tobytes()
    return out


def sparse_weights(model: Any, base_dir: str | Path | None = None, skip: Iterable[str] = ()) -> set[str]:
    """The names of the eligible weights that are already 2:4 sparse."""
    by_name = {t.name: t for t in model.graph.initializer}
    found = set()
    for name, axis in eligible(model, skip).eligible.items():
        tensor = by_name[name]
        if is_sparse(values(tensor, base_dir), tensor.dims, axis, tensor.data_type):
            found.add(name)
    return found


def prune_model(model: Any, skip: Iterable[str] = (), base_dir: str | Path | None = None) -> tuple[Any, SparsityReport]:
    """A copy of ``model`` with each eligible weight (not named in ``skip``) pruned to 2:4 sparsity; pruned
    weights are stored inline (read from ``base_dir`` when external), the others stay as they were."""
    import onnx

    report = eligible(model, skip)
    result = onnx.ModelProto()
    result.CopyFrom(model)
    for tensor in result.graph.initializer:
        axis = report.eligible.get(tensor.name)
        if axis is not None:
            tensor.CopyFrom(pruned_tensor(tensor, axis, base_dir))
    return result, report


__all__ = [
    "SparsityReport",
    "candidates",
    "eligible",
    "groups",
    "holds_data",
    "is_sparse",
    "magnitudes",
    "prune_model",
    "pruned",
    "pruned_tensor",
    "sparse_weights",
    "values",
]
