"""Polygraphy's ``DataType``: one set of data types, converted to and from NumPy, ONNX, ONNX Runtime, TensorRT
and PyTorch types (``DataType.from_dtype(np.float32)``, ``DataType.FLOAT16.onnx()``, ``DataType.to_dtype(t, "torch")``).

One table (:data:`_TABLE`) says what each type is called in each library; the converters are built from it.
Libraries are imported only when a conversion asks for them, and never installed: TensorRT and PyTorch
conversions work where those packages import (TensorRT's names are looked up on the ``tensorrt`` module, so the
behavioural model of TensorRT that Parity tests with serves as well).
"""

from __future__ import annotations

import enum
import functools
import numbers
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

from parity_polygraphy.exception import DataTypeConversionException
from parity_polygraphy.logger import G_LOGGER, LogMode

__all__ = ["DataType", "DataTypeEntry", "register_dtype_exporter", "register_dtype_importer"]


class _Kind(enum.Enum):
    FLOATING_POINT = 0
    INTEGRAL = 1
    OTHER = 2


class DataTypeEntry:
    """One data type (``DataType.FLOAT32``): its ``name``, ``itemsize`` in bytes, and a method per library
    (``numpy()``, ``onnx()``, ``onnxruntime()``, ``tensorrt()``, ``torch()``) giving that library's type."""

    def __init__(self, name: str, itemsize: float, kind: _Kind) -> None:
        self.name = name
        self.itemsize = itemsize
        self._type = kind

    @property
    def is_floating(self) -> bool:
        return self._type == _Kind.FLOATING_POINT

    @property
    def is_integral(self) -> bool:
        return self._type == _Kind.INTEGRAL

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"DataType.{self.name.upper()}"

    def __reduce__(self) -> tuple[Any, ...]:  # pickles as the one member of its name (results go through processes)
        return getattr, (DataType, self.name.upper())


class _Row(NamedTuple):
    itemsize: float
    kind: _Kind
    numpy: str | None  # np.dtype(...) argument
    onnx: str | None  # onnx.TensorProto member name; ONNX Runtime's name is derived from it
    tensorrt: tuple[str, ...]  # tensorrt attribute names (TensorRT's names changed across versions)
    torch: str | None  # torch attribute name


F, N, X = _Kind.FLOATING_POINT, _Kind.INTEGRAL, _Kind.OTHER  # N: integral  # X: neither (bool, string)
_TABLE: dict[str, _Row] = {
    "FLOAT64": _Row(8, F, "float64", "DOUBLE", (), "float64"),
    "FLOAT32": _Row(4, F, "float32", "FLOAT", ("float32",), "float32"),
    "FLOAT16": _Row(2, F, "float16", "FLOAT16", ("float16",), "float16"),
    "FLOAT4": _Row(0.5, F, None, "FLOAT4E2M1", ("fp4",), None),
    "INT16": _Row(2, N, "int16", "INT16", (), "int16"),
    "INT32": _Row(4, N, "int32", "INT32", ("int32",), "int32"),
    "INT64": _Row(8, N, "int64", "INT64", ("int64",), "int64"),
    "INT8": _Row(1, N, "int8", "INT8", ("int8",), "int8"),
    "INT4": _Row(0.5, N, None, "INT4", ("int4",), None),
    "UINT16": _Row(2, N, "uint16", "UINT16", (), None),
    "UINT32": _Row(4, N, "uint32", "UINT32", (), None),
    "UINT64": _Row(8, N, "uint64", "UINT64", (), None),
    "UINT8": _Row(1, N, "uint8", "UINT8", ("uint8",), "uint8"),
    "BOOL": _Row(1, X, "bool", "BOOL", ("bool",), "bool"),
    "STRING": _Row(0, X, "str", "STRING", (), None),
    "BFLOAT16": _Row(2, F, None, "BFLOAT16", ("bfloat16",), "bfloat16"),
    "FLOAT8E4M3FN": _Row(1, F, None, "FLOAT8E4M3FN", ("fp8",), None),
    "FLOAT8E4M3FNUZ": _Row(1, F, None, "FLOAT8E4M3FNUZ", (), None),
    "FLOAT8E5M2": _Row(1, F, None, "FLOAT8E5M2", (), None),
    "FLOAT8E5M2FNUZ": _Row(1, F, None, "FLOAT8E5M2FNUZ", (), None),
    "FLOAT8E8M0": _Row(1, F, None, "FLOAT8E8M0", ("e8m0",), None),
}
del F, N, X


class _Skip(Exception):
    """An importer did not recognise the type: the next importer is asked."""


