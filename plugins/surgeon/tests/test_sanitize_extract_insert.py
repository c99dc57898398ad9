from __future__ import annotations

import hashlib
from pathlib import Path

import models
import numpy as np
import onnx
import onnxruntime as ort

from parity.testing import mlp, save_graph


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(path: Path, feed: dict) -> list:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)


def test_plugin_is_discovered(parity_invoke):
    code, out, _ = parity_invoke("plugins")
    assert code == 0 and "parity-surgeon" in out


def test_sanitize_folds_constants_to_a_fixed_point_and_keeps_results(parity_invoke, tmp_path):
    src = models.foldable(tmp_path / "fold.onnx")
    before = _digest(src)
    out = tmp_path / "folded.onnx"
    code, text, _ = parity_invoke("surgeon", "sanitize", src, "-o", out, "--fold-constants", "--override-input-shapes", "x:[2,8]")
    assert code == 0, text
    assert "nodes: 6 -> 3" in text  # const_add, const_mul and (with a static x) shape fold away
    model = onnx.load(str(out))
    assert [n.op_type for n in model.graph.node] == ["Mul", "Reshape", "Relu"]
    assert model.ir_version == 10
    x = np.random.RandomState(0).rand(2, 8).astype(np.float32)
    np.testing.assert_allclose(_run(out, {"x": x})[0], _run(src, {"x": x})[0], rtol=1e-6)
    assert _digest(src) == before  # the input model is untouched


def test_sanitize_size_threshold_keeps_big_constants_unfolded(parity_invoke, tmp_path):
    src = models.foldable(tmp_path / "fold.onnx")
    out = tmp_path / "small.onnx"
    code, text, _ = parity_invoke("surgeon", "sanitize", src, "-o", out, "--fold-constants", "--fold-size-threshold", "8")
    assert code == 0
    ops = [n.op_type for n in onnx.load(str(out)).graph.node]
    assert "Add" in ops  # c1 + c2 is 32 bytes > 8: left alone


def test_sanitize_cleanup_removes_unused_initializer(parity_invoke, tmp_path):
    src = models.foldable(tmp_path / "fold.onnx")
    out = tmp_path / "clean.onnx"
    assert parity_invoke("surgeon", "sanitize", src, "-o", out, "--cleanup")[0] == 0
    assert "unused_w" not in {i.name for i in onnx.load(str(out)).graph.initializer}


def test_sanitize_bad_input_is_one_line(parity_invoke, tmp_path):
    bogus = tmp_path / "bogus.onnx"
    bogus.write_bytes(b"not a model")
    code, _, err = parity_invoke("surgeon", "sanitize", bogus, "-o", tmp_path / "o.onnx")
    assert code == 3 and err.count("\n") == 1 and "not a valid ONNX model" in err
    code, _, err = parity_invoke("surgeon", "sanitize", mlp(tmp_path / "m.onnx"), "-o", tmp_path / "o.onnx", "--override-input-shapes", "nope:[1]")
    assert code == 2 and "no input 'nope'" in err and "Traceback" not in err
    code, _, err = parity_invoke("surgeon", "sanitize", tmp_path / "m.onnx", "-o", tmp_path / "m.onnx")
    assert code == 2 and "overwrite" in err


def test_extract_auto_shapes_and_dtypes(parity_invoke, mlp_model, tmp_path):
    out = tmp_path / "mid.onnx"
    code, text, _ = parity_invoke("surgeon", "extract", mlp_model, "--inputs", "a1:auto:auto", "--outputs", "a2:auto", "-o", out)
    assert code == 0, text
    sub = onnx.load(str(out))
    assert [n.name for n in sub.graph.node] == ["fc2", "bias2", "act2"]
    vi = sub.graph.input[0]
    assert vi.name == "a1" and vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert [d.dim_value for d in vi.type.tensor_type.shape.dim] == [2, 16]
    # the cut computes what the full model computes at that tensor
    x = np.random.RandomState(1).rand(2, 16).astype(np.float32)
    from parity_onnxrt.api import modify_onnx_outputs

    full = modify_onnx_outputs(onnx.load(str(mlp_model)), ["a1", "a2"])
    onnx.save(full, str(tmp_path / "marked.onnx"))
    a1, a2 = _run(tmp_path / "marked.onnx", {"x": x})
    np.testing.assert_allclose(_run(out, {"a1": a1})[0], a2, rtol=1e-6)


def test_extract_falls_back_to_running_the_model(tmp_path):
    """Shape inference cannot size a Reshape to a runtime-computed shape: extract runs the model instead."""
    from onnx import TensorProto, helper
    from parity_surgeon import extract

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
        helper.make_node("Relu", ["r"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    )
    path = save_graph(graph, tmp_path / "dyn.onnx")
    sub = extract(str(path), ["r"], ["y"])
    dims = sub.graph.input[0].type.tensor_type.shape.dim
    assert sub.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT and len(dims) == 2


def test_extract_errors(parity_invoke, mlp_model, tmp_path):
    code, _, err = parity_invoke("surgeon", "extract", mlp_model, "--inputs", "a1", "--outputs", "a9", "-o", tmp_path / "o.onnx")
    assert code == 2 and "no tensor 'a9'" in err and "did you mean" in err.lower()
    code, _, err = parity_invoke("surgeon", "extract", mlp_model, "--inputs", "h1", "--outputs", "y", "-o", tmp_path / "o.onnx", "--inputs", "a2")
    assert code == 0  # h1 and a2 are enough: fc3 reads a2
    code, _, err = parity_invoke("surgeon", "extract", mlp_model, "--inputs", "a2", "--outputs", "h2b", "-o", tmp_path / "o.onnx")
    assert code == 2 and "also needs tensor 'x'" in err
    code, _, err = parity_invoke("surgeon", "extract", mlp_model, "--inputs", "a1:[2,16]:float33", "--outputs", "h2", "-o", tmp_path / "o.onnx")
    assert code == 2 and "unknown dtype 'float33'" in err


def test_insert_replaces_subgraph_with_one_node(parity_invoke, mlp_model, tmp_path):
    out = tmp_path / "ins.onnx"
    code, text, _ = parity_invoke(
        "surgeon", "insert", mlp_model, "--op", "LeakyRelu", "--name", "leaky", "--inputs", "h1", "--outputs", "a1", "--attrs", "alpha=0.0", "-o", out
    )
    assert code == 0, text
    model = onnx.load(str(out))
    names = [n.name for n in model.graph.node]
    assert "leaky" in names and "bias1" not in names and "act1" not in names
    x = np.random.RandomState(2).rand(2, 16).astype(np.float32)
    assert _run(out, {"x": x})[0].shape == (2, 4)


def test_insert_custom_domain_and_errors(parity_invoke, mlp_model, tmp_path):
    from parity_surgeon import insert_node

    model = insert_node(str(mlp_model), "MyAct", ["h2b"], ["a2"], domain="my.ops")
    assert ("my.ops", 1) in {(o.domain, o.version) for o in model.opset_import}
    assert next(n for n in model.graph.node if n.op_type == "MyAct").domain == "my.ops"
    code, _, err = parity_invoke("surgeon", "insert", mlp_model, "--op", "Relu", "--inputs", "a2", "--outputs", "a1", "-o", tmp_path / "o.onnx")
    assert code == 2 and "depend on itself" in err
    code, _, err = parity_invoke("surgeon", "insert", mlp_model, "--op", "Relu", "--inputs", "h1", "--outputs", "x", "-o", tmp_path / "o.onnx")
    assert code == 2 and "graph input" in err
