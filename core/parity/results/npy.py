"""Reading ``.npy`` data that may be hostile: the header is checked before a byte of data is allocated.

``numpy.load`` trusts the header: a 100-byte file claiming shape ``(10**6, 10**6)`` makes it allocate terabytes
(``MemoryError``), a product of dims that overflows int64 passes its size checks, and a negative dim fails deep
inside. Here the header is parsed with Python integers, the data's size is compared with the bytes actually
present, and only plain (numeric, bool, string) dtypes are accepted; nothing is ever unpickled. Every failure is a
:class:`parity.errors.UsageError` naming ``where`` (the file, and the entry or tensor inside it).
"""

from __future__ import annotations

import ast
import io
import struct
import warnings
from os import PathLike
from typing import IO

import numpy as np

from parity.errors import UsageError

MAGIC = b"\x93NUMPY"
MAX_HEADER = 100_000  # numpy's own reader refuses headers over 10,000 bytes by default
KINDS = "biufcSUmM"  # bool, ints, floats, complex, bytes, str, timedelta, datetime: no objects, no structs


class NpyError(UsageError):
    """A broken or hostile ``.npy`` header or payload: ``where`` (file, entry) and ``reason``."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


def read_header(fh: IO[bytes], where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran_order, dtype)`` from a ``.npy`` stream positioned at its magic; leaves it at the data."""
    magic = fh.read(8)
    if len(magic) < 8 or magic[:6] != MAGIC:
        raise NpyError(where, "not a .npy array (bad magic)")
    major, minor = magic[6], magic[7]
    if (major, minor) not in ((1, 0), (2, 0), (3, 0)):
        raise NpyError(where, f"unsupported .npy format version {major}.{minor}")
    size_fmt = "<H" if major == 1 else "<I"
    raw_len = fh.read(struct.calcsize(size_fmt))
    if len(raw_len) != struct.calcsize(size_fmt):
        raise NpyError(where, "truncated .npy header")
    (length,) = struct.unpack(size_fmt, raw_len)
    if length > MAX_HEADER:
        raise NpyError(where, f".npy header of {length} bytes (over {MAX_HEADER}); not a file numpy writes")
    raw = fh.read(length)
    if len(raw) != length:
        raise NpyError(where, "truncated .npy header")
    try:
        text = raw.decode("utf-8" if major == 3 else "latin-1")
        with warnings.catch_warnings():  # odd escapes in a hostile header warn; the header is refused anyway
            warnings.simplefilter("ignore")
            header = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, UnicodeDecodeError) as exc:
        raise NpyError(where, f"unreadable .npy header ({type(exc).__name__})") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise NpyError(where, "malformed .npy header (expected keys descr, fortran_order, shape)")
    shape, fortran = header["shape"], header["fortran_order"]
    if not isinstance(shape, tuple) or not all(type(d) is int for d in shape):
        raise NpyError(where, f"malformed .npy header (shape {shape!r:.60})")
    if any(d < 0 for d in shape):
        raise NpyError(where, f".npy header has a negative dimension {list(shape)}")
    if not isinstance(fortran, bool):
        raise NpyError(where, f"malformed .npy header (fortran_order {fortran!r:.60})")
    try:
        dtype = np.lib.format.descr_to_dtype(header["descr"])
    except Exception as exc:  # noqa: BLE001 - any descr numpy cannot turn into a dtype
        raise NpyError(where, f".npy header has an invalid dtype {header['descr']!r:.60} ({type(exc).__name__})") from None
    if dtype.hasobject:
        raise NpyError(where, "holds Python objects (pickled data), which Parity never loads")
    if dtype.kind not in KINDS or dtype.shape:
        raise NpyError(where, f"unsupported dtype {dtype} (Parity reads numeric, bool and string arrays)")
    return shape, fortran, dtype


def nbytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    """The data's size in bytes, exactly (Python integers: no int64 overflow)."""
    count = 1
    for d in shape:
        count *= d
    return count * dtype.itemsize


def check_size(shape: tuple[int, ...], dtype: np.dtype, available: int, where: str) -> int:
    """The data's size, or an error when the bytes present cannot hold it (never allocate what is not there)."""
    size = nbytes(shape, dtype)
    if size > available:
        raise NpyError(where, f"truncated or corrupt array: shape {list(shape)} {dtype} needs {size} bytes, {available} present")
    return size


def from_bytes(raw: bytes, where: str) -> np.ndarray:
    """An array from the bytes of a ``.npy`` file (read-only, sharing ``raw``'s memory)."""
    fh = io.BytesIO(raw)
    shape, fortran, dtype = read_header(fh, where)
    offset = fh.tell()
    size = check_size(shape, dtype, len(raw) - offset, where)
    if size == 0:
        return np.zeros(shape, dtype, order="F" if fortran else "C")
    flat = np.frombuffer(raw, dtype=dtype, count=size // dtype.itemsize, offset=offset)
    return flat.reshape(shape[::-1]).transpose() if fortran else flat.reshape(shape)


def from_stream(fh: IO[bytes], available: int, where: str) -> np.ndarray:
    """An array from a stream holding a ``.npy`` file of ``available`` bytes (e.g. a compressed zip entry)."""
    start = fh.tell() if fh.seekable() else 0
    shape, fortran, dtype = read_header(fh, where)
    consumed = (fh.tell() - start) if fh.seekable() else 0
    size = check_size(shape, dtype, available - consumed, where)
    data = fh.read(size) if size else b""
    if len(data) != size:
        raise NpyError(where, f"truncated array: {len(data)} of {size} bytes")
    if size == 0:
        return np.zeros(shape, dtype, order="F" if fortran else "C")
    flat = np.frombuffer(data, dtype=dtype)
    return flat.reshape(shape[::-1]).transpose() if fortran else flat.reshape(shape)


def check_writable(array: object, where: str) -> np.ndarray:
    """``array`` as an ndarray that Parity writes (and reads back) without pickle, or a one-line
    :class:`parity.errors.UsageError` naming ``where`` (the file and the tensor)."""
    array = np.asarray(array)
    if array.dtype.hasobject:
        raise UsageError(f"{where}: holds Python objects (dtype {array.dtype}), which only pickle can store; Parity never writes pickles")
    if array.dtype.kind not in KINDS or array.dtype.shape:
        raise UsageError(f"{where}: unsupported dtype {array.dtype} (Parity saves numeric, bool and string arrays)")
    return array


def input_where(path: str | PathLike[str], name: str, index: int) -> str:
    """How a message names an input being saved: the file, the tensor, the iteration."""
    return f"{path}: input '{name}' of iteration {index}"


def output_where(path: str | PathLike[str], name: str, runner: str, index: int) -> str:
    """How a message names an output being saved: the file, the tensor, the runner, the iteration."""
    return f"{path}: output '{name}' of runner '{runner}', iteration {index}"
