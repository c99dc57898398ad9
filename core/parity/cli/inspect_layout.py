"""Polygraphy 0.53.6's text layout of ``inspect model`` for ONNX models (``parity inspect model --format polygraphy``).

Parity prints its own layout by default; scripts written against Polygraphy's output parse this one. The layout:
a ``[I] Loading model: PATH`` line, then one ``[I] ==== ONNX Model ====`` message whose further lines are indented
by four spaces (Polygraphy's logger), with the sections ``Graph Input(s)``, ``Graph Output(s)``, ``Initializer(s)``
and ``Node(s)``; tensors as ``{name [dtype=float32, shape=(1, 3)]}``; subgraphs (If, Loop, Scan) opened under the
attribute that holds them. Weights Polygraphy cannot read print ``<error: failed to load weights>`` after an
``[E] Failed to load weights.`` message, as Polygraphy's do.
``onnx`` and ``numpy`` are imported inside functions: importing this module is free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from parity.onnx_models import data_dir, load

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Iterable

    import onnx

TAB = "    "  # Polygraphy's indent unit (constants.TAB)
LOAD_ERROR = "<error: failed to load weights>"
# ONNX element types whose Polygraphy name is not the lower-cased ONNX name
_DTYPE_NAMES = {"FLOAT": "float32", "DOUBLE": "float64"}
_DTYPE_ATTRS = {"to", "dtype", "target_type"}  # INT attributes that hold an element type: shown by name
# element types Polygraphy 0.53.6 has no data type for: shown as their number, after a warning (undefined,
# complex64/128, uint4, float4e2m1, float8e8m0, uint2, int2, float6e2m3, float6e3m2)
_NO_POLYGRAPHY_TYPE = {0, 14, 15, 21, 23, 24, 25, 26, 27, 28}


def message(severity: str, text: str) -> str:
    """``text`` as Polygraphy's logger prints it: ``[I] `` before the first line, four spaces before the others."""
    lines = str(text).splitlines() or [""]
    return f"[{severity}] " + "\n    ".join(lines)


def indent(block: str, level: int = 1) -> str:
    """Every line of ``block`` indented by ``level`` tabs (a block without lines gives the indent alone)."""
    tab = TAB * level
    return tab + f"\n{tab}".join(str(block).splitlines())


def _type_attr(value: int) -> str:
    """A ``to``/``dtype``/``target_type`` attribute: the element type's name (the number if it names none)."""
    import onnx

    try:
        name = onnx.TensorProto.DataType.Name(value)
    except ValueError:
        return str(value)
    return _DTYPE_NAMES.get(name, name.lower())


def tensor_entry(name: str, meta: tuple[str | None, list[Any] | None] | None) -> str:
    """``name [dtype=float32, shape=(1, 3)]``; a tensor without metadata is its name alone."""
    dtype, shape = meta if meta is not None else (None, None)
    items = []
    if dtype is not None:
        items.append(f"dtype={dtype}")
    if shape is not None:
        items.append(f"shape={tuple(shape)}")
    return f"{name} [{', '.join(items)}]" if items else name


def braces(entries: Iterable[str]) -> str:
    return "{" + ",\n ".join(entries) + "}"


