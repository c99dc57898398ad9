"""``parity surgeon sanitize``: constant folding to a fixed point, cleanup, toposort, input-shape overrides.

Constant folding is onnx-graphsurgeon's ``Graph.fold_constants`` (it evaluates constant subgraphs with
onnxruntime), repeated until a pass removes no node: folding a ``Shape`` can make its consumers constant,
which the next pass folds. Tensors larger than ``size_threshold`` bytes are left unfolded so a ``Tile`` or
``Expand`` of a constant cannot blow the model up.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
) -> tuple[Any, SanitizeReport]:
    """Return a sanitized copy of ``model`` (path or ModelProto) and what changed; the input is not modified."""
    import onnx

    original = g.load(model)
    work = onnx.ModelProto()
    work.CopyFrom(original)
    report = SanitizeReport(len(work.graph.node), 0, len(work.graph.initializer))
    before_ops = _count_ops(work)
    if override_input_shapes:
        g.set_input_shapes(work, dict(override_input_shapes))
        report.overridden = {k: list(v) for k, v in override_input_shapes.items()}
    if shape_inference:
        work, report.shape_inference = g.infer_shapes(work)
    if fold_constants or cleanup or toposort:
        work = _graphsurgeon_passes(work, original, report, fold_constants, cleanup, toposort, size_threshold, max_passes, fold_shapes, shape_inference)
    report.nodes_after, report.initializers_after = len(work.graph.node), len(work.graph.initializer)
    after_ops = _count_ops(work)
    report.removed_ops = {op: n - after_ops.get(op, 0) for op, n in before_ops.items() if n > after_ops.get(op, 0)}
    return g.keep_header(work, original), report


def _graphsurgeon_passes(work, original, report, fold, cleanup, toposort, size_threshold, max_passes, fold_shapes, infer) -> Any:
    import onnx_graphsurgeon as gs

    os.environ.setdefault("ORT_LOGGING_LEVEL", "3")
    graph = gs.import_onnx(work)
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
    if cleanup or fold:
        graph.cleanup(remove_unused_graph_inputs=False)
    if toposort or fold:
        graph.toposort()
    out = g.keep_header(gs.export_onnx(graph, do_type_check=False), original)
    if infer:
        out, report.shape_inference = g.infer_shapes(out)
    return out


class SanitizeOnnx:
    """Lazy loader: ``SanitizeOnnx(OnnxFromPath("m.onnx"), fold_constants=True)()`` -> ModelProto."""

    def __init__(self, model: Any, **options: Any) -> None:
        self.model, self.options = model, options

    def __call__(self) -> Any:
        from parity.api import invoke_if_callable

        model, _ = invoke_if_callable(self.model)
        return sanitize(model, **self.options)[0]
