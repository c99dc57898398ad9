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


NEW_TENSOR_SUFFIX = "_polygraphy_surgeon_insert_output"  # Polygraphy's name for the new tensor when an output is also an input
CUSTOM_DOMAIN = "custom"  # where an op ONNX does not define goes when no --domain is given


def insert_node(
    model: Any,
    op: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    name: str | None = None,
    attrs: Mapping[str, Any] | None = None,
    domain: str | None = None,
    notes: list[str] | None = None,
) -> Any:
    """Return a copy of ``model`` where one ``op`` node computes ``outputs`` from ``inputs``; external weights
    of a lazily loaded ``model`` stay references (the removed nodes' weights are dropped).

    A tensor named in both ``inputs`` and ``outputs`` gets the node inserted on it: the node reads the tensor
    and writes a new one (``<name>_polygraphy_surgeon_insert_output``) that the tensor's readers now read; a
    graph output keeps its name (the tensor before the node is renamed instead). An ``op`` that ONNX does not
    define goes in domain ``custom`` unless ``domain`` says (it would fail onnx.checker in the ONNX domain);
    ``notes`` gets a line saying so."""
    import onnx_graphsurgeon as gs

    original = g.load(model)
    if not outputs:
        raise UsageError("--outputs: name at least one tensor the new node produces")
    domain = domain or _domain_for(op, original, notes)
    graph = gs.import_onnx(original)
    tensors = graph.tensors()
    for option, names in (("--inputs", inputs), ("--outputs", outputs)):
        for t in names:
            if t not in tensors:
                raise UsageError(f"{option}: the model has no tensor '{t}'{did_you_mean(t, tensors)}")
    graph_inputs = {t.name for t in graph.inputs}
    for t in outputs:
        if t not in inputs and (t in graph_inputs or isinstance(tensors[t], gs.Constant)):
            raise UsageError(f"--outputs: '{t}' is a graph input or a constant; the new node must produce computed tensors (or name it in --inputs too)")
    _check_no_cycle(original, inputs, [t for t in outputs if t not in inputs])
    node_name = name or f"{op}_inserted"
    if any(n.name == node_name for n in graph.nodes):
        raise UsageError(f"--name: a node named '{node_name}' already exists")
    read = [tensors[t] for t in inputs]
    written = [_rewire(graph, tensors[t], gs) if t in inputs else _take_over(tensors[t]) for t in outputs]
    node = gs.Node(op=op, name=node_name, attrs=dict(attrs or {}), inputs=read, outputs=written)
    if domain:
        node.domain = domain
    # right after the last producer of what it reads: a sorted graph stays sorted, the other nodes keep their order
    graph.nodes.insert(max([graph.nodes.index(p) + 1 for t in read for p in t.inputs if p in graph.nodes] + [0]), node)
    graph.cleanup(remove_unused_graph_inputs=False)
    if not _is_sorted(graph):
        graph.toposort()
    out = g.keep_header(gs.export_onnx(graph, do_type_check=False), original)
    if domain and domain not in {o.domain for o in out.opset_import}:
        import onnx

        out.opset_import.append(onnx.helper.make_opsetid(domain, 1))
    return _shape_outputs(out, original)


def _shape_outputs(model: Any, original: Any) -> Any:
    """onnx.checker's full check wants a shape on every graph output and value_info entry: infer what can be
    inferred, give a graph output still without one the shape its tensor had before the edit (inference on
    the original), and drop value_info entries that carry only a dtype."""
    inferred, _ = g.infer_shapes(model)
    before = g.value_types(g.infer_shapes(original)[0])
    for vi in inferred.graph.output:
        tt = vi.type.tensor_type
        shape = before.get(vi.name, (0, None))[1]
        if not tt.HasField("shape") and shape is not None:
            for d in shape:
                dim = tt.shape.dim.add()
                if isinstance(d, int):
                    dim.dim_value = d
                elif d:
                    dim.dim_param = d
    kept = [vi for vi in inferred.graph.value_info if vi.type.tensor_type.HasField("shape")]
    del inferred.graph.value_info[:]
    inferred.graph.value_info.extend(kept)
    return inferred


def _domain_for(op: str, model: Any, notes: list[str] | None) -> str | None:
    """None for an op of the model's ONNX opset; ``custom`` for one ONNX does not define (noted); an op of a
    later opset is refused (the checker would fail, and the node would not mean what the op says)."""
    import onnx

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if not onnx.defs.has(op):
        if notes is not None:
            notes.append(f"'{op}' is not an ONNX op: the node is put in domain '{CUSTOM_DOMAIN}' (opset 1) so the model stays valid ONNX; --domain picks another")
        return CUSTOM_DOMAIN
    if opset is not None:
        try:
            onnx.defs.get_schema(op, opset, "")
        except onnx.defs.SchemaError:
            since = onnx.defs.get_schema(op).since_version
            raise UsageError(f"--op: {op} is not in ONNX opset {opset} (the model's); it needs opset {since} or later (or give --domain for a custom op)") from None
    return None


def _take_over(tensor: Any) -> Any:
    tensor.inputs.clear()  # disconnect the old producer: the new node takes over (cleanup drops it if unused)
    return tensor


def _rewire(graph: Any, tensor: Any, gs: Any) -> Any:
    """A tensor that is both read and written by the new node: a new tensor after the node, read by the old
    tensor's readers (and the graph output, keeping its name and dtype)."""
    if tensor in graph.outputs:
        new_name, tensor.name = tensor.name, tensor.name + NEW_TENSOR_SUFFIX
        new = gs.Variable(new_name, dtype=tensor.dtype, shape=tensor.shape)
    else:
        new = gs.Variable(tensor.name + NEW_TENSOR_SUFFIX)
    for reader in list(tensor.outputs):
        for i, t in enumerate(list(reader.inputs)):  # every use, in place
            if t is tensor:
                reader.inputs[i] = new
    graph.outputs = [new if t is tensor else t for t in graph.outputs]
    return new


def _is_sorted(graph: Any) -> bool:
    import onnx_graphsurgeon as gs

    ready = {t.name for t in graph.inputs} | {t.name for t in graph.tensors().values() if isinstance(t, gs.Constant)}
    for node in graph.nodes:
        if any(t.name and t.name not in ready for t in node.inputs):
            return False
        ready.update(t.name for t in node.outputs)
    return True


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
