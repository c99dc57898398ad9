"""``parity inspect sparsity`` (Polygraphy's ``inspect sparsity``): which weights are 2:4 sparse, before and after
``parity surgeon prune``, on a model this test builds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _model(path: Path) -> Path:
    """x[2,8] -> MatMul(w[8,4]) -> MatMul(v[4,6]); y[2,6] -> MatMul(odd[6,3]): odd's reduction axis (6) is not a
    multiple of 4, so it cannot be 2:4 sparse."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.uniform(1, 2, s).astype(np.float32), n) for n, s in (("w", (8, 4)), ("v", (4, 6)), ("odd", (6, 3)))]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("MatMul", ["h", "v"], ["y"]),
             helper.make_node("MatMul", ["y", "odd"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])], inits)
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def test_dense_then_pruned_weights(parity_invoke, tmp_path):
    src = _model(tmp_path / "dense.onnx")
    before = src.read_bytes()
    code, out, err = parity_invoke("inspect", "sparsity", src)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"{src}: 2 weight(s) eligible for 2:4 sparsity, 0 of them 2:4 sparse"
    assert lines[1:3] == ["  w: float32[8, 4], axis 0: not 2:4 sparse", "  v: float32[4, 6], axis 0: not 2:4 sparse"]
    assert lines[3].startswith("  skipped odd: axis 0 of [6, 3] is not a multiple of 4")
    assert src.read_bytes() == before  # inspecting never writes

    pruned = tmp_path / "pruned.onnx"
    code, _, err = parity_invoke("surgeon", "prune", src, "-o", pruned)
    assert code == 0, err
    code, out, err = parity_invoke("inspect", "sparsity", pruned)
    assert code == 0, err
    assert out.splitlines()[:3] == [
        f"{pruned}: 2 weight(s) eligible for 2:4 sparsity, 2 of them 2:4 sparse",
        "  w: float32[8, 4], axis 0: 2:4 sparse",
        "  v: float32[4, 6], axis 0: 2:4 sparse",
    ]


def test_bad_input_is_one_line(parity_invoke, tmp_path):
    code, out, err = parity_invoke("inspect", "sparsity", tmp_path / "missing.onnx")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "missing.onnx" in err
    notes = tmp_path / "notes.onnx"
    notes.write_text("not a model")
    code, out, err = parity_invoke("inspect", "sparsity", notes)
    assert code in (2, 3) and out == "" and len(err.strip().splitlines()) == 1 and "notes.onnx" in err
