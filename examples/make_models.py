"""Builds the small models shipped in examples/models (run: python examples/make_models.py).

They are committed so the README's first command works without running this; the tests build their own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).parent / "models"
IR_VERSION = 10  # onnxruntime cannot load the IR version onnx.helper writes by default
OPSET = 17


def save(graph: onnx.GraphProto, name: str) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="parity-examples")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    HERE.mkdir(exist_ok=True)
    path = HERE / name
    onnx.save(model, path)
    return path


def tiny_cnn() -> Path:
    """Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> Softmax, batch dimension dynamic."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "conv.w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32) * 0.1, "conv.b")
    fc_w = numpy_helper.from_array(rng.standard_normal((8, 10)).astype(np.float32) * 0.5, "fc.w")
    fc_b = numpy_helper.from_array(rng.standard_normal(10).astype(np.float32) * 0.1, "fc.b")
    nodes = [
        helper.make_node("Conv", ["x", "conv.w", "conv.b"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
        helper.make_node("GlobalAveragePool", ["relu"], ["pool"], name="pool"),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
        [w, b, fc_w, fc_b],
    )
    return save(graph, "tiny_cnn.onnx")


def identity() -> Path:
    """The seed guides' identity model: y = Identity(x), x float32[1,1,2,2]."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"], name="identity")],
        "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])],
    )
    return save(graph, "identity.onnx")


if __name__ == "__main__":
    for path in (tiny_cnn(), identity()):
        print(f"wrote {path}")
