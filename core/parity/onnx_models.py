"""Reading ONNX models with one-line errors; shared by every ONNX-consuming plugin.

``onnx`` is imported inside functions: importing this module is free.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from parity.data.meta import TensorMeta
from parity.errors import ModelError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import onnx

# IR versions onnxruntime accepts lag behind what onnx writes; this is the fix we tell users.
IR_FIX = "set model.ir_version = 10 before saving (onnx.helper.make_model writes the newest IR version)"


def check_path(path: str | Path) -> Path:
    p = Path(path)
    if not p.exists():
        raise ModelError(f"model not found: {p}")
    if p.is_dir():
        raise ModelError(f"model path is a directory: {p}")
    return p


def load(path: str | Path, load_external_data: bool = True) -> onnx.ModelProto:
    """``onnx.load`` with clean errors for missing, empty, truncated or non-ONNX files."""
    import onnx
    from google.protobuf.message import DecodeError

    p = check_path(path)
    if p.stat().st_size == 0:
        raise ModelError(f"{p}: empty file, not an ONNX model")
    try:
        model = onnx.load(str(p), load_external_data=load_external_data)
    except (DecodeError, RuntimeError, ValueError, OSError) as exc:
        raise ModelError(f"{p}: not a valid ONNX model ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'corrupt'})") from None
    if not model.graph.node and not model.graph.output:
        raise ModelError(f"{p}: not a valid ONNX model (no graph)")
    return model


def dtype_of(elem_type: int) -> np.dtype | None:
    import numpy as np
    import onnx

    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return None


def value_meta(value_info) -> TensorMeta:
    tensor_type = value_info.type.tensor_type
    dtype = dtype_of(tensor_type.elem_type) if tensor_type.elem_type else None
    if not tensor_type.HasField("shape"):
        return TensorMeta(dtype, None)
    dims: list[int | str | None] = []
    for d in tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return TensorMeta(dtype, tuple(dims))


def graph_inputs(model: onnx.ModelProto) -> dict[str, TensorMeta]:
    """Real inputs: graph inputs that are not also initializers (old exporters list weights as inputs)."""
    weights = {init.name for init in model.graph.initializer}
    return {vi.name: value_meta(vi) for vi in model.graph.input if vi.name not in weights}


def graph_outputs(model: onnx.ModelProto) -> dict[str, TensorMeta]:
    return {vi.name: value_meta(vi) for vi in model.graph.output}


MARK_ALL = "mark all"


def _wants_all(outputs: Sequence[str]) -> bool:
    return list(outputs) in (["mark", "all"], [MARK_ALL], ["*"])


def mark_outputs(model: onnx.ModelProto, outputs: Sequence[str], exclude: Sequence[str] = ()) -> onnx.ModelProto:
    """``--onnx-outputs``: make named tensors, or every tensor (``'mark all'``), the graph outputs, minus
    ``exclude``. Edits ``model`` in place and returns it; shared by every backend that runs ONNX."""
    import onnx

    from parity.errors import UsageError
    from parity.util.text import did_you_mean

    graph = model.graph
    produced = [out for node in graph.node for out in node.output if out]
    existing = {vi.name: vi for vi in graph.output}
    if _wants_all(outputs):
        wanted = list(dict.fromkeys([*produced, *existing]))
    else:
        known = set(produced) | set(existing) | {vi.name for vi in graph.input}
        for name in outputs:
            if name not in known:
                raise UsageError(f"--onnx-outputs: the model has no tensor '{name}'{did_you_mean(name, known)}")
        wanted = list(outputs)
    wanted = [n for n in wanted if n not in set(exclude)]
    infos = {vi.name: vi for vi in [*graph.value_info, *graph.output, *graph.input]}
    del graph.output[:]
    for name in wanted:
        # value_info may carry stale shapes for tensors that are now outputs: outputs win
        graph.output.append(infos.get(name) or onnx.helper.make_empty_tensor_value_info(name))
    return model


def read_inputs(path: str) -> dict[str, TensorMeta]:
    return graph_inputs(load(path, load_external_data=False))


def is_onnx(head: bytes) -> bool:
    """ONNX files are protobufs starting with field 1 (ir_version, varint): byte 0x08."""
    return head[:1] == b"\x08"


def describe(path: str, show: set[str] | frozenset[str] = frozenset(), options: object = None) -> str:
    """The text of ``parity inspect model`` for an ONNX file."""
    model = load(path, load_external_data=False)
    graph = model.graph
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
    lines = [
        f"ONNX model: {path}",
        f"  IR version {model.ir_version} | opsets: {opsets} | producer: {model.producer_name or '?'} {model.producer_version}".rstrip(),
        f"  {len(graph.node)} nodes, {len(graph.initializer)} initializers",
        "  inputs:",
    ]
    lines += [f"    {name}: {meta}" for name, meta in graph_inputs(model).items()]
    lines.append("  outputs:")
    lines += [f"    {name}: {meta}" for name, meta in graph_outputs(model).items()]
    if "layers" in show or "attrs" in show:
        lines.append("  nodes:")
        for i, node in enumerate(graph.node):
            lines.append(f"    [{i}] {node.name or '<unnamed>'} ({node.op_type}): {list(node.input)} -> {list(node.output)}")
            if "attrs" in show:
                import onnx

                for attr in node.attribute:
                    value = onnx.helper.get_attribute_value(attr)
                    if isinstance(value, bytes):
                        value = value.decode(errors="replace")
                    text = repr(value) if not hasattr(value, "dims") else f"tensor{list(value.dims)}"
                    lines.append(f"        {attr.name} = {text[:120]}")
    if "weights" in show:
        import numpy as np
        import onnx.numpy_helper as nh

        lines.append("  initializers:")
        for init in graph.initializer:
            arr = nh.to_array(init) if not init.external_data else None
            stats = "" if arr is None or arr.size == 0 else f" | mean={float(arr.astype(np.float64).mean()):.4g} min={arr.min()} max={arr.max()}"
            lines.append(f"    {init.name}: {dtype_of(init.data_type)}{list(init.dims)}{stats}")
    return "\n".join(lines)
