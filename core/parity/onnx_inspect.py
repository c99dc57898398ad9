"""``parity inspect model`` for ONNX files: inputs, outputs and, with ``--show``, every node (subgraphs of If, Loop
and Scan opened in place, indented), attributes and weights (initializers and Constant-node values), as
Polygraphy's ``inspect model --show layers attrs weights`` does.

Tensors are shown whole when small (:data:`SMALL` elements or fewer), otherwise as dtype, shape and statistics.
Weights in external data files are never read: they are shown as dtype, shape and where they are; the files are
checked to exist (``--external-data-dir``, default the model's folder) unless ``--ignore-external-data``.
``onnx`` and ``numpy`` are imported inside functions: importing this module is free.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from parity.onnx_models import dtype_of, external_info, graph_inputs, graph_outputs, is_external, load, nbytes, tensors
from parity.util.text import counted, names_preview

if TYPE_CHECKING:  # pragma: no cover
    import onnx

SMALL = 16  # tensors with at most this many elements are printed in full
STEP = "    "  # one level of nesting


def _load(path: str, options: object) -> onnx.ModelProto:
    """The graph with its external tensors left as references: checked to resolve (``external_data_dir``),
    or not at all (``ignore_external_data``); no weight byte is read."""
    given = options if isinstance(options, Mapping) else {}
    return load(
        path,
        load_external_data=False,
        external_data_dir=given.get("external_data_dir") or None,
        ignore_external_data=bool(given.get("ignore_external_data")),
    )


def describe(path: str, show: set[str] | frozenset[str] = frozenset(), options: object = None) -> str:
    """The text of ``parity inspect model`` for an ONNX file; ``options``: the command's options
    (``external_data_dir``, ``ignore_external_data``)."""
    model = _load(path, options)
    graph = model.graph
    subgraphs = list(_subgraphs(graph))
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
    counts = f"  {counted(len(graph.node), 'node')}, {counted(len(graph.initializer), 'initializer')}"
    if subgraphs:
        inner_nodes = sum(len(g.node) for _, g in subgraphs)
        inner_inits = sum(len(g.initializer) for _, g in subgraphs)
        counts += f" | {len(subgraphs)} subgraph(s) of If/Loop/Scan: {counted(inner_nodes, 'node')}, {counted(inner_inits, 'initializer')}"
    constants = sum(n.op_type == "Constant" for g in [graph, *(g for _, g in subgraphs)] for n in g.node)
    if constants:
        counts += f" | {constants} Constant node(s)"
    lines = [
        f"ONNX model: {path}",
        f"  IR version {model.ir_version} | opsets: {opsets} | producer: {model.producer_name or '?'} {model.producer_version}".rstrip(),
        counts,
    ]
    external = _external_summary(model)
    if external:
        lines.append(external)
    lines.append("  inputs:")
    lines += [f"    {name}: {meta}" for name, meta in graph_inputs(model).items()]
    lines.append("  outputs:")
    lines += [f"    {name}: {meta}" for name, meta in graph_outputs(model).items()]
    if "layers" in show or "attrs" in show:
        lines.append("  nodes:")
        lines += _nodes(graph, 1, "attrs" in show)
    if "weights" in show:
        lines += _weights(graph, subgraphs)
    return "\n".join(lines)


def _external_summary(model: onnx.ModelProto) -> str | None:
    """``  weights: 2.12 GiB, 2.12 GiB of them in external data: decoder.onnx.data`` (None without external data)."""
    total = external = 0
    files: dict[str, None] = {}
    for t in tensors(model):
        size = nbytes(t)
        total += size
        if is_external(t):
            external += size
            files[external_info(t)[0]] = None
    if not files:
        return None
    return f"  weights: {_gib(total)}, {_gib(external)} of them in external data: {names_preview(files)}"


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def summarize(path: str, options: object = None) -> dict[str, Any]:
    """What ``parity inspect model --json`` says of an ONNX file beside its inputs (schema: model.schema.json)."""
    model = _load(path, options)
    return {
        "outputs": graph_outputs(model),
        "ir_version": model.ir_version,
        "opsets": {o.domain or "ai.onnx": o.version for o in model.opset_import},
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "nodes": len(model.graph.node),
        "initializers": len(model.graph.initializer),
    }


def _graph_attrs(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    import onnx

    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.name, attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            for i, g in enumerate(attr.graphs):
                yield f"{attr.name}[{i}]", g


def _subgraphs(graph: onnx.GraphProto, where: str = "") -> Iterator[tuple[str, onnx.GraphProto]]:
    """Every subgraph at any depth, with a path naming the nodes and attributes that lead to it."""
    for node in graph.node:
        for name, g in _graph_attrs(node):
            path = f"{where}{node.name or node.op_type}.{name}"
            yield path, g
            yield from _subgraphs(g, path + "/")


def _nodes(graph: onnx.GraphProto, depth: int, attrs: bool) -> list[str]:
    pad = STEP * depth
    lines = []
    for i, node in enumerate(graph.node):
        lines.append(f"{pad}[{i}] {node.name or '<unnamed>'} ({node.op_type}): {list(node.input)} -> {list(node.output)}")
        if attrs:
            lines += [f"{pad}    {line}" for line in _attributes(node)]
        for name, sub in _graph_attrs(node):
            ins = names_preview(i.name for i in sub.input)
            outs = names_preview(o.name for o in sub.output)
            inits = f", {counted(len(sub.initializer), 'initializer')}" if len(sub.initializer) else ""
            lines.append(f"{pad}    {name}: subgraph '{sub.name}' ({counted(len(sub.node), 'node')}{inits}) | inputs: {ins} | outputs: {outs}")
            lines += _nodes(sub, depth + 2, attrs)
    return lines


def _attributes(node: onnx.NodeProto) -> list[str]:
    import onnx

    lines = []
    for attr in node.attribute:
        if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            continue  # opened below the node
        value = onnx.helper.get_attribute_value(attr)
        if isinstance(value, onnx.TensorProto):
            text = tensor_text(value)
        elif isinstance(value, onnx.SparseTensorProto):
            text = f"sparse {tensor_text(value.values)} in dims {list(value.dims)}"
        else:
            if isinstance(value, bytes):
                value = value.decode(errors="replace")
            elif isinstance(value, list) and value and isinstance(value[0], bytes):
                value = [v.decode(errors="replace") for v in value]
            text = repr(value)
            if len(text) > 120:
                text = text[:117] + "..."
        lines.append(f"{attr.name} = {text}")
    return lines


def _constant_value(node: onnx.NodeProto) -> str | None:
    """A Constant node's value as :func:`tensor_text` shows it (any of its value_* attributes)."""
    for line in _attributes(node):
        name, _, text = line.partition(" = ")
        if name.startswith("value") or name == "sparse_value":
            return text
    return None


