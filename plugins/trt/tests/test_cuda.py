"""The CUDA layer. GPU tests are marked ``gpu`` (CI skips them): python -m pytest -m gpu plugins/trt -q"""

from __future__ import annotations

import numpy as np
import pytest

cuda_bindings = pytest.importorskip("cuda.bindings")

from parity_trt import cuda  # noqa: E402

gpu = pytest.mark.gpu


@pytest.mark.skipif(cuda.device_count() > 0, reason="checks the error path on a machine without a usable GPU")
def test_no_gpu_gives_one_line_cuda_error():
    with pytest.raises(cuda.CudaError, match=r"^CUDA error in cudaMalloc\(64 bytes\): cudaError\w+ \(.+\)$"):
        cuda.DeviceArray((16,), np.float32)


@gpu
def test_round_trip_sync_and_async():
    data = np.arange(1000, dtype=np.float32).reshape(10, 100)
    with cuda.DeviceArray() as device:
        device.copy_from(data)
        assert np.array_equal(device.numpy(), data)
        stream = cuda.Stream()
        try:
            doubled = data * 2
            device.copy_from(doubled, stream)
            assert np.array_equal(device.numpy(stream), doubled)
        finally:
            stream.free()


@gpu
def test_buffers_are_reused_and_grow_geometrically():
    device = cuda.DeviceArray((100,), np.float32)
    try:
        first, size = device.ptr, device.nbytes
        device.resize((50,))
        assert device.ptr == first and device.nbytes == size  # smaller: same memory
        device.resize((101,))
        assert device.nbytes >= 2 * size  # grown x2, so the next small growth reuses it
        grown = device.ptr
        device.resize((150,))
        assert device.ptr == grown
    finally:
        device.free()
    assert device.ptr == 0


@gpu
def test_pinned_buffer_async_device_to_host():
    data = np.random.RandomState(0).rand(4, 256).astype(np.float16)
    stream = cuda.Stream()
    pinned = cuda.PinnedBuffer()
    device = cuda.DeviceArray()
    try:
        device.copy_from(data, stream)
        host = pinned.view(data.shape, data.dtype)
        device.copy_to(host, stream)
        stream.synchronize()
        assert np.array_equal(host, data)
        with pytest.raises(Exception, match="cannot hold"):
            device.copy_to(np.empty(3, np.float16), stream)
    finally:
        device.free()
        pinned.free()
        stream.free()


@gpu
def test_events_time_work_on_a_stream():
    stream = cuda.Stream()
    start, end = cuda.Event(), cuda.Event()
    big = np.ones(1 << 22, dtype=np.float32)
    device = cuda.DeviceArray()
    try:
        start.record(stream)
        device.copy_from(big, stream)
        end.record(stream)
        end.synchronize()
        assert end.elapsed_ms(start) > 0.0
    finally:
        device.free()
        start.free()
        end.free()
        stream.free()


@gpu
def test_out_of_memory_is_a_cuda_error():
    with pytest.raises(cuda.CudaError, match="cudaMalloc.*cudaErrorMemoryAllocation"):
        cuda.DeviceArray().allocate(1 << 50)  # 1 PiB


@gpu
def test_raw_pointer_copy_and_wrapped_stream_is_not_freed():
    data = np.arange(64, dtype=np.int32)
    stream = cuda.Stream()
    device = cuda.DeviceArray()
    try:
        device.copy_from(data, stream)
        wrapped = cuda.Stream.wrap(stream.ptr)
        out = cuda.memcpy_device_to_host(np.empty_like(data), device.ptr, wrapped)
        wrapped.free()  # not owned: must not destroy the real stream
        stream.synchronize()
        assert np.array_equal(out, data)
    finally:
        device.free()
        stream.free()
