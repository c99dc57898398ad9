"""``polygraphy.cuda`` on cuda-python (through parity_trt's CUDA layer, ``parity_trt.api.cuda``) rather than on
``libcudart`` through ctypes: the global wrapper (``wrapper()``), ``Stream``, ``DeviceView`` and ``DeviceArray``.

CUDA errors are raised as one-line ``PolygraphyException``s naming the call and CUDA's error; a missing cuda-python
is parity's one-line "missing dependency" error. ``DeviceArray`` allocates exactly what its shape needs (like
Polygraphy, not parity_trt's geometric growth), so ``allocated_nbytes`` is predictable.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import numpy as np
from parity_trt import api as trt_api

from parity.api import ParityError
from parity_polygraphy.datatype import DataType
from parity_polygraphy.exception import PolygraphyException
from parity_polygraphy.logger import G_LOGGER
from parity_polygraphy.util import array as _array
from parity_polygraphy.util.util import volume


class MemcpyKind(enum.IntEnum):
    """The direction of a copy; the values are CUDA's ``cudaMemcpyKind``."""

    HostToHost = 0
    HostToDevice = 1
    DeviceToHost = 2
    DeviceToDevice = 3
    Default = 4


def _cuda_call(name: str, *args: Any) -> Any:
    """cudart.<name>(*args), unpacked; CUDA's error (or a missing cuda-python) as a PolygraphyException."""
    cuda = trt_api.cuda
    try:
        return cuda.check(getattr(cuda.runtime(), name)(*args), name)
    except ParityError as exc:
        raise PolygraphyException(str(exc)) from exc


class Cuda:
    """The low-level CUDA calls Polygraphy's wrapper offers; get the process's one with :func:`wrapper`.
    Pointers and stream handles are plain ints."""

    def check(self, status: Any) -> None:
        """Raise unless ``status`` (a CUDA error code) is success."""
        if int(status) != 0:
            G_LOGGER.critical(f"CUDA Error: {int(status)}")

    def create_stream(self) -> int:
        return int(_cuda_call("cudaStreamCreate"))

    def stream_synchronize(self, ptr: int) -> None:
        _cuda_call("cudaStreamSynchronize", _stream_handle(ptr))

    def destroy_stream(self, ptr: int) -> None:
        _cuda_call("cudaStreamDestroy", _stream_handle(ptr))

    def malloc(self, nbytes: int) -> int:
        """``nbytes`` of device memory; returns the device pointer."""
        return int(_cuda_call("cudaMalloc", int(nbytes)))

    def free(self, ptr: int) -> None:
        if ptr:
            _cuda_call("cudaFree", int(ptr))

    def memcpy(self, dst: int, src: int, nbytes: int, kind: MemcpyKind | int, stream_ptr: int | None = None) -> None:
        """Copy ``nbytes`` from ``src`` to ``dst``; asynchronous on ``stream_ptr`` when given."""
        if not nbytes:
            return
        cuda_kind = getattr(trt_api.cuda.runtime().cudaMemcpyKind, f"cudaMemcpy{MemcpyKind(int(kind)).name}")
        if stream_ptr is None:
            _cuda_call("cudaMemcpy", int(dst), int(src), int(nbytes), cuda_kind)
        else:
            _cuda_call("cudaMemcpyAsync", int(dst), int(src), int(nbytes), cuda_kind, _stream_handle(stream_ptr))


def _stream_handle(ptr: int) -> Any:
    return trt_api.cuda.runtime().cudaStream_t(int(ptr))


_WRAPPER: Cuda | None = None


def wrapper() -> Cuda:
    """The process's one :class:`Cuda` wrapper."""
    global _WRAPPER
    if _WRAPPER is None:
        _WRAPPER = Cuda()
    return _WRAPPER


class Stream:
    """A CUDA stream; ``ptr`` is its handle as an int (what ``execute_async_v3`` takes)."""

    def __init__(self) -> None:
        self.ptr: int = wrapper().create_stream()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def free(self) -> None:
        if self.ptr is not None:
            wrapper().destroy_stream(self.ptr)
            self.ptr = None  # type: ignore[assignment] - freed: a second free is a no-op

    def synchronize(self) -> None:
        wrapper().stream_synchronize(self.ptr)


def try_get_stream_handle(stream: Stream | None) -> int | None:
    return None if stream is None else stream.ptr