class OnnxLayout:
    """Renders one ONNX model; ``messages`` collects what Polygraphy logs on the way (weights it could not read,
    attributes it skips)."""

    def __init__(self, show: set[str], base_dir: str | None, ignore_external_data: bool) -> None:
        self.layers = "layers" in show
        self.attrs = "attrs" in show
        self.weights = "weights" in show
        self.base_dir = base_dir
        self.ignore_external_data = ignore_external_data
        self.messages: list[tuple[str, str]] = []  # (severity letter, text) in the order Polygraphy logs them

    def dtype(self, elem_type: int) -> str:
        """Polygraphy's name of a tensor's element type (``float32``, ``int64``), or its number with a warning
        (once) where Polygraphy has none."""
        if elem_type in _NO_POLYGRAPHY_TYPE:
            warning = ("W", f"Could not convert: {elem_type} to a corresponding Polygraphy data type. Leaving this type in its source format.")
            if warning not in self.messages:
                self.messages.append(warning)
            return str(elem_type)
        return _type_attr(elem_type)

    def value_meta(self, value: onnx.ValueInfoProto) -> tuple[str, list[Any]]:
        dims: list[Any] = []
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                dims.append(dim.dim_param)
            elif dim.HasField("dim_value"):
                dims.append(dim.dim_value)
            else:
                dims.append(-1)  # neither set: dynamic
        return self.dtype(value.type.tensor_type.elem_type), dims

    def tensor_meta(self, tensor: onnx.TensorProto) -> tuple[str, list[Any]]:
        return self.dtype(tensor.data_type), list(tensor.dims)

    def model(self, model: onnx.ModelProto) -> str:
        default = "Unknown"
        others = {}
        for opset in model.opset_import:
            if opset.domain:
                others[opset.domain] = opset.version
            else:
                default = opset.version
        title = f"Name: {model.graph.name} | ONNX Opset: {default}"
        if others:
            title += f" | Other Opsets: {others}"
        return self.graph(model.graph, {}, title, 0).strip()

    def values(self, tensor: onnx.TensorProto) -> str:
        """``str()`` of the tensor's values (NumPy's printing), or :data:`LOAD_ERROR` after recording why."""
        import onnx
        import onnx.numpy_helper as nh

        external = tensor.data_location == onnx.TensorProto.EXTERNAL
        try:
            if external and self.ignore_external_data:
                location = {e.key: e.value for e in tensor.external_data}.get("location", "?")
                raise ValueError(f"{tensor.name}'s data is in {location}, not read (--ignore-external-data)")
            return str(nh.to_array(tensor, base_dir=self.base_dir or "") if external else nh.to_array(tensor))
        except Exception as exc:  # noqa: BLE001 - an unreadable tensor is shown as Polygraphy shows it, not fatal
            error = ("E", f"Failed to load weights.\nNote: Error was: {exc}")
            if error not in self.messages:  # Polygraphy logs each distinct message once
                self.messages.append(error)
            return LOAD_ERROR

    def graph(self, graph: onnx.GraphProto, parent: dict[str, Any], title: str, level: int) -> str:
        init_names = {t.name for t in graph.initializer}
        inputs = {v.name: self.value_meta(v) for v in graph.input if v.name not in init_names}
        outputs = {v.name: self.value_meta(v) for v in graph.output}
        inits = {t.name: self.tensor_meta(t) for t in graph.initializer}
        known = {**parent, **{v.name: self.value_meta(v) for v in graph.value_info}, **inits, **inputs, **outputs}
        section = "Subgraph" if level else "Graph"

        out = f"{title}\n\n" if title else ""
        if self.attrs and graph.doc_string:
            out += f"---- Docstring ----\n{graph.doc_string}\n\n"
        out += f"---- {len(inputs)} {section} Input(s) ----\n{braces(tensor_entry(n, m) for n, m in inputs.items())}\n\n"
        out += f"---- {len(outputs)} {section} Output(s) ----\n{braces(tensor_entry(n, m) for n, m in outputs.items())}\n\n"
        out += f"---- {len(inits)} Initializer(s) ----\n"
        if self.weights:
            for tensor in graph.initializer:
                dtype, dims = inits[tensor.name]
                out += f"Initializer | {tensor.name} [dtype={dtype}, shape={dims}] | Values:\n{indent(self.values(tensor))}\n\n"
            if not inits:
                out += "{}\n\n"
        elif self.layers:
            out += braces(tensor_entry(n, m) for n, m in inits.items()) + "\n\n"
        else:
            out += "\n"

        out += f"---- {len(graph.node)} Node(s) ----\n"
        # every node is rendered, shown or not: Polygraphy reads every attribute and weight it may show, and
        # warns of those it cannot read whatever --show asks
        nodes = [self.node(index, node, known, init_names, level) for index, node in enumerate(graph.node)]
        if self.layers:
            out += "".join(nodes)
        return indent(out, level) if level else out

    def node(self, index: int, node: onnx.NodeProto, known: dict[str, Any], init_names: set[str], level: int) -> str:
        def entries(names: Iterable[str]) -> str:
            return braces(tensor_entry(f"Initializer | {n}" if n in init_names else n, known.get(n)) for n in names)

        ins, outs = list(node.input), list(node.output)
        both = bool(ins and outs)
        text = f"Node {index:<4} | {node.name} [Op: {node.op_type}]\n{indent(entries(ins))}"
        text += "\n" if both else ""
        arrow = f" -> {indent(entries(outs), int(both)).strip()}"
        text += (indent(arrow, int(both)) if both else arrow) + "\n"
        rendered = [(attr.name, self.attribute(attr, known, level)) for attr in node.attribute]
        rendered = [(name, value) for name, value in rendered if value is not None]
        if rendered and self.attrs:
            text += indent("---- Attributes ----") + "\n"
            prefix = f"{node.name}." if node.name else ""
            text += "".join(indent(f"{prefix}{name} = {value}") + "\n" for name, value in rendered)
        return text + "\n"

    def attribute(self, attr: onnx.AttributeProto, known: dict[str, Any], level: int) -> str | None:
        import onnx

        kind = onnx.AttributeProto
        if attr.type == kind.GRAPH:
            return "\n" + self.graph(attr.g, known, "", level + 2)
        if attr.type == kind.TENSOR:
            dtype, dims = self.tensor_meta(attr.t)
            text = f"Tensor: [dtype={dtype}, shape={dims}]"
            return text + " | Values:\n" + indent(self.values(attr.t)) if self.weights else text
        if attr.type == kind.STRING:
            return attr.s.decode(errors="replace")
        if attr.type == kind.STRINGS:
            return str([s.decode(errors="replace") for s in attr.strings])
        if attr.type in (kind.FLOATS, kind.INTS):
            return str(list(attr.floats if attr.type == kind.FLOATS else attr.ints))
        if attr.type == kind.INT:
            return _type_attr(attr.i) if attr.name in _DTYPE_ATTRS else str(attr.i)
        if attr.type == kind.FLOAT:
            return str(attr.f)
        type_name = kind.AttributeType.Name(attr.type) if attr.type in kind.AttributeType.values() else str(attr.type)
        self.messages.append(("W", f"Attribute of type {type_name} is currently unsupported. Skipping attribute."))
        return None


