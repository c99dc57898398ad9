"""fp32 -> fp16 (or bfloat16) conversion of ONNX models: ``parity convert --fp-to-fp16`` and, through
:class:`Fp16Converter`, every candidate of ``parity debug precision`` (one conversion for both).

Rule: every float32 tensor gets a *home* precision. Each input of a node that is not kept fp32 wants the
low precision where the op's ONNX schema allows it for that input (``Resize`` scales stay float32); a kept
node wants float32 everywhere. A node's float outputs are low where it is converted and the schema allows
it. A weight (initializer or ``Constant``) is low when some converted node wants it so. Every use whose
wanted precision differs from the tensor's home reads one shared ``Cast``. Kept fp32: the user's op types
and node names, custom-domain and unknown ops, op types onnxruntime's CPU provider has no kernel for at
the low type (found by loading the result), and (by default) the readers of weights beyond the fp16 range.

Control flow (``If``, ``Loop``, ``Scan``) is converted inside its bodies by the same rule: body inputs,
outputs and loop-carried values are low, the node's float inputs and outputs too; a tensor of an outer
scope read by name inside a body gets its ``Cast`` inside that body when its home differs (recursively,
for nested bodies). A kept control-flow node keeps its whole body fp32. Names of computed tensors are
kept, so a layerwise comparison against the fp32 model matches tensors by name.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from parity.api import ModelError, UsageError, did_you_mean, onnx_models
from parity_surgeon import graph as g

FP16_MAX = 65504.0
CONTROL_FLOW = {"If", "Loop", "Scan"}
# Ops that pass weight values on unchanged: readers of an out-of-range weight through them stay fp32 too.
_MOVES = {"Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Transpose", "Expand", "Tile", "Gather", "Concat", "Slice", "Split", "Cast"}
_SMALL = 1024  # bytes: tensors this small keep their data in the type-inference skeleton
_LOW = {"float16": ("tensor(float16)", 10), "bfloat16": ("tensor(bfloat16)", 16)}  # schema type, TensorProto enum
FLOAT = 1


def _short(names: list[str], k: int = 3) -> str:
    head = ", ".join(names[:k])
    return f"{head}, ... ({len(names)} in all)" if len(names) > k else head


@dataclass
class Fp16Report:
    converted_tensors: int = 0
    casts_added: int = 0
    blocked_nodes: list[str] = field(default_factory=list)  # nodes whose float tensors all stay fp32
    auto_blocked_ops: list[str] = field(default_factory=list)  # op types onnxruntime could not run in fp16
    out_of_range: dict[str, int] = field(default_factory=dict)  # weight -> values beyond +-65504
    range_kept_nodes: list[str] = field(default_factory=list)  # nodes kept fp32 because they read those weights
    clamped: bool = False  # out-of-range values were clamped (keep_out_of_range=False) instead of kept fp32
    bodies: int = 0  # control-flow bodies converted
    serialized: bytes | None = field(default=None, repr=False)  # the validated bytes, when validated

    def lines(self) -> list[str]:
        out = [f"fp16: {self.converted_tensors} tensors converted, {self.casts_added} Cast nodes added, {len(self.blocked_nodes)} nodes kept fp32"]
        if self.bodies:
            out.append(f"control flow: {self.bodies} If/Loop/Scan bodies converted with their outer scope")
        if self.auto_blocked_ops:
            out.append(f"kept fp32 because onnxruntime has no fp16 kernel: {', '.join(self.auto_blocked_ops)}")
        if self.out_of_range:
            names = list(self.out_of_range)
            values = sum(self.out_of_range.values())
            if self.clamped:
                out.append(f"clamped to +-65504: {values} value(s) in {len(names)} weight(s): {_short(names)}")
            else:
                out.append(
                    f"kept fp32: {len(names)} weight(s) beyond +-65504 ({values} values: {_short(names)}) and their "
                    f"{len(self.range_kept_nodes)} reader(s); --clamp-out-of-range clamps them instead"
                )
        return out


@cache
def _formals(op_type: str, domain: str, opset: int, low: str) -> tuple[tuple[bool, ...], tuple[bool, ...], bool, bool] | None:
    """Per formal input/output: does it allow the low type; whether the last input/output is variadic.
    None for an op with no ONNX schema (custom domains, unknown ops)."""
    import onnx

    if domain not in ("", "ai.onnx"):
        return None
    try:
        schema = onnx.defs.get_schema(op_type, opset, domain)
    except Exception:  # unknown op
        return None
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    want = _LOW[low][0]

    def ok(param: Any) -> bool:
        return want in allowed.get(param.type_str, {param.type_str})

    var = onnx.defs.OpSchema.FormalParameterOption.Variadic
    ins, outs = list(schema.inputs), list(schema.outputs)
    return (tuple(ok(p) for p in ins), tuple(ok(p) for p in outs), bool(ins) and ins[-1].option == var, bool(outs) and outs[-1].option == var)


def _formal(flags: tuple[bool, ...], variadic: bool, k: int) -> bool:
    if k < len(flags):
        return flags[k]
    return bool(flags) and variadic and flags[-1]


def _subgraphs(node: Any) -> list[tuple[Any, Any]]:
    import onnx

    out = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            out.append((attr.name, attr.g))
        elif attr.type == onnx.AttributeProto.GRAPHS:
            out.extend((attr.name, sub) for sub in attr.graphs)
    return out


def _walk(graph: Any) -> Iterable[Any]:
    yield graph
    for node in graph.node:
        for _, sub in _subgraphs(node):
            yield from _walk(sub)


def _weight_tensors(graph: Any) -> Iterable[tuple[str, Any]]:
    """(name, TensorProto) of float initializers and Constant values of one graph."""
    for init in graph.initializer:
        yield init.name, init
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            for attr in node.attribute:
                if attr.name == "value":
                    yield node.output[0], attr.t


def _array(t: Any) -> Any:
    import numpy as np
    from onnx import numpy_helper

    if t.data_type == FLOAT and t.raw_data and not t.external_data:
        return np.frombuffer(t.raw_data, dtype=np.float32)
    return numpy_helper.to_array(t).reshape(-1)


def _skeleton(model: Any) -> Any:
    """A copy of ``model`` for type inference without the data of large float weights (dims and types
    kept), so inference does not serialize and copy the weights twice."""
    import onnx

    def strip(graph: Any) -> Any:
        out = onnx.GraphProto()
        out.name = graph.name
        out.input.extend(graph.input)
        out.output.extend(graph.output)
        out.value_info.extend(graph.value_info)
        for init in graph.initializer:
            out.initializer.append(_bare(init))
        for node in graph.node:
            copy = out.node.add()
            copy.name, copy.op_type, copy.domain = node.name, node.op_type, node.domain
            copy.input.extend(node.input)
            copy.output.extend(node.output)
            for attr in node.attribute:
                a = copy.attribute.add()
                if attr.type == onnx.AttributeProto.TENSOR:
                    a.name, a.type = attr.name, attr.type
                    a.t.CopyFrom(_bare(attr.t))
                elif attr.type == onnx.AttributeProto.GRAPH:
                    a.name, a.type = attr.name, attr.type
                    a.g.CopyFrom(strip(attr.g))
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    a.name, a.type = attr.name, attr.type
                    a.graphs.extend(strip(s) for s in attr.graphs)
                else:
                    a.CopyFrom(attr)
        return out

    skel = onnx.ModelProto()
    skel.ir_version = model.ir_version
    skel.opset_import.extend(model.opset_import)
    skel.functions.extend(model.functions)
    skel.graph.CopyFrom(strip(model.graph))
    return skel


def _bare(t: Any) -> Any:
    import onnx

    if t.data_type != FLOAT or t.ByteSize() <= _SMALL:
        return t
    out = onnx.TensorProto()
    out.name, out.data_type = t.name, t.data_type
    out.dims.extend(t.dims)
    return out


def _types(model: Any) -> dict[str, int]:
    """tensor name -> ONNX elem type, for every graph (bodies included), from one shape inference of a
    skeleton of the model."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(_skeleton(model), check_type=False, strict_mode=False, data_prop=False)
    except Exception:  # inference failed outright: use what the model declares
        inferred = model
    types: dict[str, int] = {}
    for graph in _walk(inferred.graph):
        for vi in [*graph.input, *graph.value_info, *graph.output]:
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                types[vi.name] = vi.type.tensor_type.elem_type
        for name, t in _weight_tensors(graph):
            types[name] = t.data_type
        for node in graph.node:
            if node.op_type == "Constant" and node.output:
                for attr in node.attribute:
                    if attr.name in ("value_float", "value_floats"):
                        types[node.output[0]] = FLOAT
    return types


