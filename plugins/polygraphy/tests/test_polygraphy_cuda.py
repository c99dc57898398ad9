"""parity_polygraphy.cuda (DeviceArray, DeviceView, Stream, wrapper) and the TrtRunner helper _get_array_on_cpu,
run on Parity's behavioural model of cuda-python (plugins/trt/tests/trt_model's HostCudart, NOT CUDA: "device"
memory is host memory), then on real CUDA where cuda-python and a GPU are present (skipped otherwise)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trt" / "tests"))  # trt_model lives with parity-trt's tests
from parity_polygraphy import cuda  # noqa: E402
from parity_polygraphy.backend.trt.runner import _get_array_on_cpu  # noqa: E402
from parity_polygraphy.datatype import DataType  # noqa: E402
from parity_polygraphy.exception import PolygraphyException  # noqa: E402
from trt_model.install import REAL, install, uninstall  # noqa: E402
from trt_model.manifest import versions  # noqa: E402


@pytest.fixture(params=["model", "cuda"])
def memory(request, monkeypatch):
    """The modelled cuda-python (its HostCudart, to inspect), or None on real CUDA."""
    if request.param == "cuda":
        runtime = pytest.importorskip("cuda.bindings.runtime")
        if runtime.cudaGetDeviceCount()[1] == 0:
            pytest.skip("no GPU")
        install(monkeypatch, REAL)  # skips without TensorRT too: the layer under us is parity_trt's
        yield None
    else:
        install(monkeypatch, versions()[-1], memory="host")
        yield sys.modules["cuda.bindings.runtime"]
    uninstall()


def test_round_trip_numpy_with_and_without_stream(memory):
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    with cuda.DeviceArray(shape=data.shape, dtype=data.dtype) as arr, cuda.Stream() as stream:
        assert arr.nbytes == arr.allocated_nbytes == data.nbytes
        assert arr.dtype == np.float32 and isinstance(arr.dtype, np.dtype)  # NumPy dtype, as Polygraphy gives
        arr.copy_from(data, stream)
        out = np.zeros_like(data)
        arr.copy_to(out, stream)
        stream.synchronize()
        np.testing.assert_array_equal(out, data)
        np.testing.assert_array_equal(arr.numpy(), data)
        if memory is not None:  # the bytes really live in a "device" allocation of the modelled runtime
            assert memory.is_device(arr.ptr)
    assert arr.ptr == 0 and arr.allocated_nbytes == 0 and arr.shape == ()


def test_round_trip_torch(memory):
    torch = pytest.importorskip("torch")
    with cuda.DeviceArray((2, 2), dtype=DataType.FLOAT32) as arr:
        arr.copy_from(torch.full((2, 2), 4.0))
        host = torch.zeros((2, 2))
        assert arr.copy_to(host) is host
        assert bool((host == 4).all())


def test_resize_reallocates_only_to_grow(memory):
    with cuda.DeviceArray((2, 2, 2)) as arr:  # float32 by default
        first = arr.ptr
        arr.resize((1, 1))
        assert (arr.ptr, arr.allocated_nbytes, arr.shape, arr.nbytes) == (first, 32, (1, 1), 4)
        arr.resize((9, 9))
        assert arr.allocated_nbytes == 81 * 4 and arr.shape == (9, 9)
        if memory is not None:
            assert memory.mallocs[-2:] == [32, 324]
            assert not memory.is_device(first)  # the smaller allocation was freed
    assert cuda.DeviceArray.raw((5,)).nbytes == 5


def test_wrong_host_buffers_are_refused(memory):
    with cuda.DeviceArray((4,), dtype=np.float32) as arr:
        with pytest.raises(PolygraphyException, match="larger than device buffer"):
            arr.copy_from(np.zeros(8, dtype=np.float32))
        with pytest.raises(PolygraphyException, match="smaller than device buffer"):
            arr.copy_to(np.zeros(2, dtype=np.float32))
        with pytest.raises(PolygraphyException, match="not contiguous"):
            arr.copy_from(np.zeros((4, 2), dtype=np.float32)[:, 0])
        with pytest.raises(PolygraphyException, match="cannot exceed"):
            arr.view(shape=(8,))


def test_views_read_the_same_memory(memory):
    data = np.arange(6, dtype=np.int32)
    with cuda.DeviceArray(data.shape, dtype=np.int32) as arr:
        arr.copy_from(data)
        view = arr.view(shape=(2, 3))
        assert view.ptr == arr.ptr and view.shape == (2, 3)
        np.testing.assert_array_equal(view.numpy(), data.reshape(2, 3))
        same = cuda.DeviceView(arr.ptr, arr.shape, arr.dtype)
        assert same.nbytes == arr.nbytes and same.dtype == arr.dtype
        assert str(same).startswith("DeviceView[(dtype=int32, shape=(6,))")


def test_empty_arrays_copy_nothing(memory):
    with cuda.DeviceArray((5, 0, 3), dtype=np.float32) as arr:
        host = np.empty((5, 0, 3), dtype=np.float32)
        assert arr.copy_to(host) is host and arr.copy_from(host) is arr


def test_cuda_errors_are_one_line_polygraphy_exceptions(memory):
    if memory is None:
        pytest.skip("needs the modelled runtime to make cudaMalloc fail")
    memory.fail_in_enqueue = memory.enqueueing = True  # HostCudart's switch: cudaMalloc fails
    with pytest.raises(PolygraphyException, match=r"^CUDA error in cudaMalloc: cudaErrorMemoryAllocation") as info:
        cuda.DeviceArray((4,))
    assert "\n" not in str(info.value)


def test_memcpy_through_the_wrapper(memory):
    data = np.arange(4, dtype=np.float32)
    out = np.zeros_like(data)
    with cuda.DeviceArray((4,)) as arr:
        cuda.wrapper().memcpy(arr.ptr, data.ctypes.data, data.nbytes, cuda.MemcpyKind.HostToDevice)
        cuda.wrapper().memcpy(out.ctypes.data, arr.ptr, data.nbytes, cuda.MemcpyKind.DeviceToHost)
    np.testing.assert_array_equal(out, data)
    assert cuda.wrapper() is cuda.wrapper()


@pytest.mark.parametrize("use_torch", [False, True])
def test_get_array_on_cpu_reuses_the_host_buffer(memory, use_torch):
    if use_torch:
        pytest.importorskip("torch")
    data = np.arange(4, dtype=np.float32)
    host_buffers: dict = {}
    with cuda.DeviceArray((4,)) as arr, cuda.Stream() as stream:
        arr.copy_from(data)
        raw = _get_array_on_cpu(arr, "x", host_buffers, stream, arr.nbytes, use_torch)
        assert type(raw).__module__.split(".")[0] == ("torch" if use_torch else "numpy")
        np.testing.assert_array_equal(np.asarray(raw).view(np.float32), data)
        again = _get_array_on_cpu(arr, "x", host_buffers, stream, 8, use_torch)  # fewer bytes: same memory
        assert np.asarray(again).ctypes.data == np.asarray(raw).ctypes.data and again.shape == (8,)
        np.testing.assert_array_equal(np.asarray(again).view(np.float32), data[:2])
