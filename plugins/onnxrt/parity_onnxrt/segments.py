"""``--onnx-outputs mark all`` on a model with big external weights: the run as a chain of segments.

One onnxruntime session of a model whose every tensor is marked holds its weights and, at the end of the run,
every tensor's value at once: 1.2-1.3x the weights of an LLM-like decoder, so a layerwise run needs more memory
than the model. :class:`SegmentedSession` runs such a model instead as segments cut in topological order
(:func:`parity.api.onnx_models.topological_order`, Kahn's algorithm): each segment is a session of its own on
a graph-only model of its nodes (onnxruntime reads only the weights those nodes use from the data folder),
fed the model's inputs and the values earlier segments computed that it reads, and released before the next
one loads. The run holds one segment's weights plus the values computed so far (which the run returns anyway).

Why only for ``mark all``: with every tensor a graph output, onnxruntime fuses no node whose output is read
elsewhere in the whole-model session either, so the segments run the same kernels on the same values (the
tests check that both agree bit for bit). With a few tensors marked one session holds little more than the
weights, and a boundary between segments would block fusions the whole-model session makes.

A segment closes once the weights its nodes read pass :func:`segment_bytes` (an eighth of the model's external
weights, at least :data:`MIN_SEGMENT`), and never where a value crossing the cut is not a typed tensor (a
sequence, a map, a tensor of unknown type): such a model runs in fewer segments, or in one.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from parity.api import BaseLoader, invoke_if_callable, onnx_external, onnx_models
from parity_onnxrt.loaders import SessionFromOnnx, base_dir_of, release_freed_memory

SEGMENT_FROM = 1 << 30  # external weights from which a mark-all run goes in segments
MIN_SEGMENT = 256 << 20  # a segment's weights at least (each segment pays a session's set-up)
SEGMENTS = 8  # about this many segments


def segment_bytes(weights: int) -> int:
    """The weights a segment reads before it closes."""
    return max(weights // SEGMENTS, MIN_SEGMENT)


def wants_segments(model: Any, outputs: Sequence[str]) -> bool:
    """Whether a run of ``model`` (marked already) with ``--onnx-outputs outputs`` goes in segments: every
    tensor marked, external weights of at least :data:`SEGMENT_FROM`, and each output a node's or an input."""
    if not onnx_models.wants_all(outputs) or onnx_models.external_bytes(model) < SEGMENT_FROM:
        return False
    known = {o for n in model.graph.node for o in n.output} | {vi.name for vi in model.graph.input}
    return all(vi.name in known for vi in model.graph.output)


@dataclass
class _Arg:
    """What the runner reads of an onnxruntime ``NodeArg``."""

    name: str
    type: str
    shape: list[Any]


_TYPE_NAMES = {
    "FLOAT": "float", "FLOAT16": "float16", "DOUBLE": "double", "BFLOAT16": "bfloat16", "BOOL": "bool", "STRING": "string",
    "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64",
    "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32", "UINT64": "uint64",
}  # fmt: skip


def _arg(value_info: Any) -> _Arg:
    import onnx

    tensor = value_info.type.tensor_type
    name = onnx.TensorProto.DataType.Name(tensor.elem_type) if value_info.type.HasField("tensor_type") else ""
    shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim] if tensor.HasField("shape") else []
    return _Arg(value_info.name, f"tensor({_TYPE_NAMES.get(name, name.lower())})", shape)


@dataclass
class _Segment:
    nodes: list[int]  # in the model's topological order
    reads: list[str]  # the values it is fed: model inputs and earlier segments' values
    returns: list[str]  # marked tensors it computes, and values later segments read


class SegmentedSession:
    """Quacks like the ``onnxruntime.InferenceSession`` :class:`parity_onnxrt.runner.OnnxrtRunner` drives
    (``get_inputs``, ``get_outputs``, ``run``); see the module docstring.

    :param model: the marked model, loaded lazily (its weights are references into ``base_dir``).
    :param make_session: a session of a graph-only part of the model (the run's own settings).
    """

    def __init__(self, model: Any, make_session: Callable[[Any], Any], limit: int | None = None) -> None:
        self.model = model
        self.make_session = make_session
        self._model_bytes = onnx_external.serialize(model, "the model")  # the runner reads scalar inputs' rank from it
        graph = model.graph
        weights = {t.name for t in graph.initializer} | {sp.values.name for sp in graph.sparse_initializer}
        self._inputs = [vi for vi in graph.input if vi.name not in weights]
        self.types = tensor_types(model)
        self.segments = plan(model, limit if limit is not None else segment_bytes(onnx_models.external_bytes(model)), self.types)

    def get_inputs(self) -> list[_Arg]:
        return [_arg(vi) for vi in self._inputs]

    def get_outputs(self) -> list[_Arg]:
        return [_arg(vi) for vi in self.model.graph.output]

    def run(self, names: Sequence[str] | None, feeds: Mapping[str, Any]) -> list[Any]:
        """Each segment in turn, one session at a time; the values of ``names`` (default: every output)."""
        wanted = [o.name for o in self.model.graph.output] if names is None else list(names)
        values: dict[str, Any] = dict(feeds)
        for segment in self.segments:
            part = cut(self.model, segment, values, self.types)
            session = self.make_session(part)
            try:
                got = session.run(segment.returns, {name: values[name] for name in segment.reads})
            finally:
                del session
                release_freed_memory()
            # copies: onnxruntime's outputs keep the arena of the session that made them alive
            values.update((name, np.array(value) if isinstance(value, np.ndarray) else value) for name, value in zip(segment.returns, got))
            del got
        return [values[name] for name in wanted]


