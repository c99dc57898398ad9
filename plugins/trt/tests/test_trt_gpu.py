"""TensorRT end to end. Runs wherever tensorrt imports and a GPU is present (skipped here, never faked):
python -m pytest -m gpu plugins/trt -q"""

from __future__ import annotations

import numpy as np
import pytest

trt = pytest.importorskip("tensorrt")
pytest.importorskip("cuda.bindings")

from parity_trt import (  # noqa: E402
    CreateConfig,
    CreateNetwork,
    EngineBytesFromNetwork,
    EngineFromBytes,
    ModifyNetwork,
    NetworkFromOnnxPath,
    SaveEngine,
    TrtRunner,
    engine_from_path,
    extend,
)
from parity_trt.options import MARK_ALL, build_profiles  # noqa: E402

pytestmark = pytest.mark.gpu


def reference(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0) * 2


def test_dynamic_profiles_switch_and_buffers_are_reused(onnx_model):
    profiles = build_profiles(["x:[1,3]", "x:[8,3]"], ["x:[2,3]", "x:[16,3]"], ["x:[4,3]", "x:[32,3]"])
    build = EngineBytesFromNetwork(NetworkFromOnnxPath(str(onnx_model)), CreateConfig(profiles=profiles))
    with TrtRunner(build) as runner:
        for batch in (2, 16, 3, 32):
            x = np.random.RandomState(batch).randn(batch, 3).astype(np.float32)
            assert np.allclose(runner.infer({"x": x})["y"], reference(x))
        assert set(runner.contexts) == {0, 1}
        with pytest.raises(Exception, match="fit no optimization profile"):
            runner.infer({"x": np.zeros((64, 3), np.float32)})


def test_save_and_load_engine_and_inspect(static_model, tmp_path):
    from parity_trt.inspect import describe_engine

    path = tmp_path / "m.engine"
    SaveEngine(EngineBytesFromNetwork(NetworkFromOnnxPath(str(static_model))), str(path))()
    engine = engine_from_path(str(path))
    text = describe_engine(engine, {"layers"})
    assert "x: float[2,3]" in text and "layer(s)" in text
    with TrtRunner(EngineFromBytes(path.read_bytes())) as runner:
        x = np.ones((2, 3), np.float32)
        assert np.allclose(runner.infer({"x": x})["y"], 2 * x)


def test_mark_all_returns_intermediate_tensors(static_model):
    network = ModifyNetwork(NetworkFromOnnxPath(str(static_model)), outputs=MARK_ALL)
    with pytest.warns(UserWarning, match="mark all"), TrtRunner(EngineBytesFromNetwork(network)) as runner:
        x = np.random.RandomState(0).randn(2, 3).astype(np.float32)
        out = runner.infer({"x": x})
    assert np.allclose(out["h"], np.maximum(x, 0)) and np.allclose(out["y"], reference(x))


def test_debug_tensors_are_extra_outputs(static_model):
    network = ModifyNetwork(NetworkFromOnnxPath(str(static_model)), debug=["h"])
    with TrtRunner(EngineBytesFromNetwork(network)) as runner:
        x = np.random.RandomState(1).randn(2, 3).astype(np.float32)
        out = runner.infer({"x": x})
    assert set(out) >= {"y", "h"} and np.allclose(out["h"], np.maximum(x, 0))


def test_parser_errors_name_the_node(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    node = helper.make_node("NoSuchOp", ["x"], ["y"], name="bad_node", domain="custom.domain")
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("custom.domain", 1)])
    model.ir_version = 10
    onnx.save(model, str(tmp_path / "bad.onnx"))
    with pytest.raises(Exception, match="bad_node"):
        NetworkFromOnnxPath(str(tmp_path / "bad.onnx"))()


def test_data_dependent_output_shape(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [1, "n"])
    model = helper.make_model(helper.make_graph([helper.make_node("NonZero", ["x"], ["y"])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, str(tmp_path / "nz.onnx"))
    with TrtRunner(EngineBytesFromNetwork(NetworkFromOnnxPath(str(tmp_path / "nz.onnx")))) as runner:
        out = runner.infer({"x": np.array([0, 1, 0, 2, 3, 0], np.float32)})["y"]
        assert out.tolist() == [[1, 3, 4]]
        out = runner.infer({"x": np.array([1, 1, 1, 1, 1, 0], np.float32)})["y"]
        assert out.shape == (1, 5)


def test_api_built_network_with_extend_and_config_hook():
    seen = []

    @extend(CreateNetwork())
    def build(builder, network):
        inp = network.add_input("input", trt.float32, (4, 4))
        ones = network.add_constant((4, 4), np.ones((4, 4), np.float32)).get_output(0)
        out = network.add_elementwise(inp, ones, trt.ElementWiseOperation.SUM).get_output(0)
        out.name = "output"
        network.mark_output(out)

    config = CreateConfig(postprocess=[lambda builder, network, config: seen.append(config.builder_optimization_level)])
    with TrtRunner(EngineBytesFromNetwork(build, config)) as runner:
        x = np.random.RandomState(2).rand(4, 4).astype(np.float32)
        assert np.allclose(runner.infer({"input": x})["output"], x + 1)
    assert len(seen) == 1


def test_timing_cache_written_and_reused(static_model, tmp_path):
    cache = tmp_path / "timing.cache"
    EngineBytesFromNetwork(NetworkFromOnnxPath(str(static_model)), CreateConfig(load_timing_cache=str(cache)), save_timing_cache=str(cache))()
    assert cache.stat().st_size > 0
    EngineBytesFromNetwork(NetworkFromOnnxPath(str(static_model)), CreateConfig(load_timing_cache=str(cache)), save_timing_cache=str(cache))()


def test_cli_run_and_convert(onnx_model, tmp_path, parity_invoke):
    engine = tmp_path / "m.engine"
    assert parity_invoke("convert", onnx_model, "-o", engine, "--trt-min-shapes", "x:[1,3]", "--trt-opt-shapes", "x:[2,3]",
                         "--trt-max-shapes", "x:[4,3]").exit_code == 0
    assert engine.stat().st_size > 0
    shown = parity_invoke("inspect", "model", engine)
    assert shown.exit_code == 0, shown.stderr
    assert "profile 0: x min=[1, 3]" in shown.stdout
    assert parity_invoke("run", onnx_model, "--trt", "--onnxrt", "--input-shapes", "x:[2,3]", "--save-engine", tmp_path / "r.engine").exit_code == 0
    assert parity_invoke("run", onnx_model, "--trt", "--onnxrt", "--input-shapes", "x:[2,3]", "--trt-outputs", "mark", "all",
                         "--onnx-outputs", "mark", "all").exit_code == 0
    if int(trt.__version__.split(".")[0]) >= 11:
        assert parity_invoke("convert", onnx_model, "-o", engine, "--fp16").exit_code == 2
