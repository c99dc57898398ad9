"""Weights that stay in their files: running and writing ONNX models with external data.

A model past protobuf's 2 GiB limit cannot be one serialized message, so Parity never makes it one. Every
command loads models with their external tensors left as references (``onnx_models.load`` checks that each
reference resolves, and reads no weight byte). Reading stands below this module, in :mod:`parity.onnx_models`
(:class:`WeightReader` reads a tensor's values on demand, as a read-only NumPy view of a memory map; also
:func:`tensors`, :func:`nbytes`, :func:`load_values`, ...: imported here, so ``onnx_external.WeightReader`` and the
rest keep working); this module is the rest of that layer:

- :func:`runtime_bytes` gives onnxruntime the small graph-only message plus the folder its weights are in
  (``session.model_external_initializers_file_folder_path``), so an edited model runs without a copy of them;
- :func:`save_model` writes a model and its data files together: weights are streamed tensor by tensor
  (``os.copy_file_range`` for ones already in a file), the pair is written into a private folder beside the
  target, checked there by ``onnx.checker`` (on the path, so it follows the data) and onnxruntime, then renamed
  into place. A model that would pass 2 GiB as one file gets external data even when not asked.

``onnx``, ``numpy`` and ``onnxruntime`` are imported inside functions: importing this module is free.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parity import onnx_models
from parity.errors import ModelError, ParityError, UsageError

# the readers, re-exported: plugins and the API name them here (see the module docstring)
from parity.onnx_models import (  # noqa: F401
    STORAGE_DTYPES,
    WeightReader,
    check_references,
    dtype_of,
    external_bytes,
    external_info,
    external_path,
    inline_bytes,
    is_external,
    load_values,
    nbytes,
    tensors,
    weight_bytes,
)
from parity.util.fs import kernel_copy, part_path, remove_stale_parts, same_file, write_errors

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import onnx

PROTOBUF_LIMIT = onnx_models.PROTOBUF_LIMIT  # bytes: protobuf refuses to serialize a message this large (tests lower it here)
ALIGN = 4096  # external tensors start on page boundaries, so each maps on its own (onnx aligns the same way)
# onnxruntime's session config key for the folder of a model's external data when the model is given as bytes
ORT_DATA_FOLDER = "session.model_external_initializers_file_folder_path"


@dataclass(frozen=True)
class ExternalData:
    """How a written model stores its weights: Polygraphy's ``--save-external-data [PATH]``,
    ``--external-data-size-threshold`` and ``--no-save-all-tensors-to-one-file``.

    ``location``: the data file's name relative to the model ("" for ``<model file name>.data``); None: not
    asked (weights stay inside the model unless it would pass 2 GiB). ``size_threshold``: tensors smaller than
    this many bytes stay inside the model. ``one_file``: False writes one file per tensor, named after it."""

    location: str | None = None
    size_threshold: int = 1024
    one_file: bool = True

    @property
    def requested(self) -> bool:
        return self.location is not None


@dataclass
class SavedModel:
    """What :func:`save_model` wrote: the model, its data files, and whether external data was chosen for it
    because the model would not fit one protobuf message (callers tell the user)."""

    path: Path
    data_files: list[Path] = field(default_factory=list)
    automatic: bool = False
    weight_bytes: int = 0


def has_external(model: onnx.ModelProto) -> bool:
    return any(is_external(t) for t in tensors(model))


def external_locations(model: onnx.ModelProto) -> list[str]:
    """The data files (relative locations) a model's external tensors read, in order of first use."""
    return list(dict.fromkeys(external_info(t)[0] for t in tensors(model) if is_external(t)))


def data_files(model: onnx.ModelProto, base_dir: str | os.PathLike[str] | None) -> list[Path]:
    """The data files a lazily loaded model reads, in ``base_dir``: the input's weights, never to be written."""
    base = Path(base_dir) if base_dir is not None else Path(".")
    return [base / location for location in external_locations(model)]


def set_external(tensor: onnx.TensorProto, location: str, offset: int, length: int) -> None:
    """Point ``tensor`` at ``length`` bytes of ``location`` from ``offset`` (its values inside are dropped)."""
    import onnx

    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.ClearField("raw_data")
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value


# save_model's per-tensor hook: (tensor, its stored values) -> the values to write instead, or None
Transform = Callable[["onnx.TensorProto", "np.ndarray"], "np.ndarray | None"]

def serialize(model: onnx.ModelProto, what: str) -> bytes:
    """``model.SerializeToString()``, or a one-line ModelError past :data:`PROTOBUF_LIMIT` (:func:`parity.onnx_models.serialize`)."""
    return onnx_models.serialize(model, what, PROTOBUF_LIMIT)


_SPLICED = 1 << 16  # bytes: main-graph initializers this large are written from their own raw bytes (write_message)


