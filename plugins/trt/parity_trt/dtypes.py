"""The one mapping between TensorRT's ``DataType`` and the host (NumPy) arrays Parity feeds and returns.

TensorRT's ``DataType`` members per release (NvInferRuntimeBase.h; pyFoundationalTypes.cpp@v10.16:L179-191 binds
them; ../shared/trt-api/tensorrt-V-enums.txt lists them per version): FLOAT, HALF, INT8, INT32, BOOL, UINT8, FP8,
BF16, INT64, INT4 in every 10.x/11.x release; FP4 from 10.8; E8M0 from 10.16. TensorRT's own ``nptype`` maps only
the first seven ("fp8 and bfloat16 have no equivalent numpy type", python/packaging/bindings_wheel/tensorrt/
__init__.py@v10.16:L172-194), so the types NumPy lacks are held as ml_dtypes arrays (ml_dtypes is installed with
onnx, which Parity needs; the same scalar types ONNX Runtime and ONNX's numpy_helper use):

=========  ================================  ====================================================
DataType   host array dtype                  device bytes (``DataType.itemsize``)
=========  ================================  ====================================================
BF16       ``ml_dtypes.bfloat16``            2
FP8        ``ml_dtypes.float8_e4m3fn``       1 (1 sign, 4 exponent, 3 mantissa bits, bias 7:
                                             NvInferRuntimeBase.h@v10.16:L176-178)
E8M0       ``ml_dtypes.float8_e8m0fnu``      1 (exponent only, unsigned: L193-194)
INT4       ``ml_dtypes.int4``                0.5: two per byte (``_itemsize`` in tensorrt/__init__.py@v10.16:L198-219)
FP4        ``ml_dtypes.float4_e2m1fn``       0.5: two per byte (1 sign, 2 exponent, 1 mantissa bit: L189-191)
=========  ================================  ====================================================

ml_dtypes keeps one 4-bit value per byte, so INT4/FP4 tensors are packed for the device and unpacked on the way
back, first element in the low nibble (ONNX's packing of int4/float4e2m1; TensorRT's headers give only the
size, so the nibble order is checked by real TensorRT only). Feeds for such inputs are ml_dtypes arrays: cast
float32 data with ``array.astype(ml_dtypes.bfloat16)`` in a data-loader script or before ``--load-inputs``
(Parity's random data generator makes NumPy types only and refuses these).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from parity.api import BackendError

# TensorRT DataType member name -> host NumPy dtype. The one place this mapping lives.
DTYPES: dict[str, Any] = {
    "FLOAT": np.float32,
    "HALF": np.float16,
    "INT8": np.int8,
    "UINT8": np.uint8,
    "INT32": np.int32,
    "INT64": np.int64,
    "BOOL": np.bool_,
    "BF16": ml_dtypes.bfloat16,
    "FP8": ml_dtypes.float8_e4m3fn,
    "E8M0": ml_dtypes.float8_e8m0fnu,
    "INT4": ml_dtypes.int4,
    "FP4": ml_dtypes.float4_e2m1fn,
}
PACKED = frozenset({"INT4", "FP4"})  # two elements per device byte


def trt_name(dtype: Any) -> str:
    """The member name of a TensorRT ``DataType`` (``DataType.BF16`` -> ``"BF16"``); strings pass through."""
    return str(getattr(dtype, "name", dtype)).split(".")[-1]


def to_numpy_dtype(dtype: Any, name: str = "") -> np.dtype:
    key = trt_name(dtype)
    if key not in DTYPES:
        raise BackendError(f"tensor '{name}' has TensorRT type {key}, which Parity has no host type for")
    return np.dtype(DTYPES[key])


def is_packed(dtype: Any) -> bool:
    return trt_name(dtype) in PACKED


def device_nbytes(shape: tuple[int, ...], dtype: Any) -> int:
    count = int(np.prod(shape, dtype=np.int64))
    return (count + 1) // 2 if is_packed(dtype) else count * to_numpy_dtype(dtype).itemsize


def contiguous(array: Any) -> np.ndarray:
    """``array`` C-contiguous with its shape kept (``np.ascontiguousarray`` makes a 0-d array 1-d, and TensorRT
    then refuses a scalar input's shape [1])."""
    return np.require(array, requirements="C")


def to_device_layout(array: np.ndarray, dtype: Any) -> np.ndarray:
    """The bytes TensorRT expects for ``array``: itself, or for INT4/FP4 two values per byte (low nibble first)."""
    array = contiguous(array)
    if not is_packed(dtype):
        return array
    nibbles = array.reshape(-1).view(np.uint8) & 0x0F
    if nibbles.size % 2:
        nibbles = np.append(nibbles, np.uint8(0))
    return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8)


def from_device_layout(raw: np.ndarray, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Inverse of :func:`to_device_layout`: a host array of ``shape`` from the bytes TensorRT wrote."""
    host = to_numpy_dtype(dtype)
    if not is_packed(dtype):
        return np.asarray(raw).view(host).reshape(shape)
    count = int(np.prod(shape, dtype=np.int64))
    packed = np.asarray(raw).reshape(-1).view(np.uint8)
    nibbles = np.empty(packed.size * 2, dtype=np.uint8)
    nibbles[0::2], nibbles[1::2] = packed & 0x0F, packed >> 4
    return nibbles[:count].view(host).reshape(shape)
