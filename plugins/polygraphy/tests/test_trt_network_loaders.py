"""parity_polygraphy.backend.trt's network modifiers (PostprocessNetwork, SetLayerPrecisions, SetTensorDatatypes,
SetTensorFormats, ModifyNetworkOutputs), NetworkFromOnnxPath, EngineFromPath, BytesFromEngine/BufferFromEngine,
LoadPlugins and Calibrator, run against Parity's behavioural model of TensorRT (plugins/trt/tests/trt_model, NOT
TensorRT) for each modelled version, then the real TensorRT where it imports (skipped otherwise)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trt" / "tests"))  # trt_model lives with parity-trt's tests
from parity_polygraphy import constants, cuda  # noqa: E402
from parity_polygraphy.backend.trt import (  # noqa: E402
    Calibrator,
    CreateConfig,
    NetworkFromOnnxBytes,
    SaveEngine,
    TrtRunner,
    buffer_from_engine,
    bytes_from_engine,
    engine_from_network,
    engine_from_path,
    load_plugins,
    modify_network_outputs,
    network_from_onnx_path,
    onnx_like_from_network,
    postprocess_network,
    set_layer_precisions,
    set_tensor_datatypes,
    set_tensor_formats,
)
from parity_polygraphy.comparator import DataLoader  # noqa: E402
from parity_polygraphy.exception import PolygraphyException  # noqa: E402
from trt_model import fixtures  # noqa: E402

trt_backend = fixtures.trt_backend  # each modelled TensorRT version, then the real one


def _relu_neg() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"], name="relu"), helper.make_node("Neg", ["a"], ["y"], name="neg")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


@pytest.fixture
def network_loader(trt_backend):
    return NetworkFromOnnxBytes(_relu_neg().SerializeToString())


def _outputs(network) -> list[str]:
    return [network.get_output(i).name for i in range(network.num_outputs)]


def test_set_tensor_formats_sets_the_format_mask(trt_backend, network_loader):
    trt = trt_backend
    formats = [trt.TensorFormat.LINEAR, trt.TensorFormat.CHW4]
    _, network, _ = set_tensor_formats(network_loader, {"x": formats, "y": [trt.TensorFormat.HWC8]})
    assert network.get_input(0).allowed_formats == 1 << int(formats[0]) | 1 << int(formats[1])
    assert network.get_output(0).allowed_formats == 1 << int(trt.TensorFormat.HWC8)


def test_set_layer_precisions_and_datatypes(trt_backend, network_loader):
    trt = trt_backend
    _, network, _ = network_loader()
    names = [network.get_layer(i).name for i in range(network.num_layers)]
    _, network, _ = set_layer_precisions(network_loader, {names[0]: trt.float16})
    assert network.get_layer(0).precision == trt.float16
    try:
        _, network, _ = set_tensor_datatypes(network_loader, {"y": trt.float16})
    except PolygraphyException as exc:  # only where TensorRT has no ITensor.dtype setter (11: strongly typed)
        assert "cannot set the data type of tensor y" in str(exc)
        assert not isinstance(getattr(trt.ITensor, "dtype", None), property) or trt.ITensor.dtype.fset is None
    else:
        assert network.get_output(0).dtype == trt.float16


def test_unknown_names_are_refused_not_skipped(trt_backend, network_loader):
    with pytest.raises(PolygraphyException, match="no layer named nope"):
        set_layer_precisions(network_loader, {"nope": trt_backend.float16})
    with pytest.raises(PolygraphyException, match="no tensor named nope"):
        set_tensor_formats(network_loader, {"nope": []})
    with pytest.raises(PolygraphyException, match="no tensor named nope"):
        modify_network_outputs(network_loader, ["nope"])


def test_postprocess_network_calls_the_function_with_the_network(trt_backend, network_loader):
    seen = []
    _, network, _ = postprocess_network(network_loader, lambda **kwargs: seen.append(kwargs["network"]))
    assert seen == [network]
    with pytest.raises(PolygraphyException, match="Object None is not a callable"):
        postprocess_network(network_loader, None)


def test_modify_network_outputs(trt_backend, network_loader):
    _, network, _ = modify_network_outputs(network_loader, constants.MARK_ALL)
    assert sorted(_outputs(network)) == ["a", "y"]
    _, network, _ = modify_network_outputs(network_loader, constants.MARK_ALL, exclude_outputs=["y"])
    assert _outputs(network) == ["a"]
    _, network, _ = modify_network_outputs(network_loader, ["a"])
    assert _outputs(network) == ["a"]


def test_network_from_onnx_path_and_engine_round_trip_through_a_file(trt_backend, tmp_path):
    model_path = tmp_path / "model.onnx"
    onnx.save(_relu_neg(), model_path)
    _, network, _ = network_from_onnx_path(str(model_path))
    assert network.num_layers == 2 and _outputs(network) == ["y"]
    with pytest.raises(PolygraphyException, match="ONNX model does not exist"):
        network_from_onnx_path(str(tmp_path / "missing.onnx"))

    engine = engine_from_network(NetworkFromOnnxBytes(model_path.read_bytes()))
    serialized = bytes_from_engine(engine)
    assert isinstance(serialized, bytes) and serialized == bytes(buffer_from_engine(engine))
    plan = tmp_path / "model.plan"
    SaveEngine(engine, str(plan))()
    assert plan.read_bytes() == serialized
    with TrtRunner(engine_from_path(str(plan))) as runner:
        out = runner.infer({"x": np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)})["y"]
    np.testing.assert_array_equal(out, -np.maximum([[-1, 2, -3], [4, -5, 6]], 0).astype(np.float32))
    with pytest.raises(PolygraphyException, match="Could not read engine file"):
        engine_from_path(str(tmp_path / "missing.plan"))


def test_load_plugins_returns_the_object(trt_backend, tmp_path):
    assert load_plugins(obj=lambda: 42) == 42
    with pytest.raises(PolygraphyException, match="Could not load plugin library"):
        load_plugins(plugins=[str(tmp_path / "libmissing.so")])


def test_onnx_like_from_network_is_refused(trt_backend, network_loader):
    with pytest.raises(PolygraphyException, match="not supported"):
        onnx_like_from_network(network_loader)


def test_calibrator_feeds_batches_and_writes_the_cache(trt_backend, network_loader, tmp_path):
    if not hasattr(trt_backend, "IInt8EntropyCalibrator2"):
        with pytest.raises(PolygraphyException, match="Calibrator is not available on TensorRT .*int8 calibration was removed"):
            Calibrator(DataLoader(iterations=2))
        return
    cache = tmp_path / "calibration.cache"
    calibrator = Calibrator(DataLoader(iterations=3), cache=str(cache))
    engine_from_network(network_loader, config=CreateConfig(int8=True, calibrator=calibrator))
    assert calibrator.num_batches == 3
    assert cache.stat().st_size > 0
    # a second calibrator reads the cache rather than asking for data
    again = Calibrator([], cache=str(cache))
    assert again.read_calibration_cache() == cache.read_bytes()


def test_trt_runner_takes_and_returns_device_memory(trt_backend, network_loader):
    """DeviceArray/DeviceView inputs are read from device memory; copy_outputs_to_host=False gives DeviceViews."""
    data = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    expected = -np.maximum(data, 0)
    with TrtRunner(engine_from_network(network_loader)) as runner, cuda.DeviceArray(data.shape, np.float32) as arr:
        arr.copy_from(data)
        for value in (arr, arr.view()):
            np.testing.assert_array_equal(runner.infer({"x": value})["y"], expected)
        out = runner.infer({"x": data}, copy_outputs_to_host=False)["y"]
        assert isinstance(out, cuda.DeviceView) and out.shape == (2, 3)
        np.testing.assert_array_equal(out.numpy(), expected)
        assert runner.context is runner.context  # the context inferences run on
        with pytest.raises(PolygraphyException, match="return_raw_buffers"):
            runner.infer({"x": data}, return_raw_buffers=True)


def test_engine_from_network_with_a_runtime_and_a_file_like_timing_cache(trt_backend, network_loader, tmp_path):
    from parity_polygraphy.backend.trt import EngineFromNetwork, get_trt_logger

    runtime = trt_backend.Runtime(get_trt_logger())
    with open(tmp_path / "timing.cache", "w+b") as cache:
        engine = EngineFromNetwork(network_loader, save_timing_cache=cache, runtime=runtime)()
        assert isinstance(engine, trt_backend.ICudaEngine)
        size = cache.seek(0, 2)
        assert size > 0  # the build's timing cache was written into the open file
        EngineFromNetwork(network_loader, save_timing_cache=cache)()
        assert cache.seek(0, 2) >= size  # merged with what was there, not appended twice or lost
    assert sorted(p.name for p in tmp_path.iterdir()) == ["timing.cache"]  # no temporary files left
