"""TrtRunner, the calibrator and the engine loader against trt_model (a model of TensorRT's documented behaviour,
NOT TensorRT) and trt_model.host_cuda (a model of cuda-python's runtime with "device" memory in host buffers).

The model calls Parity's callback objects the way the bindings do (plain-int addresses, TensorLocation members,
exceptions swallowed and logged), each behaviour cited in trt_model/behaviour.py; the engine's arithmetic is the
test's (``reshape_program``).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from parity_trt import cuda
from trt_model.engine import Program, engine
from trt_model.host_cuda import HostCudart
from trt_model.install import install, uninstall

from parity.errors import BackendError, UsageError

# ---- the engine these tests run: y = reshape(x, values of shape tensor s) ------------------------------------


def reshape_program(data_dependent: bool = False) -> Program:
    """y = reshape(x, values of shape tensor s), plus debug tensors h = 2x (device) and s_debug (host).

    Profile 0 admits x [1..2, 4] and s values [1,4]..[2,4]; profile 1 x [1..4, 4] and s [1,1]..[16,16]. With
    ``data_dependent`` y's shape is unknown until enqueue and comes through the output allocator."""

    def compute(context: Any) -> Any:
        values = context._shape_values("s")
        x = context._read("x", np.float32)
        return {"y": x.reshape(values)}, [("h", x * 2, "DEVICE"), ("s_debug", np.array(values, np.int64), "HOST")]

    def output_shape(context: Any, name: str) -> Any:
        values = context._shape_values("s")
        return None if values is None or data_dependent else tuple(values)

    return Program(
        io={"x": ("INPUT", "FLOAT", (-1, 4), False), "s": ("INPUT", "INT64", (2,), True), "y": ("OUTPUT", "FLOAT", (-1, -1), False)},
        shape_profiles=[{"x": ((1, 4), (2, 4), (2, 4))}, {"x": ((1, 4), (2, 4), (4, 4))}],
        value_profiles=[{"s": ([1, 4], [2, 4], [2, 4])}, {"s": ([1, 1], [4, 2], [16, 16])}],
        compute=compute,
        output_shape=output_shape,
    )


def Engine(fake_cuda: HostCudart, data_dependent: bool = False) -> Any:  # noqa: N802 - reads as the engine it makes
    return engine(sys.modules["tensorrt"], reshape_program(data_dependent), fake_cuda)


# ---- fixtures -----------------------------------------------------------------------------------------------


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> HostCudart:
    fake = HostCudart()
    monkeypatch.setattr(cuda, "runtime", lambda: fake)
    return fake


@pytest.fixture
def trt(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    yield install(monkeypatch, "10.7.0")
    uninstall()


def run(engine: Any, feed: dict[str, np.ndarray], **kwargs: Any) -> dict[str, np.ndarray]:
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


def build_with(data: list[dict[str, np.ndarray]], tmp_path: Any) -> bytes:
    """An INT8 build of y = relu(x), x [N, 4], calibrated with ``data`` (the model's parser reads the ONNX file)."""
    import onnx
    from onnx import TensorProto, helper
    from parity_trt._trt import get_logger
    from parity_trt.calibrator import Calibrator
    from parity_trt.engine import EngineBytesFromNetwork

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.save(model, str(tmp_path / "relu.onnx"))
    trt = sys.modules["tensorrt"]
    get_logger.cache_clear()
    builder = trt.Builder(get_logger())
    network = builder.create_network()
    assert trt.OnnxParser(network, get_logger()).parse_from_file(str(tmp_path / "relu.onnx"))
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.INT8)
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 4), (2, 4), (2, 4))
    config.add_optimization_profile(profile)
    config.int8_calibrator = Calibrator(data)
    return EngineBytesFromNetwork((builder, network, None), config=lambda builder, network: config)()


@pytest.mark.parametrize(("array", "message"), [
    (np.zeros((2, 4), np.float64), r"^calibration data for input 'x' has dtype float64, but the network expects float32$"),
    (np.zeros((2, 5), np.float32), r"^calibration data for input 'x' has shape \[2, 5\], but the network expects \['\?', 4\]$"),
])
def test_calibration_data_is_checked_before_the_device(trt, fake_cuda, array, message, tmp_path):
    with pytest.raises(UsageError, match=message):
        build_with([{"x": np.zeros((2, 4), np.float32)}, {"x": array}], tmp_path)
    assert max(fake_cuda.mallocs) == 32  # the good first feed only: the bad one never reached the device


def test_calibration_get_batch_exception_resurfaces_after_the_build(trt, fake_cuda, tmp_path):
    with pytest.raises(UsageError, match=r"^calibration data has no input 'x' \(it has y\)$"):
        build_with([{"y": np.zeros((2, 4), np.float32)}], tmp_path)


@pytest.mark.parametrize("network_dtype", ["float16", "bfloat16", "float8_e4m3fn", "int8"])
@pytest.mark.parametrize("feed_dtype", ["network", "float32"])
def test_calibration_batches_of_non_index_inputs_are_float32(network_dtype, feed_dtype):
    """TensorRT reads calibration batches as float32 for every input that is not FLOAT/INT32/INT64/BOOL
    (trt_model/calibration.py; Polygraphy 0.53.6 backend/trt/calibrator.py set_input_metadata): feeds of the
    network's type or float32 are accepted and handed over as float32."""
    import ml_dtypes
    from parity_trt.calibrator import check_feed

    dtype = np.dtype(getattr(ml_dtypes, network_dtype, None) or network_dtype)
    values = np.array([[0.5, -1.0, 2.0]], np.float32)
    feed = values.astype(dtype if feed_dtype == "network" else np.float32)
    arrays = check_feed({"x": feed}, ["x"], {"x": (dtype, (1, 3))})
    assert arrays["x"].dtype == np.float32
    np.testing.assert_array_equal(arrays["x"], feed.astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.bool_])
def test_calibration_batches_of_index_inputs_keep_their_type(dtype):
    from parity_trt.calibrator import check_feed

    arrays = check_feed({"x": np.ones((1, 3), dtype)}, ["x"], {"x": (np.dtype(dtype), (1, 3))})
    assert arrays["x"].dtype == dtype
    with pytest.raises(UsageError, match=rf"^calibration data for input 'x' has dtype float64, but the network expects {np.dtype(dtype)}$"):
        check_feed({"x": np.ones((1, 3), np.float64)}, ["x"], {"x": (np.dtype(dtype), (1, 3))})


def test_calibration_checks_dynamic_inputs_against_the_opt_shape():
    from parity_trt.calibrator import check_feed

    expected = {"x": (np.dtype(np.float32), (-1, 4))}
    assert check_feed({"x": np.zeros((2, 4), np.float32)}, ["x"], expected, {"x": (2, 4)})["x"].shape == (2, 4)
    with pytest.raises(UsageError, match=r"has shape \[1, 4\], but TensorRT calibrates it at the calibration profile's OPT shape \[2, 4\]"):
        check_feed({"x": np.zeros((1, 4), np.float32)}, ["x"], expected, {"x": (2, 4)})
    # no OPT shape known (a config made without CreateConfig): any size in the dynamic dim
    assert check_feed({"x": np.zeros((1, 4), np.float32)}, ["x"], expected)["x"].shape == (1, 4)


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
