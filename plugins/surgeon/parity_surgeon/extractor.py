"""``parity surgeon extract``: cut the subgraph between given tensors out of a model.

Shapes and dtypes given as ``auto`` come from ONNX shape inference; where inference cannot tell, the model
is run once with onnxruntime on random inputs with those tensors marked as outputs, and the observed
shapes and dtypes are used (the graph's dynamic dims are then fixed to what was seen: say so with a shape).

Models with external data: given a lazily loaded model and its ``base_dir``, the cut keeps the weights of the
kept nodes as references into their files (written with ``graph.save(..., base_dir=...)``, the output's data
holds only those) and no weight is read; the fallback run gives onnxruntime the graph-only message plus the
data's folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parity.api import UsageError, did_you_mean, onnx_models, parse_shape
from parity_surgeon import graph as g
from parity_surgeon.naming import safe_name

AUTO = "auto"


@dataclass(frozen=True)
class TensorSpec:
    """A boundary tensor: ``shape``/``dtype`` of ``None`` mean auto."""

    name: str
    shape: tuple | None = None
    dtype: Any = None


def parse_input_spec(text: str) -> TensorSpec:
    """``name:shape:dtype`` with either part ``auto``: ``x:[1,3]:float32``, ``x:auto:auto``, ``x``."""
    import numpy as np

    parts = text.rsplit(":", 2)
    if len(parts) == 3 and (parts[1] == AUTO or parts[1].startswith("[")):
        name, shape_text, dtype_text = parts
    elif len(parts) >= 2 and text.endswith("]"):
        name, shape_text, dtype_text = text[: text.rfind(":[")], text[text.rfind(":[") + 1 :], AUTO
    else:
        name, shape_text, dtype_text = text, AUTO, AUTO
    if not name:
        raise UsageError(f"--inputs: cannot read '{text}'; write name:shape:dtype, e.g. x:[1,3,224,224]:float32 or x:auto:auto")
    shape = None if shape_text == AUTO else parse_shape(f"{name}:{shape_text}", "--inputs")[1]
    return TensorSpec(name, shape, _dtype(dtype_text, text, "--inputs", np))


def parse_output_spec(text: str) -> TensorSpec:
    """``name:dtype`` or ``name`` (auto)."""
    import numpy as np

    name, sep, dtype_text = text.rpartition(":")
    if not sep or not _looks_like_dtype(dtype_text, np):
        name, dtype_text = text, AUTO
    return TensorSpec(name, None, _dtype(dtype_text, text, "--outputs", np))


def _looks_like_dtype(text: str, np: Any) -> bool:
    if text == AUTO:
        return True
    try:
        np.dtype(text)
        return True
    except TypeError:
        return False


def _dtype(text: str, whole: str, option: str, np: Any) -> Any:
    if text == AUTO:
        return None
    try:
        return np.dtype(text)
    except TypeError:
        raise UsageError(f"{option}: unknown dtype '{text}' in '{whole}' (e.g. float32, float16, int64, or auto)") from None


RAN = "Ran the model once in onnxruntime for the shapes and dtypes shape inference could not tell"


def extract(
    model: Any,
    inputs: Sequence[TensorSpec | str],
    outputs: Sequence[TensorSpec | str],
    feed: Mapping[str, Any] | None = None,
    base_dir: str | Path | None = None,
    *,
    force_fallback: bool = False,
    notes: list[str] | None = None,
    events: list[str] | None = None,
) -> Any:
    """Return the subgraph of ``model`` computing ``outputs`` from ``inputs`` (a new ModelProto); with no
    ``inputs``, from the model's own inputs (those the subgraph reads), and with no ``outputs``, to the model's
    own outputs, as Polygraphy does.

    Shapes and dtypes not given come from the model's own type information; where it has none, from ONNX
    shape inference (``events`` gets "Shape inference completed successfully"), and where that cannot tell,
    from one onnxruntime run (``feed``, or generated inputs with dynamic dims 1, noted in ``notes``).
    ``force_fallback``: every boundary tensor's shape and dtype from that run, over what the model says.

    ``base_dir``: the folder of ``model``'s external data when it was loaded lazily; the kept weights stay
    references into it."""
    import onnx_graphsurgeon as gs

    original = g.load(model)
    own_inputs = not inputs
    if own_inputs:
        weights = {i.name for i in original.graph.initializer}
        inputs = [vi.name for vi in original.graph.input if vi.name not in weights]
    if not outputs:
        outputs = [vi.name for vi in original.graph.output]
    ins = [s if isinstance(s, TensorSpec) else TensorSpec(s) for s in inputs]
    outs = [s if isinstance(s, TensorSpec) else TensorSpec(s) for s in outputs]
    if not outs:
        raise UsageError("--outputs: name at least one output tensor")
    known = set(g.tensor_order(original)) | {vi.name for vi in original.graph.input} | {i.name for i in original.graph.initializer}
    for spec, option in [*((s, "--inputs") for s in ins), *((s, "--outputs") for s in outs)]:
        if spec.name not in known:
            raise UsageError(f"{option}: the model has no tensor '{spec.name}'{did_you_mean(spec.name, known)}")
    inferred, types = original, g.value_types(original)
    if not force_fallback and any(not _resolved(s, types, output) for group, output in ((ins, False), (outs, True)) for s in group):
        inferred, status = g.infer_shapes(original)
        types = g.value_types(inferred)
        if events is not None and status == "ok":
            events.append("Shape inference completed successfully")
    wanted = [s.name for s in [*ins, *outs]] if force_fallback else [s.name for s in [*ins, *outs] if not _resolved(s, types, s in outs)]

    def run(names: Sequence[str]) -> dict[str, Any]:
        graph_inputs = {vi.name for vi in original.graph.input}
        run_feed = dict(feed) if feed is not None else fallback_feed(original, notes)
        if events is not None:
            events.append(RAN)
        seen = observe(original, [n for n in dict.fromkeys(names) if n not in graph_inputs], run_feed, base_dir, with_feed=True)
        return {n: seen[n] for n in names if n in seen}

    observed = run(wanted) if wanted else {}
    if force_fallback:  # what the run saw wins over the model's own shapes and dtypes
        import onnx

        types = {**types, **{n: (onnx.helper.np_dtype_to_tensor_dtype(a.dtype), tuple(a.shape)) for n, a in observed.items()}}
    graph = gs.import_onnx(inferred)
    tensors = graph.tensors()
    graph.inputs = [_boundary(tensors[s.name], s, types, observed, gs, is_input=True) for s in ins]
    graph.outputs = [_boundary(tensors[s.name], s, types, observed, gs, is_input=False) for s in outs]
    graph.cleanup(remove_unused_graph_inputs=own_inputs).toposort()
    _check_closed(graph, {s.name for s in ins})
    result = gs.export_onnx(graph, do_type_check=False)
    del result.graph.value_info[:]  # stale shapes from the full graph; re-infer on the cut
    result, _ = g.infer_shapes(g.keep_header(result, original))
    unshaped = [vi for vi in result.graph.output if not vi.type.tensor_type.HasField("shape")]
    if unshaped:  # onnx.checker's full check wants them: what inference on the cut could not tell, a run tells
        seen = {**observed, **run([vi.name for vi in unshaped if vi.name not in observed])}
        for vi in unshaped:
            if vi.name in seen:
                vi.type.tensor_type.shape.SetInParent()
                for d in seen[vi.name].shape:
                    vi.type.tensor_type.shape.dim.add().dim_value = d
    return result


def _resolved(spec: TensorSpec, types: Mapping[str, tuple], output: bool = False) -> bool:
    """Whether ``spec``'s dtype and shape are known (an output's shape comes from inference on the cut)."""
    elem, shape = types.get(spec.name, (0, None))
    return (spec.dtype is not None or bool(elem)) and (output or spec.shape is not None or shape is not None)


def _boundary(tensor: Any, spec: TensorSpec, types: Mapping[str, tuple], observed: Mapping[str, Any], gs: Any, is_input: bool) -> Any:
    elem, shape = types.get(spec.name, (0, None))
    dtype = spec.dtype if spec.dtype is not None else (onnx_models.dtype_of(elem) if elem else None)
    if is_input:
        shape = spec.shape if spec.shape is not None else shape
    if spec.name in observed:
        arr = observed[spec.name]
        dtype = dtype if dtype is not None else arr.dtype
        shape = shape if shape is not None else tuple(arr.shape)
    if isinstance(tensor, gs.Constant):
        if not is_input:
            return tensor  # a constant output is legal ONNX; nothing to do
        var = gs.Variable(tensor.name)  # a weight turned into an input: the caller feeds it
        for node in list(tensor.outputs):
            for i, t in enumerate(node.inputs):
                if t is tensor:
                    node.inputs[i] = var
        tensor = var
    if is_input:
        tensor.inputs.clear()  # cut: the tensor now comes from outside
    tensor.dtype = dtype
    tensor.shape = None if shape is None else [d if isinstance(d, int) and d >= 0 else (d if isinstance(d, str) else None) for d in shape]
    return tensor


def _check_closed(graph: Any, given: set[str]) -> None:
    """Every tensor the kept nodes read must be a boundary input or a constant."""
    import onnx_graphsurgeon as gs

    produced = {t.name for n in graph.nodes for t in n.outputs}
    for node in graph.nodes:
        for t in node.inputs:
            if isinstance(t, gs.Variable) and t.name and t.name not in produced and t.name not in given:
                raise UsageError(f"the subgraph also needs tensor '{t.name}' (read by node '{node.name}'); add it to --inputs")


def observe(model: Any, names: Sequence[str], feed: Mapping[str, Any] | None = None, base_dir: str | Path | None = None, with_feed: bool = False) -> dict[str, Any]:
    """Run the model once with ``names`` marked as outputs (the fallback when shape inference cannot tell)
    and return their values (with ``with_feed``, the generated inputs too); external weights are read by
    onnxruntime from ``base_dir``."""
    from parity_onnxrt.api import ModifyOnnxOutputs, SessionFromOnnx  # here: they load onnxrt's loaders (numpy, onnxruntime)

    from parity.api import DataLoader

    session = SessionFromOnnx(ModifyOnnxOutputs(lambda: _copy(model), list(names)), base_dir=base_dir)()
    data = dict(feed) if feed is not None else DataLoader(onnx_models.graph_inputs(model))[0]
    values = dict(zip(names, session.run(list(names), data)))
    return {**data, **values} if with_feed else values


def fallback_feed(model: Any, notes: list[str] | None = None) -> dict[str, Any]:
    """Generated inputs for a fallback run: dynamic dims are 1 (as Polygraphy's), each such input noted."""
    from parity.api import DataLoader

    shapes = {}
    for name, meta in onnx_models.graph_inputs(model).items():
        if meta.shape is not None and any(not isinstance(d, int) or d < 0 for d in meta.shape):
            shapes[name] = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in meta.shape)
            if notes is not None:
                notes.append(f"the fallback run gave input '{name}' shape {list(shapes[name])} (its dynamic dims set to 1)")
    return DataLoader(onnx_models.graph_inputs(model), input_shapes=shapes)[0]


