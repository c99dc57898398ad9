"""``parity inspect model --list-unbounded-dds [--shape-inference]`` (Polygraphy's flags): the run-time tensors that
give a Range/Pad/Resize/Tile/Expand output a data-dependent size with no upper bound, on models this test builds."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper


def _range_model(path, bound: bool = False, constant_limit: bool = False):
    """x[4] -> ReduceMax -> Cast(int64) [-> Min(., 8)] -> Range(0, limit, 1) -> y[?]."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("start", 0), ("delta", 1), ("cap", 8), ("fixed", 5))]
    nodes = [
        helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0, name="max"),
        helper.make_node("Cast", ["m"], ["limit"], to=TensorProto.INT64, name="cast"),
    ]
    limit = "limit"
    if bound:
        nodes.append(helper.make_node("Min", ["limit", "cap"], ["bounded"], name="min"))
        limit = "bounded"
    if constant_limit:
        limit = "fixed"
    nodes.append(helper.make_node("Range", ["start", limit, "delta"], ["y"], name="range"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, ["n"])], inits)
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])  # a real, runnable model
    return path


@pytest.mark.parametrize("inference", [[], ["--shape-inference"]])
def test_lists_the_run_time_limit_of_range(main, tmp_path, inference):
    model = _range_model(tmp_path / "m.onnx")
    code, out, err = main("inspect", "model", model, "--list-unbounded-dds", *inference)
    assert code == 0, err
    assert out.splitlines()[0].startswith("ONNX model")  # Parity's description comes first, unchanged
    assert out.splitlines()[-1] == "Found tensors with unbounded DDS: limit (input 1 of Range 'range')"


@pytest.mark.parametrize("kind", ["bound", "constant_limit"])
def test_a_min_or_a_constant_bounds_it(main, tmp_path, kind):
    model = _range_model(tmp_path / "m.onnx", **{kind: True})
    code, out, _ = main("inspect", "model", model, "--list-unbounded-dds", "--shape-inference")
    assert code == 0 and out.splitlines()[-1] == "No tensors with unbounded DDS found."


def test_refusals(main, tmp_path):
    model = _range_model(tmp_path / "m.onnx")
    code, out, err = main("inspect", "model", model, "--shape-inference")
    assert code == 2 and out == "" and "--shape-inference applies to --list-unbounded-dds" in err
    code, out, err = main("inspect", "model", model, "--list-unbounded-dds", "--json")
    assert code == 2 and out == "" and "--list-unbounded-dds applies to an ONNX model, without --json" in err