def infer_shapes(model: onnx.ModelProto, onnxruntime: bool = True) -> onnx.ModelProto:
    """Shape inference as Polygraphy's ``--shape-inference`` runs it: ONNX Runtime's symbolic shape inference (its
    dimension names, e.g. ``Range_5_o0__d0``), else (or with ``--no-onnxruntime-shape-inference``) ONNX's."""
    import onnx

    if not onnxruntime:
        return onnx.shape_inference.infer_shapes(model)
    try:
        from parity.onnx_models import symbolic_shapes  # here: only --shape-inference needs it

        inferred = symbolic_shapes(model)
        if inferred is not None:
            return inferred
    except Exception:  # noqa: BLE001 - symbolic inference refuses some models; ONNX's is Polygraphy's fallback too
        pass
    return onnx.shape_inference.infer_shapes(model)


def dds_variables(model: onnx.ModelProto, names: Iterable[str]) -> str:
    """Polygraphy's list of unbounded-DDS tensors: ``[Variable (name): (shape=[...], dtype=int64)]``."""
    import onnx

    graph = model.graph
    values = {v.name: v for v in (*graph.input, *graph.value_info, *graph.output)}
    entries = []
    for name in names:
        value = values.get(name)
        shape = dtype = None
        if value is not None and value.type.tensor_type.HasField("shape"):
            shape = [d.dim_value if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param") else None
                     for d in value.type.tensor_type.shape.dim]
        if value is not None and value.type.tensor_type.elem_type:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        entries.append(f"Variable ({name}): (shape={shape}, dtype={dtype})")
    return "[" + ", ".join(entries) + "]"


def describe_onnx(path: str, show: Iterable[str] = (), options: object = None, inference: str | None = None,
                  unbounded_dds: Iterable[str] | None = None) -> str:
    """``inspect model --format polygraphy`` for an ONNX file: Polygraphy's messages, one per block of lines.
    ``inference``: describe the model with shapes inferred by ``onnxruntime`` (symbolic) or ``onnx``;
    ``unbounded_dds``: the tensors ``--list-unbounded-dds`` found, listed after the model."""
    given = options if isinstance(options, Mapping) else {}
    ignore = bool(given.get("ignore_external_data"))
    folder = given.get("external_data_dir") or None
    model = load(path, load_external_data=False, external_data_dir=folder, ignore_external_data=ignore)
    if inference:
        model = infer_shapes(model, onnxruntime=inference == "onnxruntime")
    layout = OnnxLayout(set(show), str(data_dir(path, folder)), ignore)
    text = layout.model(model)
    blocks = [message("I", f"Loading model: {path}")]
    blocks += [message(severity, text) for severity, text in layout.messages]
    blocks.append(message("I", f"==== ONNX Model ====\n{text}"))
    if unbounded_dds is not None:
        blocks.append(message("I", f"Found tensors with unbounded DDS: {dds_variables(model, unbounded_dds)}"))
    return "\n".join(blocks)
