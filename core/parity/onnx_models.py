"""Reading ONNX models with one-line errors; shared by every ONNX-consuming plugin.

This module reads: the graph (:func:`load`, :func:`read_inputs`, ...), and the weights a model keeps in external
data files (:func:`check_references`, :class:`WeightReader`, :func:`load_values`). Writing and running such models
is :mod:`parity.onnx_external`, which stands on this module (and re-exports the readers under their old names).

``onnx`` and ``numpy`` are imported inside functions: importing this module is free.
"""

from __future__ import annotations

import contextlib
import heapq
import mmap
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from parity.data.meta import TensorMeta
from parity.errors import ModelError, UsageError
from parity.util.text import did_you_mean

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    import numpy as np
    import onnx

# IR versions onnxruntime accepts lag behind what onnx writes; this is the fix we tell users.
IR_FIX = "set model.ir_version = 10 before saving (onnx.helper.make_model writes the newest IR version)"


def load(
    path: str | Path, load_external_data: bool = True, *, external_data_dir: str | Path | None = None, ignore_external_data: bool = False
) -> onnx.ModelProto:
    """``onnx.load`` with clean errors for missing, empty, truncated or non-ONNX files.

    The graph is parsed with external tensors left as references; each reference is checked to resolve (in
    ``external_data_dir``, default the model's folder) without reading a byte. ``load_external_data=False``
    keeps them that way: read values with :class:`parity.onnx_external.WeightReader`, run with
    :func:`parity.onnx_external.runtime_bytes` and write with :func:`parity.onnx_external.save_model`, each given
    :func:`data_dir`. ``ignore_external_data``: the structure only (inspect, lint, planning a cut); references
    are not checked."""
    import onnx
    from google.protobuf.message import DecodeError

    from parity.util.fs import check_model_path  # here: `parity run --help` imports this module, not these

    p = check_model_path(path)
    if p.stat().st_size == 0:
        raise ModelError(f"{p}: empty file, not an ONNX model")
    try:
        model = onnx.load(str(p), load_external_data=False)
    except (DecodeError, RuntimeError, ValueError, OSError, onnx.checker.ValidationError) as exc:
        raise ModelError(f"{p}: not a valid ONNX model ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'corrupt'})") from None
    if not model.graph.node and not model.graph.output:
        raise ModelError(f"{p}: not a valid ONNX model (no graph)")
    if ignore_external_data:
        return model
    base = data_dir(p, external_data_dir)
    check_references(model, base, str(p))
    if load_external_data and external_bytes(model) > 0:
        load_values(model, [t.name for t in tensors(model)], base)
    return model


def data_dir(path: str | Path, external_data_dir: str | Path | None = None) -> Path:
    """Where a model's external data files are: ``--external-data-dir``, else the model's folder."""
    from pathlib import Path  # 6 ms at start-up: `parity run --help` imports this module, never Path

    if external_data_dir is not None:
        folder = Path(external_data_dir)
        if not folder.is_dir():
            raise UsageError(f"--external-data-dir: {folder} is not a folder")
        return folder
    return Path(path).parent


# --- external data: references and reading ----------------------------------------------------------------------
# What loading needs of a model whose weights stay in their files (writing them is parity.onnx_external's part).

PROTOBUF_LIMIT = 2**31 - 1  # bytes: protobuf refuses to serialize a message this large
# element types whose raw bytes are a plain little-endian NumPy array (bfloat16 and float8 read as their bits)
STORAGE_DTYPES = {1: "<f4", 2: "u1", 3: "i1", 4: "<u2", 5: "<i2", 6: "<i4", 7: "<i8", 9: "?", 10: "<f2", 11: "<f8", 12: "<u4", 13: "<u8", 16: "<u2"}


def tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor a model holds: initializers and Constant-like attribute values, in subgraphs too."""
    from onnx.external_data_helper import _get_all_tensors

    return _get_all_tensors(model)


def is_external(tensor: onnx.TensorProto) -> bool:
    import onnx

    return tensor.data_location == onnx.TensorProto.EXTERNAL


def external_info(tensor: onnx.TensorProto) -> tuple[str, int, int | None]:
    """``(location, offset, length)`` of an external tensor (length None when the file does not say)."""
    info = {e.key: e.value for e in tensor.external_data}
    length = info.get("length")
    return info.get("location", ""), int(info.get("offset") or 0), int(length) if length else None


def nbytes(tensor: onnx.TensorProto) -> int:
    """The tensor's size in bytes as stored, without reading external data, and without ``ByteSize()`` where the
    element type says it (upb computes ``ByteSize`` by serializing the message)."""
    if is_external(tensor):
        length = external_info(tensor)[2]
        if length is not None:
            return length
    if tensor.data_type in STORAGE_DTYPES:
        import numpy as np

        count = 1
        for dim in tensor.dims:
            count *= dim
        return count * np.dtype(STORAGE_DTYPES[tensor.data_type]).itemsize
    return tensor.ByteSize()


def weight_bytes(model: onnx.ModelProto) -> int:
    """All weight bytes of a model, inside it or in its data files, without reading any."""
    return sum(nbytes(t) for t in tensors(model))


def external_bytes(model: onnx.ModelProto) -> int:
    return sum(nbytes(t) for t in tensors(model) if is_external(t))


def load_values(model: onnx.ModelProto, names: Iterable[str], base_dir: str | os.PathLike[str] | None) -> int:
    """Bring the named external tensors inside the model (for passes that compute on them, such as constant
    folding); the rest stay in their files. Returns the bytes read."""
    wanted = set(names)
    read = 0
    with WeightReader(base_dir) as reader:
        for tensor in tensors(model):
            if tensor.name in wanted and is_external(tensor):
                data = bytes(reader.buffer(tensor))
                del tensor.external_data[:]
                tensor.data_location = 0
                tensor.raw_data = data
                read += len(data)
    return read


def check_references(model: onnx.ModelProto, base_dir: Path, what: str) -> None:
    """Each external tensor's file exists in ``base_dir`` and holds its bytes; a one-line ModelError naming the
    first that does not (the model's own location strings are kept; nothing is read)."""
    sizes: dict[str, int | None] = {}
    for tensor in tensors(model):
        if not is_external(tensor):
            continue
        location, offset, length = external_info(tensor)
        if location not in sizes:
            file = external_path(base_dir, location, tensor.name, what)
            sizes[location] = file.stat().st_size if file.is_file() else None
        size = sizes[location]
        if size is None:
            raise ModelError(
                f"{what}: external data file '{location}' of tensor '{tensor.name}' is missing "
                f"(looked for {base_dir / location}); keep the model's data files beside it or name their folder with --external-data-dir"
            )
        if length is not None and offset + length > size:
            raise ModelError(f"{what}: external data file '{location}' is too short for tensor '{tensor.name}' (needs {offset + length} bytes, has {size})")


def external_path(base_dir: Path, location: str, name: str, what: str) -> Path:
    """``base_dir / location``, refusing locations that leave the folder (as onnx and onnxruntime do)."""
    from pathlib import Path  # 6 ms at start-up: `parity run --help` imports this module, never Path

    if not location or os.path.isabs(location) or ".." in Path(location).parts:
        raise ModelError(f"{what}: tensor '{name}' names external data '{location}' outside the model's folder; onnx refuses such paths")
    return base_dir / location


class WeightReader:
    """Values of a model's tensors, read on demand: an external tensor is a read-only NumPy view of a memory
    map of its file (pages come from the page cache and are dropped under pressure, so a weight is never held
    twice); others come from the proto. Use as a context manager, or call :meth:`close`."""

    def __init__(self, base_dir: str | os.PathLike[str] | None) -> None:
        from pathlib import Path  # 6 ms at start-up: `parity run --help` imports this module, never Path

        self.base_dir = Path(base_dir) if base_dir is not None else Path(".")
        self._maps: dict[str, mmap.mmap] = {}

    def __enter__(self) -> WeightReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for m in self._maps.values():
            with contextlib.suppress(BufferError):  # a view still alive keeps its map open until collected
                m.close()
        self._maps.clear()

    def buffer(self, tensor: onnx.TensorProto) -> memoryview:
        """The stored bytes of an external tensor (little-endian raw data), without a copy."""
        location, offset, length = external_info(tensor)
        mapped = self._maps.get(location)
        if mapped is None:
            file = external_path(self.base_dir, location, tensor.name, "the model")
            try:
                with open(file, "rb") as handle:
                    mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            except OSError as exc:
                raise ModelError(f"cannot read external data {file} of tensor '{tensor.name}': {exc.strerror or exc}") from None
            self._maps[location] = mapped
        end = len(mapped) if length is None else offset + length
        if end > len(mapped):
            raise ModelError(f"external data file '{location}' is too short for tensor '{tensor.name}'")
        return memoryview(mapped)[offset:end]

    def release(self, tensor: onnx.TensorProto) -> None:
        """Drop an external tensor's pages from this process (``madvise(MADV_DONTNEED)``; they stay in the page
        cache and views of them stay valid): a pass over every weight then keeps about one tensor resident,
        not the whole file."""
        if not is_external(tensor) or not hasattr(mmap, "MADV_DONTNEED"):
            return
        location, offset, length = external_info(tensor)
        mapped = self._maps.get(location)
        if mapped is None:
            return
        start = offset - offset % mmap.PAGESIZE
        end = len(mapped) if length is None else min(len(mapped), offset + length)
        if end > start:
            with contextlib.suppress(OSError, ValueError):
                mapped.madvise(mmap.MADV_DONTNEED, start, end - start)

    def array(self, tensor: onnx.TensorProto) -> np.ndarray:
        """The tensor's values; zero-copy and read-only for an external tensor of a NumPy element type."""
        import numpy as np
        from onnx import numpy_helper

        if not is_external(tensor):
            return numpy_helper.to_array(tensor)
        dtype = dtype_of(tensor.data_type)
        storage = STORAGE_DTYPES.get(tensor.data_type)
        if dtype is None or storage is None:  # packed 4-bit, strings...: onnx reads it, from a copy made in memory
            inline = self.inline_copy(tensor)
            return numpy_helper.to_array(inline)
        values = np.frombuffer(self.buffer(tensor), dtype=storage).reshape(tuple(tensor.dims))
        return values if storage == dtype else values.view(dtype)

    def inline_copy(self, tensor: onnx.TensorProto) -> onnx.TensorProto:
        """A copy of ``tensor`` with its bytes inside (for code that needs a self-contained TensorProto)."""
        import onnx

        inline = onnx.TensorProto()
        inline.CopyFrom(tensor)
        del inline.external_data[:]
        inline.data_location = onnx.TensorProto.DEFAULT
        inline.raw_data = bytes(self.buffer(tensor)) if is_external(tensor) else tensor.raw_data
        return inline


def serialize(model: onnx.ModelProto, what: str, limit: int = PROTOBUF_LIMIT) -> bytes:
    """``model.SerializeToString()``, or a one-line ModelError when the message would pass protobuf's 2 GiB limit
    (judged from the weights inside it, which dominate: cheaper than ``ByteSize``, which serializes)."""
    inside = inline_bytes(model)
    try:
        if inside > limit:
            raise ValueError
        return model.SerializeToString()
    except ValueError:  # also protobuf's own refusal (EncodeError is a ValueError) for what the estimate missed
        raise ModelError(
            f"{what} holds {inside / 2**30:.1f} GiB of weights inside it, past protobuf's 2 GiB limit for one message; "
            "write it with --save-external-data"
        ) from None


def copy_fields(src: Any, dst: Any, skip: str) -> Any:
    """Copy every set field of message ``src`` into ``dst`` except the field ``skip`` (a model or graph without its
    weights, built without copying them first); returns ``dst``."""
    for descriptor, value in src.ListFields():
        if descriptor.name == skip:
            continue
        target = getattr(dst, descriptor.name)
        if hasattr(target, "extend"):  # repeated
            target.extend(value)
        elif hasattr(value, "MergeFrom"):  # a message
            target.CopyFrom(value)
        else:
            setattr(dst, descriptor.name, value)
    return dst


def inline_bytes(model: onnx.ModelProto) -> int:
    """Weight bytes inside the message (not in external data files)."""
    return sum(nbytes(t) for t in tensors(model) if not is_external(t))


def dtype_of(elem_type: int) -> np.dtype | None:
    import numpy as np
    import onnx

    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return None


def value_meta(value_info) -> TensorMeta:
    tensor_type = value_info.type.tensor_type
    dtype = dtype_of(tensor_type.elem_type) if tensor_type.elem_type else None
    if not tensor_type.HasField("shape"):
        return TensorMeta(dtype, None)
    dims: list[int | str | None] = []
    for d in tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return TensorMeta(dtype, tuple(dims))


def graph_inputs(model: onnx.ModelProto) -> dict[str, TensorMeta]:
    """Real inputs: graph inputs that are not also initializers (old exporters list weights as inputs)."""
    weights = {init.name for init in model.graph.initializer} | {sp.values.name for sp in model.graph.sparse_initializer}
    return {vi.name: value_meta(vi) for vi in model.graph.input if vi.name not in weights}


def graph_outputs(model: onnx.ModelProto) -> dict[str, TensorMeta]:
    return {vi.name: value_meta(vi) for vi in model.graph.output}


def node_inputs(node: onnx.NodeProto) -> list[str]:
    """Tensors a node reads, including outer-scope names its subgraphs (If/Loop/Scan bodies) use; omitted
    optional inputs ('') are left out."""
    import onnx

    names = [n for n in node.input if n]
    for attr in node.attribute:
        graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for g in graphs:
            inner = {i.name for i in g.input} | {i.name for i in g.initializer}
            for sub in g.node:
                names.extend(name for name in node_inputs(sub) if name not in inner)
                inner.update(o for o in sub.output if o)
    return list(dict.fromkeys(names))


def topological_order(nodes: Sequence[onnx.NodeProto]) -> list[int]:
    """Indices of ``nodes`` in topological order (Kahn's algorithm with a heap, so among nodes that are ready
    together the file's order is kept). Nodes on a cycle are left out: callers decide what a cycle means."""
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    users: list[list[int]] = [[] for _ in nodes]
    waiting = [0] * len(nodes)
    for i, n in enumerate(nodes):
        deps = {producer[t] for t in node_inputs(n) if t in producer and producer[t] != i}
        waiting[i] = len(deps)
        for d in deps:
            users[d].append(i)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    return order


MARK_ALL = "mark all"


def wants_all(outputs: Sequence[str]) -> bool:
    """Whether ``--onnx-outputs`` asks for every tensor (``mark all``, ``"mark all"`` or ``*``)."""
    return list(outputs) in (["mark", "all"], [MARK_ALL], ["*"])


def mark_outputs(model: onnx.ModelProto, outputs: Sequence[str], exclude: Sequence[str] = ()) -> onnx.ModelProto:
    """``--onnx-outputs``: make named tensors, or every tensor (``'mark all'``), the graph outputs, minus
    ``exclude``. Edits ``model`` in place and returns it; shared by every backend that runs ONNX."""
    import onnx

    graph = model.graph
    produced = [out for node in graph.node for out in node.output if out]
    existing = {vi.name: vi for vi in graph.output}
    known = set(produced) | set(existing) | {vi.name for vi in graph.input}
    for name in exclude:  # a misspelt exclusion would leave the tensor marked without a word
        if name not in known:
            raise UsageError(f"--onnx-exclude-outputs: the model has no tensor '{name}'{did_you_mean(name, known)}")
    if wants_all(outputs):
        wanted = list(dict.fromkeys([*produced, *existing]))
    else:
        for name in outputs:
            if name not in known:
                raise UsageError(f"--onnx-outputs: the model has no tensor '{name}'{did_you_mean(name, known)}")
        wanted = list(outputs)
    wanted = [n for n in wanted if n not in set(exclude)]
    infos = {vi.name: vi for vi in [*graph.value_info, *graph.output, *graph.input]}
    del graph.output[:]
    for name in wanted:
        # value_info may carry stale shapes for tensors that are now outputs: outputs win
        graph.output.append(infos.get(name) or onnx.helper.make_empty_tensor_value_info(name))
    return model


def read_inputs(path: str) -> dict[str, TensorMeta]:
    """The model's real inputs, read without loading its weights when possible (see :func:`_scan_inputs`)."""
    from parity.util.fs import check_model_path  # (see load)

    file = check_model_path(path)
    try:
        found = _scan_inputs(file)
    except Exception:  # noqa: BLE001 - a malformed file falls back to the full parser's clean error
        found = None
    if found is None:  # anything unexpected: the full parser, which also gives the clean error messages
        return graph_inputs(load(path, load_external_data=False))
    return found


# Protobuf field numbers (onnx.proto): ModelProto.graph, GraphProto.initializer/input/sparse_initializer,
# TensorProto.name, SparseTensorProto.values.
_MODEL_GRAPH, _GRAPH_INIT, _GRAPH_INPUT, _GRAPH_SPARSE, _TENSOR_NAME, _SPARSE_VALUES = 7, 5, 11, 15, 8, 1


def read_varint(buf, pos: int) -> tuple[int, int]:
    """One protobuf base-128 varint at ``pos`` of ``buf`` (bytes or a memory map): ``(value, next position)``.
    Shared by the readers that walk a model's wire format without parsing its weights."""
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _wire(buf, start: int, end: int):
    """``(field number, wire type, value)`` of each field between ``start`` and ``end``: an int for a varint, the
    ``(start, end)`` span for a length-delimited field; fixed-width fields are skipped."""
    pos = start
    while pos < end:
        key, pos = read_varint(buf, pos)
        wire = key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
            yield key >> 3, wire, value
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length, pos = read_varint(buf, pos)
            yield key >> 3, wire, (pos, pos + length)
            pos += length
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    if pos != end:
        raise ValueError("truncated protobuf field")


def _fields(buf, start: int, end: int):
    """``(field number, (start, end))`` of each length-delimited field; other wire types are skipped."""
    for number, wire, value in _wire(buf, start, end):
        if wire == 2:
            yield number, value


def _name_of(buf, span: tuple[int, int], field: int) -> str | None:
    for number, (s, e) in _fields(buf, *span):
        if number == field:
            return bytes(buf[s:e]).decode()
    return None


def _scan_inputs(path: Path) -> dict[str, TensorMeta] | None:
    """Graph inputs from the protobuf wire format over a memory map: weights (often most of the file) are
    skipped by their length prefix instead of being parsed and copied, so a 2 GB model costs no 2 GB here, and
    onnx itself is not imported (about 0.1 s of every ``parity run``). None for what it does not read (an input
    that is not a tensor, an element type outside ``_NUMPY_TYPES``): the caller then uses the full parser."""
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        graph = next((span for number, span in _fields(buf, 0, len(buf)) if number == _MODEL_GRAPH), None)
        if graph is None:
            return None
        inputs, weights = [], set()
        for number, span in _fields(buf, *graph):
            if number == _GRAPH_INPUT:
                found = _value_info_meta(buf, span)
                if found is None:
                    return None
                inputs.append(found)
            elif number == _GRAPH_INIT:
                weights.add(_name_of(buf, span, _TENSOR_NAME))
            elif number == _GRAPH_SPARSE:
                values = next((s for n, s in _fields(buf, *span) if n == _SPARSE_VALUES), None)
                weights.add(_name_of(buf, values, _TENSOR_NAME) if values else None)
        return {name: meta for name, meta in inputs if name not in weights}


# TensorProto.DataType -> NumPy type name, for the element types the wire reader decodes (the rest: onnx)
_NUMPY_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "object",
                9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128"}


def _value_info_meta(buf, span: tuple[int, int]) -> tuple[str, TensorMeta] | None:
    """What :func:`value_meta` gives for the ValueInfoProto at ``span``, from the wire format (onnx.proto:
    ValueInfoProto name=1 type=2; TypeProto tensor_type=1; Tensor elem_type=1 shape=2; TensorShapeProto dim=1;
    Dimension dim_value=1 dim_param=2)."""
    import numpy as np

    name, type_span = None, None
    for number, wire, value in _wire(buf, *span):
        if number == 1 and wire == 2:
            name = bytes(buf[value[0] : value[1]]).decode()
        elif number == 2 and wire == 2:
            type_span = value
    if name is None or type_span is None:
        return None
    tensor = next((v for n, w, v in _wire(buf, *type_span) if n == 1 and w == 2), None)
    if tensor is None:
        return None  # a sequence, map or optional input
    elem, shape = 0, None
    for number, wire, value in _wire(buf, *tensor):
        if number == 1 and wire == 0:
            elem = value
        elif number == 2 and wire == 2:
            shape = value
    if elem and elem not in _NUMPY_TYPES:
        return None
    dtype = np.dtype(_NUMPY_TYPES[elem]) if elem else None
    if shape is None:
        return name, TensorMeta(dtype, None)
    dims: list[int | str | None] = []
    for number, wire, value in _wire(buf, *shape):
        if number == 1 and wire == 2:
            dim: int | str | None = None
            for n, w, v in _wire(buf, *value):
                if n == 1 and w == 0:
                    dim = v - (1 << 64) if v >= 1 << 63 else v  # int64, two's complement
                elif n == 2 and w == 2:
                    dim = bytes(buf[v[0] : v[1]]).decode()
            dims.append(dim)
    return name, TensorMeta(dtype, tuple(dims))


def keep_ir_valid(model: onnx.ModelProto) -> onnx.ModelProto:
    """Before IR version 4 every initializer must also be a graph input; models that writers rebuild (a cut, a
    reduced candidate) lose those inputs. List the missing ones; newer IR versions are left as they are."""
    import onnx

    if model.ir_version < 4:
        listed = {vi.name for vi in model.graph.input}
        model.graph.input.extend(
            onnx.helper.make_tensor_value_info(w.name, w.data_type, list(w.dims)) for w in model.graph.initializer if w.name not in listed
        )
    return model


def is_onnx(head: bytes) -> bool:
    """ONNX files are protobufs starting with field 1 (ir_version, varint): byte 0x08."""
    return head[:1] == b"\x08"


class MissingKernelError(ModelError):
    """onnxruntime (CPU) has no kernel for an op at the types the model uses; ``op_type`` names it."""

    def __init__(self, message: str, op_type: str) -> None:
        super().__init__(message)
        self.op_type = op_type


def validate(model: onnx.ModelProto | bytes | str, what: str = "the model", onnxruntime: bool = True, missing_kernels_ok: bool = False) -> None:
    """The final check of every model writer: ``onnx.checker.check_model(full_check=True)``, then a load in
    onnxruntime's CPU provider (graph optimizations off, so only validity is tested). Raises a one-line
    :class:`ModelError` (exit 3) naming what failed, or :class:`MissingKernelError` for an op type the CPU
    provider has no kernel for (unless ``missing_kernels_ok``). Pass the serialized bytes when you have them:
    nothing is serialized twice; pass a path (a ``str``) for a model with external data: the checker follows
    it, and onnxruntime maps aligned external tensors instead of reading them."""
    import onnx

    def flat(text: str) -> str:
        return " ".join(text.split())[:300]

    if isinstance(model, str):
        data: bytes | str = model
    else:
        data = model if isinstance(model, bytes) else serialize(model, what)
    try:
        onnx.checker.check_model(data, full_check=True)
    except Exception as exc:  # ValidationError, InferenceError
        raise ModelError(f"{what} fails onnx.checker (full check): {flat(str(exc))}") from None
    if not onnxruntime:
        return
    try:
        import onnxruntime as ort
    except ImportError:
        return
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    # prepacking copies every MatMul weight into packed buffers even with optimizations off: a second copy of a
    # big model's weights, for a load that only checks validity (2.3 GB -> 0.1 GB on a 2.1 GiB decoder)
    options.add_session_config_entry("session.disable_prepacking", "1")
    # one thread: a load runs nothing, and a pool of one thread per core costs more than the load on many cores
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    try:
        ort.InferenceSession(data, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's pybind exceptions
        text = str(exc)
        found = re.search(r"Could not find an implementation for (\w+)\(\d+\)", text)
        if found:
            if missing_kernels_ok:
                return
            raise MissingKernelError(f"{what} does not load in onnxruntime (CPU): no kernel for {found.group(1)} at these types", found.group(1)) from None
        # an op of a custom domain onnxruntime has no schema for (a TensorRT plugin, an inserted custom op): the
        # checker has passed it; like a missing kernel, the model is meant for another backend
        custom = re.search(r"([\w.]+):(\w+)\(-?\d+\) is not a registered function/op", text)
        if custom and missing_kernels_ok and custom.group(1) not in ("ai.onnx", "ai.onnx.ml"):
            return
        raise ModelError(f"{what} does not load in onnxruntime (CPU): {flat(text.split(' failed:', 1)[-1])}") from None


def symbolic_shapes(model: Any) -> Any:
    """ONNX Runtime's symbolic shape inference of ``model`` (a ModelProto, weights inside), as Polygraphy runs it
    (``auto_merge``); None where it gives no model. Where it cannot finish it saves sym_shape_infer_temp.onnx in
    the working folder, a stray file in the user's: it runs in a private one. Its own exceptions propagate."""
    import tempfile  # 4.5 ms at start-up: only shape inference needs it

    with tempfile.TemporaryDirectory(prefix="parity-shapes-") as folder, contextlib.chdir(folder):
        return _symbolic_module().SymbolicShapeInference.infer_shapes(model, auto_merge=True)


def _symbolic_module() -> Any:
    """onnxruntime's ``tools/symbolic_shape_infer.py``, loaded from its file: the package ``onnxruntime.tools``
    imports PyTorch wherever it is installed (its ``pytorch_export_helpers``), 1.5-3 s that shape inference
    never uses. The module itself imports only numpy, onnx, sympy and packaging."""
    name = "parity._ort_symbolic_shape_infer"
    if name in sys.modules:
        return sys.modules[name]
    if "onnxruntime.tools.symbolic_shape_infer" in sys.modules:  # imported already (by the user, by Polygraphy)
        return sys.modules["onnxruntime.tools.symbolic_shape_infer"]
    import importlib.util  # under 1 ms at start-up: only symbolic shape inference loads a module by path

    import onnxruntime

    path = os.path.join(os.path.dirname(onnxruntime.__file__), "tools", "symbolic_shape_infer.py")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not os.path.exists(path):  # another layout: the package's way
        from onnxruntime.tools import symbolic_shape_infer

        return symbolic_shape_infer
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module

