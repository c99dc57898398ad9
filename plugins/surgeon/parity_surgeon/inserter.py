"""``parity surgeon insert``: replace the subgraph between tensors with one new node (e.g. a custom op).

The new node reads ``inputs`` and produces ``outputs`` (existing tensor names, so every consumer now reads
the new node); the nodes that used to compute ``outputs`` and feed nothing else become dead and are removed
by graphsurgeon's cleanup. Used while debugging to swap a suspect block for a plugin or a reference op.

Models with external data: a lazily loaded model's weights stay references (the result is written with
``graph.save(..., base_dir=...)``); no weight is read.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from parity.api import UsageError, did_you_mean
from parity_surgeon import graph as g


def parse_attrs(items: Sequence[str]) -> dict[str, Any]:
    """``alpha=0.5 axes=[0,1] mode=linear`` -> typed values (Python literals; anything else is a string)."""
    attrs: dict[str, Any] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key:
            raise UsageError(f"--attrs: cannot read '{item}'; write name=value, e.g. alpha=0.5 axes=[0,1]")
        try:
            attrs[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            attrs[key] = raw
    return attrs


def insert_node(
    model: Any,
    op: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    name: str | None = None,
    attrs: Mapping[str, Any] | None = None,
    domain: str | None = None,
) -> Any:
    """Return a copy of ``model`` where one ``op`` node computes ``outputs`` from ``inputs``; external weights
    of a lazily loaded ``model`` stay references (the removed nodes' weights are dropped)."""
    import onnx_graphsurgeon as gs

    original = g.load(model)
    if not outputs:
        raise UsageError("--outputs: name at least one tensor the new node produces")
    graph = gs.import_onnx(original)
    tensors = graph.tensors()
    for option, names in (("--inputs", inputs), ("--outputs", outputs)):
        for t in names:
            if t not in tensors:
                raise UsageError(f"{option}: the model has no tensor '{t}'{did_you_mean(t, tensors)}")
    graph_inputs = {t.name for t in graph.inputs}
    for t in outputs:
        if t in graph_inputs or isinstance(tensors[t], gs.Constant):
            raise UsageError(f"--outputs: '{t}' is a graph input or a constant; the new node must produce computed tensors")
    _check_no_cycle(original, inputs, outputs)
    for t in outputs:
        tensors[t].inputs.clear()  # disconnect the old producer: the new node takes over
    node_name = name or f"{op}_inserted"
    if any(n.name == node_name for n in graph.nodes):
        raise UsageError(f"--name: a node named '{node_name}' already exists")
    node = gs.Node(op=op, name=node_name, attrs=dict(attrs or {}), inputs=[tensors[t] for t in inputs], outputs=[tensors[t] for t in outputs])
    if domain:
        node.domain = domain
    graph.nodes.append(node)
    graph.cleanup(remove_unused_graph_inputs=False).toposort()
    out = g.keep_header(gs.export_onnx(graph, do_type_check=False), original)
    if domain and domain not in {o.domain for o in out.opset_import}:
        import onnx

        out.opset_import.append(onnx.helper.make_opsetid(domain, 1))
    return out


def _check_no_cycle(model: Any, inputs: Sequence[str], outputs: Sequence[str]) -> None:
    """An input computed from one of the outputs would make the new node feed itself."""
    prods = {t: n for n in model.graph.node for t in n.output}
    targets = set(outputs)
    for start in inputs:
        stack, seen = [start], set()
        while stack:
            t = stack.pop()
            if t in targets:
                raise UsageError(f"--inputs: '{start}' is computed from --outputs '{t}'; the new node would depend on itself")
            if t in seen or t not in prods:
                continue
            seen.add(t)
            stack.extend(i for i in prods[t].input if i)