class DeviceView:
    """A read-only view of device memory: ``ptr`` (int), ``shape`` and ``dtype``. ``dtype`` reads back as a NumPy
    dtype where NumPy has one (as in Polygraphy, for backwards compatibility), else as the DataType."""

    def __init__(self, ptr: int, shape: Sequence[int], dtype: Any) -> None:
        self.ptr = int(ptr)
        self.shape = tuple(shape)
        self.dtype = dtype

    @property
    def dtype(self) -> Any:
        try:
            return DataType.to_dtype(self._dtype, "numpy")
        except Exception:  # noqa: BLE001 - no NumPy type (bfloat16, fp8): the DataType itself
            return self._dtype

    @dtype.setter
    def dtype(self, new: Any) -> None:
        self._dtype = DataType.from_dtype(new)
        self.itemsize = self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return int(volume(self.shape) * self.itemsize)

    def _check_host_buffer(self, host_buffer: Any, copying_from: bool) -> None:
        if _array.dtype(host_buffer) != self._dtype:
            G_LOGGER.error(f"Host buffer type: {_array.dtype(host_buffer)} does not match the type of this device buffer: {self._dtype}")
        if not _array.is_contiguous(host_buffer):
            G_LOGGER.critical("Provided host buffer is not contiguous in memory.")
        host_bytes = _array.nbytes(host_buffer)
        if copying_from and host_bytes > self.nbytes:
            G_LOGGER.critical(f"Provided host buffer is larger than device buffer ({host_bytes} > {self.nbytes} bytes); resize() the device buffer first.")
        if not copying_from and host_bytes < self.nbytes:
            G_LOGGER.critical(f"Provided host buffer is smaller than device buffer ({host_bytes} < {self.nbytes} bytes).")

    def copy_to(self, host_buffer: Any, stream: Stream | None = None) -> Any:
        """Device -> ``host_buffer`` (a contiguous NumPy array or CPU torch tensor at least as big); returns it."""
        if not self.nbytes:
            return host_buffer
        self._check_host_buffer(host_buffer, copying_from=False)
        wrapper().memcpy(_array.data_ptr(host_buffer), self.ptr, self.nbytes, MemcpyKind.DeviceToHost, try_get_stream_handle(stream))
        return host_buffer

    def numpy(self) -> np.ndarray:
        """A new NumPy array with this memory's contents."""
        return self.copy_to(np.empty(self.shape, dtype=DataType.to_dtype(self._dtype, "numpy")))

    def __str__(self) -> str:
        return f"{type(self).__name__}[(dtype={self._dtype.name}, shape={self.shape}), ptr={hex(self.ptr)}]"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(ptr={self.ptr}, shape={self.shape}, dtype={self._dtype})"


class DeviceArray(DeviceView):
    """Device memory that owns its allocation. ``resize`` reallocates only when the new shape needs more bytes
    than are allocated (``allocated_nbytes``); ``free`` (or leaving a ``with`` block) releases it."""

    def __init__(self, shape: Sequence[int] | None = None, dtype: Any = None) -> None:
        super().__init__(0, tuple(shape or ()), DataType.FLOAT32 if dtype is None else dtype)
        self.allocated_nbytes = 0
        self.resize(self.shape)

    @staticmethod
    def raw(shape: Sequence[int] | None = None) -> DeviceArray:
        """An untyped (uint8) array: ``shape`` counts bytes."""
        return DeviceArray(shape=shape, dtype=DataType.UINT8)

    def resize(self, shape: Sequence[int]) -> DeviceArray:
        shape = tuple(shape)
        nbytes = int(volume(shape) * self.itemsize)
        if nbytes > self.allocated_nbytes:
            self.free()
            self.ptr = wrapper().malloc(nbytes)
            self.allocated_nbytes = nbytes
        self.shape = shape
        return self

    def __enter__(self) -> DeviceArray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def free(self) -> None:
        wrapper().free(self.ptr)
        self.shape = ()
        self.allocated_nbytes = 0
        self.ptr = 0

    def copy_from(self, host_buffer: Any, stream: Stream | None = None) -> DeviceArray:
        """``host_buffer`` (contiguous, no bigger than this array) -> device; returns self."""
        nbytes = _array.nbytes(host_buffer)
        if not nbytes:
            return self
        self._check_host_buffer(host_buffer, copying_from=True)
        wrapper().memcpy(self.ptr, _array.data_ptr(host_buffer), nbytes, MemcpyKind.HostToDevice, try_get_stream_handle(stream))
        return self

    def view(self, shape: Sequence[int] | None = None, dtype: Any = None) -> DeviceView:
        """A DeviceView of this memory (default: this shape and type); it may not exceed the array's bytes."""
        view = DeviceView(self.ptr, self.shape if shape is None else shape, self._dtype if dtype is None else dtype)
        if view.nbytes > self.nbytes:
            G_LOGGER.critical(f"A view cannot exceed the number of bytes of the original array ({view.nbytes} > {self.nbytes} bytes).")
        return view


__all__ = ["Cuda", "DeviceArray", "DeviceView", "MemcpyKind", "Stream", "wrapper"]