class DataType:
    """Polygraphy's data types, one class attribute each (``DataType.FLOAT32``), all in ``DataType.__members__``."""

    _IMPORTER_FUNCS: dict[str, Callable[[Any], DataTypeEntry]] = {}
    _EXPORTER_FUNCS: dict[str, Callable[[DataTypeEntry], Any]] = {}
    __members__: dict[str, DataTypeEntry] = {name: DataTypeEntry(name.lower(), row.itemsize, row.kind) for name, row in _TABLE.items()}

    FLOAT64: DataTypeEntry
    FLOAT32: DataTypeEntry
    FLOAT16: DataTypeEntry
    FLOAT4: DataTypeEntry
    INT16: DataTypeEntry
    INT32: DataTypeEntry
    INT64: DataTypeEntry
    INT8: DataTypeEntry
    INT4: DataTypeEntry
    UINT16: DataTypeEntry
    UINT32: DataTypeEntry
    UINT64: DataTypeEntry
    UINT8: DataTypeEntry
    BOOL: DataTypeEntry
    STRING: DataTypeEntry
    BFLOAT16: DataTypeEntry
    FLOAT8E4M3FN: DataTypeEntry
    FLOAT8E4M3FNUZ: DataTypeEntry
    FLOAT8E5M2: DataTypeEntry
    FLOAT8E5M2FNUZ: DataTypeEntry
    FLOAT8E8M0: DataTypeEntry

    @staticmethod
    def from_dtype(dtype: Any, source_module: str | None = None) -> Any:
        """The DataType of a library's type (asking each library in turn unless ``source_module`` names one).
        An unknown type is returned as it is, with a warning (once), as Polygraphy does; None is refused."""
        if dtype is None:
            G_LOGGER.critical(f"Could not convert: {dtype} to a Polygraphy data type")
        if isinstance(dtype, DataTypeEntry):
            return dtype
        if source_module is not None and source_module not in DataType._IMPORTER_FUNCS:
            G_LOGGER.critical(
                f"Could not find source module: {source_module} in known importers. "
                f"Note: Importer functions have been registered for the following modules: {list(DataType._IMPORTER_FUNCS)}"
            )
        importers = [DataType._IMPORTER_FUNCS[source_module]] if source_module is not None else list(DataType._IMPORTER_FUNCS.values())
        for importer in importers:
            try:
                return importer(dtype)
            except _Skip:
                pass
        message = f"Could not convert: {dtype} to a corresponding Polygraphy data type. Leaving this type in its source format."
        G_LOGGER.warning(message, mode=LogMode.ONCE)
        G_LOGGER.internal_error(message)
        return dtype

    @staticmethod
    def to_dtype(dtype: Any, target_module: str) -> Any:
        """``dtype`` as a type of ``target_module`` ("numpy", "onnx", "onnxruntime", "tensorrt", "torch");
        anything not a DataType is returned as it is. Raises DataTypeConversionException where the library has no
        such type."""
        if not isinstance(dtype, DataTypeEntry):
            G_LOGGER.internal_error(f"Received input of type other than DataType: {dtype}")
            return dtype
        if target_module not in DataType._EXPORTER_FUNCS:
            G_LOGGER.critical(
                f"Could not find target module: {target_module} in known exporters. "
                f"Note: Exporter functions have been registered for the following modules: {list(DataType._EXPORTER_FUNCS)}"
            )
        return DataType._EXPORTER_FUNCS[target_module](dtype)


for _name, _entry in DataType.__members__.items():
    setattr(DataType, _name, _entry)


def register_dtype_importer(source_module: str) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Decorator: ``func(foreign_type)`` returns the DataType, or None where it does not know the type. It must not
    import a library that is not already importable cheaply (guard with ``sys.modules`` or an import check)."""

    def register(func: Callable[[Any], Any]) -> Callable[[Any], Any]:
        @functools.wraps(func)
        def importer(dtype: Any) -> Any:
            value = func(dtype)
            if value is None:
                raise _Skip
            return value

        DataType._IMPORTER_FUNCS[source_module] = importer
        return importer

    return register


def register_dtype_exporter(target_module: str) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Decorator: ``func(datatype)`` returns ``target_module``'s type, or None where it has none; it becomes the
    method ``DataType.X.<target_module>()`` and ``DataType.to_dtype(X, target_module)``."""

    def register(func: Callable[[Any], Any]) -> Callable[[Any], Any]:
        @functools.wraps(func)
        def exporter(dtype: DataTypeEntry) -> Any:
            value = func(dtype)
            if value is None:
                G_LOGGER.critical(
                    f"Could not convert Polygraphy data type: {dtype} to a corresponding {target_module} data type. ",
                    ExceptionType=DataTypeConversionException,
                )
            return value

        exporter.__name__ = target_module
        setattr(DataTypeEntry, target_module, exporter)
        DataType._EXPORTER_FUNCS[target_module] = exporter
        return exporter

    return register


# --- the libraries ------------------------------------------------------------------------------------------
def _importable(name: str) -> Any:
    """The module if it is imported already or imports now; None where it is not installed."""
    if name in sys.modules:
        return sys.modules[name]
    try:
        return __import__(name)
    except ImportError:
        return None


