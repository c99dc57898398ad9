"""Small ONNX models the surgeon tests build, saved by parity.testing's ``save_graph`` (IR 10, opset 17, so onnxruntime
loads them); the MLP is parity.testing's ``mlp``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from parity.testing import save_graph


def overflow(path: Path) -> Path:
    """x in [0,1] -> scale1 (x300) -> scale2 (x300: up to 90000, past fp16's 65504) -> shrink (/1e4) -> y."""
    nodes = [
        helper.make_node("Mul", ["x", "k1"], ["s1"], name="scale1"),
        helper.make_node("Mul", ["s1", "k2"], ["s2"], name="scale2"),
        helper.make_node("Div", ["s2", "k3"], ["s3"], name="shrink"),
        helper.make_node("Relu", ["s3"], ["y"], name="out"),
    ]
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("k1", 300.0), ("k2", 300.0), ("k3", 1e4))]
    graph = helper.make_graph(
        nodes, "overflow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], inits
    )
    return save_graph(graph, path)


def foldable(path: Path) -> Path:
    """Constant subgraphs (c1 + c2, and a Reshape target from Shape(x)) that folding removes."""
    nodes = [
        helper.make_node("Add", ["c1", "c2"], ["c12"], name="const_add"),
        helper.make_node("Mul", ["c12", "c2"], ["c122"], name="const_mul"),
        helper.make_node("Mul", ["x", "c122"], ["xm"], name="scale"),
        helper.make_node("Shape", ["xm"], ["shp"], name="shape"),
        helper.make_node("Reshape", ["xm", "shp"], ["xr"], name="reshape"),
        helper.make_node("Relu", ["xr"], ["y"], name="relu"),
    ]
    inits = [
        numpy_helper.from_array(np.full((8,), 0.5, np.float32), "c1"),
        numpy_helper.from_array(np.full((8,), 2.0, np.float32), "c2"),
        numpy_helper.from_array(np.zeros((3,), np.float32), "unused_w"),
    ]
    graph = helper.make_graph(
        nodes, "foldable", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits
    )
    return save_graph(graph, path)


def branchy(path: Path) -> Path:
    """Two parallel branches joined by an Add: a node after a branch may sit next to the other branch's tensors."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="left1"),
        helper.make_node("Sigmoid", ["x"], ["b"], name="right1"),
        helper.make_node("Mul", ["a", "ka"], ["a2"], name="left2"),
        helper.make_node("Mul", ["b", "kb"], ["b2"], name="right2"),
        helper.make_node("Add", ["a2", "b2"], ["y"], name="join"),
    ]
    inits = [numpy_helper.from_array(np.array(2.0, np.float32), "ka"), numpy_helper.from_array(np.array(3.0, np.float32), "kb")]
    graph = helper.make_graph(
        nodes, "branchy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], inits
    )
    return save_graph(graph, path)


def lint_bad(path: Path) -> Path:
    """Dangling input, unused initializer, duplicate node names, a dead node."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="dup"),
        helper.make_node("Add", ["a", "ghost"], ["b"], name="dup"),
        helper.make_node("Neg", ["a"], ["dead_out"], name="dead"),
    ]
    inits = [numpy_helper.from_array(np.zeros((4,), np.float32), "never_used")]
    graph = helper.make_graph(
        nodes, "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], [helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])], inits
    )
    return save_graph(graph, path)
