"""Weight stripping and reconstruction (``parity surgeon weight-strip`` / ``weight-reconstruct``).

A stripped weight keeps its name, element type and dims and loses its values; its ``doc_string`` becomes
``TRT_WEIGHTLESS/`` (``TRT_WEIGHTLESS/SPARSE_2_4`` when the weight was 2:4 sparse) and the model's
``doc_string`` gets ``TRT_WEIGHTLESS`` appended: the markers TensorRT's ONNX parser reads to build a
weightless engine that is refitted later, and that Polygraphy writes. Which weights are stripped follows
Polygraphy 0.53.6's rules (see :func:`strip_targets`). Reconstruction fills the marked weights with random
normal values (the SPARSE_2_4 ones then pruned to 2:4 sparsity), for functional tests of such a model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from parity_surgeon import sparsity

WEIGHTLESS = "TRT_WEIGHTLESS"
SPARSE = "SPARSE_2_4"
UINT8 = 2  # onnx.TensorProto.UINT8: quantized weights are never stripped (TensorRT needs them to build)

# where a Q -> DQ chain or a Transpose may feed each op for its first node's weight to be stripped
_FED_POSITIONS = {"Conv": (0,), "ConvTranspose": (0,), "Gemm": (0, 1, 2), "MatMul": (0, 1)}
# how many inputs each single op takes to count as a weight reader
_ARITIES = {"Conv": (2, 3), "ConvTranspose": (2, 3), "Gemm": (2, 3), "MatMul": (2,), "Gather": (2,), "Slice": (3, 4, 5)}
# below these element counts a weight stays (small index tensors of Gather/Slice are kept by TensorRT anyway)
_SIZE_THRESHOLDS = {"Conv": 1, "ConvTranspose": 1, "Gather": 1024, "Gemm": 1, "Slice": 1024, "plugin": 1024}
# the only inputs stripped of these ops
_INPUTS_TO_STRIP = {"QuantizeLinear": (0,), "Slice": (0,)}


@dataclass
class StripReport:
    stripped: list[str] = field(default_factory=list)
    sparse: list[str] = field(default_factory=list)
    excluded_missing: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f"stripped {len(self.stripped)} weight(s), {len(self.sparse)} of them 2:4 sparse (marked {SPARSE})"]

    def warnings(self) -> list[str]:
        if not self.excluded_missing:
            return []
        return [f"--exclude-list names weights the model does not strip or hold: {', '.join(self.excluded_missing)}"]


def _is_plugin(node: Any) -> bool:
    import onnx

    return not onnx.defs.has(node.op_type)


def _first_nodes(model: Any) -> list[tuple[Any, str]]:
    """The nodes whose weight inputs may be stripped, each with the op whose threshold applies: single weight
    readers (Conv, ConvTranspose, Gemm, MatMul, Gather, Slice), the QuantizeLinear of a Q -> DQ chain and the
    Transpose that feed one of Conv, ConvTranspose, Gemm or MatMul, and plugins (ops ONNX does not define)."""
    consumers: dict[str, list[tuple[Any, int]]] = {}
    for node in model.graph.node:
        for index, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, index))

    def feeds_reader(output: str) -> bool:
        return any(n.op_type in _FED_POSITIONS and len(n.input) in _ARITIES[n.op_type] and i in _FED_POSITIONS[n.op_type] for n, i in consumers.get(output, ()))

    found = []
    for node in model.graph.node:
        if node.op_type in _ARITIES and len(node.input) in _ARITIES[node.op_type]:
            found.append((node, node.op_type))
        elif node.op_type == "QuantizeLinear" and len(node.input) in (2, 3) and node.output:
            dq = [n for n, i in consumers.get(node.output[0], ()) if n.op_type == "DequantizeLinear" and i == 0 and len(n.input) in (2, 3)]
            if any(feeds_reader(n.output[0]) for n in dq if n.output):
                found.append((node, node.op_type))
        elif node.op_type == "Transpose" and len(node.input) == 1 and node.output and feeds_reader(node.output[0]):
            found.append((node, node.op_type))
        elif _is_plugin(node):
            found.append((node, "plugin"))
    return found


def strip_targets(model: Any, exclude: Iterable[str] = ()) -> tuple[set[str], set[str]]:
    """``(names of the initializers to strip, names of ``exclude`` that were met)``. An input of a node from
    :func:`_first_nodes` is stripped when it is an initializer, not uint8, not in ``exclude``, at an input
    position the op allows (QuantizeLinear and Slice: input 0 only) and at least the op's size threshold
    (Gather, Slice and plugins: 1024 elements)."""
    exclude = set(exclude)
    weights = {t.name: t for t in model.graph.initializer}
    strip: set[str] = set()
    met: set[str] = set()
    for node, kind in _first_nodes(model):
        for index, name in enumerate(node.input):
            tensor = weights.get(name)
            if tensor is None or (node.op_type in _INPUTS_TO_STRIP and index not in _INPUTS_TO_STRIP[node.op_type]):
                continue
            if tensor.data_type == UINT8:
                continue
            if name in exclude:
                met.add(name)
                continue
            if int(np.prod(tensor.dims, dtype=np.int64)) < _SIZE_THRESHOLDS.get(kind, 0):
                continue
            strip.add(name)
    return strip, met


def strip_weights(model: Any, exclude: Iterable[str] = (), base_dir: str | Path | None = None) -> tuple[Any, StripReport]:
    """A copy of ``model`` with the weights :func:`strip_targets` names emptied and marked (see the module's
    docstring); ``base_dir``: where external weights are read from for the 2:4 sparsity check."""
    import onnx

    exclude = set(exclude)
    targets, met = strip_targets(model, exclude)
    sparse = sparsity.sparse_weights(model, base_dir) & targets
    result = onnx.ModelProto()
    result.CopyFrom(model)
    report = StripReport(excluded_missing=sorted(exclude - met))
    for tensor in result.graph.initializer:
        if tensor.name not in targets:
            continue
        for name in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data", "external_data"):
            tensor.ClearField(name)
        tensor.data_location = onnx.TensorProto.DEFAULT
        tensor.doc_string = f"{WEIGHTLESS}/{SPARSE if tensor.name in sparse else ''}"
        report.stripped.append(tensor.name)
        if tensor.name in sparse:
            report.sparse.append(tensor.name)
    if report.stripped:
        result.doc_string = "-".join(filter(None, [result.doc_string, WEIGHTLESS]))
    return result, report


def is_stripped(tensor: Any) -> bool:
    return tensor.doc_string.startswith(WEIGHTLESS)


def random_values(data_type: int, dims: Iterable[int], rng: np.random.Generator) -> np.ndarray:
    """Standard-normal values of the tensor's element type, as stored in raw data (bfloat16: the upper halves
    of float32 words; integers: the normal values truncated). Raises ValueError for a type NumPy cannot hold."""
    import onnx

    dims = tuple(int(d) for d in dims)
    normal = rng.standard_normal(dims, dtype=np.float32)
    if data_type == sparsity.BFLOAT16:
        return (normal.view(np.uint32) >> 16).astype("<u2")
    if data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
        raise ValueError(onnx.helper.tensor_dtype_to_string(data_type))
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(data_type))
    except Exception:  # float8, 4-bit types: no NumPy dtype
        raise ValueError(onnx.helper.tensor_dtype_to_string(data_type)) from None
    if dtype.kind not in "fciub":  # ml_dtypes' float8/int4 types: their raw bytes are not a plain cast
        raise ValueError(onnx.helper.tensor_dtype_to_string(data_type))
    return normal.astype(dtype.newbyteorder("<"))


@dataclass
class ReconstructReport:
    reconstructed: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    sparse_not_pruned: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f"reconstructed {len(self.reconstructed)} weight(s) with random values, {len(self.pruned)} pruned to 2:4 sparsity ({SPARSE})"]

    def warnings(self) -> list[str]:
        if not self.sparse_not_pruned:
            return []
        return [f"marked {SPARSE} but not prunable (not a MatMul/Gemm/Conv weight along a multiple of 4): {', '.join(self.sparse_not_pruned)}"]


def reconstruct_weights(model: Any, seed: int | None = None) -> tuple[Any, ReconstructReport]:
    """A copy of ``model`` whose weights marked ``TRT_WEIGHTLESS`` hold random normal values (``seed``: the
    same values each run), those marked ``SPARSE_2_4`` then pruned to 2:4 sparsity. The markers are removed:
    the copy holds weights again. Raises ValueError naming a marked weight that still holds data or whose
    element type cannot be generated."""
    import onnx

    rng = np.random.default_rng(seed)
    result = onnx.ModelProto()
    result.CopyFrom(model)
    report = ReconstructReport()
    sparse = set()
    for tensor in result.graph.initializer:
        if not is_stripped(tensor):
            continue
        if sparsity.holds_data(tensor) and int(np.prod(tensor.dims, dtype=np.int64)) > 0:
            raise ValueError(f"weight '{tensor.name}' is marked {WEIGHTLESS} but holds data: not a stripped model")
        try:
            filled = random_values(tensor.data_type, tensor.dims, rng)
        except ValueError as exc:
            raise ValueError(f"weight '{tensor.name}': cannot generate values of type {exc}") from None
        tensor.raw_data = filled.tobytes()
        if tensor.doc_string.split("/", 1)[-1] == SPARSE:
            sparse.add(tensor.name)
        tensor.doc_string = ""
        report.reconstructed.append(tensor.name)
    prunable = sparsity.eligible(result).eligible
    report.sparse_not_pruned = sorted(sparse - set(prunable))
    if sparse & set(prunable):
        result, _ = sparsity.prune_model(result, skip=set(prunable) - sparse)
    report.pruned = sorted(sparse & set(prunable))
    if report.reconstructed:
        result.doc_string = "-".join(part for part in result.doc_string.split("-") if part != WEIGHTLESS)
    return result, report


__all__ = ["SPARSE", "WEIGHTLESS", "ReconstructReport", "StripReport", "is_stripped", "random_values", "reconstruct_weights", "strip_targets", "strip_weights"]