@functools.cache
def _numpy_map() -> dict[Any, DataTypeEntry]:
    import numpy as np

    return {np.dtype(row.numpy): DataType.__members__[name] for name, row in _TABLE.items() if row.numpy}


@functools.cache
def _onnx_map() -> dict[int, DataTypeEntry]:
    import onnx

    members = dict(onnx.TensorProto.DataType.items())
    return {members[row.onnx]: DataType.__members__[name] for name, row in _TABLE.items() if row.onnx in members}


@functools.cache
def _onnxrt_map() -> dict[str, DataTypeEntry]:
    # ONNX Runtime's names: tensor(<onnx name in lower case>), except FLOAT and DOUBLE keep C's names
    return {f"tensor({row.onnx.lower()})": DataType.__members__[name] for name, row in _TABLE.items() if row.onnx}


def _trt_map() -> dict[Any, DataTypeEntry]:
    # not cached: the tensorrt module may change (a test installs a model of another TensorRT version)
    trt = _importable("tensorrt")
    if trt is None:
        return {}
    found = {}
    for name, row in _TABLE.items():
        for attr in row.tensorrt:
            value = getattr(trt, attr, None)
            if value is not None:
                found[value] = DataType.__members__[name]
                break
    return found


def _torch_map() -> dict[Any, DataTypeEntry]:
    torch = sys.modules.get("torch") or _importable("torch")
    if torch is None:
        return {}
    return {getattr(torch, row.torch): DataType.__members__[name] for name, row in _TABLE.items() if row.torch and hasattr(torch, row.torch)}


def _library_of(value: Any) -> str:
    """The library a type object comes from ("tensorrt" also for tensorrt_bindings), by its class's module."""
    root = (type(value).__module__ or "").split(".")[0]
    return "tensorrt" if root.startswith("tensorrt") else root


def _lookup(mapping: dict[Any, DataTypeEntry], key: Any) -> DataTypeEntry | None:
    try:
        return mapping.get(key)
    except TypeError:  # unhashable
        return None


def _reverse(mapping: dict[Any, DataTypeEntry], dtype: DataTypeEntry) -> Any:
    return next((foreign for foreign, entry in mapping.items() if entry is dtype), None)


@register_dtype_importer("numpy")
def from_numpy(numpy_type: Any) -> DataTypeEntry | None:
    """A NumPy type (``np.float32``, ``np.dtype("int8")``, ``"float16"``) as a DataType."""
    if _library_of(numpy_type) in ("tensorrt", "torch"):
        return None
    import numpy as np

    try:
        return _lookup(_numpy_map(), np.dtype(numpy_type))
    except Exception:  # not something NumPy reads as a type
        return None


@register_dtype_exporter("numpy")
def to_numpy(dtype: DataTypeEntry) -> Any:
    return _reverse(_numpy_map(), dtype)


@register_dtype_importer("onnx")
def from_onnx(onnx_type: Any) -> DataTypeEntry | None:
    """An ONNX type (``onnx.TensorProto.FLOAT``, an int) as a DataType."""
    if not isinstance(onnx_type, numbers.Integral) or isinstance(onnx_type, bool):  # np.int32(1) too, as a dict key would match it
        return None
    return _onnx_map().get(int(onnx_type))


@register_dtype_exporter("onnx")
def to_onnx(dtype: DataTypeEntry) -> Any:
    return _reverse(_onnx_map(), dtype)


@register_dtype_importer("onnxruntime")
def from_onnxrt(onnxrt_type: Any) -> DataTypeEntry | None:
    """An ONNX Runtime type name (``"tensor(float)"``) as a DataType."""
    return _onnxrt_map().get(onnxrt_type) if isinstance(onnxrt_type, str) else None


@register_dtype_exporter("onnxruntime")
def to_onnxrt(dtype: DataTypeEntry) -> Any:
    return _reverse(_onnxrt_map(), dtype)


@register_dtype_importer("tensorrt")
def from_tensorrt(tensorrt_type: Any) -> DataTypeEntry | None:
    """A TensorRT type (``trt.float16``) as a DataType, where TensorRT (or its model) is installed."""
    if _library_of(tensorrt_type) != "tensorrt":  # asks nothing of TensorRT for other libraries' types
        return None
    return _lookup(_trt_map(), tensorrt_type)


@register_dtype_exporter("tensorrt")
def to_tensorrt(dtype: DataTypeEntry) -> Any:
    return _reverse(_trt_map(), dtype)


@register_dtype_importer("torch")
def from_torch(torch_type: Any) -> DataTypeEntry | None:
    """A PyTorch type (``torch.float32``) as a DataType, where PyTorch is installed."""
    if _library_of(torch_type) != "torch":
        return None
    return _lookup(_torch_map(), torch_type)


@register_dtype_exporter("torch")
def to_torch(dtype: DataTypeEntry) -> Any:
    return _reverse(_torch_map(), dtype)