def _encode(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _wire(buf: Any, start: int, end: int) -> Iterable[tuple[int, int, int, int, int]]:
    """Protobuf fields of ``buf[start:end]``: (number, wire type, field start, value start, field end);
    the value of a length-delimited field is ``buf[value start:field end]``."""
    pos = start
    while pos < end:
        head = pos
        key, pos = onnx_models.read_varint(buf, pos)
        wire = key & 7
        if wire == 0:
            value = pos
            _, pos = onnx_models.read_varint(buf, pos)
        elif wire == 1:
            value, pos = pos, pos + 8
        elif wire == 5:
            value, pos = pos, pos + 4
        elif wire == 2:
            length, value = onnx_models.read_varint(buf, pos)
            pos = value + length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield key >> 3, wire, head, value, pos
    if pos != end:
        raise ValueError("truncated protobuf field")


# onnx.proto field numbers: ModelProto.graph; GraphProto.initializer; TensorProto data_type, name, raw_data,
# data_location
_M_GRAPH, _G_INIT, _T_TYPE, _T_NAME, _T_RAW, _T_LOCATION = 7, 5, 2, 8, 9, 14


class _FileWeights:
    """The raw data of a model file's large float32 main-graph initializers, left in the file.

    :meth:`load` parses the model without it (weights keep name, type and dims), so the fp32 weights are
    never held by the ModelProto: protobuf (upb) keeps a message's old field data until the whole message
    is freed, so converting them in place held fp32 and fp16 copies together. :meth:`assemble` writes the
    converted model's bytes with each weight read back from the file, converted when the build lowered it."""

    def __init__(self, path: Path, spans: dict[str, tuple[int, int]]) -> None:
        self.path = path
        self.spans = spans  # initializer name -> (offset, length) of its raw_data in the file
        self.lowered: set[str] = set()

    @classmethod
    def load(cls, path: str | Path) -> tuple[Any, _FileWeights] | None:
        """(model without the stored data, store), or None where the file is anything but a plain model
        with embedded weights (the caller loads it as usual, with its clean errors)."""
        import mmap

        import onnx

        p = Path(path)
        try:
            if not p.is_file() or p.stat().st_size == 0:
                return None
            spans: dict[str, tuple[int, int]] = {}
            parts: list[bytes] = []
            with open(p, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                for number, wire, head, value, end in _wire(buf, 0, len(buf)):
                    if number != _M_GRAPH or wire != 2:
                        parts.append(buf[head:end])
                        continue
                    graph: list[bytes] = []
                    for gnum, gwire, ghead, gvalue, gend in _wire(buf, value, end):
                        kept = cls._strip(buf, gvalue, gend, spans) if gnum == _G_INIT and gwire == 2 else None
                        if kept is None:
                            graph.append(buf[ghead:gend])
                        else:
                            graph.append(_encode(_G_INIT << 3 | 2) + _encode(len(kept)) + kept)
                    body = b"".join(graph)
                    parts.append(_encode(_M_GRAPH << 3 | 2) + _encode(len(body)) + body)
            if not spans:
                return None
            model = onnx.ModelProto.FromString(b"".join(parts))
        except Exception:  # noqa: BLE001 - anything unusual: the ordinary load and its errors
            return None
        if not model.graph.node and not model.graph.output:
            return None
        names = [i.name for i in model.graph.initializer]
        if len(set(names)) != len(names) or any(t.data_location == onnx.TensorProto.EXTERNAL for gr in _walk(model.graph) for _, t in _weight_tensors(gr)):
            return None
        return model, cls(p, spans)

    @staticmethod
    def _strip(buf: Any, start: int, end: int, spans: dict[str, tuple[int, int]]) -> bytes | None:
        """A TensorProto's bytes without its raw_data when it is a large float32 tensor with one raw_data and
        a name not seen before (its span recorded in ``spans``); None to keep it as it is."""
        fields = list(_wire(buf, start, end))
        raw = [f for f in fields if f[0] == _T_RAW and f[1] == 2]
        types = [onnx_models.read_varint(buf, f[3])[0] for f in fields if f[0] == _T_TYPE and f[1] == 0]
        names = [bytes(buf[f[3] : f[4]]) for f in fields if f[0] == _T_NAME and f[1] == 2]
        location = [f for f in fields if f[0] == _T_LOCATION]
        if len(raw) != 1 or types[-1:] != [FLOAT] or len(names) != 1 or location or raw[0][4] - raw[0][3] <= _SMALL or (raw[0][4] - raw[0][3]) % 4:
            return None
        name = names[0].decode()
        if name in spans:
            return None
        spans[name] = (raw[0][3], raw[0][4] - raw[0][3])
        return b"".join(buf[f[2] : f[4]] for f in fields if f is not raw[0])

    def holds(self, t: Any) -> bool:
        """Whether ``t`` (a main-graph initializer of the loaded model) has its data here."""
        import math

        if t.name not in self.spans or t.raw_data or t.float_data or t.data_type != FLOAT:
            return False
        return math.prod(t.dims) * 4 == self.spans[t.name][1]

    def _read(self, name: str, fh: Any) -> Any:
        import numpy as np

        offset, length = self.spans[name]
        fh.seek(offset)
        data = fh.read(length)
        if len(data) != length:
            raise ValueError(f"{self.path} changed while it was converted")
        return np.frombuffer(data, dtype=np.float32)

    def array(self, name: str) -> Any:
        with open(self.path, "rb") as fh:
            return self._read(name, fh)

    def assemble(self, light: bytes, low: str, out_of_range: dict[str, int]) -> bytes:
        """The serialized model: ``light`` (the converted model, serialized without the stored data) with
        each stored initializer's raw_data put back, converted to ``low`` where the build lowered it (fp16:
        finite values beyond +-65504 clamped, as :meth:`_Build.lower` does)."""
        import io

        import numpy as np

        def raw_size(name: str) -> int:
            return self.spans[name][1] // (2 if name in self.lowered else 1)

        def size(piece: bytes | str) -> int:
            return len(piece) if isinstance(piece, bytes) else raw_size(piece)

        pieces: list[bytes | str] = []  # bytes, or the name of a weight whose raw_data goes there
        for number, wire, head, value, end in _wire(light, 0, len(light)):
            if number != _M_GRAPH or wire != 2:
                pieces.append(light[head:end])
                continue
            graph: list[bytes | str] = []
            for gnum, gwire, ghead, gvalue, gend in _wire(light, value, end):
                name = None
                if gnum == _G_INIT and gwire == 2:
                    fields = list(_wire(light, gvalue, gend))
                    names = [light[f[3] : f[4]].decode() for f in fields if f[0] == _T_NAME and f[1] == 2]
                    name = names[0] if len(names) == 1 and names[0] in self.spans and not any(f[0] == _T_RAW for f in fields) else None
                if name is None:
                    graph.append(light[ghead:gend])
                    continue
                # the raw_data field goes in field-number order, as protobuf writes it
                at = next((f[2] for f in fields if f[0] > _T_RAW), gend)
                head_raw = _encode(_T_RAW << 3 | 2) + _encode(raw_size(name))
                tensor = (gend - gvalue) + len(head_raw) + raw_size(name)
                graph += [_encode(_G_INIT << 3 | 2) + _encode(tensor) + light[gvalue:at] + head_raw, name, light[at:gend]]
            pieces.append(_encode(_M_GRAPH << 3 | 2) + _encode(sum(size(p) for p in graph)))
            pieces += graph
        total = sum(size(p) for p in pieces)
        if total >= 2**31:
            raise ModelError(f"the fp16 model is over protobuf's 2 GiB limit ({total} bytes) and cannot be written as one file")
        out = io.BytesIO()
        with open(self.path, "rb") as fh:
            for p in pieces:
                if isinstance(p, bytes):
                    out.write(p)
                    continue
                arr = self._read(p, fh)
                if p in self.lowered:
                    if low == "float16":
                        if p in out_of_range:
                            arr = np.where(np.isinf(arr), arr, np.clip(arr, -FP16_MAX, FP16_MAX))
                        arr = arr.astype(np.float16)
                    else:
                        import ml_dtypes

                        arr = arr.astype(ml_dtypes.bfloat16)
                out.write(arr.data)
                del arr
        data = out.getvalue()  # the buffer itself (no copy): nothing else refers to it
        if len(data) != total:
            raise AssertionError(f"assembled {len(data)} bytes, expected {total}")
        return data


class Fp16Converter:
    """Analyses a model once (types, weights beyond the fp16 range) and builds converted copies with any
    extra set of nodes kept fp32: ``convert --fp-to-fp16`` builds one, ``debug precision`` one per check."""

    def __init__(
        self,
        model: Any,
        keep_io_types: bool = True,
        op_block_list: Iterable[str] = (),
        node_block_list: Iterable[str] = (),
        keep_out_of_range: bool = True,
        low: str = "float16",
        weights: _FileWeights | None = None,
    ) -> None:
        import numpy as np

        if low not in _LOW:
            raise UsageError(f"--precision: expected one of {', '.join(_LOW)}, got '{low}'")
        self.source = model
        # weights: the model was parsed without the data of its large float32 main-graph initializers, which
        # stay in the file (see _FileWeights); the build marks them and _FileWeights.assemble writes them
        self.weights = weights
        self.model = g.load(model)
        self.low, self.low_type = low, _LOW[low][1]
        self.keep_io, self.keep_range = keep_io_types, keep_out_of_range
        self.block_ops = set(op_block_list)
        self.block_names = set(node_block_list)
        known = {n.name for graph in _walk(self.model.graph) for n in graph.node}
        unknown = sorted(self.block_names - known)
        if unknown:
            raise UsageError(f"--node-block-list: the model has no node '{unknown[0]}'{did_you_mean(unknown[0], known)}")
        self.opset = next((o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx")), 17)
        self.types = _types(self.model)
        self.out_of_range: dict[str, int] = {}
        if low == "float16":
            for depth, graph in enumerate(_walk(self.model.graph)):
                for name, t in _weight_tensors(graph):
                    if t.data_type == FLOAT:
                        stored = weights is not None and depth == 0 and weights.holds(t)
                        arr = weights.array(t.name) if stored else _array(t)
                        if arr.size:
                            n = int(np.count_nonzero(np.abs(arr) > FP16_MAX))  # inf stays inf: not a clamp
                            n -= int(np.count_nonzero(np.isinf(arr)))
                            if n > 0:
                                self.out_of_range[name] = n
        self.auto_ops: list[str] = []

    # which nodes are kept fp32 with a given extra block set (names); decided per graph during the build
    def build(self, keep_fp32: Iterable[str] = (), in_place: bool = False) -> tuple[Any, Fp16Report]:
        """A converted model with the nodes named in ``keep_fp32`` also kept fp32. ``in_place`` converts the
        analysed model itself (no copy: for a single conversion; the converter cannot build again)."""
        import onnx

        if in_place:
            model = self.model
        else:
            model = onnx.ModelProto()
            model.CopyFrom(self.model)
        report = Fp16Report(auto_blocked_ops=list(self.auto_ops), clamped=not self.keep_range and bool(self.out_of_range))
        report.out_of_range = dict(self.out_of_range)
        names = {t for graph in _walk(model.graph) for n in graph.node for t in (*n.input, *n.output)}
        names.update(i.name for graph in _walk(model.graph) for i in [*graph.input, *graph.initializer])
        state = _Build(self, report, names, self.block_names | set(keep_fp32), set(self.block_ops) | set(self.auto_ops))
        state.graph(model.graph, ChainMap(), main=True, fp32=False)
        report.range_kept_nodes = sorted(set(report.range_kept_nodes))
        return model, report

    def probe_onnxruntime(self) -> None:
        """Keep fp32 the op types onnxruntime's CPU provider has no kernel for at the low type, found by
        loading default builds (what ``convert_to_fp16`` does), so later builds load."""
        while True:
            model, _ = self.build()
            try:
                onnx_models.validate(model.SerializeToString(), "the fp16 model")
                return
            except onnx_models.MissingKernelError as exc:
                if exc.op_type in self.block_ops or exc.op_type in self.auto_ops:
                    return
                self.auto_ops.append(exc.op_type)
            except Exception:  # other problems surface when the built model is checked or written
                return

    def candidates(self) -> list[str]:
        """Names of the nodes a default build converts (the search space of ``debug precision``)."""
        model, report = self.build()
        kept = set(report.blocked_nodes)
        floats = {t for t, ty in self.types.items() if ty == FLOAT}
        return [n.name for n in model.graph.node if n.name and n.name not in kept and not n.name.endswith("__cast") and any(t in floats for t in (*n.input, *n.output))]


class _Build:
    """One conversion pass over a model copy (recursive over control-flow bodies)."""

    def __init__(self, conv: Fp16Converter, report: Fp16Report, taken: set[str], block_names: set[str], block_ops: set[str]) -> None:
        self.c, self.report, self.taken = conv, report, taken
        self.block_names, self.block_ops = block_names, block_ops

    def unique(self, base: str) -> str:
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def is_float(self, t: str) -> bool:
        return bool(t) and self.c.types.get(t) == FLOAT

    def graph(self, graph: Any, outer: ChainMap, main: bool, fp32: bool, in_low: bool = False, out_low: bool | None = None) -> None:
        """Convert ``graph`` in place. ``outer``: home precision (True = low) of enclosing scopes' tensors.
        ``fp32``: keep every node (a kept control-flow node's body). Subgraph inputs are low when
        ``in_low``; subgraph outputs are cast to low when ``out_low``."""
        import onnx
        from onnx import helper

        c, report, low = self.c, self.report, self.c.low_type
        nodes = list(graph.node)
        # --- which nodes are kept fp32, and what each input wants (True = low)
        kept: set[int] = set()
        wants: list[list[bool]] = []
        out_homes: list[list[bool]] = []
        for i, node in enumerate(nodes):
            floats_in = [self.is_float(t) for t in node.input]
            floats_out = [self.is_float(t) for t in node.output]
            formals = None if node.op_type in CONTROL_FLOW else _formals(node.op_type, node.domain, c.opset, c.low)
            block = fp32 or node.op_type in self.block_ops or node.name in self.block_names
            if not block and node.op_type not in CONTROL_FLOW and formals is None and (any(floats_in) or any(floats_out)):
                block = True  # custom domain or unknown op: leave it as it is
            if node.op_type == "Constant" and node.output and node.output[0] in c.out_of_range and c.keep_range:
                block = True
            if block:
                kept.add(i)
            if node.op_type in CONTROL_FLOW:
                wants.append([f and not block for f in floats_in])
                out_homes.append([f and not block for f in floats_out])
            elif block or formals is None:
                wants.append([False] * len(node.input))
                out_homes.append([False] * len(node.output))
            else:
                fin, fout, vin, vout = formals
                wants.append([f and _formal(fin, vin, k) for k, f in enumerate(floats_in)])
                out_homes.append([f and _formal(fout, vout, k) for k, f in enumerate(floats_out)])
        # readers of out-of-range weights stay fp32 (through ops that only move the values)
        if c.keep_range and c.out_of_range and not fp32:
            hot = {t for t in c.out_of_range}
            changed = True
            while changed:
                changed = False
                for i, node in enumerate(nodes):
                    reads = set(node.input) | set(_captured(node))
                    if reads & hot and i not in kept:
                        kept.add(i)
                        wants[i] = [False] * len(node.input)
                        out_homes[i] = [False] * len(node.output)
                        report.range_kept_nodes.append(node.name or f"{node.op_type}_{i}")
                        changed = True
                    if reads & hot and node.op_type in _MOVES and not set(node.output) <= hot:
                        hot.update(t for t in node.output if t)
                        changed = True
        # --- home precision of the tensors this graph defines
        home: dict[str, bool] = {}
        scope = outer.new_child(home)
        for vi in graph.input:
            if self.is_float(vi.name):
                home[vi.name] = (not c.keep_io) if main else in_low
        readers: dict[str, list[tuple[int, bool]]] = {}
        for i, node in enumerate(nodes):
            for k, t in enumerate(node.input):
                readers.setdefault(t, []).append((i, wants[i][k]))
            if node.op_type in CONTROL_FLOW:
                for t in _captured(node):
                    readers.setdefault(t, []).append((i, i not in kept))
        main_outputs = {o.name for o in graph.output} if main else set()
        for init in graph.initializer:
            if init.data_type == FLOAT:
                users = readers.get(init.name, [])
                if init.name in main_outputs:
                    home[init.name] = not c.keep_io
                else:
                    home[init.name] = (not users or any(w for _, w in users)) and not (c.keep_range and init.name in c.out_of_range) and not fp32
        for i, node in enumerate(nodes):
            for k, t in enumerate(node.output):
                if self.is_float(t):
                    home[t] = out_homes[i][k]
        for i in sorted(kept):
            if any(self.is_float(t) for t in (*nodes[i].input, *nodes[i].output)):
                report.blocked_nodes.append(nodes[i].name or f"{nodes[i].op_type}_{i}")
        # --- weights and attributes
        for init in graph.initializer:
            if home.get(init.name):
                if main and c.weights is not None and c.weights.holds(init):
                    c.weights.lowered.add(init.name)  # converted as it is written (_FileWeights.assemble)
                    init.data_type = low
                else:
                    self.lower(init)
        for i, node in enumerate(nodes):
            if node.op_type in CONTROL_FLOW:
                self.body(node, scope, i in kept)
                continue
            if i in kept:
                continue
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == FLOAT:
                    self.lower(attr.t, node.output[0] if node.op_type == "Constant" and node.output else "")
                elif attr.name in ("to", "dtype") and attr.type == onnx.AttributeProto.INT and attr.i == FLOAT:
                    attr.i = low
            if node.op_type == "Constant":
                for attr in list(node.attribute):
                    if attr.name in ("value_float", "value_floats"):
                        import numpy as np
                        from onnx import numpy_helper

                        arr = np.asarray(attr.f if attr.name == "value_float" else list(attr.floats), dtype=np.float32)
                        node.attribute.remove(attr)
                        t = numpy_helper.from_array(arr)
                        self.lower(t)
                        node.attribute.append(helper.make_attribute("value", t))
        report.converted_tensors += sum(1 for v in home.values() if v)
        # --- casts: one per tensor and wanted precision in this graph, placed before its first reader
        casts: dict[tuple[str, bool], str] = {}
        pending: list[Any] = []

        def cast_of(t: str, want: bool) -> str:
            key = (t, want)
            if key not in casts:
                casts[key] = self.unique(f"{t}__{self.tag(want)}")
                pending.append(helper.make_node("Cast", [t], [casts[key]], name=self.unique(f"{casts[key]}__cast"), to=low if want else FLOAT))
            return casts[key]

        new_nodes: list[Any] = []
        for i, node in enumerate(nodes):
            for k, t in enumerate(node.input):
                if t in scope and scope[t] != wants[i][k]:
                    node.input[k] = cast_of(t, wants[i][k])
            new_nodes.extend(pending)
            pending.clear()
            new_nodes.append(node)
        # --- outputs
        tail: list[Any] = []
        for out in graph.output:
            if out.name not in scope:
                continue
            want = (not c.keep_io) if main else bool(out_low)
            if scope[out.name] != want:
                if main and out.name in home and any(out.name in n.output for n in new_nodes):
                    inner = self.unique(f"{out.name}__{self.tag(scope[out.name])}")
                    _rename(new_nodes, out.name, inner)
                    home[inner] = home.pop(out.name)
                    tail.append(helper.make_node("Cast", [inner], [out.name], name=self.unique(f"{out.name}__cast_out"), to=low if want else FLOAT))
                elif not main:
                    new = cast_of(out.name, want)
                    tail.extend(pending)
                    pending.clear()
                    out.name = new
            out.type.tensor_type.elem_type = low if want else FLOAT
        for vi in graph.input:
            if home.get(vi.name):
                vi.type.tensor_type.elem_type = low
        for vi in graph.value_info:
            if vi.name in home and vi.type.tensor_type.elem_type == FLOAT and home[vi.name]:
                vi.type.tensor_type.elem_type = low
        report.casts_added += len(casts) + sum(1 for n in tail if n.op_type == "Cast" and n.name.endswith("__cast_out"))
        del graph.node[:]
        graph.node.extend(new_nodes)
        graph.node.extend(tail)

    def body(self, node: Any, scope: ChainMap, kept: bool) -> None:
        self.report.bodies += 0 if kept else len(_subgraphs(node))
        for _, sub in _subgraphs(node):
            self.graph(sub, scope, main=False, fp32=kept, in_low=not kept, out_low=not kept)

    def tag(self, low: bool) -> str:
        return ("fp16" if self.c.low == "float16" else "bf16") if low else "fp32"

    def lower(self, t: Any, name: str = "") -> None:
        """Convert a float32 TensorProto to the low type in place (fp16: finite values beyond +-65504
        clamped, which only happens for weights kept in range or under --clamp-out-of-range)."""
        import numpy as np

        arr = _array(t)
        if self.c.low == "float16":
            if (name or t.name) in self.c.out_of_range:
                arr = np.where(np.isinf(arr), arr, np.clip(arr, -FP16_MAX, FP16_MAX))
            data = arr.astype(np.float16)
        else:
            import ml_dtypes

            data = arr.astype(ml_dtypes.bfloat16)
        t.ClearField("float_data")
        t.data_type = self.c.low_type
        t.raw_data = data.tobytes()


def _captured(node: Any) -> list[str]:
    """Outer-scope names read inside a node's bodies."""
    if not _subgraphs(node):
        return []
    direct = set(node.input)
    return [t for t in onnx_models.node_inputs(node) if t not in direct]


def _rename(nodes: list[Any], old: str, new: str) -> None:
    """Rename a tensor's producer and readers, including reads inside bodies (which see it by name)."""
    for node in nodes:
        for k, t in enumerate(node.output):
            if t == old:
                node.output[k] = new
        for k, t in enumerate(node.input):
            if t == old:
                node.input[k] = new
        for _, sub in _subgraphs(node):
            if old not in {i.name for i in sub.input} | {i.name for i in sub.initializer}:
                _rename(list(sub.node), old, new)


def convert_to_fp16(
    model: Any,
    keep_io_types: bool = True,
    op_block_list: Iterable[str] = (),
    node_block_list: Iterable[str] = (),
    check_onnxruntime: bool = True,
    keep_out_of_range: bool = True,
    validate: bool = True,
) -> tuple[Any, Fp16Report]:
    """Return an fp16 model (from a path or ModelProto; a given ModelProto is not modified) and a report.

    With ``check_onnxruntime``, op types onnxruntime's CPU provider has no kernel for at fp16 are kept fp32
    (found by loading the result). With ``validate`` the result must pass ``onnx.checker`` (full check) and
    load in onnxruntime, or a one-line :class:`parity.errors.ModelError` says why."""

    converted, report = _convert_validated(model, keep_io_types, op_block_list, node_block_list, check_onnxruntime, keep_out_of_range, validate, keep_model=True)
    return converted, report


def convert_to_fp16_bytes(model: str | Path, **options: Any) -> tuple[bytes, Fp16Report]:
    """:func:`convert_to_fp16` for a model file, returning the validated serialized model. The file is parsed
    without the data of its large float32 weights (:class:`_FileWeights`), each weight is read back and
    converted as the bytes are written, and the converted ModelProto is freed before validation: the fp32
    weights are never held whole, and never beside their fp16 copies."""
    options.setdefault("validate", True)
    options.setdefault("check_onnxruntime", True)
    _, report = _convert_validated(model, keep_model=False, **options)
    data, report.serialized = report.serialized, None
    return data or b"", report


def _convert_validated(
    model: Any,
    keep_io_types: bool = True,
    op_block_list: Iterable[str] = (),
    node_block_list: Iterable[str] = (),
    check_onnxruntime: bool = True,
    keep_out_of_range: bool = True,
    validate: bool = True,
    keep_model: bool = True,
) -> tuple[Any, Fp16Report]:
    path = isinstance(model, (str, Path))
    auto: list[str] = []
    while True:
        # bytes only, from a file: parse it without its large weights, which are converted as they are written
        light = _FileWeights.load(model) if path and not keep_model and (validate or check_onnxruntime) else None
        weights = light[1] if light else None
        conv = Fp16Converter(light[0] if light else model, keep_io_types, op_block_list, node_block_list, keep_out_of_range, weights=weights)
        del light
        conv.auto_ops = list(auto)
        converted, report = conv.build(in_place=path)
        if not validate and not check_onnxruntime:
            return converted, report
        try:
            data = converted.SerializeToString()
        except ValueError as exc:  # protobuf's 2 GiB limit
            raise ModelError(f"the fp16 model is over protobuf's 2 GiB limit and cannot be written as one file ({exc})") from None
        if not keep_model:
            out_of_range = conv.out_of_range
            del conv, converted
            converted = None
            if weights is not None:
                data = weights.assemble(data, "float16", out_of_range)
        try:
            onnx_models.validate(data, "the fp16 model", missing_kernels_ok=not check_onnxruntime)
        except onnx_models.MissingKernelError as exc:
            if exc.op_type in set(op_block_list) or exc.op_type in auto:
                raise
            auto.append(exc.op_type)
            continue
        except ModelError:
            if validate:
                raise
        report.serialized = data  # what was validated: write these bytes, do not serialize again
        return converted, report


class Fp16FromOnnx:
    """Lazy loader twin of :func:`convert_to_fp16` (returns only the model)."""

    def __init__(self, model: Any, **options: Any) -> None:
        self.model, self.options = model, options

    def __call__(self) -> Any:
        from parity.api import invoke_if_callable

        model, _ = invoke_if_callable(self.model)
        return convert_to_fp16(model, **self.options)[0]
