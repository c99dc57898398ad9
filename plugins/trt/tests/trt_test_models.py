"""ONNX models the TensorRT plugin's tests build (ir_version 10, so every onnxruntime the lock allows loads them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

OPSET = 17


def save_graph(graph: Any, path: Path, check: bool = True) -> Path:
    """``graph`` as a model file, checked by onnx's full check unless ``check`` is False (a test that wants an
    operator no one registered, or outputs of unknown shape)."""
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)
    if check:
        onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def save_model(path: Path, nodes: list, inputs: list, outputs: list, initializers: list = (), check: bool = False) -> Path:
    from onnx import helper

    return save_graph(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers)), path, check)


def relu_add(path: Path, dims: tuple = ("N", 3)) -> Path:
    """h = relu(x); y = h + h."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(dims))
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"), helper.make_node("Add", ["h", "h"], ["y"], name="add")]
    return save_model(path, nodes, [x], [y])


def make_model(path: Path, dynamic: bool = True) -> Path:
    """relu_add with x [N, 3] (dynamic) or [2, 3]."""
    return relu_add(path, ("N", 3) if dynamic else (2, 3))
