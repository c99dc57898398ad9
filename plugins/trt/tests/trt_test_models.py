"""ONNX models the TensorRT plugin's tests build (ir_version 10 so onnxruntime loads them)."""

from __future__ import annotations

from pathlib import Path


def make_model(path: Path, dynamic: bool = True) -> Path:
    import onnx
    from onnx import TensorProto, helper

    dims = ["N", 3] if dynamic else [2, 3]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"), helper.make_node("Add", ["h", "h"], ["y"], name="add")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return path