def _copy(model: Any) -> Any:
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


class ExtractSubgraph:
    """Lazy loader twin of :func:`extract` (the model's weights come inside the result)."""

    def __init__(self, model: Any, inputs: Sequence[TensorSpec | str], outputs: Sequence[TensorSpec | str]) -> None:
        self.model, self.inputs, self.outputs = model, inputs, outputs

    def __call__(self) -> Any:
        from parity.api import invoke_if_callable

        model, _ = invoke_if_callable(self.model)
        return extract(model, self.inputs, self.outputs)


def extract_node(model: Any, node_name: str, input_types: Mapping[str, tuple[Any, tuple]] | None = None) -> Any:
    """One node as a standalone model: its computed inputs become graph inputs, weights and ``Constant``
    inputs stay inside. Built directly (no shape inference over the whole graph), so it is cheap enough to
    call for every node. ``input_types`` maps input name -> (numpy dtype, shape); missing ones come from the
    model's own type information."""
    import onnx
    from onnx import helper

    proto = g.load(model)
    nodes = {n.name or f"{n.op_type}_{i}": n for i, n in enumerate(g.topo_nodes(proto.graph))}
    if node_name not in nodes:
        raise UsageError(f"the model has no node '{node_name}'{did_you_mean(node_name, nodes)}")
    node = nodes[node_name]
    inits = {i.name: i for i in proto.graph.initializer}
    consts = {n.output[0]: n for n in proto.graph.node if n.op_type == "Constant"}
    types = g.value_types(proto)
    computed = [t for t in onnx_models.node_inputs(node) if t not in inits and t not in consts and not (input_types and t in input_types)]
    if any(types.get(t, (0, None))[1] is None for t in computed):  # the model carries no shape for an input: infer once
        types = g.value_types(g.infer_shapes(proto, data_prop=False)[0])
    graph_inputs, kept_inits, kept_nodes = [], [], []
    for t in dict.fromkeys(onnx_models.node_inputs(node)):
        if t in inits:
            kept_inits.append(inits[t])
        elif t in consts:
            kept_nodes.append(consts[t])
        else:
            if input_types and t in input_types:
                dtype, shape = input_types[t]
                elem = helper.np_dtype_to_tensor_dtype(dtype)
            else:
                elem, shape = types.get(t, (0, None))
            graph_inputs.append(helper.make_tensor_value_info(t, elem or onnx.TensorProto.FLOAT, None if shape is None else list(shape)))
    outputs = [helper.make_empty_tensor_value_info(t) for t in node.output if t]
    graph = helper.make_graph([*kept_nodes, node], f"{safe_name(node_name)}_alone", graph_inputs, outputs, list(kept_inits))
    out = g.keep_header(helper.make_model(graph), proto)
    _type_outputs(out, types)
    return out


def _type_outputs(model: Any, known: Mapping[str, tuple]) -> None:
    """Graph outputs must carry a type: infer it on the one-node model (cheap), else take the full model's."""
    from onnx import TensorProto, helper

    inferred, _ = g.infer_shapes(model, data_prop=False)
    found = {**known, **g.value_types(inferred)}
    for vi in model.graph.output:
        elem, shape = found.get(vi.name, (0, None))
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, elem or TensorProto.FLOAT, None if shape is None else list(shape)))
