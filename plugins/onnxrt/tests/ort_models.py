"""ONNX models the onnxrt tests build, saved by parity.testing's ``save_graph`` (``ir_version`` 10, which every
onnxruntime >= 1.18 loads) unless the model is about its format (IR 3, external data, a custom domain)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from parity.testing import IR_VERSION, OPSET, save_graph


def relu_add(path: Path) -> Path:
    """y = relu(x + [1, -2, 3, -4]); x: float32[N, 4] (a named dynamic batch)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    w = numpy_helper.from_array(np.array([1, -2, 3, -4], np.float32), "w")
    nodes = [helper.make_node("Add", ["x", "w"], ["a"], name="add"), helper.make_node("Relu", ["a"], ["y"], name="relu")]
    return save_graph(helper.make_graph(nodes, "relu_add", [x], [y], [w]), path)


def identities(path: Path) -> Path:
    """One Identity per dtype: float16 [2], int64 [None, 3] (unnamed dynamic dim), bool [2], string [2]."""
    spec = [("f16", TensorProto.FLOAT16, [2]), ("i64", TensorProto.INT64, [None, 3]), ("b", TensorProto.BOOL, [2]), ("s", TensorProto.STRING, [2])]
    ins = [helper.make_tensor_value_info(n, t, s) for n, t, s in spec]
    outs = [helper.make_tensor_value_info(f"{n}_out", t, s) for n, t, s in spec]
    nodes = [helper.make_node("Identity", [n], [f"{n}_out"], name=f"id_{n}") for n, _, _ in spec]
    return save_graph(helper.make_graph(nodes, "identities", ins, outs), path)


def unshaped(path: Path) -> Path:
    """y = relu(x) where x has a dtype but no shape at all (unknown rank), as some exporters write."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return save_graph(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "unshaped", [x], [y]), path)


def scalar_scale(path: Path) -> Path:
    """y = x * k with k a true scalar (rank 0) input."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    k = helper.make_tensor_value_info("k", TensorProto.FLOAT, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    return save_graph(helper.make_graph([helper.make_node("Mul", ["x", "k"], ["y"])], "scalar", [x, k], [y]), path)


def control_flow(path: Path) -> Path:
    """s = sigmoid(x); y = If(c, then: -relu(x), else: |x|); z = Loop 3 times (acc += x) from s.

    The If and Loop bodies have tensors of their own (t_in, t_out, e_out, acc_out, cond_out) that no
    ``mark all`` may make graph outputs: onnxruntime only sees the main graph's tensors."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])
    t_out = helper.make_tensor_value_info("t_out", TensorProto.FLOAT, [2])
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t_in"]), helper.make_node("Neg", ["t_in"], ["t_out"])], "then", [], [t_out])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["e_out"])], "else", [], [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [2])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["acc_in", "x"], ["acc_out"], name="body_add")],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2])],
    )
    trips = helper.make_tensor("trips", TensorProto.INT64, [], [3])
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["s"], name="sig"),
        helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other),
        helper.make_node("Loop", ["trips", "", "s"], ["z"], name="loop", body=body),
    ]
    return save_graph(helper.make_graph(nodes, "control_flow", [x, c], [y, z], [trips]), path)


def external(path: Path) -> Path:
    """y = x + w with w (float32[1, 1024]) stored in '<stem>.data' beside the model."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])
    w = numpy_helper.from_array(np.arange(1024, dtype=np.float32).reshape(1, 1024), "w")
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "external", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.save(model, str(path), save_as_external_data=True, location=f"{path.stem}.data", size_threshold=0)
    return path


def ir3_weights_as_inputs(path: Path) -> Path:
    """IR 3 (opset 8): the weight w is an initializer listed among the graph inputs, as old exporters wrote."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    w_in = helper.make_tensor_value_info("w", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    w = numpy_helper.from_array(np.array([1, 2, 3, 4], np.float32), "w")
    nodes = [helper.make_node("Add", ["x", "w"], ["a"], name="add"), helper.make_node("Relu", ["a"], ["y"], name="relu")]
    model = helper.make_model(helper.make_graph(nodes, "ir3", [x, w_in], [y], [w]), opset_imports=[helper.make_opsetid("", 8)])
    model.ir_version = 3
    onnx.save(model, str(path))
    return path


def custom_op(path: Path) -> Path:
    """An op of a domain onnxruntime does not know (my.ops:Frobnicate)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], domain="my.ops", name="frob")], "custom", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("my.ops", 1)])
    model.ir_version = IR_VERSION
    onnx.save(model, str(path))
    return path


def no_kernel(path: Path) -> Path:
    """Tan on float64: a valid model whose op onnxruntime's CPU provider has no kernel for at that type."""
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2])
    return save_graph(helper.make_graph([helper.make_node("Tan", ["x"], ["y"], name="tan")], "no_kernel", [x], [y]), path)


def contrib_inverse(path: Path) -> Path:
    """y = inverse(x + 4 I) @ x, the inverse being onnxruntime-extensions' ai.onnx.contrib:Inverse (a custom op
    that no onnxruntime knows without that library); x: float32[4, 4]. Tensors: a, inv, y."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])
    shift = numpy_helper.from_array(4 * np.eye(4, dtype=np.float32), "shift")
    nodes = [
        helper.make_node("Add", ["x", "shift"], ["a"], name="add"),
        helper.make_node("Inverse", ["a"], ["inv"], domain="ai.onnx.contrib", name="inverse"),
        helper.make_node("MatMul", ["inv", "x"], ["y"], name="matmul"),
    ]
    graph = helper.make_graph(nodes, "contrib_inverse", [x], [y], [shift])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("ai.onnx.contrib", 1)])
    model.ir_version = IR_VERSION
    onnx.save(model, str(path))
    return path
