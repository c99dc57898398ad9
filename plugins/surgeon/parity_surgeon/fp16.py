"""fp32 -> fp16 conversion of ONNX models (``parity convert --fp-to-fp16``), without onnxconverter-common.

Rule: every float32 tensor gets a *home* precision, fp16 unless it is produced by a blocked node (kept
fp32), is a graph input kept fp32 (``keep_io_types``), or is a weight read only by blocked nodes. Every use
whose wanted precision differs from the tensor's home gets one shared ``Cast``. Blocked nodes are the user's
op types and node names, nodes whose ONNX schema does not accept float16 on a float input, nodes of custom
domains, and (when onnxruntime is installed) op types onnxruntime reports having no fp16 kernel for: the
model is loaded and each such op type is blocked until it loads. Names of computed tensors are kept, so a
layerwise comparison against the fp32 model matches tensors by name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from parity_surgeon import graph as g

FP16_MAX = 65504.0
CONTROL_FLOW = {"If", "Loop", "Scan"}  # bodies see outer-scope tensors by name: keep them fp32
_NO_KERNEL = re.compile(r"Could not find an implementation for (\w+)\(\d+\)")


@dataclass
class Fp16Report:
    converted_tensors: int = 0
    casts_added: int = 0
    blocked_nodes: list[str] = field(default_factory=list)
    auto_blocked_ops: list[str] = field(default_factory=list)  # op types onnxruntime could not run in fp16
    clamped_weights: dict[str, int] = field(default_factory=dict)  # weight -> values clamped to +-65504

    def lines(self) -> list[str]:
        out = [f"fp16: {self.converted_tensors} tensors converted, {self.casts_added} Cast nodes added, {len(self.blocked_nodes)} nodes kept fp32"]
        if self.auto_blocked_ops:
            out.append(f"kept fp32 because onnxruntime has no fp16 kernel: {', '.join(self.auto_blocked_ops)}")
        if self.clamped_weights:
            out.append("weights clamped to the fp16 range: " + ", ".join(f"{k} ({v})" for k, v in self.clamped_weights.items()))
        return out


def convert_to_fp16(
    model: Any,
    keep_io_types: bool = False,
    op_block_list: Iterable[str] = (),
    node_block_list: Iterable[str] = (),
    check_onnxruntime: bool = True,
) -> tuple[Any, Fp16Report]:
    """Return an fp16 copy of ``model`` (path or ModelProto) and a report; ``model`` is not modified."""
    from parity.plugins import module_available

    original = g.load(model)
    ops = set(op_block_list)
    names = set(node_block_list)
    known_nodes = {n.name for n in original.graph.node}
    unknown = sorted(names - known_nodes)
    if unknown:
        from parity.errors import UsageError
        from parity.util.text import did_you_mean

        raise UsageError(f"--node-block-list: the model has no node '{unknown[0]}'{did_you_mean(unknown[0], known_nodes)}")
    auto: list[str] = []
    for _ in range(32):
        converted, report = _convert(original, keep_io_types, ops, names)
        if not check_onnxruntime or not module_available("onnxruntime"):
            break
        missing = _ort_missing_kernel(converted)
        if not missing or missing in ops:
            break
        ops.add(missing)
        auto.append(missing)
    report.auto_blocked_ops = auto
    return converted, report


def _ort_missing_kernel(model: Any) -> str | None:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        ort.InferenceSession(model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's pybind exceptions
        found = _NO_KERNEL.search(str(exc))
        return found.group(1) if found else None
    return None


def _schema_blocks(node: Any, float_inputs: list[int], opset: int) -> bool:
    """Whether the op's schema refuses float16 on an input that is float32 now."""
    import onnx

    if node.domain not in ("", "ai.onnx"):
        return True
    if node.op_type in CONTROL_FLOW:
        return True
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except Exception:  # unknown op: leave it as it is
        return True
    constraints = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    formal = list(schema.inputs)
    for i in float_inputs:
        if not formal:
            return True
        param = formal[min(i, len(formal) - 1)]  # variadic inputs repeat the last formal input
        allowed = constraints.get(param.type_str, {param.type_str})
        if "tensor(float16)" not in allowed:
            return True
    return False


