"""A failing ONNX model as an ordered list of nodes, and the valid model of any subset of them.

Candidates are node subsets, not only prefixes: a tensor whose producer is cut away becomes a graph
input of the dtype and shape it had in the reference run (``cut="input"``), or an initializer frozen to
that value (``cut="constant"``). Any subset is therefore a valid model, possibly disconnected, and a
data-dependent fault still sees the values it saw in the full model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from parity.api import ModelError, UsageError, onnx_models, runtime_bytes


def _constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or len(node.attribute) != 1:
        return None
    attr = node.attribute[0]
    value = onnx.helper.get_attribute_value(attr)
    if attr.name == "value":
        return numpy_helper.to_array(value)
    scalar = {"value_float": np.float32, "value_int": np.int64}
    if attr.name in scalar:
        return np.array(value, dtype=scalar[attr.name])
    vectors = {"value_floats": np.float32, "value_ints": np.int64}
    if attr.name in vectors:
        return np.array(list(value), dtype=vectors[attr.name])
    return None


def prepare(
    model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int | str]] | None = None, copy: bool = True, infer_shapes: bool = True
) -> onnx.ModelProto:
    """The model ready for reduction: input shapes overridden (freezing dynamic dims), Constant nodes turned
    into initializers (they are not worth a check), nodes in topological order, shapes inferred.

    ``copy``: work on a copy (the caller's model is left as it was); ``False`` edits ``model`` itself, for a
    model the caller loaded for this (no copy of weights held inside it). A model with external data is
    loaded lazily (its weights stay references), so a copy of it is a copy of its graph."""
    if copy:
        copied = onnx.ModelProto()
        copied.CopyFrom(model)
        model = copied
    graph = model.graph
    weights = {init.name for init in graph.initializer}
    real_inputs = {i.name for i in graph.input if i.name not in weights}
    for name, dims in (input_shapes or {}).items():
        if name not in real_inputs:
            raise UsageError(f"--model-input-shapes: the model has no input '{name}'; inputs: {', '.join(sorted(real_inputs))}")
        vi = next(i for i in graph.input if i.name == name)
        shape = vi.type.tensor_type.shape
        del shape.dim[:]
        for d in dims:
            dim = shape.dim.add()
            if isinstance(d, int) and d >= 0:
                dim.dim_value = d
            else:
                dim.dim_param = str(d)
    _forget_negative_dims(graph)
    kept = []
    for node in graph.node:
        value = _constant_value(node)
        if value is not None and node.output[0] not in weights:
            graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
            weights.add(node.output[0])
        else:
            kept.append(node)
    ordered = _toposort(kept, {i.name for i in graph.input} | weights)
    del graph.node[:]
    graph.node.extend(ordered)
    del graph.value_info[:]
    if not infer_shapes:  # --no-shape-inference / --force-fallback-shape-inference: types from the reference run only
        return model
    try:
        model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # shape inference is a help, not a requirement (custom ops)
        pass
    return model


def _forget_negative_dims(graph: onnx.GraphProto) -> None:
    """Exporters (Paddle's among them) write -1 for an unknown dim; ONNX wants dim_value >= 0, and a candidate
    that copies such an output type fails full shape inference. Make those dims unknown."""
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        for dim in vi.type.tensor_type.shape.dim:
            if dim.HasField("dim_value") and dim.dim_value < 0:
                dim.Clear()


def _toposort(nodes: list[onnx.NodeProto], available: set[str]) -> list[onnx.NodeProto]:
    """Nodes in topological order (``parity.onnx_models.topological_order``); cycles and reads of tensors
    nothing produces are errors."""
    order = onnx_models.topological_order(nodes)
    if len(order) != len(nodes):
        raise ModelError("the graph has a cycle; cannot order its nodes")
    producer = {o for n in nodes for o in n.output if o}
    missing = {t for n in nodes for t in onnx_models.node_inputs(n) if t not in producer and t not in available}
    if missing:
        raise ModelError(f"nodes read tensors nothing produces: {', '.join(sorted(missing)[:5])}")
    return [nodes[i] for i in order]


@dataclass
class GraphIndex:
    """Dependencies of a prepared model: producers, consumers, ancestor/descendant sets as bitmasks."""

    model: onnx.ModelProto
    nodes: list[onnx.NodeProto] = field(init=False)
    producer: dict[str, int] = field(init=False)
    consumers: dict[str, list[int]] = field(init=False)
    reads: list[list[str]] = field(init=False)

    def __post_init__(self) -> None:
        graph = self.model.graph
        self.nodes = list(graph.node)
        if not self.nodes:
            raise ModelError("the model has no nodes to reduce")
        self.producer = {o: i for i, n in enumerate(self.nodes) for o in n.output if o}
        self.reads = [onnx_models.node_inputs(n) for n in self.nodes]
        self.consumers = {}
        for i, names in enumerate(self.reads):
            for t in names:
                self.consumers.setdefault(t, []).append(i)
        self.weights = {init.name: init for init in graph.initializer}
        self.graph_inputs = {i.name: i for i in graph.input if i.name not in self.weights}
        self.outputs = [o.name for o in graph.output]
        self.output_info = {o.name: o for o in graph.output}
        self.value_info = {v.name: v for v in graph.value_info}
        self._anc: list[int] | None = None
        self._desc: list[int] | None = None

    def __len__(self) -> int:
        return len(self.nodes)

    def names(self, subset: Iterable[int]) -> list[str]:
        return [self.nodes[i].name or f"{self.nodes[i].op_type}_{i}" for i in sorted(subset)]

    def ancestors(self) -> list[int]:
        """``anc[i]``: bitmask of node i and every node it depends on (nodes are in topological order)."""
        if self._anc is None:
            anc = []
            for i, names in enumerate(self.reads):
                mask = 1 << i
                for t in names:
                    if t in self.producer:
                        mask |= anc[self.producer[t]]
                anc.append(mask)
            self._anc = anc
        return self._anc

    def descendants(self) -> list[int]:
        if self._desc is None:
            desc = [0] * len(self.nodes)
            for i in reversed(range(len(self.nodes))):
                mask = 1 << i
                for o in self.nodes[i].output:
                    for c in self.consumers.get(o, ()):
                        mask |= desc[c]
                desc[i] = mask
            self._desc = desc
        return self._desc

    def closure(self, subset: Iterable[int], up: bool = False, down: bool = False) -> frozenset[int]:
        """``subset`` plus its ancestors (``up``: keep the real graph inputs) and/or descendants (``down``)."""
        mask = 0
        for i in subset:
            mask |= 1 << i
            if up:
                mask |= self.ancestors()[i]
            if down:
                mask |= self.descendants()[i]
        return frozenset(i for i in range(len(self.nodes)) if mask >> i & 1)

    # --- building candidates ---------------------------------------------------------------------------
    def boundary(self, subset: frozenset[int]) -> tuple[list[str], list[str], list[str]]:
        """(real graph inputs read, cut tensors, outputs) of the model of ``subset``."""
        produced = {o for i in subset for o in self.nodes[i].output if o}
        reads = list(dict.fromkeys(t for i in sorted(subset) for t in self.reads[i]))
        real = [t for t in reads if t in self.graph_inputs]
        cut = [t for t in reads if t not in produced and t not in self.weights and t not in self.graph_inputs]
        outputs = []
        for i in sorted(subset):
            for o in self.nodes[i].output:
                if not o:
                    continue
                users = self.consumers.get(o, [])
                if o in self.output_info or not any(u in subset for u in users):
                    outputs.append(o)
        return real, cut, outputs

    def build(self, subset: Iterable[int], reference: Reference | None = None, cut: str = "input") -> onnx.ModelProto:
        """The valid ONNX model of the nodes in ``subset`` (see the module docstring)."""
        subset = frozenset(subset)
        real, cuts, outputs = self.boundary(subset)
        graph = onnx.GraphProto(name=f"{self.model.graph.name or 'graph'}_reduced")
        graph.node.extend(self.nodes[i] for i in sorted(subset))
        used = {t for i in subset for t in self.reads[i]}
        graph.initializer.extend(w for name, w in self.weights.items() if name in used)
        graph.input.extend(self.graph_inputs[t] for t in real)
        for t in cuts:
            if cut == "constant" and reference is not None and reference.frozen(t) is not None:
                graph.initializer.append(numpy_helper.from_array(reference.frozen(t), t))
            else:
                graph.input.append(self.tensor_info(t, reference))
        graph.output.extend(self.output_info.get(o) or self.tensor_info(o, reference) for o in outputs)
        model = onnx.helper.make_model(graph, opset_imports=list(self.model.opset_import), producer_name="parity-reduce")
        model.ir_version = self.model.ir_version
        model.functions.extend(self.model.functions)
        return onnx_models.keep_ir_valid(model)

    def tensor_info(self, name: str, reference: Reference | None) -> onnx.ValueInfoProto:
        """Type of a tensor: its shape across reference samples (dims that differ become symbolic)."""
        if reference is not None and reference.has(name):
            values = reference.values(name)
            first = values[0]
            dims: list[int | str] = list(first.shape)
            for v in values[1:]:
                if v.ndim != first.ndim:
                    dims = [f"{name}_d{k}" for k in range(first.ndim)]
                    break
                dims = [d if d == s else f"{name}_d{k}" for k, (d, s) in enumerate(zip(dims, v.shape))]
            elem = onnx.helper.np_dtype_to_tensor_dtype(first.dtype)
            return onnx.helper.make_tensor_value_info(name, elem, dims)
        if name in self.value_info:
            return self.value_info[name]
        if name in self.graph_inputs:
            return self.graph_inputs[name]
        return onnx.ValueInfoProto(name=name)


class Reference:
    """Every tensor's value in a reference run (onnxruntime), one dict per input sample."""

    def __init__(self, samples: list[dict[str, np.ndarray]]) -> None:
        self.samples = samples

    def has(self, name: str) -> bool:
        return bool(self.samples) and all(name in s for s in self.samples)

    def values(self, name: str) -> list[np.ndarray]:
        return [s[name] for s in self.samples]

    def frozen(self, name: str) -> np.ndarray | None:
        """The one value to freeze ``name`` to; ``None`` when samples disagree (it must stay an input)."""
        if not self.has(name):
            return None
        values = self.values(name)
        if all(v.shape == values[0].shape and np.array_equal(v, values[0]) for v in values[1:]):
            return values[0]
        return None

    def feeds(self, names: Sequence[str]) -> list[dict[str, np.ndarray]]:
        return [{n: s[n] for n in names} for s in self.samples]


def cast_float_feeds(model: onnx.ModelProto, feeds: Sequence[Mapping[str, np.ndarray]]) -> tuple[list[dict[str, np.ndarray]], list[str]]:
    """The feeds with each float input cast to the float type the model declares, as ``parity run`` does (saved
    inputs are often float64 or float32 for an fp16 model), and the casts made ("'Y0' float64 -> float32")."""
    declared = {}
    for vi in model.graph.input:
        elem = vi.type.tensor_type.elem_type
        if elem:
            declared[vi.name] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    casts: dict[str, str] = {}
    out = []
    for feed in feeds:
        cast = {}
        for name, value in feed.items():
            array = np.asarray(value)
            want = declared.get(name)
            if want is not None and array.dtype != want and np.issubdtype(array.dtype, np.floating) and np.issubdtype(want, np.floating):
                casts[name] = f"'{name}' {array.dtype.name} -> {want.name}"
                array = array.astype(want)
            cast[name] = array
        out.append(cast)
    return out, list(casts.values())


def run_reference(model: onnx.ModelProto, feeds: Sequence[Mapping[str, np.ndarray]], base_dir: str | Path | None = None) -> Reference:
    """Run ``model`` with onnxruntime on every sample, returning every node output (and the inputs).

    Every node output is marked for the run, then ``model`` is restored: nothing is copied. External
    weights are read from ``base_dir`` by onnxruntime itself (``runtime_bytes``: the graph-only message plus
    the data folder), so a model past 2 GiB runs without ever being one protobuf message."""
    import onnxruntime as ort

    outputs = model.graph.output
    kept = len(outputs)
    have = {o.name for o in outputs}
    try:
        for node in model.graph.node:
            for o in node.output:
                if o and o not in have:
                    outputs.append(onnx.ValueInfoProto(name=o))
                    have.add(o)
        data, config = runtime_bytes(model, base_dir)
    finally:
        del outputs[kept:]
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep every tensor
    options.add_session_config_entry("session.disable_prepacking", "1")  # one run: packing would copy every weight first
    for key, value in config.items():
        options.add_session_config_entry(key, value)
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    del data
    names = [o.name for o in session.get_outputs()]
    samples = []
    for feed in feeds:
        values = session.run(names, dict(feed))
        sample = {k: np.asarray(v) for k, v in feed.items()}
        sample.update(zip(names, (np.asarray(v) for v in values)))
        samples.append(sample)
    return Reference(samples)


def counterpart(model: onnx.ModelProto, golden: Reference) -> dict[str, str]:
    """Each tensor of ``model`` that has a value in ``golden`` (a reference model's run): the same name, or,
    for a tensor a Cast made (an fp16-converted model keeps the names and adds Casts at its fp32 edges and
    around blocked nodes), the counterpart of the Cast's input."""
    have = golden.samples[0].keys() if golden.samples else set()
    casts = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type == "Cast" and n.domain in ("", "ai.onnx") and n.output and n.input}
    names = {i.name for i in model.graph.input} | {o for n in model.graph.node for o in n.output if o}
    out: dict[str, str] = {}
    for name in names:
        t, seen = name, set()
        while t not in have and t in casts and t not in seen:
            seen.add(t)
            t = casts[t]
        if t in have:
            out[name] = t
    return out


def against_reference(own: Reference, model: onnx.ModelProto, golden: Reference) -> tuple[Reference, Reference]:
    """(feeding, expected) for ``debug reduce --reference-model``: ``feeding`` is ``own`` (the model's run) with
    every tensor that has a counterpart in ``golden`` replaced by the reference's value cast to this model's
    dtype, so every cut tensor carries the reference's (fp32) intermediate; ``expected`` maps this model's
    tensor names to the reference's values as they are, what a candidate's outputs are compared with.
    A counterpart of another shape is left out (the model's own value stays)."""
    pairs = counterpart(model, golden)
    feeding, expected = [], []
    for mine, ref in zip(own.samples, golden.samples):
        feed, want = dict(mine), {}
        for name, other in pairs.items():
            value = ref[other]
            if name in mine and tuple(mine[name].shape) != tuple(value.shape):
                continue
            want[name] = value
            if name in mine:
                feed[name] = value.astype(mine[name].dtype, copy=False) if value.dtype != mine[name].dtype else value
        feeding.append(feed)
        expected.append(want)
    return Reference(feeding), Reference(expected)


def unfeedable(feeding: Reference, own: Reference) -> set[str]:
    """Tensors whose fed (reference) value is finite in the reference but not once cast to this model's dtype."""
    out = set()
    for fed, mine in zip(feeding.samples, own.samples):
        for name, value in fed.items():
            if value is mine.get(name) or value.dtype.kind != "f":
                continue
            if not np.isfinite(value).all():
                out.add(name)
    return out
