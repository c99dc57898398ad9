"""A model of cuda-python's runtime module (``cuda.bindings.runtime``) for tests, NOT CUDA: "device" memory is host
buffers, so the runner's copies and the TensorRT model's reads and writes run on a machine without a GPU. It is
also the TensorRT model's memory seam (``is_device``, ``alloc_device``, ``free_device``, ``read``, ``write``,
``enqueueing``); ``cuda_memory.CudaMemory`` is the same seam over real device memory."""

from __future__ import annotations

import ctypes
import enum
from typing import Any


class HostCudart:
    class cudaError_t(enum.IntEnum):  # noqa: N801 - cuda-python's names
        cudaSuccess = 0
        cudaErrorMemoryAllocation = 2

    class cudaMemcpyKind(enum.IntEnum):  # noqa: N801
        cudaMemcpyHostToDevice = 1
        cudaMemcpyDeviceToHost = 2

    cudaStream_t = int

    def __init__(self) -> None:
        self.device: dict[int, Any] = {}  # "device" allocations: address -> ctypes buffer
        self.pinned: dict[int, Any] = {}
        self.fail_in_enqueue = False  # cudaMalloc fails while TensorRT runs (inside its callbacks)
        self.enqueueing = False
        self.mallocs: list[int] = []  # sizes asked of cudaMalloc

    # the TensorRT model's memory seam
    def is_device(self, ptr: int) -> bool:
        return int(ptr) in self.device

    def alloc_device(self, size: int) -> int:
        return self._alloc(self.device, size)[1]

    def free_device(self, ptr: int) -> None:
        self.device.pop(int(ptr))

    def read(self, ptr: int, nbytes: int) -> bytes:
        self._check_bounds(int(ptr), int(nbytes))
        return ctypes.string_at(int(ptr), int(nbytes))

    def write(self, ptr: int, data: bytes) -> None:
        self._check_bounds(int(ptr), len(data))
        ctypes.memmove(int(ptr), data, len(data))

    def _check_bounds(self, ptr: int, nbytes: int) -> None:
        """A read or write that starts in a "device" allocation must end in it (on a GPU it would be an illegal
        address; here it would corrupt the test process's memory)."""
        for base, buf in self.device.items():
            if base <= ptr < base + max(len(buf), 1):
                if ptr + nbytes > base + len(buf):
                    raise MemoryError(f"{nbytes} bytes at {ptr:#x} overrun the {len(buf)}-byte allocation at {base:#x}")
                return

    def _alloc(self, table: dict[int, Any], size: int) -> tuple[int, int]:
        buf = ctypes.create_string_buffer(int(size))
        table[ctypes.addressof(buf)] = buf
        return self.cudaError_t.cudaSuccess, ctypes.addressof(buf)

    def cudaMalloc(self, size: int) -> tuple[int, int]:  # noqa: N802
        self.mallocs.append(int(size))
        if self.fail_in_enqueue and self.enqueueing:
            return self.cudaError_t.cudaErrorMemoryAllocation, 0
        return self._alloc(self.device, size)

    def cudaMallocHost(self, size: int) -> tuple[int, int]:  # noqa: N802
        return self._alloc(self.pinned, size)

    def cudaFree(self, ptr: int) -> tuple[int]:  # noqa: N802
        self.device.pop(int(ptr))
        return (self.cudaError_t.cudaSuccess,)

    def cudaFreeHost(self, ptr: int) -> tuple[int]:  # noqa: N802
        self.pinned.pop(int(ptr))
        return (self.cudaError_t.cudaSuccess,)

    def cudaMemcpy(self, dst: int, src: int, n: int, kind: Any) -> tuple[int]:  # noqa: N802
        ctypes.memmove(int(dst), int(src), int(n))
        return (self.cudaError_t.cudaSuccess,)

    def cudaMemcpyAsync(self, dst: int, src: int, n: int, kind: Any, stream: Any) -> tuple[int]:  # noqa: N802
        return self.cudaMemcpy(dst, src, n, kind)

    def cudaStreamCreate(self) -> tuple[int, int]:  # noqa: N802
        return self.cudaError_t.cudaSuccess, 0x5000

    def cudaStreamSynchronize(self, stream: Any) -> tuple[int]:  # noqa: N802
        return (self.cudaError_t.cudaSuccess,)

    cudaStreamDestroy = cudaStreamSynchronize

    def cudaGetErrorName(self, err: Any) -> tuple[int, bytes]:  # noqa: N802
        return self.cudaError_t.cudaSuccess, self.cudaError_t(err).name.encode()

    def cudaGetErrorString(self, err: Any) -> tuple[int, bytes]:  # noqa: N802
        return self.cudaError_t.cudaSuccess, b"out of memory"