def plan(model: Any, limit: int, typed: Collection[str]) -> list[_Segment]:
    """Cut the model's nodes, in topological order, into segments whose weights pass ``limit``, crossing only
    ``typed`` tensors (see the module docstring). One segment when no cut is allowed."""
    graph = model.graph
    nodes = list(graph.node)
    order = onnx_models.topological_order(nodes)
    if len(order) != len(nodes):  # a cycle: one session says what it means
        order = list(range(len(nodes)))
    weight_size = {t.name: onnx_external.nbytes(t) for t in graph.initializer}
    weight_size.update({sp.values.name: onnx_external.nbytes(sp.values) + onnx_external.nbytes(sp.indices) for sp in graph.sparse_initializer})
    reads = [[t for t in onnx_models.node_inputs(nodes[i]) if t not in weight_size] for i in range(len(nodes))]
    weights_of = [[t for t in onnx_models.node_inputs(nodes[i]) if t in weight_size] for i in range(len(nodes))]
    last_reader: dict[str, int] = {}
    for position, i in enumerate(order):
        for t in reads[i]:
            last_reader[t] = position
    inputs = {vi.name for vi in graph.input if vi.name not in weight_size}
    marked = {vi.name for vi in graph.output}

    groups: list[list[int]] = [[]]
    held: set[str] = set()
    size = 0
    live: set[str] = set()  # values computed so far that a later node reads
    for position, i in enumerate(order):
        new = [w for w in weights_of[i] if w not in held]
        grown = size + sum(weight_size[w] for w in new)
        if groups[-1] and grown > limit and all(t in typed for t in live):
            groups.append([])
            held, size = set(), 0
            new, grown = weights_of[i], sum(weight_size[w] for w in set(weights_of[i]))
        groups[-1].append(i)
        held.update(new)
        size = grown
        live = {t for t in live if last_reader.get(t, -1) > position}
        live.update(o for o in nodes[i].output if o and last_reader.get(o, -1) > position)

    later: list[set[str]] = []  # per group: the values nodes of later groups read
    acc: set[str] = set()
    for group in reversed(groups):
        later.append(set(acc))
        acc.update(t for i in group for t in reads[i])
    later.reverse()
    segments, made = [], set(inputs)
    for group, read_later in zip(groups, later):
        outputs = [o for i in group for o in nodes[i].output if o]
        returns = [o for o in outputs if o in marked or o in read_later]
        if returns:  # else nothing it computes is marked or read later (--onnx-exclude-outputs): not run
            fed = list(dict.fromkeys(t for i in group for t in reads[i] if t in made))
            segments.append(_Segment(group, fed, returns))
        made.update(outputs)
    return segments


def tensor_types(model: Any) -> dict[str, int]:
    """The element type of each tensor whose type the model declares or shape inference finds (a cut may
    cross only those; a value fed to a segment is declared with it)."""
    import onnx

    graph = onnx.ModelProto()
    graph.CopyFrom(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(graph, strict_mode=False)
    except Exception:  # noqa: BLE001 - shape inference is a hint here: without it, only declared types count
        inferred = graph
    found = {}
    for vi in [*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input]:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            found[vi.name] = vi.type.tensor_type.elem_type
    return found


def cut(model: Any, segment: _Segment, values: Mapping[str, Any], types: Mapping[str, int]) -> Any:
    """The graph-only model of one segment: its nodes, the weights they read (external ones stay references),
    a graph input for each value it is fed (typed from the value) and its returned tensors as outputs."""
    import onnx
    from onnx import helper

    source = model.graph
    part = onnx.ModelProto()
    for key in ("ir_version", "producer_name", "producer_version", "domain", "model_version"):
        setattr(part, key, getattr(model, key))
    part.opset_import.extend(model.opset_import)
    part.functions.extend(model.functions)
    graph = part.graph
    graph.name = source.name
    chosen = [source.node[i] for i in segment.nodes]
    graph.node.extend(chosen)
    reads = {t for n in chosen for t in onnx_models.node_inputs(n)}
    graph.initializer.extend(t for t in source.initializer if t.name in reads)
    graph.sparse_initializer.extend(sp for sp in source.sparse_initializer if sp.values.name in reads)
    declared = {vi.name: vi for vi in source.input}
    for name in segment.reads:
        value = values[name]
        if name in declared:
            graph.input.append(declared[name])
        else:
            graph.input.append(helper.make_tensor_value_info(name, types[name], list(np.shape(value))))
    infos = {vi.name: vi for vi in [*source.value_info, *source.output]}
    graph.output.extend(infos.get(n) or helper.make_empty_tensor_value_info(n) for n in segment.returns)
    return part


class SegmentedSessionFromOnnx(BaseLoader):
    """The session of a marked model: ``session`` (a :class:`~parity_onnxrt.loaders.SessionFromOnnx` of it) as
    it is, or a :class:`SegmentedSession` of its parts with the same settings where :func:`wants_segments`
    says so for ``outputs`` (the ``--onnx-outputs`` given)."""

    def __init__(self, session: SessionFromOnnx, outputs: Sequence[str]) -> None:
        self.session, self.outputs = session, list(outputs)

    def __call__(self) -> Any:
        base_dir = self.session.base_dir or base_dir_of(self.session.model)
        model, _ = invoke_if_callable(self.session.model)
        whole = self._with(model, base_dir)
        if not wants_segments(model, self.outputs):
            return whole()
        return SegmentedSession(model, lambda part: self._with(part, base_dir)())

    def _with(self, model: Any, base_dir: str | None) -> SessionFromOnnx:
        loader = copy.copy(self.session)
        loader.model, loader.base_dir = model, base_dir
        return loader
