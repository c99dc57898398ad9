"""The TensorRT model's memory seam over real CUDA (cuda-python), for runs on a GPU: engines of the model read their
inputs from, and write their outputs to, real device memory, so Parity's CUDA layer is exercised for real.
``host_cuda.HostCudart`` is the same seam in CI, with "device" memory in host buffers."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np


class CudaMemory:
    def __init__(self, cudart: Any) -> None:
        self.cudart = cudart
        self.enqueueing = False  # set by the model while an enqueue runs (callbacks happen then)
        self.device_copies = 0  # copies to or from real device memory (a test checks the GPU was used)

    def _check(self, result: Any) -> Any:
        err, *values = result if isinstance(result, tuple) else (result,)
        if err != self.cudart.cudaError_t.cudaSuccess:
            raise RuntimeError(f"CUDA error {err}")
        return values[0] if len(values) == 1 else values

    def is_device(self, ptr: int) -> bool:
        err, attributes = self.cudart.cudaPointerGetAttributes(int(ptr))
        return err == self.cudart.cudaError_t.cudaSuccess and attributes.type == self.cudart.cudaMemoryType.cudaMemoryTypeDevice

    def alloc_device(self, size: int) -> int:
        return int(self._check(self.cudart.cudaMalloc(int(size))))

    def free_device(self, ptr: int) -> None:
        self._check(self.cudart.cudaFree(int(ptr)))

    def read(self, ptr: int, nbytes: int) -> bytes:
        if not self.is_device(ptr):
            return ctypes.string_at(int(ptr), int(nbytes))
        self.device_copies += 1
        host = np.empty(int(nbytes), np.uint8)
        self._check(self.cudart.cudaMemcpy(host.ctypes.data, int(ptr), int(nbytes), self.cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost))
        return host.tobytes()

    def write(self, ptr: int, data: bytes) -> None:
        if not self.is_device(ptr):
            ctypes.memmove(int(ptr), data, len(data))
            return
        self.device_copies += 1
        host = np.frombuffer(data, np.uint8)
        self._check(self.cudart.cudaMemcpy(int(ptr), host.ctypes.data, len(data), self.cudart.cudaMemcpyKind.cudaMemcpyHostToDevice))
