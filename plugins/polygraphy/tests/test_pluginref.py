"""parity_polygraphy.backend.pluginref: PluginRefRunner evaluates onnx-graphsurgeon graphs with NumPy references;
its results are checked against onnxruntime running the same ONNX model."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_graphsurgeon as gs
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from parity_polygraphy.backend.onnx import GsFromOnnx
from parity_polygraphy.backend.pluginref import PluginRefRunner
from parity_polygraphy.exception import PolygraphyException


def _model(nodes, inputs, outputs, initializers=(), full_check=True) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model, full_check=full_check)
    return model


def _ort(model: onnx.ModelProto, feed: dict) -> list:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)


def _value(name: str, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def test_instance_normalization_matches_onnxruntime():
    rng = np.random.default_rng(0)
    scale, bias = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    model = _model(
        [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)],
        [_value("x", [2, 3, 4, 5])], [_value("y", [2, 3, 4, 5])],
        [helper.make_tensor("s", TensorProto.FLOAT, [3], scale), helper.make_tensor("b", TensorProto.FLOAT, [3], bias)],
    )
    feed = {"x": rng.standard_normal((2, 3, 4, 5)).astype(np.float32)}
    with PluginRefRunner(GsFromOnnx(model)) as runner:
        out = runner.infer(feed)
        assert runner.last_inference_time() is not None
    assert list(out) == ["y"]
    np.testing.assert_allclose(out["y"], _ort(model, feed)[0], rtol=1e-4, atol=1e-5)


def test_mean_variance_normalization_matches_onnxruntime_for_default_and_given_axes():
    rng = np.random.default_rng(1)
    feed = {"x": rng.standard_normal((2, 3, 4, 5)).astype(np.float32)}
    for ours, axes in (({}, [0, 2, 3]), ({"axes": [1, 3]}, [1, 3])):
        io = [_value("x", [2, 3, 4, 5])], [_value("y", [2, 3, 4, 5])]
        # onnx's full check cannot infer shapes through MVN's function body without explicit axes (an onnx bug)
        model = _model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"], **ours)], *io, full_check=bool(ours))
        explicit = _model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=axes)], *io)
        with PluginRefRunner(GsFromOnnx(model)) as runner:
            np.testing.assert_allclose(runner.infer(feed)["y"], _ort(explicit, feed)[0], rtol=1e-4, atol=1e-4)


def test_chained_nodes_and_a_graph_given_directly():
    model = _model(
        [helper.make_node("Identity", ["x"], ["mid"]), helper.make_node("MeanVarianceNormalization", ["mid"], ["y"], axes=[1])],
        [_value("x", ["n", 4])], [_value("y", ["n", 4]), _value("mid", ["n", 4])],
    )
    feed = {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}
    runner = PluginRefRunner(gs.import_onnx(model), name="ref")
    assert runner.name == "ref"
    with runner:
        meta = runner.get_input_metadata()
        assert meta["x"].dtype == np.float32 and list(meta["x"].shape) == ["n", 4]
        out = runner.infer(feed)
    assert list(out) == ["y", "mid"]
    np.testing.assert_array_equal(out["mid"], feed["x"])
    np.testing.assert_allclose(out["y"], _ort(model, feed)[0], rtol=1e-4, atol=1e-4)
    assert runner.graph is None and not runner.is_active  # released on deactivation


def test_an_op_without_a_reference_fails_naming_it():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_value("x", [2])], [_value("y", [2])])
    with PluginRefRunner(GsFromOnnx(model)) as runner, pytest.raises(PolygraphyException, match="Op: Relu does not have a reference implementation"):
        runner.infer({"x": np.ones(2, dtype=np.float32)})


def test_feeds_are_checked_against_the_graph_inputs():
    model = _model([helper.make_node("Identity", ["x"], ["y"])], [_value("x", [2, 2])], [_value("y", [2, 2])])
    with PluginRefRunner(GsFromOnnx(model)) as runner:
        with pytest.raises(PolygraphyException, match="unexpected dtype"):
            runner.infer({"x": np.ones((2, 2), dtype=np.int32)})
        with pytest.raises(PolygraphyException, match="incompatible shape"):
            runner.infer({"x": np.ones((2, 3), dtype=np.float32)})
        with pytest.raises(PolygraphyException, match="Extra inputs"):
            runner.infer({"x": np.ones((2, 2), dtype=np.float32), "z": np.ones(1)})