def write_message(model: onnx.ModelProto, handle: Any, what: str) -> None:
    """Write the message :func:`serialize` gives into the open file ``handle``, piece by piece: the model's other
    fields, then its graph: the graph's other fields, then its initializers, each large one as its other fields
    followed by its raw bytes as they are. The same message (fields in another order, which protobuf allows):
    upb serializes a 100 MB model at a third of memcpy's speed into a buffer that Python copies once more."""
    big = [t for t in model.graph.initializer if t.HasField("raw_data") and nbytes(t) >= _SPLICED]
    if not big or inline_bytes(model) > PROTOBUF_LIMIT:  # nothing to splice, or too large: serialize's way (its refusal)
        handle.write(serialize(model, what))
        return
    import onnx

    spliced = {id(t) for t in big}
    head, graph = onnx_models.copy_fields(model, onnx.ModelProto(), skip="graph"), onnx_models.copy_fields(model.graph, onnx.GraphProto(), skip="initializer")
    parts = [graph.SerializeToString()]
    for tensor in model.graph.initializer:
        if id(tensor) not in spliced:
            entry = tensor.SerializeToString()
            parts += [_key(5, _varint(len(entry))), entry]
            continue
        fields = onnx_models.copy_fields(tensor, onnx.TensorProto(), skip="raw_data").SerializeToString()
        raw = tensor.raw_data  # one copy, this tensor's alone
        inner = _key(9, _varint(len(raw)))
        parts += [_key(5, _varint(len(fields) + len(inner) + len(raw))), fields, inner, raw]
    size = sum(len(part) for part in parts)
    first = head.SerializeToString() + _key(7, _varint(size))
    if len(first) + size > PROTOBUF_LIMIT:
        raise ModelError(f"{what} is past protobuf's 2 GiB limit for one message; write it with --save-external-data")
    handle.write(first)
    for part in parts:
        handle.write(part)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _key(field: int, length: bytes) -> bytes:
    """A length-delimited field's key (wire type 2) and its encoded length."""
    return _varint(field << 3 | 2) + length


def runtime_bytes(model: onnx.ModelProto, base_dir: str | os.PathLike[str] | None) -> tuple[bytes, dict[str, str]]:
    """What onnxruntime needs to load ``model`` without its weights in the message: the serialized graph and
    the session config entries naming the folder of its external data (none when it has none)."""
    data = serialize(model, "the model")
    if base_dir is None or not has_external(model):
        return data, {}
    return data, {ORT_DATA_FOLDER: os.fspath(Path(base_dir).resolve())}


# --- writing ----------------------------------------------------------------------------------------


