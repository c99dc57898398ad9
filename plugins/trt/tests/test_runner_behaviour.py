"""TrtRunner, the calibrator and the engine loader against small test doubles of TensorRT and CUDA.

These doubles are NOT TensorRT: they model only the documented behaviour that the tests need, taken from
TensorRT's binding sources (NVIDIA/TensorRT, cited by file, tag and line next to each behaviour), and they call
Parity's callback objects the way the bindings do (plain-int addresses, TensorLocation members, exceptions
swallowed and logged). The CUDA double keeps "device" memory in host buffers, so the runner's copies run here.
"""

from __future__ import annotations

import ctypes
import enum
import sys
import types
from typing import Any

import numpy as np
import pytest
from parity_trt import cuda

from parity.errors import BackendError, UsageError

# ---- CUDA double: cuda-python's runtime module, with "device" memory in host buffers ------------------------


class FakeCudart:
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


# ---- TensorRT double ----------------------------------------------------------------------------------------


def trampoline(obj: Any, method: str, *args: Any, default: Any = None) -> Any:
    """How pyCore.cpp / pyInt8.cpp call a Python override: any exception is caught, printed to stderr, and the
    default returned (pyCore.cpp@v10.7.0:L718-725 PyDebugListener, L574-583 reallocateOutputAsync returns
    nullptr, L594-601 notifyShape; pyInt8.cpp@v10.7.0:L68-76 getBatch returns false)."""
    try:
        return getattr(obj, method)(*args)
    except Exception as exc:  # noqa: BLE001 - modelling TensorRT's catch (std::exception const&)
        print(f"[ERROR] Exception caught in {method}(): {exc}", file=sys.stderr)
        return default


class TensorIOMode(enum.Enum):
    INPUT = 1
    OUTPUT = 2


class TensorLocation(enum.Enum):  # pyCore.cpp@v10.7.0:L1215-1217: members DEVICE and HOST
    DEVICE = 0
    HOST = 1


class DataType(enum.Enum):
    FLOAT = 0
    INT32 = 3
    INT64 = 8


class _Interface:
    def __init__(self) -> None:
        pass


def make_trt() -> types.ModuleType:
    trt = types.ModuleType("tensorrt")
    trt.__version__ = "10.7.0"
    trt.TensorIOMode, trt.TensorLocation, trt.DataType = TensorIOMode, TensorLocation, DataType
    trt.IDebugListener = type("IDebugListener", (_Interface,), {})
    trt.IOutputAllocator = type("IOutputAllocator", (_Interface,), {})
    trt.IInt8EntropyCalibrator2 = type("IInt8EntropyCalibrator2", (_Interface,), {})
    return trt


class Engine:
    """y = reshape(x, values of shape tensor s), plus debug tensors h = 2x (device) and s (host).

    With ``data_dependent`` the output y's shape is unknown until enqueue and comes through the output allocator.
    """

    def __init__(self, fake_cuda: FakeCudart, data_dependent: bool = False) -> None:
        self.fake_cuda = fake_cuda
        self.data_dependent = data_dependent
        self.io = {  # name: (mode, dtype, shape, shape-inference IO)
            "x": (TensorIOMode.INPUT, DataType.FLOAT, (-1, 4), False),
            "s": (TensorIOMode.INPUT, DataType.INT64, (2,), True),
            "y": (TensorIOMode.OUTPUT, DataType.FLOAT, (-1, -1), False),
        }
        # profile 0 admits x [1..2, 4] and s values [1,4]..[2,4]; profile 1 x [1..4, 4] and s [1,1]..[16,16]
        self.shape_profiles = [((1, 4), (2, 4), (2, 4)), ((1, 4), (2, 4), (4, 4))]
        self.value_profiles = [([1, 4], [2, 4], [2, 4]), ([1, 1], [4, 2], [16, 16])]

    num_io_tensors = 3

    @property
    def num_optimization_profiles(self) -> int:
        return len(self.shape_profiles)

    def get_tensor_name(self, i: int) -> str:
        return list(self.io)[i]

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        return self.io[name][0]

    def get_tensor_dtype(self, name: str) -> DataType:
        return self.io[name][1]

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        return self.io[name][2]

    def is_shape_inference_io(self, name: str) -> bool:
        return self.io[name][3]

    def get_tensor_location(self, name: str) -> TensorLocation:
        return TensorLocation.HOST if self.io[name][3] else TensorLocation.DEVICE

    def get_tensor_profile_shape(self, name: str, profile_index: int) -> list[tuple[int, ...]]:
        if self.io[name][3]:
            return [self.io[name][2]] * 3
        return list(self.shape_profiles[profile_index])

    def get_tensor_profile_values(self, name: Any, profile_index: Any) -> list[list[int]]:
        # pyCore.cpp@v10.7.0:L1333 binds the lambda (ICudaEngine&, int32_t profileIndex, std::string tensorName)
        # of L193-194 under the names ("name", "profile_index"): the first positional argument is the profile
        # index (the signature manifest shows name: int, profile_index: str); pybind11 refuses other types.
        index, tensor = name, profile_index
        if not isinstance(index, int) or not isinstance(tensor, str):
            raise TypeError("get_tensor_profile_values(): incompatible function arguments")
        # L197-198: only input shape tensors
        if not (self.io[tensor][3] and self.io[tensor][0] == TensorIOMode.INPUT):
            raise RuntimeError("Binding index does not correspond to an input shape tensor.")
        return [list(v) for v in self.value_profiles[index]]

    def create_execution_context(self) -> Context:
        return Context(self)


