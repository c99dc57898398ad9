"""fp32 -> fp16 (or bfloat16) conversion of ONNX models: ``parity convert --fp-to-fp16`` and, through
:class:`Fp16Converter`, every candidate of ``parity debug precision`` (one conversion for both).

Rule: every float32 tensor gets a *home* precision. Each input of a node that is not kept fp32 wants the
low precision where the op's ONNX schema allows it for that input (``Resize`` scales stay float32); a kept
node wants float32 everywhere. A node's float outputs are low where it is converted and the schema allows
it. A weight (initializer or ``Constant``) is low when some converted node wants it so. Every use whose
wanted precision differs from the tensor's home reads one shared ``Cast``. Kept fp32: the user's op types
and node names, custom-domain and unknown ops, op types onnxruntime's CPU provider has no kernel for at
the low type (found by loading the graph alone, its large weights as graph inputs), and (by default) the
readers of weights beyond the fp16 range.

Control flow (``If``, ``Loop``, ``Scan``) is converted inside its bodies by the same rule: body inputs,
outputs and loop-carried values are low, the node's float inputs and outputs too; a tensor of an outer
scope read by name inside a body gets its ``Cast`` inside that body when its home differs (recursively,
for nested bodies). A kept control-flow node keeps its whole body fp32. Names of computed tensors are
kept, so a layerwise comparison against the fp32 model matches tensors by name.

Models of any size (:func:`write_fp16`, what ``parity convert --fp-to-fp16`` runs): the model is loaded with
its external weights left in their files, the graph is converted without reading them, and
``parity.api.save_model`` writes the result tensor by tensor: each external float32 weight is read through a
memory map and written as float16 (its transform hook), into the data file(s) ``--save-external-data`` asks
for, inside the model when it fits one file, or into ``<output>.data`` by itself when the fp16 model would
pass protobuf's 2 GiB limit. Peak memory is about the largest weight, not the model (2.1 GiB of float32
weights: under 0.3 GB). :func:`convert_to_fp16` and :func:`convert_to_fp16_bytes` give the result in memory,
for models that fit one protobuf message.
"""

from __future__ import annotations

import math
from collections import ChainMap
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from parity.api import ModelError, UsageError, WeightReader, counted, did_you_mean, onnx_external, onnx_models, refuse_overwrite, save_model

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
        kept = counted(len(self.blocked_nodes), "node")
        out = [f"fp16: {counted(self.converted_tensors, 'tensor')} converted, {counted(self.casts_added, 'Cast node')} added, {kept} kept fp32"]
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

    if t.data_type == FLOAT and not onnx_external.is_external(t):
        raw = t.raw_data  # a copy (protobuf): read once
        if raw:
            return np.frombuffer(raw, dtype=np.float32)
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

    if t.data_type != FLOAT or onnx_external.is_external(t) or _float_bytes(t) <= _SMALL:
        return t
    out = onnx.TensorProto()
    out.name, out.data_type = t.name, t.data_type
    out.dims.extend(t.dims)
    return out


def _float_bytes(t: Any) -> int:
    """A float32 tensor's data size from its dims (``ByteSize`` would serialize it: protobuf's upb has no cached size)."""
    return 4 * math.prod(t.dims)


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


