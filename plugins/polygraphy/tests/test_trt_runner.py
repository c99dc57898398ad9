"""parity_polygraphy.backend.trt's engine loaders, TrtRunner and util.get_all_tensors, run against Parity's behavioural
model of TensorRT (plugins/trt/tests/trt_model, NOT TensorRT: engines built and run on the host) for each modelled
version, then the real TensorRT where it imports (skipped otherwise)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trt" / "tests"))  # trt_model lives with parity-trt's tests
from parity_polygraphy.backend.onnx import GsFromOnnx  # noqa: E402
from parity_polygraphy.backend.onnxrt import OnnxrtRunner, SessionFromOnnx  # noqa: E402
from parity_polygraphy.backend.pluginref import PluginRefRunner  # noqa: E402
from parity_polygraphy.backend.trt import (  # noqa: E402
    EngineBytesFromNetwork,
    EngineFromBytes,
    EngineFromNetwork,
    NetworkFromOnnxBytes,
    TrtRunner,
    engine_from_network,
    network_from_onnx_bytes,
)
from parity_polygraphy.backend.trt.util import get_all_tensors  # noqa: E402
from parity_polygraphy.comparator import Comparator, CompareFunc  # noqa: E402
from parity_polygraphy.exception import PolygraphyException  # noqa: E402
from trt_model.fixtures import trt_backend  # noqa: E402, F401 - each modelled TensorRT version, then the real one


@pytest.fixture
def trt(trt_backend):  # noqa: F811 - the fixture, by name
    return trt_backend


def _model_bytes(op: str = "Relu", shape=(2, 3)) -> bytes:
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def test_runner_builds_and_runs_an_engine(trt):
    runner = TrtRunner(EngineFromNetwork(NetworkFromOnnxBytes(_model_bytes())), name="trt")
    assert runner.name == "trt" and not runner.is_active
    x = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    with runner:
        assert isinstance(runner.engine, trt.ICudaEngine)
        meta = runner.get_input_metadata()
        assert meta["x"].dtype == np.float32 and tuple(meta["x"].shape) == (2, 3)
        out = runner.infer({"x": x})
        assert runner.last_inference_time() is not None
        with pytest.raises(PolygraphyException, match="incompatible shape"):
            runner.infer({"x": np.ones((3, 3), dtype=np.float32)})
    assert not runner.is_active
    assert list(out) == ["y"]
    np.testing.assert_array_equal(out["y"], np.maximum(x, 0))


def test_serialized_engine_and_torch_tensors(trt):
    torch = pytest.importorskip("torch")
    data = EngineBytesFromNetwork(NetworkFromOnnxBytes(_model_bytes()))()
    assert isinstance(data, bytes)
    x = torch.tensor([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]])
    with TrtRunner(EngineFromBytes(data)) as runner:
        out = runner.infer({"x": x})
    assert isinstance(out["y"], torch.Tensor)
    assert torch.equal(out["y"], torch.relu(x))


def test_debug_tensor_comes_back_as_an_extra_output(trt):
    builder, network, parser = network_from_onnx_bytes(_model_bytes())
    tensors = get_all_tensors(network)
    assert set(tensors) == {"x", "y"}
    if not hasattr(network, "mark_debug"):
        pytest.skip(f"TensorRT {trt.__version__} has no debug tensors")
    network.mark_debug(tensors["x"])
    x = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    with TrtRunner(engine_from_network((builder, network, parser))) as runner:
        out = runner.infer({"x": x})
    assert list(out) == ["y", "x"]
    np.testing.assert_array_equal(out["x"], x)


def test_trt_pluginref_and_onnxruntime_agree_in_the_comparator(trt):
    data = _model_bytes("Identity", (1, 1, 2, 2))
    runners = [OnnxrtRunner(SessionFromOnnx(data)), PluginRefRunner(GsFromOnnx(onnx.load_from_string(data))),
               TrtRunner(EngineFromNetwork(NetworkFromOnnxBytes(data)))]
    results = Comparator.run(runners)
    assert len(results) == 3
    assert bool(Comparator.compare_accuracy(results, compare_func=CompareFunc.simple(check_shapes=True)))


@pytest.mark.parametrize("option", [{"allocation_strategy": "runtime"}, {"weight_streaming_budget": 0},
                                    {"weight_streaming_percent": 50.0}, {"debug_listener": object()}])
def test_options_it_cannot_honour_are_refused(trt, option):
    runner = TrtRunner(EngineFromNetwork(NetworkFromOnnxBytes(_model_bytes())), **option)
    with pytest.raises(PolygraphyException, match="does not support"):
        runner.activate()
    assert not runner.is_active


def test_raw_buffers_are_refused_and_bad_engine_bytes_are_polygraphy_errors(trt):
    # (copy_outputs_to_host=False gives DeviceViews now: test_trt_network_loaders.py tests it)
    with TrtRunner(EngineFromNetwork(NetworkFromOnnxBytes(_model_bytes()))) as runner, pytest.raises(PolygraphyException, match="return_raw_buffers"):
        runner.infer({"x": np.ones((2, 3), dtype=np.float32)}, return_raw_buffers=True)
    with pytest.raises(PolygraphyException, match="could not deserialize"):
        EngineFromBytes(b"not an engine")()