def _convert(original: Any, keep_io: bool, block_ops: set[str], block_names: set[str]) -> tuple[Any, Fp16Report]:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    FLOAT, HALF = TensorProto.FLOAT, TensorProto.FLOAT16
    report = Fp16Report()
    inferred, _ = g.infer_shapes(original, data_prop=False)
    types = g.value_types(inferred)
    model = onnx.ModelProto()
    model.CopyFrom(original)
    graph = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)

    def is_float(t: str) -> bool:
        return bool(t) and types.get(t, (0, None))[0] == FLOAT

    blocked: set[int] = set()
    for i, node in enumerate(graph.node):
        floats = [k for k, t in enumerate(node.input) if is_float(t)]
        has_float = floats or any(is_float(t) for t in node.output)
        if node.op_type in block_ops or node.name in block_names or (has_float and _schema_blocks(node, floats, opset)):
            blocked.add(i)
            report.blocked_nodes.append(node.name or f"{node.op_type}_{i}")

    consumers: dict[str, list[int]] = {}
    for i, node in enumerate(graph.node):
        for t in node.input:
            consumers.setdefault(t, []).append(i)

    # home precision of every float tensor (True = fp16)
    home: dict[str, bool] = {}
    for vi in graph.input:
        if is_float(vi.name):
            home[vi.name] = not keep_io
    for init in graph.initializer:
        if init.data_type == FLOAT:
            users = consumers.get(init.name, [])
            home[init.name] = not users or any(u not in blocked for u in users)
    for i, node in enumerate(graph.node):
        for t in node.output:
            if is_float(t):
                home[t] = i not in blocked

    # rewrite weights, constants and dtype attributes of unblocked nodes
    for init in graph.initializer:
        if home.get(init.name):
            arr = numpy_helper.to_array(init)
            clipped = int(np.count_nonzero(np.abs(arr) > FP16_MAX))
            if clipped:
                report.clamped_weights[init.name] = clipped
            init.CopyFrom(numpy_helper.from_array(np.clip(arr, -FP16_MAX, FP16_MAX).astype(np.float16), init.name))
    for i, node in enumerate(graph.node):
        if i in blocked:
            continue
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == FLOAT:
                arr = numpy_helper.to_array(attr.t)
                attr.t.CopyFrom(numpy_helper.from_array(np.clip(arr, -FP16_MAX, FP16_MAX).astype(np.float16), attr.t.name))
            elif attr.name in ("to", "dtype") and attr.type == onnx.AttributeProto.INT and attr.i == FLOAT:
                attr.i = HALF

    # graph outputs whose home differs from what the caller gets: rename the internal tensor, cast at the end
    tail: list[Any] = []
    for out in graph.output:
        if out.name not in home:
            continue
        want16 = not keep_io
        if home[out.name] != want16:
            inner = f"{out.name}__{'fp16' if home[out.name] else 'fp32'}"
            _rename(graph, out.name, inner)
            home[inner] = home.pop(out.name)
            tail.append(helper.make_node("Cast", [inner], [out.name], name=f"{out.name}__cast_out", to=HALF if want16 else FLOAT))
        out.type.tensor_type.elem_type = HALF if want16 else FLOAT
    for vi in graph.input:
        if vi.name in home and home[vi.name]:
            vi.type.tensor_type.elem_type = HALF

    # one shared Cast per tensor and wanted precision, placed right after the tensor is available
    casts: dict[tuple[str, bool], str] = {}
    new_nodes: list[Any] = []

    def cast_of(t: str, want16: bool) -> str:
        key = (t, want16)
        if key not in casts:
            casts[key] = f"{t}__{'fp16' if want16 else 'fp32'}"
            pending.append(helper.make_node("Cast", [t], [casts[key]], name=f"{casts[key]}__cast", to=HALF if want16 else FLOAT))
        return casts[key]

    pending: list[Any] = []
    for i, node in enumerate(graph.node):
        want16 = i not in blocked
        for k, t in enumerate(node.input):
            if t in home and home[t] != want16:
                node.input[k] = cast_of(t, want16)
        new_nodes.extend(pending)  # a cast must precede its consumer; producers come earlier in a sorted graph
        pending.clear()
        new_nodes.append(node)
    new_nodes.extend(tail)
    report.casts_added = len(casts) + len(tail)
    report.converted_tensors += sum(1 for v in home.values() if v)
    del graph.node[:]
    graph.node.extend(g.topo_nodes(_graph_with(new_nodes, graph)))
    del graph.value_info[:]
    model, _ = g.infer_shapes(model, data_prop=False)
    return g.keep_header(model, original), report


def _graph_with(nodes: list[Any], graph: Any) -> Any:
    import onnx

    tmp = onnx.GraphProto()
    tmp.node.extend(nodes)
    return tmp


def _rename(graph: Any, old: str, new: str) -> None:
    for node in graph.node:
        for k, t in enumerate(node.output):
            if t == old:
                node.output[k] = new
        for k, t in enumerate(node.input):
            if t == old:
                node.input[k] = new
    for init in graph.initializer:
        if init.name == old:
            init.name = new


class Fp16FromOnnx:
    """Lazy loader twin of :func:`convert_to_fp16` (returns only the model)."""

    def __init__(self, model: Any, **options: Any) -> None:
        self.model, self.options = model, options

    def __call__(self) -> Any:
        from parity.backend.base import invoke_if_callable

        model, _ = invoke_if_callable(self.model)
        return convert_to_fp16(model, **self.options)[0]
