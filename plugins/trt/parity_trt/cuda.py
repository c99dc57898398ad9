"""A small CUDA layer on cuda-python: streams, events, device arrays and pinned host buffers.

It depends only on cuda-python and NumPy (not on TensorRT), so any GPU backend can reuse it. It is written
against ``cuda.bindings.runtime`` (cuda-python 12.6+/13.x) and falls back to the old ``cuda.cudart`` module.
Every call goes through :func:`check`, which turns a CUDA error code into a one-line :class:`CudaError`.
Buffers grow geometrically and are never shrunk, so repeated ``infer`` calls reuse their memory.
"""

from __future__ import annotations

import ctypes
import functools
from types import ModuleType
from typing import Any

import numpy as np

from parity.api import BackendError, missing_dependency


class CudaError(BackendError):
    """A CUDA runtime call failed; the message names the call and CUDA's error name and text."""


@functools.cache
def runtime() -> ModuleType:
    try:
        from cuda.bindings import runtime as cudart
    except ImportError:
        try:
            from cuda import cudart  # cuda-python < 12.6
        except ImportError as exc:
            raise missing_dependency("cuda-python", "pip install cuda-python") from exc
    return cudart


def check(result: Any, what: str) -> Any:
    """Unpack cuda-python's ``(error, *values)`` tuples; raise :class:`CudaError` unless the error is success."""
    cudart = runtime()
    if isinstance(result, tuple):
        err, values = result[0], result[1:]
    else:
        err, values = result, ()
    if err != cudart.cudaError_t.cudaSuccess:
        name = cudart.cudaGetErrorName(err)[1]
        text = cudart.cudaGetErrorString(err)[1]
        name = name.decode() if isinstance(name, bytes) else str(name)
        text = text.decode() if isinstance(text, bytes) else str(text)
        raise CudaError(f"CUDA error in {what}: {name} ({text})")
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def device_count() -> int:
    """How many GPUs CUDA sees; 0 (not an error) without a driver or device."""
    cudart = runtime()
    err, count = cudart.cudaGetDeviceCount()
    return int(count) if err == cudart.cudaError_t.cudaSuccess else 0


def _kind(name: str) -> Any:
    return getattr(runtime().cudaMemcpyKind, name)


def _ptr(handle: Any) -> int:
    """The handle value of a cuda-python handle (``int(cudaStream_t)``; ``getPtr()`` would be its storage address)."""
    return int(handle)


class Stream:
    """A CUDA stream; ``ptr`` is the integer handle TensorRT's ``execute_async_v3`` takes."""

    def __init__(self) -> None:
        self.handle = check(runtime().cudaStreamCreate(), "cudaStreamCreate")
        self.owned = True

    @classmethod
    def wrap(cls, handle: Any) -> Stream:
        """A stream someone else owns (e.g. the one TensorRT passes to a callback); ``free`` leaves it alone."""
        stream = cls.__new__(cls)
        stream.handle = runtime().cudaStream_t(int(handle)) if isinstance(handle, int) else handle
        stream.owned = False
        return stream

    @property
    def ptr(self) -> int:
        return _ptr(self.handle)

    def synchronize(self) -> None:
        check(runtime().cudaStreamSynchronize(self.handle), "cudaStreamSynchronize")

    def free(self) -> None:
        if self.handle is not None and self.owned:
            check(runtime().cudaStreamDestroy(self.handle), "cudaStreamDestroy")
        self.handle = None

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()


class Event:
    """A CUDA event for timing work on a stream: ``end.elapsed_ms(start)``."""

    def __init__(self) -> None:
        self.handle = check(runtime().cudaEventCreate(), "cudaEventCreate")

    def record(self, stream: Stream) -> None:
        check(runtime().cudaEventRecord(self.handle, stream.handle), "cudaEventRecord")

    def synchronize(self) -> None:
        check(runtime().cudaEventSynchronize(self.handle), "cudaEventSynchronize")

    def elapsed_ms(self, start: Event) -> float:
        return float(check(runtime().cudaEventElapsedTime(start.handle, self.handle), "cudaEventElapsedTime"))

    def free(self) -> None:
        if self.handle is not None:
            check(runtime().cudaEventDestroy(self.handle), "cudaEventDestroy")
            self.handle = None


def _grow(current: int, needed: int) -> int:
    """Geometric growth (x2) so a slowly growing dynamic shape does not reallocate on every call."""
    return max(needed, current * 2) if needed > current else current


