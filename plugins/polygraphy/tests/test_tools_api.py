"""parity_polygraphy.tools: ``sparse.SparsityPruner`` (2:4 structured sparsity) on models built with onnx.helper,
run in onnxruntime, and ``check.subtool.lint.Lint``'s report vocabulary against onnxruntime's real messages."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from parity_polygraphy.tools.check.subtool import Lint as LintFromPackage
from parity_polygraphy.tools.check.subtool.lint import Lint
from parity_polygraphy.tools.sparse import SparsityPruner

RNG = np.random.default_rng(7)


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def _weights(*shape, low=0.5):
    """Values with no zero (so nothing is sparse before pruning) and distinct magnitudes."""
    mags = RNG.permutation(np.prod(shape)).reshape(shape).astype(np.float32) + low
    return mags * RNG.choice([-1.0, 1.0], size=shape).astype(np.float32)


def _matmul_model(w, dtype=TensorProto.FLOAT, name="w"):
    k, n = w.shape
    init = numpy_helper.from_array(w, name)
    return _model(
        [helper.make_node("MatMul", ["x", name], ["y"], name="mm")],
        [helper.make_tensor_value_info("x", dtype, [2, k])],
        [helper.make_tensor_value_info("y", dtype, [2, n])],
        [init],
    )


def _groups_along(arr, axis):
    """Each group of 4 consecutive values along ``axis`` as a row."""
    moved = np.moveaxis(arr, axis, -1)
    return moved.reshape(-1, moved.shape[-1] // 4, 4).reshape(-1, 4)


def _init(model, name):
    return numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == name))


def _assert_pruned(before, after, axis):
    """2 zeros per group of 4 along ``axis``, where the 2 smallest magnitudes were; the rest unchanged."""
    old, new = _groups_along(before, axis), _groups_along(after, axis)
    assert (np.count_nonzero(new == 0, axis=1) == 2).all()
    smallest = np.argsort(np.abs(old), axis=1, kind="stable")[:, :2]
    expected = old.copy()
    np.put_along_axis(expected, smallest, 0, axis=1)
    np.testing.assert_array_equal(new, expected)


def test_matmul_weight_is_pruned_along_its_reduction_axis_and_the_model_still_runs():
    w = _weights(8, 3)
    model = _matmul_model(w)
    original = model.SerializeToString()

    checker = SparsityPruner(model)
    checker.check()
    assert checker.sparse_tensors == set()

    pruned = SparsityPruner(model).prune()
    assert model.SerializeToString() == original  # the model given is not modified
    onnx.checker.check_model(pruned, full_check=True)
    _assert_pruned(w, _init(pruned, "w"), axis=0)

    x = RNG.standard_normal((2, 8)).astype(np.float32)
    sess = ort.InferenceSession(pruned.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], x @ _init(pruned, "w"), rtol=1e-5)

    again = SparsityPruner(pruned)
    again.check()
    assert again.sparse_tensors == {"w"}


def test_conv_weight_is_pruned_along_input_channels():
    w = _weights(2, 8, 3, 3)
    model = _model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 3])],
        [numpy_helper.from_array(w, "w")],
    )
    pruned = SparsityPruner(model).prune()
    _assert_pruned(w, _init(pruned, "w"), axis=1)
    ort.InferenceSession(pruned.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("trans_b, axis", [(0, 0), (1, 1)])
def test_gemm_follows_trans_b(trans_b, axis):
    w = _weights(8, 8)
    model = _model(
        [helper.make_node("Gemm", ["x", "w"], ["y"], name="gemm", transB=trans_b)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [numpy_helper.from_array(w, "w")],
    )
    _assert_pruned(w, _init(SparsityPruner(model).prune(), "w"), axis=axis)


def test_weight_reached_through_cast_and_transpose_is_pruned_on_the_moved_axis():
    w = _weights(3, 8)  # transposed to (8, 3): MatMul's reduction axis 0 is w's axis 1
    model = _model(
        [
            helper.make_node("Cast", ["w"], ["wc"], to=TensorProto.FLOAT),
            helper.make_node("Transpose", ["wc"], ["wt"], perm=[1, 0]),
            helper.make_node("MatMul", ["x", "wt"], ["y"], name="mm"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(w, "w")],
    )
    _assert_pruned(w, _init(SparsityPruner(model).prune(), "w"), axis=1)


def test_ineligible_weights_are_left_alone():
    odd = _weights(6, 4)  # reduction axis of 6: not a multiple of 4
    skipped = _weights(8, 4)
    ints = RNG.integers(1, 100, size=(8, 4)).astype(np.int8)  # int8: not a float type
    model = _model(
        [
            helper.make_node("MatMul", ["x6", "odd"], ["y1"]),
            helper.make_node("MatMul", ["x8", "skipped"], ["y2"]),
            helper.make_node("DequantizeLinear", ["ints", "scale"], ["deq"]),
            helper.make_node("MatMul", ["x8", "deq"], ["y3"]),
        ],
        [helper.make_tensor_value_info("x6", TensorProto.FLOAT, [2, 6]), helper.make_tensor_value_info("x8", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4]) for n in ("y1", "y2", "y3")],
        [
            numpy_helper.from_array(odd, "odd"),
            numpy_helper.from_array(skipped, "skipped"),
            numpy_helper.from_array(ints, "ints"),
            numpy_helper.from_array(np.array(0.5, np.float32), "scale"),
        ],
    )
    pruned = SparsityPruner(model).prune(weights_skip={"skipped"})
    for name, values in (("odd", odd), ("skipped", skipped), ("ints", ints)):
        np.testing.assert_array_equal(_init(pruned, name), values)
    onnx.checker.check_model(pruned, full_check=True)


def test_weight_without_data_is_skipped_not_an_error():
    model = _matmul_model(_weights(8, 4))
    model.graph.initializer[0].ClearField("raw_data")  # as weight stripping leaves it
    checker = SparsityPruner(model)
    checker.check()
    assert checker.sparse_tensors == set()
    assert SparsityPruner(model).prune().graph.initializer[0].raw_data == b""


def test_ties_zero_the_first_smallest():
    w = np.ones((4, 1), np.float32)
    pruned = _init(SparsityPruner(_matmul_model(w)).prune(), "w")
    np.testing.assert_array_equal(pruned[:, 0], [0, 0, 1, 1])


def test_one_zero_per_group_is_not_sparse():
    w = _weights(8, 2)
    w[0, :] = 0  # one zero in the first group of each column: 2:4 needs two
    checker = SparsityPruner(_matmul_model(w))
    checker.check()
    assert checker.sparse_tensors == set()


def test_float16_weight_keeps_its_type():
    w = _weights(8, 4, low=1).astype(np.float16)
    pruned = SparsityPruner(_matmul_model(w, TensorProto.FLOAT16)).prune()
    assert pruned.graph.initializer[0].data_type == TensorProto.FLOAT16
    _assert_pruned(w, _init(pruned, "w"), axis=0)
    ort.InferenceSession(pruned.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("storage", ["raw_data", "int32_data"])
def test_bfloat16_weight_is_pruned_by_magnitude(storage):
    # values exactly representable in bfloat16 (small integers): pruning must match the float32 result
    w = _weights(8, 4, low=1)
    tensor = helper.make_tensor("w", TensorProto.BFLOAT16, w.shape, w.reshape(-1).tolist())  # int32_data
    if storage == "raw_data":
        bits = np.asarray(tensor.int32_data, np.uint16)
        tensor.ClearField("int32_data")
        tensor.raw_data = bits.astype("<u2").tobytes()
    model = _model(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 4])],
        [tensor],
    )
    pruned = SparsityPruner(model).prune()
    out = pruned.graph.initializer[0]
    assert out.data_type == TensorProto.BFLOAT16
    bits = np.frombuffer(out.raw_data, "<u2").astype(np.uint32) << 16
    _assert_pruned(w, bits.view(np.float32).reshape(w.shape), axis=0)
    checker = SparsityPruner(pruned)
    checker.check()
    assert checker.sparse_tensors == {"w"}


def test_same_result_as_polygraphy_on_float32_weights():
    poly = pytest.importorskip("polygraphy.tools.sparse")
    w1, w2 = _weights(8, 8), _weights(4, 8, 2, 1)
    model = _model(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h"]),
            helper.make_node("Reshape", ["h", "shape"], ["hr"]),
            helper.make_node("Conv", ["hr", "w2"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(np.array([1, 8, 2, 1], np.int64), "shape")],
    )
    ours, theirs = SparsityPruner(model).prune(), poly.SparsityPruner(model).prune()
    for name in ("w1", "w2"):
        np.testing.assert_array_equal(_init(ours, name), _init(theirs, name))


def test_lint_report_vocabulary():
    assert LintFromPackage is Lint
    assert {m.name: m.value for m in Lint.Level} == {"EXCEPTION": "exception", "WARNING": "warning", "INFO": "info"}
    assert {m.name: m.value for m in Lint.Source} == {
        "ONNXRUNTIME": "onnxruntime", "ONNX_CHECKER": "onnx_checker", "ONNX_LOADER": "onnx_loader", "ONNX_GS": "onnx_graphsurgeon",
    }  # fmt: skip
    assert Lint.Level("warning") is Lint.Level.WARNING


@pytest.mark.parametrize("import_domain", [True, False])
def test_custom_op_markers_match_onnxruntimes_messages(import_domain):
    """Each way onnxruntime refuses an op it does not know carries one of ``CUSTOM_OP_EXCEPTION_SUBSTRS``."""
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("com.example", 1)] if import_domain else [])
    graph = helper.make_graph(
        [helper.make_node("MyOp", ["x"], ["y"], domain="com.example")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    with pytest.raises(Exception) as info:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert any(marker in str(info.value) for marker in Lint.CUSTOM_OP_EXCEPTION_SUBSTRS), str(info.value)