def _weights(graph: onnx.GraphProto, subgraphs: list[tuple[str, onnx.GraphProto]]) -> list[str]:
    inits = [("", init) for init in graph.initializer] + [(f"{path}: ", init) for path, sub in subgraphs for init in sub.initializer]
    lines = ["  initializers:" if inits else "  initializers: none"]
    lines += [f"    {where}{init.name}: {tensor_text(init)}" for where, init in inits]
    consts = [("", n) for n in graph.node if n.op_type == "Constant"]
    consts += [(f"{path}: ", n) for path, sub in subgraphs for n in sub.node if n.op_type == "Constant"]
    if consts:
        lines.append("  constants (Constant nodes):")
        for where, node in consts:
            label = node.output[0] if node.output else node.name
            lines.append(f"    {where}{label}: {_constant_value(node) or '?'}")
    return lines


def tensor_text(tensor: Any) -> str:
    """``float32[2,3] = [[...]]`` in full for small tensors, else ``float32[64,3,3,3] | mean .. std .. min .. max``;
    external data is named, never read."""
    import numpy as np
    import onnx
    import onnx.numpy_helper as nh

    if isinstance(tensor, onnx.TensorProto):
        head = f"{dtype_of(tensor.data_type) or onnx.TensorProto.DataType.Name(tensor.data_type).lower()}[{','.join(map(str, tensor.dims))}]"
        if tensor.data_location == onnx.TensorProto.EXTERNAL or tensor.external_data:
            location = {e.key: e.value for e in tensor.external_data}.get("location")
            return f"{head} (external data{': ' + location if location else ''})"
        try:
            arr = nh.to_array(tensor)
        except Exception as exc:  # noqa: BLE001 - an unreadable tensor is described, not fatal
            return f"{head} (unreadable: {type(exc).__name__})"
    else:
        arr = np.asarray(tensor)
        head = f"{arr.dtype.name}[{','.join(map(str, arr.shape))}]"
    if arr.size <= SMALL:
        if arr.dtype.kind in "SUO":
            values = repr(arr.tolist())
        else:
            text = np.array2string(arr, separator=", ", threshold=SMALL, max_line_width=10_000, formatter={"float_kind": lambda v: f"{v:.6g}"})
            values = " ".join(text.split())
        return f"{head} = {values}"
    if arr.dtype.kind not in "biuf":
        return f"{head} ({arr.size} elements)"
    data = arr.astype(np.float64)
    finite = data[np.isfinite(data)]
    if finite.size == 0:
        return f"{head} | no finite values"
    stats = f"mean {finite.mean():.4g} std {finite.std():.4g} min {finite.min():.4g} max {finite.max():.4g}"
    if finite.size != data.size:
        stats += f" | NaN/Inf {data.size - finite.size}"
    return f"{head} | {stats}"