class _Allocation:
    """Memory that is reused while big enough and grows geometrically (device or page-locked host)."""

    _alloc = "cudaMalloc"  # the cudart functions that allocate and free this kind of memory
    _release = "cudaFree"
    ptr = 0
    nbytes = 0  # allocated bytes

    def allocate(self, nbytes: int) -> int:
        """Make sure at least ``nbytes`` are allocated; return the pointer (never 0: TensorRT needs one)."""
        nbytes = max(int(nbytes), 1)
        if nbytes > self.nbytes:
            size = _grow(self.nbytes, nbytes)  # before free(), which zeroes nbytes
            self.free()
            self.ptr = int(check(getattr(runtime(), self._alloc)(size), f"{self._alloc}({size} bytes)"))
            self.nbytes = size
        return self.ptr

    def free(self) -> None:
        if self.ptr:
            check(getattr(runtime(), self._release)(self.ptr), self._release)
        self.ptr, self.nbytes = 0, 0


class DeviceArray(_Allocation):
    """Device memory holding one tensor. ``resize`` keeps the allocation when it is big enough."""

    def __init__(self, shape: tuple[int, ...] = (), dtype: np.dtype | type = np.float32) -> None:
        self.ptr = 0
        self.nbytes = 0  # allocated bytes
        self.dtype = np.dtype(dtype)
        self.shape: tuple[int, ...] = ()
        self.resize(shape)

    @property
    def size_bytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def resize(self, shape: tuple[int, ...], dtype: np.dtype | type | None = None) -> DeviceArray:
        if dtype is not None:
            self.dtype = np.dtype(dtype)
        self.shape = tuple(int(d) for d in shape)
        self.allocate(self.size_bytes)
        return self

    def copy_from(self, host: np.ndarray, stream: Stream | None = None) -> DeviceArray:
        """Host -> device; asynchronous on ``stream`` (keep ``host`` alive until the stream syncs)."""
        host = np.require(host, requirements="C")  # (not ascontiguousarray: it makes 0-d arrays 1-d)
        self.resize(host.shape, host.dtype)
        _memcpy(self.ptr, host.ctypes.data, host.nbytes, "cudaMemcpyHostToDevice", stream)
        return self

    def copy_to(self, host: np.ndarray, stream: Stream | None = None) -> np.ndarray:
        """Device -> host into ``host`` (contiguous, at least as big as this array)."""
        if not host.flags.c_contiguous or host.nbytes < self.size_bytes:
            raise BackendError(f"copy_to: host buffer of {host.nbytes} bytes cannot hold {self.size_bytes} bytes")
        _memcpy(host.ctypes.data, self.ptr, self.size_bytes, "cudaMemcpyDeviceToHost", stream)
        return host

    def numpy(self, stream: Stream | None = None) -> np.ndarray:
        """A new host array with this array's contents (synchronous)."""
        out = np.empty(self.shape, dtype=self.dtype)
        self.copy_to(out, stream)
        if stream is not None:
            stream.synchronize()
        return out

    def __enter__(self) -> DeviceArray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()


class PinnedBuffer(_Allocation):
    """Page-locked host memory (``cudaMallocHost``) so device->host copies can run asynchronously."""

    _alloc = "cudaMallocHost"
    _release = "cudaFreeHost"

    def __init__(self, nbytes: int = 0) -> None:
        self.ptr = 0
        self.nbytes = 0
        if nbytes:
            self.allocate(nbytes)

    def view(self, shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
        """A NumPy view of the first bytes of the buffer (valid until the buffer is freed or grown)."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        self.allocate(count * dtype.itemsize)
        raw = (ctypes.c_byte * max(count * dtype.itemsize, 1)).from_address(self.ptr)
        return np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)



def _memcpy(dst: int, src: int, nbytes: int, kind: str, stream: Stream | None) -> None:
    if nbytes == 0:
        return
    cudart = runtime()
    if stream is None:
        check(cudart.cudaMemcpy(dst, src, nbytes, _kind(kind)), "cudaMemcpy")
    else:
        check(cudart.cudaMemcpyAsync(dst, src, nbytes, _kind(kind), stream.handle), "cudaMemcpyAsync")


def memcpy_device_to_host(host: np.ndarray, device_ptr: int, stream: Stream | None = None) -> np.ndarray:
    """Copy ``host.nbytes`` bytes from a raw device pointer (e.g. a TensorRT debug tensor) into ``host``."""
    _memcpy(host.ctypes.data, int(device_ptr), host.nbytes, "cudaMemcpyDeviceToHost", stream)
    return host