class Fp16Converter:
    """Analyses a model once (types, weights beyond the fp16 range) and builds converted copies with any
    extra set of nodes kept fp32: ``convert --fp-to-fp16`` builds one, ``debug precision`` one per check.

    Weights are read, never copied whole: a path is loaded with its external tensors left in their files
    (``base_dir``: their folder, default the model's; read through memory maps, each page released after use),
    and every build starts from a copy of the model without the data of its large float32 main-graph
    initializers (:meth:`_stub_copy`); a weight the build lowers gets its float16 data written into that copy
    from the source, one weight at a time, and the ones kept float32 are copied at the end. So a build holds
    the source and the converted weights, never the source twice. :meth:`stream_build` leaves the external
    float32 weights it lowers in their files, for ``save_model``'s transform to convert as it writes them."""

    def __init__(
        self,
        model: Any,
        keep_io_types: bool = True,
        op_block_list: Iterable[str] = (),
        node_block_list: Iterable[str] = (),
        keep_out_of_range: bool = True,
        low: str = "float16",
        base_dir: str | Path | None = None,
    ) -> None:
        if low not in _LOW:
            raise UsageError(f"--precision: expected one of {', '.join(_LOW)}, got '{low}'")
        self.source = model
        if isinstance(model, (str, Path)):
            self.base_dir: Path | None = onnx_models.data_dir(model, base_dir)
            model = onnx_models.load(model, load_external_data=False, external_data_dir=base_dir)
        else:
            self.base_dir = Path(base_dir) if base_dir is not None else None
        self.model = model
        self.low, self.low_type = low, _LOW[low][1]
        self.keep_io, self.keep_range = keep_io_types, keep_out_of_range
        self.block_ops = set(op_block_list)
        self.block_names = set(node_block_list)
        known = {n.name for graph in _walk(self.model.graph) for n in graph.node}
        unknown = sorted(self.block_names - known)
        if unknown:
            raise UsageError(f"--node-block-list: the model has no node '{unknown[0]}'{did_you_mean(unknown[0], known)}")
        self.opset = next((o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx")), 17)
        # main-graph float32 initializers whose data a build leaves in self.model (unique names only)
        inits = list(self.model.graph.initializer)
        counts: dict[str, int] = {}
        for init in inits:
            counts[init.name] = counts.get(init.name, 0) + 1
        self._sources = {
            t.name: t for t in inits if counts[t.name] == 1 and t.data_type == FLOAT and not onnx_external.is_external(t) and _float_bytes(t) > _SMALL
        }
        self.types = _types(self.model)
        self.out_of_range: dict[str, int] = {}
        if low == "float16":
            with WeightReader(self.base_dir) as reader:
                for graph in _walk(self.model.graph):
                    for name, t in _weight_tensors(graph):
                        if t.data_type == FLOAT:
                            n = _beyond_range(reader.array(t) if onnx_external.is_external(t) else _array(t))
                            reader.release(t)
                            if n > 0:
                                self.out_of_range[name] = n
        self.auto_ops: list[str] = []

    def build(self, keep_fp32: Iterable[str] = ()) -> tuple[Any, Fp16Report]:
        """A converted model, weights inside, with the nodes named in ``keep_fp32`` also kept fp32."""
        model, report, _ = self._build(keep_fp32, "full")
        return model, report

    def stream_build(self, keep_fp32: Iterable[str] = ()) -> tuple[Any, Fp16Report, Any]:
        """``(model, report, transform)``: :meth:`build`, except that the external float32 weights it lowers stay
        in their files as they are (float32, in a model that expects float16: write it only through
        ``save_model(model, ..., base_dir=self.base_dir, transform=transform)``, which converts each as it
        writes it). ``transform`` holds no reference to this converter or its model."""
        model, report, deferred = self._build(keep_fp32, "stream")
        return model, report, _LowerAsWritten(deferred, set(self.out_of_range), self.low)

    def _build(self, keep_fp32: Iterable[str], mode: str) -> tuple[Any, Fp16Report, set[tuple[str, str, int]]]:
        """One build. ``mode``: "full" (every lowered weight inside, in float16), "stream" (see
        :meth:`stream_build`), "types" (graph and types only: the large main-graph weights get their new type
        and no data, for :meth:`probe_onnxruntime` and :meth:`planned_bytes`)."""
        model = self._stub_copy()
        report = Fp16Report(auto_blocked_ops=list(self.auto_ops), clamped=not self.keep_range and bool(self.out_of_range))
        report.out_of_range = dict(self.out_of_range)
        names = {t for graph in _walk(model.graph) for n in graph.node for t in (*n.input, *n.output)}
        names.update(i.name for graph in _walk(model.graph) for i in [*graph.input, *graph.initializer])
        with WeightReader(self.base_dir) as reader:
            state = _Build(self, report, names, self.block_names | set(keep_fp32), set(self.block_ops) | set(self.auto_ops), mode, reader)
            state.graph(model.graph, ChainMap(), main=True, fp32=False)
        if mode != "types":
            for init in model.graph.initializer:  # the weights kept float32: their data, from the source
                if self._is_stub(init):
                    init.CopyFrom(self._sources[init.name])
        report.range_kept_nodes = sorted(set(report.range_kept_nodes))
        return model, report, state.deferred

    def _stub_copy(self) -> Any:
        """A copy of the model whose large float32 main-graph initializers (``self._sources``) have name, type
        and dims but no data."""
        import onnx

        model = onnx.ModelProto()
        onnx_models.copy_fields(self.model, model, skip="graph")
        onnx_models.copy_fields(self.model.graph, model.graph, skip="initializer")
        for init in self.model.graph.initializer:
            model.graph.initializer.append(_bare(init) if init.name in self._sources else init)
        return model

    def _is_stub(self, t: Any) -> bool:
        return t.name in self._sources and t.data_type == FLOAT and not t.HasField("raw_data") and not t.float_data

    def values(self, t: Any, reader: Any) -> Any:
        """A float tensor's values (flat): from its file (external, a read-only memory-mapped view), from the
        source model (a stub) or from the proto."""
        if onnx_external.is_external(t):
            return reader.array(t).reshape(-1)
        if self._is_stub(t):
            return _array(self._sources[t.name])
        return _array(t)

    def probe_onnxruntime(self) -> None:
        """Keep fp32 the op types onnxruntime's CPU provider has no kernel for at the low type, found by
        loading default builds (what ``convert_to_fp16`` does), so later builds load. Each probe is the graph
        alone: the large weights are graph inputs of their new type, so no weight is read or converted."""
        while True:
            model, _, _ = self._build((), "types")
            try:
                onnx_models.validate(self._probe_bytes(model), "the fp16 model")
                return
            except onnx_models.MissingKernelError as exc:
                if exc.op_type in self.block_ops or exc.op_type in self.auto_ops:
                    return
                self.auto_ops.append(exc.op_type)
            except Exception:  # other problems surface when the built model is checked or written
                return

    def _probe_bytes(self, model: Any) -> bytes:
        """A types-mode build as onnxruntime loads it for the kernel check: its main-graph weights without data
        (stubs and external ones) become graph inputs; other external tensors (rare) are read in."""
        from onnx import helper

        graph = model.graph
        listed = {vi.name for vi in graph.input}
        for k in reversed(range(len(graph.initializer))):
            init = graph.initializer[k]
            if onnx_external.is_external(init) or (init.name in self._sources and not init.HasField("raw_data")):
                if init.name not in listed:
                    graph.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
                del graph.initializer[k]
        rest = [t.name for t in onnx_external.tensors(model) if onnx_external.is_external(t)]
        if rest:
            onnx_external.load_values(model, rest, self.base_dir)
        return onnx_external.serialize(model, "the fp16 model")

    def planned_bytes(self) -> int:
        """About how many bytes the converted model takes as one protobuf message (no weight is read)."""
        model, _, _ = self._build((), "types")
        size = model.ByteSize()
        for init in model.graph.initializer:
            if onnx_external.is_external(init) or (init.name in self._sources and not init.HasField("raw_data")):
                dtype = onnx_models.dtype_of(init.data_type)
                size += math.prod(init.dims) * (dtype.itemsize if dtype is not None else 4)
        return size

    def candidates(self) -> list[str]:
        """Names of the nodes a default build converts (the search space of ``debug precision``)."""
        model, report, _ = self._build((), "types")
        kept = set(report.blocked_nodes)
        floats = {t for t, ty in self.types.items() if ty == FLOAT}
        return [n.name for n in model.graph.node if n.name and n.name not in kept and not n.name.endswith("__cast") and any(t in floats for t in (*n.input, *n.output))]


class _LowerAsWritten:
    """``save_model``'s transform for :meth:`Fp16Converter.stream_build`: the external float32 weights the
    build lowered (by name and place in their file) are converted as they are written; others pass."""

    def __init__(self, deferred: set[tuple[str, str, int]], out_of_range: set[str], low: str) -> None:
        self.deferred, self.out_of_range, self.low = deferred, out_of_range, low

    def __call__(self, tensor: Any, values: Any) -> Any:
        if tensor.data_type != FLOAT or _key(tensor) not in self.deferred:
            return None
        return _lowered(values, tensor.name in self.out_of_range, self.low)


def _key(t: Any) -> tuple[str, str, int]:
    location, offset, _ = onnx_external.external_info(t)
    return t.name, location, offset


_CHUNK = 1 << 22  # elements: float32 values are range-checked and converted this many at a time


def _beyond_range(values: Any) -> int:
    """Finite values beyond +-65504 (inf stays inf: not a clamp), counted a chunk at a time."""
    import numpy as np

    flat = values.reshape(-1)
    n = 0
    for start in range(0, flat.size, _CHUNK):
        part = flat[start : start + _CHUNK]
        if part.size and part.min() >= -FP16_MAX and part.max() <= FP16_MAX:  # two reductions, no temporaries (NaN: neither holds)
            continue
        n += int(np.count_nonzero(np.abs(part) > FP16_MAX)) - int(np.count_nonzero(np.isinf(part)))
    return n


def _lowered(values: Any, clamp: bool, low: str) -> Any:
    """float32 ``values`` in the low type (fp16 with ``clamp``: finite values beyond +-65504 clamped), converted
    a chunk at a time into one new array of the same shape."""
    import numpy as np

    if low == "float16":
        target: Any = np.float16
    else:
        import ml_dtypes

        target = ml_dtypes.bfloat16
    flat = values.reshape(-1)
    out = np.empty(flat.shape, target)
    for start in range(0, flat.size, _CHUNK):
        part = flat[start : start + _CHUNK]
        if clamp and low == "float16":
            part = np.where(np.isinf(part), part, np.clip(part, -FP16_MAX, FP16_MAX))
        out[start : start + _CHUNK] = part
    return out.reshape(values.shape)


class _Build:
    """One conversion pass over a model copy (recursive over control-flow bodies)."""

    def __init__(
        self, conv: Fp16Converter, report: Fp16Report, taken: set[str], block_names: set[str], block_ops: set[str], mode: str, reader: Any
    ) -> None:
        self.c, self.report, self.taken = conv, report, taken
        self.block_names, self.block_ops = block_names, block_ops
        self.mode, self.reader = mode, reader  # see Fp16Converter._build; reader: a WeightReader of c.base_dir
        self.deferred: set[tuple[str, str, int]] = set()  # stream mode: external weights save_model converts

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
                if main and self.mode == "stream" and onnx_external.is_external(init) and init.data_type == FLOAT:
                    self.deferred.add(_key(init))  # converted as it is written (_LowerAsWritten)
                elif main and self.mode == "types" and (onnx_external.is_external(init) or c._is_stub(init)):
                    init.data_type = low  # no data: a graph input of the probe
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
        """Convert a float32 TensorProto to the low type in place, its data inside (fp16: finite values beyond
        +-65504 clamped, which only happens for weights kept in range or under --clamp-out-of-range). The
        values come from its file, or from the source model for a stub (:meth:`Fp16Converter.values`)."""
        data = _lowered(self.c.values(t, self.reader), (name or t.name) in self.c.out_of_range, self.c.low)
        self.reader.release(t)
        t.ClearField("float_data")
        if onnx_external.is_external(t):
            del t.external_data[:]
            t.data_location = 0  # DEFAULT, as onnx_external writes a tensor it brings inside
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
    The result holds its weights inside: for models that fit one protobuf message; write larger ones with
    :func:`write_fp16`.

    With ``check_onnxruntime``, op types onnxruntime's CPU provider has no kernel for at fp16 are kept fp32
    (found by loading the result). With ``validate`` the result must pass ``onnx.checker`` (full check) and
    load in onnxruntime, or a one-line :class:`parity.errors.ModelError` says why."""
    return _convert_validated(model, keep_io_types, op_block_list, node_block_list, check_onnxruntime, keep_out_of_range, validate, keep_model=True)


def convert_to_fp16_bytes(model: str | Path, **options: Any) -> tuple[bytes, Fp16Report]:
    """:func:`convert_to_fp16` for a model file, returning the validated serialized model. A model whose fp16
    copy would pass protobuf's 2 GiB limit is refused in one line before any weight is read (write it with
    :func:`write_fp16`: ``parity convert --fp-to-fp16 ... --save-external-data``)."""
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
    conv = Fp16Converter(model, keep_io_types, op_block_list, node_block_list, keep_out_of_range)
    if check_onnxruntime:
        conv.probe_onnxruntime()
    if not keep_model and (size := conv.planned_bytes()) > onnx_external.PROTOBUF_LIMIT:
        raise ModelError(
            f"the fp16 model of {model} would be {size / 2**30:.2f} GiB, past protobuf's 2 GiB limit for one message: "
            "write it to a file with its weights beside it (parity_surgeon.fp16.write_fp16, or parity convert --fp-to-fp16 --save-external-data)"
        )
    while True:
        converted, report = conv.build()
        if not validate and not check_onnxruntime:
            return converted, report
        data = onnx_external.serialize(converted, "the fp16 model")
        if not keep_model:
            converted = None
        try:
            onnx_models.validate(data, "the fp16 model", missing_kernels_ok=not check_onnxruntime)
        except onnx_models.MissingKernelError as exc:
            if exc.op_type in set(op_block_list) or exc.op_type in conv.auto_ops:
                raise
            conv.auto_ops.append(exc.op_type)
            continue
        except ModelError:
            if validate:
                raise
        report.serialized = data  # what was validated: write these bytes, do not serialize again
        return converted, report


# weights (bytes) above which, or kept in data files, write_fp16 finds the op types onnxruntime cannot run in
# fp16 on the graph alone first: for a smaller model the written model's own validation finds them and the
# model is written again (a rare retry that costs less than a probe of every small model)
_PROBE_ABOVE = 256 << 20


def write_fp16(
    model: str | Path,
    output: str | Path,
    *,
    external: Any = None,
    external_data_dir: str | Path | None = None,
    keep_io_types: bool = True,
    op_block_list: Iterable[str] = (),
    node_block_list: Iterable[str] = (),
    check_onnxruntime: bool = True,
    keep_out_of_range: bool = True,
) -> tuple[Any, Fp16Report]:
    """``parity convert --fp-to-fp16``: convert the model file ``model`` and write it to ``output``, in bounded
    memory at any size. Returns ``(parity.api.SavedModel, report)``.

    The model is loaded with its external weights left in their files (``external_data_dir``, default its
    folder); the graph is converted without reading them; then ``save_model`` writes the result tensor by
    tensor, each external float32 weight read through a memory map and written as float16 (:class:`_LowerAsWritten`),
    and validates it on the path (``onnx.checker`` full check, an onnxruntime load) before it appears.
    ``external`` (a ``parity.api.ExternalData``: ``--save-external-data`` and its modifiers) says where the
    weights go; without it they go inside the model, or into ``<output>.data`` when the fp16 model would pass
    2 GiB as one file (``SavedModel.automatic``: the caller tells the user). The output may not land on the
    input or on any of its data files (a one-line usage error before any work)."""
    base = onnx_models.data_dir(model, external_data_dir)
    auto: list[str] = []
    first = True
    while True:
        conv = Fp16Converter(model, keep_io_types, op_block_list, node_block_list, keep_out_of_range, base_dir=base)
        if first:
            outs = onnx_external.planned_data_files(conv.model, output, external)
            sources = onnx_external.data_files(conv.model, base)
            refuse_overwrite({"the input model": model, "the input model's external data": sources}, output, **{"the output's data file": outs})
            first = False
        conv.auto_ops = list(auto)
        if check_onnxruntime and (onnx_external.has_external(conv.model) or onnx_external.weight_bytes(conv.model) > _PROBE_ABOVE):
            conv.probe_onnxruntime()
        built, report, transform = conv.stream_build()
        auto = list(conv.auto_ops)
        del conv  # the source model goes before the write: a model with its weights inside is not held twice
        try:
            saved = save_model(
                built, output, base_dir=base, external=external, what="the fp16 model", transform=transform, missing_kernels_ok=not check_onnxruntime
            )
        except onnx_models.MissingKernelError as exc:  # the graph-only probe missed it: keep that op type fp32 and write again
            if not check_onnxruntime or exc.op_type in set(op_block_list) or exc.op_type in auto:
                raise
            auto.append(exc.op_type)
            continue
        return saved, report


class Fp16FromOnnx:
    """Lazy loader twin of :func:`convert_to_fp16` (returns only the model)."""

    def __init__(self, model: Any, **options: Any) -> None:
        self.model, self.options = model, options

    def __call__(self) -> Any:
        from parity.api import invoke_if_callable

        model, _ = invoke_if_callable(self.model)
        return convert_to_fp16(model, **self.options)[0]