def save_model(
    model: onnx.ModelProto,
    path: str | os.PathLike[str],
    *,
    base_dir: str | os.PathLike[str] | None = None,
    external: ExternalData | None = None,
    what: str = "the model",
    validate: bool = True,
    missing_kernels_ok: bool = False,
    transform: Transform | None = None,
) -> SavedModel:
    """Write ``model`` to ``path`` with its weights where ``external`` says (see :class:`ExternalData`), reading
    tensors that are still external from ``base_dir``. The model and its data files appear together or not at
    all: they are written into a private folder beside ``path``, validated there (``onnx.checker`` full check on
    the path, then a load in onnxruntime's CPU provider) and renamed into place, data first. Free disk space is
    checked before the first byte. ``model`` is left as it was.

    ``transform(tensor, values)``: called for each tensor read from external data, with its values (a read-only
    memory-mapped view); an array it returns is written instead (same shape; the tensor's element type becomes
    the array's), None writes the stored bytes as they are. It is first called once per such tensor with an
    empty array of the tensor's type, to size the output (the 2 GiB decision and the disk check). Each tensor's
    pages are released after it is written, so a pass over the weights keeps about one tensor in memory."""

    target = Path(path)
    external = external or ExternalData()
    written = sum(_written_bytes(t, transform) for t in tensors(model) if is_external(t))
    total = weight_bytes(model) - external_bytes(model) + written
    automatic = not external.requested and inline_bytes(model) + written > PROTOBUF_LIMIT - (64 << 20)
    if automatic:
        external = ExternalData("")
    location = external.location or f"{target.name}.data"
    if external.requested:
        check_location(location, target)
    _refuse_sources(model, base_dir, [target, target.parent / location])  # before any work; per-tensor files once named
    with write_errors(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        _check_free_space(target.parent, total, target)
        remove_stale_parts(target.parent)
        work = part_path(target.parent)
        work.mkdir()
        try:
            staged = work / target.name
            with _externalized(model, base_dir, work, location if external.requested else None, external, transform) as data_files, open(staged, "wb") as handle:
                write_message(model, handle, what)
            if validate:
                onnx_models.validate(str(staged), f"{what} (not written to {target})", missing_kernels_ok=missing_kernels_ok)
            _refuse_sources(model, base_dir, [target, *(target.parent / name for name in data_files)])
            keep_mode = _existing_mode(target)
            published = []
            for name in data_files:  # data first: a crash between the renames leaves the old model with new data
                _publish(work / name, target.parent / name)
                published.append(target.parent / name)
            _publish(staged, target, keep_mode)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return SavedModel(target, published, automatic, total)


def _refuse_sources(model: onnx.ModelProto, base_dir: str | os.PathLike[str] | None, targets: list[Path]) -> None:
    """Never replace a file the model's weights are read from (the input's own data file)."""
    sources = data_files(model, base_dir)
    for target in targets:
        for source in sources:
            if same_file(target, source):
                raise UsageError(
                    f"refusing to overwrite the input model's external data ({source}) with {target}; choose another --save-external-data name or output folder"
                )


def _written_bytes(tensor: onnx.TensorProto, transform: Transform | None) -> int:
    """An external tensor's size as written: its stored size, scaled by the element size ``transform`` writes
    (learnt from a call on no values)."""
    import numpy as np

    size = nbytes(tensor)
    dtype = dtype_of(tensor.data_type) if transform is not None and tensor.data_type in STORAGE_DTYPES else None
    if dtype is None:
        return size
    out = transform(tensor, np.empty((0,), dtype))
    return size if out is None else size // dtype.itemsize * out.dtype.itemsize


def _transformed(reader: WeightReader, tensor: onnx.TensorProto, transform: Transform | None) -> np.ndarray | None:
    """What ``transform`` writes for an external tensor instead of its stored bytes (None: the bytes); the
    tensor's element type is set to the array's."""
    if transform is None or tensor.data_type not in STORAGE_DTYPES:
        return None
    out = transform(tensor, reader.array(tensor))
    if out is None:
        return None
    import numpy as np
    from onnx import helper

    tensor.data_type = helper.np_dtype_to_tensor_dtype(out.dtype)
    return np.ascontiguousarray(out)


def planned_data_files(model: onnx.ModelProto, path: str | os.PathLike[str], external: ExternalData | None) -> list[Path]:
    """The data files :func:`save_model` may write beside ``path``, for the overwrite checks a command makes before
    any work: the one file (``location``, or ``<output>.data``, also the automatic one past 2 GiB), or with
    ``one_file=False`` one per tensor at or above the threshold, named as :func:`save_model` names them."""
    target = Path(path)
    external = external or ExternalData()
    if not external.requested:
        return [target.parent / f"{target.name}.data"] if weight_bytes(model) > PROTOBUF_LIMIT - (64 << 20) else []
    if external.one_file:
        return [target.parent / (external.location or f"{target.name}.data")]
    taken: dict[str, Any] = {}
    for tensor in tensors(model):
        if nbytes(tensor) >= external.size_threshold:
            taken[_tensor_file(tensor.name, taken)] = None
    return [target.parent / name for name in taken]


def copy_with_data(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> bool:
    """Copy an ONNX model that reads external data together with that data (into ``<target>.data``, written as
    :func:`save_model` writes; not validated: a faithful copy of what was there, e.g. a debug check's candidate).
    False, copying nothing, for a file that is not such a model: the caller copies it as a file."""
    import onnx

    source = Path(source)
    try:
        model = onnx.load(str(source), load_external_data=False)
    except Exception:  # noqa: BLE001 - not an ONNX model: a plain file to the caller
        return False
    if not has_external(model):
        return False
    save_model(model, target, base_dir=source.parent, external=ExternalData(""), validate=False, what=str(source))
    return True


def check_location(location: str, target: str | os.PathLike[str]) -> None:
    """``--save-external-data PATH`` names a file in the output's folder, never the output itself: a usage error
    (exit 2) before any work otherwise."""
    target = Path(target)
    if os.path.isabs(location) or ".." in Path(location).parts or location.endswith(("/", os.sep)):
        raise UsageError(f"--save-external-data: '{location}' must be a file name relative to the model's folder ({target.parent})")
    if Path(location).name == target.name:
        raise UsageError(f"--save-external-data: the data file '{location}' cannot be the model file itself")


def _existing_mode(target: Path) -> int | None:
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return None


def _publish(staged: Path, target: Path, keep_mode: int | None = None) -> None:
    """Rename a finished file into place. New files get the mode the umask gives; a replaced one keeps its bits."""
    mode = keep_mode if keep_mode is not None else 0o666 & ~_umask()
    os.chmod(staged, mode)
    os.replace(staged, target)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def _check_free_space(directory: Path, needed: int, target: Path) -> None:
    free = shutil.disk_usage(directory).free
    if needed + (16 << 20) > free:
        raise ParityError(f"cannot write {target}: it needs about {needed / 2**30:.2f} GiB and {directory} has {free / 2**30:.2f} GiB free")


@contextlib.contextmanager
def _externalized(
    model: onnx.ModelProto,
    base_dir: str | os.PathLike[str] | None,
    folder: Path,
    location: str | None,
    options: ExternalData,
    transform: Transform | None = None,
) -> Iterator[list[str]]:
    """Point the model's tensors at data files written into ``folder`` (or bring them all inside when
    ``location`` is None), yield the data file names, and restore every tensor afterwards: the caller's model is
    not changed, and no tensor is copied in memory (a tensor moving out keeps its bytes until restored).
    External tensors go through ``transform`` (see :func:`save_model`)."""
    import onnx

    saved: list[tuple[onnx.TensorProto, bytes, bool | None]] = []  # (tensor, what restores it, for raw data: had data_location)
    files: dict[str, Any] = {}
    reader = WeightReader(base_dir)
    try:
        for tensor in tensors(model):
            size = nbytes(tensor)
            leave_inside = location is None or size < options.size_threshold or tensor.data_type == onnx.TensorProto.STRING
            if leave_inside:
                if is_external(tensor):  # into the message
                    saved.append((tensor, tensor.SerializeToString(), None))
                    values = _transformed(reader, tensor, transform)
                    data = bytes(reader.buffer(tensor)) if values is None else values.tobytes()
                    del values
                    reader.release(tensor)
                    del tensor.external_data[:]
                    tensor.data_location = onnx.TensorProto.DEFAULT
                    tensor.raw_data = data
                continue
            name = location if options.one_file else _tensor_file(tensor.name, files)
            handle = files.get(name)
            if handle is None:
                handle = files[name] = open(folder / name, "wb")  # noqa: SIM115 - closed in the finally below
            offset = -handle.tell() % ALIGN + handle.tell()
            handle.seek(offset)
            if is_external(tensor):
                saved.append((tensor, tensor.SerializeToString(), None))  # a few bytes: its reference
                values = _transformed(reader, tensor, transform)
                if values is None:
                    length = _copy_range(reader, tensor, handle)
                else:
                    handle.write(memoryview(values).cast("B"))
                    length = values.nbytes
                    del values
                    reader.release(tensor)
            elif tensor.HasField("raw_data"):
                raw = tensor.raw_data  # moved, not copied: the proto's field is cleared below
                saved.append((tensor, raw, tensor.HasField("data_location")))
                handle.write(raw)
                length = len(raw)
                tensor.ClearField("raw_data")
            else:  # values in typed fields (float_data...): small in practice
                saved.append((tensor, tensor.SerializeToString(), None))
                raw = _raw_bytes(tensor)
                handle.write(raw)
                length = len(raw)
                _clear_values(tensor)
            set_external(tensor, name, offset, length)
        for handle in files.values():
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
        yield list(files)
    finally:
        for handle in files.values():
            handle.close()
        reader.close()
        for tensor, restore, had_location in reversed(saved):
            if had_location is not None:  # raw data moved out: move it back
                del tensor.external_data[:]
                tensor.ClearField("data_location")
                if had_location:
                    tensor.data_location = onnx.TensorProto.DEFAULT
                tensor.raw_data = restore
            else:
                tensor.Clear()
                tensor.MergeFromString(restore)


def _tensor_file(name: str, taken: dict[str, Any]) -> str:
    """One data file per tensor (``--no-save-all-tensors-to-one-file``): the tensor's name, made a safe file name."""
    base = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "tensor"
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}.{n}"
    return candidate


def _copy_range(reader: WeightReader, tensor: onnx.TensorProto, handle: Any) -> int:
    """Copy an external tensor's bytes from its file into ``handle`` in the kernel where it can
    (``copy_file_range``), else through the memory map."""
    view = reader.buffer(tensor)
    length = len(view)
    location, offset, _ = external_info(tensor)
    source = external_path(reader.base_dir, location, tensor.name, "the model")
    handle.flush()
    out = handle.tell()
    with open(source, "rb") as src:
        done = kernel_copy(src.fileno(), handle.fileno(), length, offset, out)
    handle.seek(out + done)
    step = 64 << 20
    for start in range(done, length, step):  # what the kernel did not copy
        handle.write(view[start : start + step])
    return length


def _raw_bytes(tensor: onnx.TensorProto) -> bytes:
    """Little-endian raw bytes of a tensor whose values are inside the proto."""
    from onnx import numpy_helper

    if tensor.HasField("raw_data"):
        return tensor.raw_data
    return numpy_helper.to_array(tensor).tobytes()  # native order: little-endian on every platform onnxruntime ships for


def _clear_values(tensor: onnx.TensorProto) -> None:
    for name in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"):
        tensor.ClearField(name)
