"""``parity surgeon sanitize``: constant folding to a fixed point, cleanup, toposort, input-shape overrides.

Constant folding is onnx-graphsurgeon's ``Graph.fold_constants`` (it evaluates constant subgraphs with
onnxruntime), repeated until a pass removes no node: folding a ``Shape`` can make its consumers constant,
which the next pass folds. Tensors larger than ``size_threshold`` bytes are left unfolded so a ``Tile`` or
``Expand`` of a constant cannot blow the model up.

Models with external data (``base_dir`` given with a lazily loaded model): weights stay in their files. Folding
evaluates constant subgraphs from a serialized copy, so only the external tensors that a foldable node reads
(a node whose inputs are all constants, transitively; a ``Shape`` counts as constant) are read into the proto
first (:func:`foldable_external`); those that survive folding unchanged go back to being references, and
every other weight (an LLM's MatMul weights) is never read. Any other value graphsurgeon asks for is read from
``base_dir`` (:func:`parity_surgeon.graph.external_values`), not from the current directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parity.api import onnx_external, onnx_models
from parity_surgeon import graph as g

DEFAULT_FOLD_LIMIT = 64 << 20  # bytes; larger folded tensors stay computed at run time


@dataclass
class SanitizeReport:
    nodes_before: int = 0
    nodes_after: int = 0
    initializers_before: int = 0
    initializers_after: int = 0
    passes: int = 0
    shape_inference: str = "not run"
    overridden: dict[str, list] = field(default_factory=dict)
    removed_ops: dict[str, int] = field(default_factory=dict)  # op type -> count removed

    def lines(self) -> list[str]:
        out = [f"nodes: {self.nodes_before} -> {self.nodes_after} | initializers: {self.initializers_before} -> {self.initializers_after}"]
        if self.passes:
            out.append(f"constant folding: {self.passes} pass(es)")
        if self.removed_ops:
            out.append("removed: " + ", ".join(f"{n} {op}" for op, n in sorted(self.removed_ops.items(), key=lambda kv: (-kv[1], kv[0]))))
        if self.overridden:
            out.append("input shapes: " + ", ".join(f"{k}:{v}" for k, v in self.overridden.items()))
        out.append(f"shape inference: {self.shape_inference}")
        return out


def _count_ops(model: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in model.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return counts


def sanitize(
    model: Any,
    fold_constants: bool = False,
    cleanup: bool = False,
    toposort: bool = False,
    override_input_shapes: Mapping[str, tuple] | None = None,
    size_threshold: int | None = DEFAULT_FOLD_LIMIT,
    max_passes: int = 10,
    fold_shapes: bool = True,
    shape_inference: bool = True,
    base_dir: str | Path | None = None,
) -> tuple[Any, SanitizeReport]:
    """Return a sanitized copy of ``model`` (path or ModelProto) and what changed; the input is not modified.

    ``base_dir``: the folder of ``model``'s external data when it was loaded lazily (``graph.load(path,
    lazy=True)``); the result's untouched weights are still references into it (write it with
    ``graph.save(..., base_dir=base_dir)``). Folded tensors are inside the result."""
    import onnx

    original = g.load(model)
    work = onnx.ModelProto()
    work.CopyFrom(original)  # cheap for a lazy model: its weights are references
    report = SanitizeReport(len(work.graph.node), 0, len(work.graph.initializer))
    before_ops = _count_ops(work)
    if override_input_shapes:
        g.set_input_shapes(work, dict(override_input_shapes))
        report.overridden = {k: list(v) for k, v in override_input_shapes.items()}
    if shape_inference:
        work, report.shape_inference = g.infer_shapes(work)
    if fold_constants or cleanup or toposort:
        work = _graphsurgeon_passes(work, original, report, fold_constants, cleanup, toposort, size_threshold, max_passes, fold_shapes, shape_inference, base_dir)
    report.nodes_after, report.initializers_after = len(work.graph.node), len(work.graph.initializer)
    after_ops = _count_ops(work)
    report.removed_ops = {op: n - after_ops.get(op, 0) for op, n in before_ops.items() if n > after_ops.get(op, 0)}
    return g.keep_header(work, original), report


def _graphsurgeon_passes(work, original, report, fold, cleanup, toposort, size_threshold, max_passes, fold_shapes, infer, base_dir=None) -> Any:
    import onnx_graphsurgeon as gs

    os.environ.setdefault("ORT_LOGGING_LEVEL", "3")
    references: dict[str, Any] = {}
    if fold and base_dir is not None:
        references = _read_foldable(work, base_dir, fold_shapes)
    graph = gs.import_onnx(work)
    g.external_values(graph, base_dir)
    if fold:
        count = len(graph.nodes)
        for _ in range(max_passes):
            report.passes += 1
            # flatten_subgraphs=False: graphsurgeon's inlining of an If with a constant condition left readers
            # of the If's outputs dangling (silero-vad: the folded model did not load)
            graph.fold_constants(fold_shapes=fold_shapes, size_threshold=size_threshold or None, error_ok=True, flatten_subgraphs=False).cleanup()
            if len(graph.nodes) == count:
                break
            count = len(graph.nodes)
            if infer:  # newly constant shapes let inference resolve more, which lets the next pass fold more
                model = g.keep_header(gs.export_onnx(graph, do_type_check=False), original)
                model, _ = g.infer_shapes(model)
                graph = gs.import_onnx(model)
                g.external_values(graph, base_dir)
    if cleanup or fold:
        graph.cleanup(remove_unused_graph_inputs=False)
    if toposort or fold:
        graph.toposort()
    out = g.keep_header(gs.export_onnx(graph, do_type_check=False), original)
    _restore_references(out, references)
    if infer:
        out, report.shape_inference = g.infer_shapes(out)
    return out


_NO_FOLD = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}  # graphsurgeon never folds these


def foldable_external(model: Any, fold_shapes: bool = True) -> set[str]:
    """Names of the external tensors that constant folding may read: inputs of nodes all of whose inputs are
    constant (initializers, Constant outputs, with ``fold_shapes`` also ``Shape`` outputs, whose input shape
    may become static), transitively, in subgraphs too (a subgraph sees its outer scope's constants)."""
    external = {t.name for t in onnx_external.tensors(model) if onnx_external.is_external(t)}
    wanted: set[str] = set()

    def walk(graph: Any, outer: set[str]) -> None:
        constant = set(outer) | {i.name for i in graph.initializer}
        nodes = list(graph.node)
        for i in onnx_models.topological_order(nodes):
            node = nodes[i]
            for attr in node.attribute:  # subgraphs fold on their own, with what is constant here
                for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                    walk(sub, constant)
            reads = onnx_models.node_inputs(node)
            if node.op_type == "Constant" or (fold_shapes and node.op_type == "Shape"):
                constant.update(o for o in node.output if o)
            elif node.op_type not in _NO_FOLD and all(t in constant for t in reads):
                constant.update(o for o in node.output if o)
                wanted.update(t for t in reads if t in external)

    walk(model.graph, set())
    return wanted


def _read_foldable(model: Any, base_dir: str | Path, fold_shapes: bool) -> dict[str, Any]:
    """Bring the external tensors folding may read inside ``model``; returns copies of their references."""
    import onnx

    names = foldable_external(model, fold_shapes)
    references = {}
    for tensor in onnx_external.tensors(model):
        if tensor.name in names and onnx_external.is_external(tensor):
            references[tensor.name] = onnx.TensorProto()
            references[tensor.name].CopyFrom(tensor)  # a few bytes: the reference
    if names:
        onnx_external.load_values(model, names, base_dir)
    return references


def _restore_references(model: Any, references: Mapping[str, Any]) -> None:
    """Tensors read in for folding that are still in the model unchanged become references to their file again
    (they are written from there, and the model stays small)."""
    if not references:
        return
    for tensor in onnx_external.tensors(model):
        ref = references.get(tensor.name)
        if (
            ref is not None
            and not onnx_external.is_external(tensor)
            and tensor.data_type == ref.data_type
            and list(tensor.dims) == list(ref.dims)
            and len(tensor.raw_data) == onnx_external.nbytes(ref)
        ):
            tensor.Clear()
            tensor.CopyFrom(ref)


class SanitizeOnnx:
    """Lazy loader: ``SanitizeOnnx(OnnxFromPath("m.onnx"), fold_constants=True)()`` -> ModelProto."""

    def __init__(self, model: Any, **options: Any) -> None:
        self.model, self.options = model, options

    def __call__(self) -> Any:
        from parity.api import invoke_if_callable

        model, _ = invoke_if_callable(self.model)
        return sanitize(model, **self.options)[0]