class Context:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.profile = 0
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.addresses: dict[str, int] = {}
        self.allocators: dict[str, Any] = {}
        self.listener: Any = None
        self.debug_all = False
        self.errors: list[str] = []

    def set_optimization_profile_async(self, index: int, stream: int) -> bool:
        self.profile = index
        return True

    def set_input_shape(self, name: str, shape: tuple[int, ...]) -> bool:
        if self.engine.io[name][3]:
            ok = tuple(shape) == self.engine.io[name][2]
        else:
            lo, _, hi = self.engine.shape_profiles[self.profile]
            ok = len(shape) == len(lo) and all(a <= s <= b for s, a, b in zip(shape, lo, hi))
        if ok:
            self.shapes[name] = tuple(shape)
        return ok

    def set_tensor_address(self, name: str, ptr: int) -> bool:
        self.addresses[name] = int(ptr)
        return True

    def _shape_values(self) -> list[int] | None:
        """The values of shape tensor s, read from host memory as TensorRT does: NvInferRuntime.h@v10.7.0:L4446-4448
        (a kHOST tensor's pointer must point to a host buffer). A "device" pointer is refused here."""
        ptr = self.addresses.get("s")
        if ptr is None or ptr in self.engine.fake_cuda.device:
            return None
        return [int(v) for v in np.ctypeslib.as_array((ctypes.c_int64 * 2).from_address(ptr))]

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        if name == "y":
            values = self._shape_values()
            if values is None or self.engine.data_dependent:
                return (-1, -1)
            return tuple(values)
        return self.shapes.get(name, self.engine.io[name][2])

    def set_output_allocator(self, name: str, allocator: Any) -> bool:
        self.allocators[name] = allocator
        return True

    def set_debug_listener(self, listener: Any) -> bool:
        self.listener = listener
        return True

    def set_all_tensors_debug_state(self, flag: bool) -> bool:
        self.debug_all = flag
        return True

    def execute_async_v3(self, stream_handle: int) -> bool:
        self.engine.fake_cuda.enqueueing = True
        try:
            return self._execute(stream_handle)
        finally:
            self.engine.fake_cuda.enqueueing = False

    def _execute(self, stream_handle: int) -> bool:
        values = self._shape_values()
        if values is None:
            self.errors.append("shape tensor 's' is not in host memory")
            return False
        lo, _, hi = self.engine.value_profiles[self.profile]
        if not all(a <= v <= b for v, a, b in zip(values, lo, hi)):
            self.errors.append(f"values of 's' {values} are outside profile {self.profile}")
            return False
        n = int(np.prod(self.shapes["x"]))
        x = np.ctypeslib.as_array((ctypes.c_float * n).from_address(self.addresses["x"])).copy()
        y = x.reshape(values)
        if self.listener is not None and self.debug_all:
            # a device tensor that lives only during the callback (NvInferRuntime.h@v10.7.0:L3983-3984)
            _, scratch = self.engine.fake_cuda._alloc(self.engine.fake_cuda.device, x.nbytes)
            ctypes.memmove(scratch, (x * 2).ctypes.data, x.nbytes)
            # pyCore.cpp@v10.7.0:L716: pyFunc(reinterpret_cast<size_t>(addr), location, type, shape, name,
            # reinterpret_cast<size_t>(stream)): addr and stream are plain ints
            trampoline(self.listener, "process_debug_tensor", scratch, TensorLocation.DEVICE, DataType.FLOAT,
                       self.shapes["x"], "h", int(stream_handle))
            ctypes.memset(scratch, 0, x.nbytes)
            self.engine.fake_cuda.cudaFree(scratch)
            host_s = np.array(values, dtype=np.int64)
            trampoline(self.listener, "process_debug_tensor", host_s.ctypes.data, TensorLocation.HOST, DataType.INT64,
                       (2,), "s_debug", int(stream_handle))
        if "y" in self.allocators:
            allocator = self.allocators["y"]
            # pyCore.cpp@v10.7.0:L563-565: reallocate_output_async(name, int(currentMemory), size, alignment,
            # int(stream)); an exception gives nullptr (L574-583), and enqueue fails without memory
            ptr = trampoline(allocator, "reallocate_output_async", "y", 0, y.nbytes, 256, int(stream_handle), default=None)
            if not ptr:
                self.errors.append("output allocator returned nullptr")
                return False
            trampoline(allocator, "notify_shape", "y", tuple(y.shape))  # pyCore.cpp@v10.7.0:L592
        else:
            ptr = self.addresses["y"]
        ctypes.memmove(int(ptr), np.ascontiguousarray(y).ctypes.data, y.nbytes)
        return True


