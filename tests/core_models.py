"""Small real ONNX models the tests build (IR version 10, opset 17: loadable by onnxruntime)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 10
OPSET = 17


def save(graph: onnx.GraphProto, path: Path, ir_version: int = IR_VERSION) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = ir_version
    onnx.save(model, path)
    return path


def tensor(name: str, dtype: int, shape: Sequence) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, list(shape))


def affine(path: Path, scale: float = 2.0, bias: float = 0.5, shape=(1, 4), dtype=TensorProto.FLOAT) -> Path:
    """y = x * scale + bias: changing scale/bias plants a known difference."""
    np_dtype = helper.tensor_dtype_to_np_dtype(dtype)
    nodes = [
        helper.make_node("Mul", ["x", "scale"], ["scaled"], name="mul"),
        helper.make_node("Add", ["scaled", "bias"], ["y"], name="add"),
    ]
    inits = [
        numpy_helper.from_array(np.array(scale, dtype=np_dtype), "scale"),
        numpy_helper.from_array(np.array(bias, dtype=np_dtype), "bias"),
    ]
    graph = helper.make_graph(nodes, "affine", [tensor("x", dtype, shape)], [tensor("y", dtype, shape)], inits)
    return save(graph, path)


def two_inputs(path: Path) -> Path:
    """out = a + b (dynamic batch), idx = ArgMax(a) for index comparisons."""
    nodes = [
        helper.make_node("Add", ["a", "b"], ["sum"], name="add"),
        helper.make_node("ArgMax", ["a"], ["idx"], name="argmax", axis=-1, keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "two_inputs",
        [tensor("a", TensorProto.FLOAT, ["batch", 8]), tensor("b", TensorProto.FLOAT, ["batch", 8])],
        [tensor("sum", TensorProto.FLOAT, ["batch", 8]), tensor("idx", TensorProto.INT64, ["batch"])],
    )
    return save(graph, path)


def log_model(path: Path) -> Path:
    """y = Log(x): negative inputs give NaN, zero gives -Inf (for --validate)."""
    graph = helper.make_graph(
        [helper.make_node("Log", ["x"], ["y"], name="log")], "log", [tensor("x", TensorProto.FLOAT, [1, 4])], [tensor("y", TensorProto.FLOAT, [1, 4])]
    )
    return save(graph, path)


def chain(path: Path, length: int = 6) -> Path:
    """x -> Relu -> Add(c0) -> Relu -> Add(c1) ... : a deeper model with named intermediate tensors."""
    nodes, inits, prev = [], [], "x"
    for i in range(length):
        if i % 2 == 0:
            nodes.append(helper.make_node("Relu", [prev], [f"t{i}"], name=f"relu{i}"))
        else:
            inits.append(numpy_helper.from_array(np.full((1, 4), 0.1 * i, np.float32), f"c{i}"))
            nodes.append(helper.make_node("Add", [prev, f"c{i}"], [f"t{i}"], name=f"add{i}"))
        prev = f"t{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    graph = helper.make_graph(nodes, "chain", [tensor("x", TensorProto.FLOAT, [1, 4])], [tensor("y", TensorProto.FLOAT, [1, 4])], inits)
    return save(graph, path)


def nan_midway(path: Path, how: str = "log") -> Path:
    """x in [0, 1) -> double (Mul) -> center (Sub: [-1, 1)) -> culprit -> after (Add) -> out (Mul): every tensor
    before ``culprit`` is finite; ``culprit`` makes the first NaN: ``log`` Log(c) and ``sqrt`` Sqrt(c) of the
    negative values, ``div`` 0 / 0 (Div(zero, zero), zero = c * 0); ``none``: Exp(c), finite everywhere."""
    nodes = [helper.make_node("Mul", ["x", "two"], ["a"], name="double"), helper.make_node("Sub", ["a", "one"], ["c"], name="center")]
    if how == "div":
        nodes += [helper.make_node("Mul", ["c", "nil"], ["zero"], name="zeroed"), helper.make_node("Div", ["zero", "zero"], ["bad"], name="culprit")]
    else:
        op = {"log": "Log", "sqrt": "Sqrt", "none": "Exp"}[how]
        nodes.append(helper.make_node(op, ["c"], ["bad"], name="culprit"))
    nodes += [helper.make_node("Add", ["bad", "one"], ["d"], name="after"), helper.make_node("Mul", ["d", "two"], ["y"], name="out")]
    values = (("two", 2.0), ("one", 1.0)) + ((("nil", 0.0),) if how == "div" else ())
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in values]
    graph = helper.make_graph(nodes, f"nan_{how}", [tensor("x", TensorProto.FLOAT, [4, 8])], [tensor("y", TensorProto.FLOAT, [4, 8])], inits)
    return save(graph, path)
