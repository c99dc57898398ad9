"""``parity surgeon extract``: --outputs defaults to the model's outputs, shape inference runs (and is said at
-v) only where the model lacks the boundary's metadata, --force-fallback-shape-inference takes the boundary's
shapes from one onnxruntime run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

SAID = "Shape inference completed successfully"


def _chain(path: Path, shape) -> Path:
    """x -> Identity(a) -> Relu(b) -> Identity(y); only x and y carry types."""
    nodes = [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]), helper.make_node("Identity", ["b"], ["y"])]
    x, y = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape)), helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), str(path))
    return path


def _dims(vi) -> list:
    return [d.dim_value or d.dim_param for d in vi.type.tensor_type.shape.dim]


def test_outputs_default_to_the_model_outputs(parity_invoke, tmp_path):
    out = tmp_path / "o.onnx"
    code, text, err = parity_invoke("surgeon", "extract", "-v", _chain(tmp_path / "m.onnx", [2, 3]), "--inputs", "x:auto:auto", "-o", out)
    assert code == 0, err
    model = onnx.load(str(out))
    assert [o.name for o in model.graph.output] == ["y"] and len(model.graph.node) == 3
    assert _dims(model.graph.output[0]) == [2, 3]  # the output's shape from inference on the cut (the checker wants one)
    assert SAID not in text  # the model says what the boundary is: no inference was needed to find it
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert np.array_equal(sess.run(None, {"x": x})[0], np.maximum(x, 0))


def test_inference_runs_and_is_said_where_the_model_lacks_metadata(parity_invoke, tmp_path):
    src = _chain(tmp_path / "m.onnx", [2, 3])
    code, text, err = parity_invoke("surgeon", "extract", "-v", src, "--inputs", "a:auto:auto", "--outputs", "b:auto", "-o", tmp_path / "o.onnx")
    assert code == 0, err
    assert SAID in text
    model = onnx.load(str(tmp_path / "o.onnx"))
    assert [n.op_type for n in model.graph.node] == ["Relu"] and _dims(model.graph.input[0]) == [2, 3]
    code, text, _ = parity_invoke("surgeon", "extract", src, "--inputs", "a:auto:auto", "--outputs", "b:auto", "-o", tmp_path / "q.onnx")
    assert code == 0 and SAID not in text  # only at -v


def test_force_fallback_shape_inference_takes_the_run_shapes(parity_invoke, tmp_path):
    src, out = _chain(tmp_path / "m.onnx", [1, "n"]), tmp_path / "o.onnx"
    code, text, err = parity_invoke("surgeon", "extract", "-v", src, "--outputs", "y:auto", "--force-fallback-shape-inference", "-o", out)
    assert code == 0, err
    assert SAID not in text and "dynamic dims set to 1" in err
    model = onnx.load(str(out))
    assert _dims(model.graph.input[0]) == [1, 1] and _dims(model.graph.output[0]) == [1, 1]
    # without it the dynamic dim stays
    code, _, err = parity_invoke("surgeon", "extract", src, "--outputs", "y:auto", "-o", tmp_path / "d.onnx")
    assert code == 0, err
    assert _dims(onnx.load(str(tmp_path / "d.onnx")).graph.input[0]) == [1, "n"]
