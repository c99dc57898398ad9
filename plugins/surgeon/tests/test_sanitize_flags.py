"""``parity surgeon sanitize``'s Polygraphy flags: --partitioning, --no-per-pass-shape-inference,
--no-onnxruntime-shape-inference, --force-fallback-shape-inference, --outputs, --set-unbounded-dds-upper-bound,
and --override-input-shapes on a computed tensor. Models are built here with onnx.helper."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper


def _save(path: Path, nodes, inputs, outputs, inits=(), opset: int = 17) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10), str(path))
    return path


def _foldable(path: Path) -> Path:
    """output = input + ((a + b) + d): two Adds of constants fold away, one Add stays."""
    inits = [numpy_helper.from_array(np.full((1, 3), v, np.float32), n) for n, v in (("a", 1), ("b", 2), ("d", 3))]
    nodes = [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Add", ["c", "d"], ["e"]), helper.make_node("Add", ["input", "e"], ["output"])]
    io = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 3]) for name in ("input", "output")]
    return _save(path, nodes, io[:1], io[1:], inits)


def _chain(path: Path, shape=(2, 3)) -> Path:
    """x -> Identity(a) -> Relu(b) -> y."""
    nodes = [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]), helper.make_node("Identity", ["b"], ["y"])]
    return _save(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))], [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))])


def _range(path: Path) -> Path:
    """y = Range(0, Cast(ReduceMax(x)), 1): the length of y depends on x's values."""
    inits = [numpy_helper.from_array(np.array(0, np.int64), "start"), numpy_helper.from_array(np.array(1, np.int64), "delta")]
    nodes = [
        helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
        helper.make_node("Cast", ["m"], ["limit"], to=TensorProto.INT64),
        helper.make_node("Range", ["start", "limit", "delta"], ["y"]),
    ]
    return _save(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], [helper.make_tensor_value_info("y", TensorProto.INT64, [None])], inits)


def _run(path: Path, feed: dict) -> list:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)


@pytest.mark.parametrize("partitioning", ["basic", "recursive"])
def test_partitioning_folds_and_needs_fold_constants(parity_invoke, tmp_path, partitioning):
    src, out = _foldable(tmp_path / "f.onnx"), tmp_path / "o.onnx"
    code, text, err = parity_invoke("surgeon", "sanitize", src, "-o", out, "--fold-constants", "--partitioning", partitioning, "--no-per-pass-shape-inference")
    assert code == 0, err
    assert [n.op_type for n in onnx.load(str(out)).graph.node] == ["Add"]
    assert "Pass 1: nodes 3 -> 1" in text
    x = np.ones((1, 3), np.float32)
    assert np.array_equal(_run(out, {"input": x})[0], x + 6)
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", tmp_path / "o2.onnx", "--partitioning", partitioning)
    assert code == 2 and "--partitioning" in err and "--fold-constants" in err and not (tmp_path / "o2.onnx").exists()


def test_onnxruntime_symbolic_shape_inference_is_said_at_verbose(parity_invoke, tmp_path):
    src = _range(tmp_path / "r.onnx")  # y's length depends on x's values: onnx's inference leaves it unknown
    message = "Inferred shapes in the model with `onnxruntime.tools.symbolic_shape_infer`"
    code, text, _ = parity_invoke("surgeon", "sanitize", "-v", src, "-o", tmp_path / "a.onnx", "--fold-constants")
    assert code == 0 and message in text
    code, text, _ = parity_invoke("surgeon", "sanitize", src, "-o", tmp_path / "b.onnx", "--fold-constants")
    assert code == 0 and message not in text  # only at -v
    code, text, _ = parity_invoke("surgeon", "sanitize", "-v", src, "-o", tmp_path / "c.onnx", "--fold-constants", "--no-onnxruntime-shape-inference")
    assert code == 0 and message not in text and "shape inference: ok" in text


def test_a_model_onnx_resolves_skips_the_symbolic_inference(parity_invoke, tmp_path):
    """Every tensor typed with fixed dims by onnx's own inference: onnxruntime's symbolic inference (sympy, seconds
    on a real model) is not run, -v says which inference ran and why; the model is the same as with it."""
    src = _foldable(tmp_path / "f.onnx")
    code, text, err = parity_invoke("surgeon", "sanitize", "-v", src, "-o", tmp_path / "a.onnx", "--fold-constants")
    assert code == 0 and "Inferred shapes in the model with `onnx.shape_inference`" in text
    assert err.count("symbolic inference had nothing to add") == 1 and "symbolic_shape_infer`" not in text  # once, not per inference
    model = onnx.load(str(tmp_path / "a.onnx"))
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == ["Add"]
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == [1, 3]