# ---- fixtures -----------------------------------------------------------------------------------------------


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> FakeCudart:
    fake = FakeCudart()
    monkeypatch.setattr(cuda, "runtime", lambda: fake)
    return fake


@pytest.fixture
def trt(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    import parity_trt._trt
    import parity_trt.calibrator
    import parity_trt.runner

    module = make_trt()
    for mod in (parity_trt.runner, parity_trt.calibrator):
        monkeypatch.setattr(mod, "import_trt", lambda: module)
    monkeypatch.setitem(sys.modules, "tensorrt", module)
    return module


def run(engine: Engine, feed: dict[str, np.ndarray], **kwargs: Any) -> dict[str, np.ndarray]:
    from parity_trt.runner import TrtRunner

    with TrtRunner(engine, **kwargs) as runner:
        return runner.infer(feed)


FEED = {"x": np.arange(8, dtype=np.float32).reshape(2, 4), "s": np.array([4, 2], dtype=np.int64)}


# ---- item 3: shape-tensor inputs ----------------------------------------------------------------------------


def test_shape_tensor_profile_ranges_are_values(trt, fake_cuda):
    from parity_trt.runner import TrtRunner

    with TrtRunner(Engine(fake_cuda)) as runner:
        ranges = runner.profile_ranges(1)
    assert ranges["s"] == ((1, 1), (4, 2), (16, 16))
    assert ranges["x"] == ((1, 4), (2, 4), (4, 4))


def test_shape_tensor_input_is_bound_in_host_memory_and_picks_its_profile(trt, fake_cuda):
    out = run(Engine(fake_cuda), FEED, capture_debug=False)
    assert list(out) == ["y"]
    np.testing.assert_array_equal(out["y"], FEED["x"].reshape(4, 2))


def test_shape_tensor_values_outside_every_profile_are_refused(trt, fake_cuda):
    feed = {**FEED, "s": np.array([32, 1], dtype=np.int64), "x": np.zeros((4, 8), np.float32)[:, :4].copy()}
    with pytest.raises(UsageError, match=r"s:values \[32, 1\] fit no optimization profile.*s values \[1, 1\]\.\.\[16, 16\]\)$"):
        run(Engine(fake_cuda), feed, capture_debug=False)


# ---- item 1: debug tensors ----------------------------------------------------------------------------------


def test_debug_tensors_arrive_from_device_and_host(trt, fake_cuda, monkeypatch):
    copies = []
    real_copy = cuda.memcpy_device_to_host

    def spy(host, ptr, stream=None):  # the CUDA layer's copy, used for device tensors only
        copies.append(ptr)
        return real_copy(host, ptr, stream)

    monkeypatch.setattr(cuda, "memcpy_device_to_host", spy)
    out = run(Engine(fake_cuda), FEED)
    np.testing.assert_array_equal(out["h"], FEED["x"] * 2)  # copied before the scratch buffer was cleared
    np.testing.assert_array_equal(out["s_debug"], [4, 2])
    assert len(copies) == 1  # the host tensor was read directly, not through cudaMemcpy


# ---- item 5: exceptions in callbacks ------------------------------------------------------------------------


def test_debug_listener_exception_resurfaces_after_inference(trt, fake_cuda, monkeypatch, capsys):
    def broken(host, ptr, stream=None):
        raise cuda.CudaError("CUDA error in cudaMemcpyAsync: cudaErrorIllegalAddress (an illegal memory access)")

    monkeypatch.setattr(cuda, "memcpy_device_to_host", broken)
    with pytest.raises(cuda.CudaError, match=r"^CUDA error in cudaMemcpyAsync: cudaErrorIllegalAddress"):
        run(Engine(fake_cuda), FEED)


def test_output_allocator_exception_resurfaces_instead_of_a_generic_failure(trt, fake_cuda):
    fake_cuda.fail_in_enqueue = True  # the allocator's cudaMalloc fails
    with pytest.raises(cuda.CudaError, match=r"^CUDA error in cudaMalloc\(\d+ bytes\): cudaErrorMemoryAllocation"):
        run(Engine(fake_cuda, data_dependent=True), FEED, capture_debug=False)


def test_output_allocator_serves_data_dependent_output(trt, fake_cuda):
    out = run(Engine(fake_cuda, data_dependent=True), FEED, capture_debug=False)
    np.testing.assert_array_equal(out["y"], FEED["x"].reshape(4, 2))


def test_non_parity_exception_becomes_one_line_backend_error(trt, fake_cuda, monkeypatch):
    def broken(host, ptr, stream=None):
        raise ValueError("bad\npointer")

    monkeypatch.setattr(cuda, "memcpy_device_to_host", broken)
    with pytest.raises(BackendError, match=r"^the debug listener \(process_debug_tensor\) raised ValueError: bad pointer$"):
        run(Engine(fake_cuda), FEED)


# ---- items 5 and 6: the calibrator during a build -----------------------------------------------------------


class NetworkInput:
    def __init__(self, name: str, dtype: DataType, shape: tuple[int, ...]) -> None:
        self.name, self.dtype, self.shape = name, dtype, shape


class Network:
    def __init__(self) -> None:
        self.inputs = [NetworkInput("x", DataType.FLOAT, (-1, 4))]

    @property
    def num_inputs(self) -> int:
        return len(self.inputs)

    def get_input(self, i: int) -> NetworkInput:
        return self.inputs[i]


class Builder:
    def build_serialized_network(self, network: Network, config: Any) -> bytes | None:
        calibrator = config.int8_calibrator
        # pyInt8.cpp@v10.7.0:L58-66: get_batch(list of names); a None/empty result ends calibration; an
        # exception is logged and false returned (L68-76), and the build goes on with the batches it had
        while trampoline(calibrator, "get_batch", ["x"], default=None):
            pass
        return b"engine"


def build_with(data: list[dict[str, np.ndarray]]) -> bytes:
    from parity_trt.calibrator import Calibrator
    from parity_trt.engine import EngineBytesFromNetwork

    calibrator = Calibrator(data)
    config = types.SimpleNamespace(int8_calibrator=calibrator)
    return EngineBytesFromNetwork((Builder(), Network(), None), config=lambda builder, network: config)()


@pytest.mark.parametrize(("array", "message"), [
    (np.zeros((2, 4), np.float64), r"^calibration data for input 'x' has dtype float64, but the network expects float32$"),
    (np.zeros((2, 5), np.float32), r"^calibration data for input 'x' has shape \[2, 5\], but the network expects \['\?', 4\]$"),
])
def test_calibration_data_is_checked_before_the_device(trt, fake_cuda, array, message):
    with pytest.raises(UsageError, match=message):
        build_with([{"x": np.zeros((2, 4), np.float32)}, {"x": array}])
    assert max(fake_cuda.mallocs) == 32  # the good first feed only: the bad one never reached the device


def test_calibration_get_batch_exception_resurfaces_after_the_build(trt, fake_cuda):
    with pytest.raises(UsageError, match=r"^calibration data has no input 'x' \(it has y\)$"):
        build_with([{"y": np.zeros((2, 4), np.float32)}])


# ---- the same debug-tensor path on a real GPU (real CUDA layer; TensorRT's call modelled as above) ----------


@pytest.mark.gpu
def test_debug_listener_copies_a_real_device_tensor(trt):
    """What TensorRT does for a device debug tensor, with real device memory and a real stream: call
    process_debug_tensor with the address and stream as plain ints (pyCore.cpp@v10.7.0, PyDebugListener)."""
    from parity_trt.callbacks import raise_pending
    from parity_trt.runner import _make_debug_listener

    sink: dict[str, np.ndarray] = {}
    listener = _make_debug_listener(trt, sink)
    values = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5
    stream = cuda.Stream()
    with cuda.DeviceArray() as device:
        device.copy_from(values, stream)
        stream.synchronize()
        listener.process_debug_tensor(int(device.ptr), trt.TensorLocation.DEVICE, trt.DataType.FLOAT, (3, 4), "h", stream.ptr)
    raise_pending(listener)
    np.testing.assert_array_equal(sink["h"], values)
