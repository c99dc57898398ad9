"""Small ONNX graph helpers shared by the surgeon commands: load/save, topological order, producers.

Works on ``onnx.ModelProto`` directly (no graphsurgeon import) so that layerwise debugging of big models
does not pay for building a second in-memory graph.

Models past 2 GiB: :func:`load` with ``lazy=True`` keeps external weights in their files (``base_dir`` says
where they are: :func:`parity.onnx_models.data_dir`); :func:`save` given that ``base_dir`` streams them into
the output's data files (``parity.onnx_external.save_model``), so no weight is held twice and no protobuf
past 2 GiB is ever serialized. :func:`external_values` lets onnx-graphsurgeon read an external constant's
values from ``base_dir`` (its own ``LazyValues`` resolves them against the current directory).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parity.api import ModelError, UsageError, did_you_mean, first_line, onnx_external, onnx_models, refuse_overwrite
from parity.commands import note_external_data

IR_VERSION_FALLBACK = 10  # what onnxruntime loads; onnx.helper writes newer versions it cannot


def load(model: Any, *, lazy: bool = False, external_data_dir: str | Path | None = None, ignore_external_data: bool = False) -> Any:
    """A path or a ModelProto -> ModelProto (paths get one-line errors).

    ``lazy``: external tensors stay references into their files (checked to exist, in ``external_data_dir`` or
    the model's folder); pass :func:`base_dir` of the same arguments to :func:`save`. Without it a path's
    external data is read into the proto (fine for small models only). ``ignore_external_data``: the
    structure alone; the data files need not exist."""
    if isinstance(model, (str, Path)):
        if ignore_external_data:
            return onnx_models.load(model, load_external_data=False, ignore_external_data=True)
        return onnx_models.load(model, load_external_data=not lazy, external_data_dir=external_data_dir)
    return model


def save(
    model: Any,
    path: str | Path,
    source: str | Path | None = None,
    what: str = "the model",
    *,
    base_dir: str | Path | None = None,
    external: Any = None,
    source_data: Iterable[str | Path] = (),
    note: bool = True,
) -> Any:
    """Write ``model`` (with its data files, if any) only after it passes the full checker on the path and
    loads in onnxruntime (a missing CPU kernel is allowed: the model may be meant for another backend);
    refuse to overwrite ``source`` or any of ``source_data`` (the input's data files, see :func:`data_files`).

    ``base_dir``: where the model's still-external tensors are read from (they are streamed, never held);
    ``external``: a ``parity.api.ExternalData`` (the ``--save-external-data`` flags), default weights inside.
    A model that would pass 2 GiB as one file gets ``<output>.data`` anyway; with ``note`` one line on stderr
    says so. Returns the ``SavedModel``."""
    external = external or onnx_external.ExternalData()
    outputs = {"the output's data file": onnx_external.planned_data_files(model, path, external)}
    refuse_overwrite({"the input model": source, "the input model's external data": list(source_data)}, path, **outputs)
    saved = onnx_external.save_model(model, path, base_dir=base_dir, external=external, what=what, missing_kernels_ok=True)
    if note and saved.automatic:
        note_external_data(saved)
    return saved


def external_values(graph: Any, base_dir: str | Path | None) -> int:
    """Give each external constant of an onnx-graphsurgeon graph values read from ``base_dir`` (a memory map,
    copied only when graphsurgeon asks for them); the export still writes the original reference, so weights
    nobody reads stay in their file. Returns how many constants it changed."""
    if base_dir is None:
        return 0
    import onnx_graphsurgeon as gs
    from onnx_graphsurgeon.ir.tensor import LazyValues

    class ExternalValues(LazyValues):
        def load(self) -> Any:
            import numpy as np

            with onnx_external.WeightReader(folder) as reader:
                return np.array(reader.array(self.tensor))

    folder = Path(base_dir)
    changed = 0
    for tensor in graph.tensors().values():
        values = getattr(tensor, "_values", None) if isinstance(tensor, gs.Constant) else None
        if type(values) is LazyValues and onnx_external.is_external(values.tensor):
            tensor._values = ExternalValues(values.tensor)
            changed += 1
    return changed


def serialize(model: Any) -> bytes:
    """``model.SerializeToString()``, or a one-line ModelError past protobuf's 2 GiB limit."""
    try:
        return onnx_external.serialize(model, "the model")
    except ValueError as exc:  # protobuf's own refusal
        raise ModelError(f"the model is over protobuf's 2 GiB limit and cannot be written as one file ({exc})") from None


def keep_header(model: Any, original: Any) -> Any:
    """Copy IR version and opsets from ``original``: exporters (gs, onnx.helper) write newer IR versions."""
    model.ir_version = original.ir_version or IR_VERSION_FALLBACK
    del model.opset_import[:]
    model.opset_import.extend(original.opset_import)
    for field in ("producer_name", "producer_version", "domain", "model_version", "doc_string"):
        setattr(model, field, getattr(original, field))
    return onnx_models.keep_ir_valid(model)


@dataclass(frozen=True)
class NodeInfo:
    """Where a tensor comes from: index in topological order, node name, op type, inputs and outputs."""

    index: int
    name: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def topo_nodes(graph: Any) -> list[Any]:
    """Nodes in topological order (``parity.onnx_models.topological_order``); a cycle is an error."""
    nodes = list(graph.node)
    order = onnx_models.topological_order(nodes)
    if len(order) != len(nodes):
        raise ModelError(f"the graph has a cycle through {len(nodes) - len(order)} node(s); it is not a valid ONNX graph")
    return [nodes[i] for i in order]


def producers(model: Any) -> dict[str, NodeInfo]:
    """tensor name -> the node producing it, with the node's position in topological order."""
    out: dict[str, NodeInfo] = {}
    for index, node in enumerate(topo_nodes(model.graph)):
        info = NodeInfo(index, node.name or f"{node.op_type}_{index}", node.op_type, tuple(node.input), tuple(node.output))
        for t in node.output:
            if t:
                out[t] = info
    return out


def tensor_order(model: Any) -> list[str]:
    """Every node output, in topological order."""
    return [t for n in topo_nodes(model.graph) for t in n.output if t]


def constant_names(model: Any) -> set[str]:
    """Initializers and outputs of Constant nodes: values that need no input."""
    names = {i.name for i in model.graph.initializer}
    names.update(t for n in model.graph.node if n.op_type == "Constant" for t in n.output)
    return names


def value_types(model: Any) -> dict[str, tuple[int, tuple | None]]:
    """tensor -> (ONNX elem_type, shape or None) from inputs, outputs, value_info and initializers."""
    out: dict[str, tuple[int, tuple | None]] = {}
    g = model.graph
    for vi in [*g.value_info, *g.input, *g.output]:
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            continue
        shape = None
        if tt.HasField("shape"):
            shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
        if tt.elem_type or vi.name not in out:
            out[vi.name] = (tt.elem_type, shape)
    for init in g.initializer:
        out[init.name] = (init.data_type, tuple(init.dims))
    for n in g.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    out[n.output[0]] = (a.t.data_type, tuple(a.t.dims))
    return out


def infer_shapes(model: Any, data_prop: bool = True) -> tuple[Any, str]:
    """ONNX shape inference where it succeeds; returns the model and a one-line status."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=data_prop)
        return inferred, "ok"
    except Exception as exc:  # onnx raises InferenceError, ValidationError or protobuf errors
        return model, f"failed ({first_line(exc, 160)})"


def set_input_shapes(model: Any, shapes: dict[str, tuple]) -> None:
    """Overwrite graph input shapes in place (``--override-input-shapes``), dropping stale inferred shapes."""
    inputs = {vi.name: vi for vi in model.graph.input}
    for name, dims in shapes.items():
        if name not in inputs:
            raise UsageError(f"the model has no input '{name}'{did_you_mean(name, inputs)}; inputs: {', '.join(inputs)}")
        shape = inputs[name].type.tensor_type.shape
        del shape.dim[:]
        for d in dims:
            dim = shape.dim.add()
            if isinstance(d, int):
                dim.dim_value = d
            elif d:
                dim.dim_param = str(d)
    if shapes:
        del model.graph.value_info[:]
        for out in model.graph.output:  # outputs' dims may depend on the inputs': let inference redo them
            tt = out.type.tensor_type
            if tt.HasField("shape"):  # rank kept: where inference cannot redo them (a Reshape of computed dims),
                for dim in tt.shape.dim:  # the output still has a shape, as the full checker requires
                    dim.Clear()
