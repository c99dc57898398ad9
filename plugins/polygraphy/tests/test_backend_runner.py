"""parity_polygraphy.backend.base, .common and .onnxrt: Polygraphy's runner and loader contracts on real
onnxruntime sessions of models built with onnx.helper."""

from __future__ import annotations

import contextlib
import io
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from parity_polygraphy.backend.base import BaseLoader, BaseRunner
from parity_polygraphy.backend.common import BytesFromPath, InvokeFromScript, SaveBytes, bytes_from_path, invoke_from_script
from parity_polygraphy.backend.onnxrt import OnnxrtRunner, SessionFromOnnx, session_from_onnx
from parity_polygraphy.exception import PolygraphyException, PolygraphyInternalException


def _negate(dims=("batch", 3)) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["y"])],
        "neg",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(dims))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.fixture
def model_path(tmp_path):
    path = tmp_path / "neg.onnx"
    onnx.save(_negate(), path)
    return str(path)


def test_runner_lifecycle_metadata_and_timing(model_path):
    runner = OnnxrtRunner(SessionFromOnnx(BytesFromPath(model_path)))
    assert runner.name.startswith("onnxrt-runner-N") and not runner.is_active
    with runner:
        assert runner.is_active
        meta = runner.get_input_metadata()
        dtype, shape = meta["x"]
        assert isinstance(dtype, np.dtype) and dtype == np.float32
        assert list(shape) == ["batch", 3]  # a dynamic dim keeps its name
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        outputs = runner.infer({"x": x})
        assert list(outputs) == ["y"]
        np.testing.assert_array_equal(outputs["y"], -x)
        assert isinstance(runner.last_inference_time(), float) and runner.last_inference_time() > 0
        from parity_polygraphy.datatype import DataType

        assert meta is not runner.get_input_metadata(use_numpy_dtypes=False)
        assert runner.get_input_metadata(use_numpy_dtypes=False)["x"].dtype == DataType.FLOAT32
    assert not runner.is_active
    assert OnnxrtRunner(None, name="mine").name == "mine"


@pytest.mark.parametrize(
    "feed, message",
    [
        ({"x": np.ones((2, 3), np.float32), "z": np.ones(1, np.float32)}, "Extra inputs in"),
        ({"z": np.ones(1, np.float32)}, "The following inputs were not found"),
        ({}, "The following inputs were not found"),
        ({"x": np.ones((2, 3), np.int32)}, "unexpected dtype"),
        ({"x": np.ones((2, 4), np.float32)}, "incompatible shape"),
        ({"x": np.ones((3,), np.float32)}, "incompatible shape"),
    ],
)
def test_infer_checks_the_feed(model_path, feed, message):
    with OnnxrtRunner(SessionFromOnnx(model_path)) as runner, pytest.raises(PolygraphyException, match=message):
        runner.infer(feed)


def test_infer_before_activation_is_refused(model_path):
    runner = OnnxrtRunner(SessionFromOnnx(model_path))
    with pytest.raises(PolygraphyException, match="Must be activated prior to calling infer"):
        runner.infer({"x": np.ones((1, 3), np.float32)})


def test_calling_impl_methods_directly_warns(model_path):
    runner = OnnxrtRunner(session_from_onnx(model_path))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        with runner:
            runner.infer({"x": np.ones((1, 3), np.float32)})
        assert "directly is not recommended" not in out.getvalue()
        runner.activate_impl()
        runner.infer_impl({"x": np.ones((1, 3), np.float32)})
        runner.deactivate_impl()
    text = out.getvalue()
    for method in ("activate", "infer", "deactivate"):
        assert f"Calling 'OnnxrtRunner.{method}_impl()' directly is not recommended. Please use '{method}()' instead." in text


def test_torch_tensors_in_give_torch_tensors_out(model_path):
    torch = pytest.importorskip("torch")
    with OnnxrtRunner(SessionFromOnnx(model_path)) as runner:
        x = torch.ones((2, 3), dtype=torch.float32)
        y = runner.infer({"x": x})["y"]
        assert isinstance(y, torch.Tensor) and torch.equal(y, -x)


def test_session_providers_are_matched_by_part_of_their_name(model_path):
    for providers in (None, ["cpu"], ["CPU"], [("CPUExecutionProvider", {})]):
        sess = SessionFromOnnx(model_path, providers=providers)()
        assert isinstance(sess, ort.InferenceSession) and sess.get_providers() == ["CPUExecutionProvider"]
    with pytest.raises(PolygraphyException, match="Could not find specified ONNX-Runtime execution provider"):
        SessionFromOnnx(model_path, providers=["cpu", "no_such_provider"])()
    sess = session_from_onnx(model_path, graph_optimization_level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    assert sess.run(None, {"x": np.ones((1, 3), np.float32)})[0].tolist() == [[-1, -1, -1]]


def test_loader_call_is_a_constant_method_under_internal_checks(monkeypatch):
    from parity_polygraphy import config

    class Counting(BaseLoader):
        def __init__(self):
            self.count = 0

        def call_impl(self):
            self.count += 1
            return self.count

    monkeypatch.setattr(config, "INTERNAL_CORRECTNESS_CHECKS", False)
    assert Counting()() == 1  # unchecked by default, as in Polygraphy
    monkeypatch.setattr(config, "INTERNAL_CORRECTNESS_CHECKS", True)
    with pytest.raises(PolygraphyInternalException, match="count"):
        Counting()()

    class Fine(BaseLoader):
        def __init__(self, value):
            self.value = value

        def call_impl(self, extra=0):
            return self.value + extra

    assert Fine(2)() == 2 and Fine(2)(extra=3) == 5


def test_base_runner_subclass_gets_the_contract():
    class Doubler(BaseRunner):
        def get_input_metadata_impl(self):
            from parity_polygraphy.common import TensorMetadata

            return TensorMetadata().add("a", dtype=np.float64, shape=[None])

        def infer_impl(self, feed_dict):
            return {"b": feed_dict["a"] * 2}

    with Doubler(name="d") as runner:
        assert runner.infer({"a": np.array([1.0, 2.0])})["b"].tolist() == [2.0, 4.0]
        assert runner.last_inference_time() is None  # this runner does not measure
        with pytest.raises(PolygraphyException, match="unexpected dtype"):
            runner.infer({"a": np.array([1, 2])})
        assert runner.infer({"a": np.array([1, 2])}, check_inputs=False)["b"].tolist() == [2, 4]


def test_bytes_save_and_script_loaders(tmp_path, model_path):
    data = bytes_from_path(model_path)
    assert onnx.load_model_from_string(data) == _negate()
    target = tmp_path / "deep" / "copy.onnx"
    assert SaveBytes(BytesFromPath(model_path), str(target))() == data
    assert target.read_bytes() == data
    with pytest.raises(PolygraphyException, match="missing.onnx"):
        BytesFromPath(str(tmp_path / "missing.onnx"))()

    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        def make(a, b=1):
            return a * 10 + b
    """))
    assert InvokeFromScript(str(script), "make")(4, b=2) == 42
    assert invoke_from_script(str(script), "make", 3) == 31
    with pytest.raises(PolygraphyException, match="Could not import symbol: nope from"):
        invoke_from_script(str(script), "nope")
