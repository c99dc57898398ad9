"""``parity surgeon insert`` on one tensor (--inputs and --outputs naming it), at a graph input or output, ops
ONNX does not define (domain ``custom``), ops of a later opset (refused) and typed --attrs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

SUFFIX = "_polygraphy_surgeon_insert_output"


def _fan_out(path: Path) -> Path:
    """x -> Neg(n) -> two readers: Identity(y1) and Abs(y2)."""
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Identity", ["n"], ["y1"]), helper.make_node("Abs", ["n"], ["y2"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], [helper.make_tensor_value_info(y, TensorProto.FLOAT, [4]) for y in ("y1", "y2")]
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), str(path))
    return path


def _run(path: Path, x: np.ndarray) -> list:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})


X = np.array([-2.0, -1.0, 1.0, 2.0], np.float32)


def test_node_on_a_tensor_feeds_every_reader(parity_invoke, tmp_path):
    out = tmp_path / "o.onnx"
    code, text, err = parity_invoke("surgeon", "insert", _fan_out(tmp_path / "m.onnx"), "--op", "Relu", "--inputs", "n", "--outputs", "n", "-o", out)
    assert code == 0, err
    model = onnx.load(str(out))
    assert [n.op_type for n in model.graph.node] == ["Neg", "Relu", "Identity", "Abs"]
    assert [list(n.input) for n in model.graph.node[2:]] == [[f"n{SUFFIX}"], [f"n{SUFFIX}"]]
    y1, y2 = _run(out, X)
    assert np.array_equal(y1, np.maximum(-X, 0)) and np.array_equal(y2, np.maximum(-X, 0))
    assert "nodes: 3 -> 4" in text


def test_node_on_a_graph_output_keeps_its_name(parity_invoke, tmp_path):
    out = tmp_path / "o.onnx"
    code, _, err = parity_invoke("surgeon", "insert", _fan_out(tmp_path / "m.onnx"), "--op", "Neg", "--inputs", "y1", "--outputs", "y1", "-o", out)
    assert code == 0, err
    model = onnx.load(str(out))
    assert [o.name for o in model.graph.output] == ["y1", "y2"]
    assert [n.op_type for n in model.graph.node] == ["Neg", "Identity", "Neg", "Abs"]  # right after what it reads
    assert list(model.graph.node[2].input) == [f"y1{SUFFIX}"] and list(model.graph.node[2].output) == ["y1"]
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == [4]
    assert np.array_equal(_run(out, X)[0], X)  # Neg(Neg(x))


def test_node_on_a_graph_input(parity_invoke, tmp_path):
    out = tmp_path / "o.onnx"
    code, _, err = parity_invoke("surgeon", "insert", _fan_out(tmp_path / "m.onnx"), "--op", "Abs", "--inputs", "x", "--outputs", "x", "-o", out)
    assert code == 0, err
    model = onnx.load(str(out))
    assert [i.name for i in model.graph.input] == ["x"] and model.graph.node[0].op_type == "Abs"
    assert np.array_equal(_run(out, X)[0], -np.abs(X))
    # a graph input as an output only (not read by the node) is still refused
    code, _, err = parity_invoke("surgeon", "insert", _fan_out(tmp_path / "m.onnx"), "--op", "Abs", "--inputs", "n", "--outputs", "x", "-o", tmp_path / "p.onnx")
    assert code == 2 and "graph input" in err


def test_op_onnx_lacks_goes_in_a_custom_domain_and_is_written(parity_invoke, tmp_path):
    out = tmp_path / "o.onnx"
    code, _, err = parity_invoke(
        "surgeon", "insert", _fan_out(tmp_path / "m.onnx"), "--op", "FakeOp", "--inputs", "n", "--outputs", "n", "-o", out,
        "--attrs", "s='0'", "i=0", "f=0.0", "w=name", "ss=['0','1']", "ii=[1,2,3]", "ff=[0.0,-1.0]",
    )  # fmt: skip
    assert code == 0, err
    assert "'FakeOp' is not an ONNX op" in err and "domain 'custom'" in err
    model = onnx.load(str(out))
    onnx.checker.check_model(model, full_check=True)
    node = next(n for n in model.graph.node if n.op_type == "FakeOp")
    assert node.domain == "custom" and ("custom", 1) in {(o.domain, o.version) for o in model.opset_import}
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs == {"s": b"0", "i": 0, "f": 0.0, "w": b"name", "ss": [b"0", b"1"], "ii": [1, 2, 3], "ff": [0.0, -1.0]}
    assert [a.type for a in node.attribute][:3] == [onnx.AttributeProto.STRING, onnx.AttributeProto.INT, onnx.AttributeProto.FLOAT]
    # with --domain the op goes where it says (written too: onnxruntime lacking the op is like a missing kernel)
    args = ["--op", "MyAct", "--domain", "my.ops", "--inputs", "n", "--outputs", "y2", "-o", tmp_path / "d.onnx"]
    code, _, err = parity_invoke("surgeon", "insert", tmp_path / "m.onnx", *args)
    assert code == 0, err
    assert next(n for n in onnx.load(str(tmp_path / "d.onnx")).graph.node if n.op_type == "MyAct").domain == "my.ops"


def test_op_of_a_later_opset_is_refused(parity_invoke, tmp_path):
    code, _, err = parity_invoke("surgeon", "insert", _fan_out(tmp_path / "m.onnx"), "--op", "Gelu", "--inputs", "n", "--outputs", "n", "-o", tmp_path / "o.onnx")
    assert code == 2 and "not in ONNX opset 17" in err and "opset 20" in err and err.count("\n") == 1
    assert not (tmp_path / "o.onnx").exists()
