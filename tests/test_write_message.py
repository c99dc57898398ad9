"""``parity.onnx_external.write_message``: every model writer (``save_model``) writes the serialized model piece by
piece, its large initializers' raw bytes as they are (issue 30: upb's serializer runs at a third of memcpy's
speed and its buffer is copied once more). The file is the same message: it parses equal to the model, starts
as an ONNX file does, passes the full checker and runs; past protobuf's limit it is refused in one line."""

from __future__ import annotations

import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from parity import onnx_external, onnx_models
from parity.errors import ModelError


def _model() -> onnx.ModelProto:
    """MatMul by a 256 KiB weight (spliced), Add of a small bias (serialized), an If whose branches hold a large
    Constant (inside the graph's own bytes), metadata, a doc string and a float_data initializer."""
    rng = np.random.default_rng(0)
    big = numpy_helper.from_array(rng.standard_normal((256, 256)).astype(np.float32), "w")
    bias = numpy_helper.from_array(np.ones(256, np.float32), "b")
    typed = helper.make_tensor("scale", TensorProto.FLOAT, [256], np.full(256, 0.5, np.float32).tolist())  # float_data, 1 KiB
    branch = lambda name, value: helper.make_graph(  # noqa: E731
        [helper.make_node("Constant", [], [f"{name}_c"], value=numpy_helper.from_array(np.full((256, 256), value, np.float32)))],
        name, [], [helper.make_tensor_value_info(f"{name}_c", TensorProto.FLOAT, [256, 256])],
    )  # fmt: skip
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Mul", ["a", "scale"], ["s"]),
        helper.make_node("If", ["cond"], ["k"], then_branch=branch("then", 1.0), else_branch=branch("else", 2.0)),
        helper.make_node("MatMul", ["s", "k"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 256]), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 256])], [big, bias, typed], doc_string="graph doc",
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="test", doc_string="model doc")
    model.ir_version = 10
    helper.set_model_props(model, {"k": "v"})
    return model


def test_the_written_file_is_the_same_message(tmp_path):
    model = _model()
    buffer = io.BytesIO()
    onnx_external.write_message(model, buffer, "the model")
    data = buffer.getvalue()
    assert len(data) == len(model.SerializeToString())
    assert onnx_models.is_onnx(data[:1])  # ir_version first, as onnx writes it
    assert onnx.load_from_string(data) == model
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    onnx.checker.check_model(str(path), full_check=True)
    x = np.random.default_rng(1).standard_normal((2, 256)).astype(np.float32)
    out = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x, "cond": np.array(True)})[0]
    w = numpy_helper.to_array(model.graph.initializer[0])
    assert np.allclose(out, ((x @ w + 1) * 0.5) @ np.ones((256, 256), np.float32), rtol=1e-4, atol=1e-3)


def test_save_model_writes_it_and_leaves_the_model_as_it_was(tmp_path):
    model = _model()
    before = model.SerializeToString()
    saved = onnx_external.save_model(model, tmp_path / "out.onnx")
    assert model.SerializeToString() == before
    assert onnx.load(str(saved.path)) == model
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.onnx"]


def test_past_the_limit_it_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(onnx_external, "PROTOBUF_LIMIT", 200_000)  # the 256 KiB weight alone passes it
    with pytest.raises(ModelError, match="past protobuf's 2 GiB limit for one message; write it with --save-external-data"):
        onnx_external.write_message(_model(), io.BytesIO(), "the model")