def test_outputs_mark_all_and_cleanup(parity_invoke, tmp_path):
    src = _chain(tmp_path / "c.onnx")
    out = tmp_path / "all.onnx"
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", out, "--outputs", "mark", "all")
    assert code == 0, err
    model = onnx.load(str(out))
    assert [o.name for o in model.graph.output] == ["a", "b", "y"]
    assert all(o.type.tensor_type.elem_type == TensorProto.FLOAT for o in model.graph.output)  # typed, not empty
    out = tmp_path / "cut.onnx"
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", out, "--outputs", "a", "--cleanup")
    assert code == 0, err
    model = onnx.load(str(out))
    assert [n.op_type for n in model.graph.node] == ["Identity"] and [o.name for o in model.graph.output] == ["a"]
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", tmp_path / "bad.onnx", "--outputs", "nope")
    assert code == 2 and "nope" in err and err.count("\n") == 1
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", tmp_path / "bad.onnx", "--outputs", "z*")
    assert code == 2 and "no tensor matches 'z*'" in err and not (tmp_path / "bad.onnx").exists()


def test_outputs_take_wildcards(parity_invoke, tmp_path):
    src, out = _chain(tmp_path / "c.onnx"), tmp_path / "o.onnx"
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", out, "--outputs", "[ab]", "y")
    assert code == 0, err
    assert [o.name for o in onnx.load(str(out)).graph.output] == ["a", "b", "y"]


def test_force_fallback_shape_inference_fixes_dynamic_dims(parity_invoke, tmp_path):
    src = _chain(tmp_path / "d.onnx", shape=(1, "h"))
    out = tmp_path / "o.onnx"
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", out, "--force-fallback-shape-inference")
    assert code == 0, err
    assert "dynamic dims set to 1" in err
    model = onnx.load(str(out))
    dims = lambda vi: [d.dim_value for d in vi.type.tensor_type.shape.dim]  # noqa: E731
    assert dims(model.graph.input[0]) == [1, 1] and dims(model.graph.output[0]) == [1, 1]
    assert {vi.name for vi in model.graph.value_info} == {"a", "b"} and all(dims(vi) == [1, 1] for vi in model.graph.value_info)
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", tmp_path / "x.onnx", "--force-fallback-shape-inference", "--no-shape-inference")
    assert code == 2 and "give one" in err


@pytest.mark.parametrize("bounds, expected", [(["7"], {"limit": 7}), (["limit:3"], {"limit": 3}), (["9", "limit:5"], {"limit": 5})])
def test_set_unbounded_dds_upper_bound_clamps_with_min(parity_invoke, tmp_path, bounds, expected):
    src, out = _range(tmp_path / "r.onnx"), tmp_path / "o.onnx"
    code, text, err = parity_invoke("surgeon", "sanitize", src, "-o", out, "--fold-constants", "--set-unbounded-dds-upper-bound", *bounds)
    assert code == 0, err
    model = onnx.load(str(out))
    mins = [n for n in model.graph.node if n.op_type == "Min"]
    assert len(mins) == 1 and mins[0].output[0] == "limit"
    bound = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}[mins[0].input[1]]
    assert bound.dtype == np.int64 and int(bound) == expected["limit"]
    assert f"limit<={expected['limit']}" in text
    x = np.array([0, 20, 1, 2], np.float32)
    assert len(_run(out, {"x": x})[0]) == expected["limit"]  # clamped: 20 without the bound
    assert len(_run(src, {"x": x})[0]) == 20


def test_set_unbounded_dds_upper_bound_refuses_bad_values(parity_invoke, tmp_path):
    src = _range(tmp_path / "r.onnx")
    for value, words in (("many", "cannot read 'many'"), ("nope:4", "no tensor 'nope'"), ("-3", ">= 0")):
        code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", tmp_path / "o.onnx", "--set-unbounded-dds-upper-bound", value)
        assert code == 2 and words in err and err.count("\n") == 1, err
    assert not (tmp_path / "o.onnx").exists()


def test_override_input_shapes_on_a_computed_tensor_makes_it_an_input(parity_invoke, tmp_path):
    src, out = _chain(tmp_path / "c.onnx"), tmp_path / "o.onnx"
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", out, "--override-input-shapes", "b:[4,5]")
    assert code == 0, err
    assert "'b' was not a graph input" in err
    model = onnx.load(str(out))
    assert [i.name for i in model.graph.input] == ["x", "b"] and [n.op_type for n in model.graph.node] == ["Identity"]
    assert [d.dim_value for d in model.graph.input[1].type.tensor_type.shape.dim] == [4, 5]
