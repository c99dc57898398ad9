"""``parity inspect model x.onnx --display-as trt``: the ONNX model as TensorRT's ONNX parser reads it, run against
the TensorRT model (NOT TensorRT) of each modelled version, then the real TensorRT where it imports."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from parity.testing import invoke, relu_add


def test_display_as_trt_shows_the_parsed_network(trt_backend, tmp_path):
    model = relu_add(tmp_path / "model.onnx", (2, 3))
    shown = invoke("inspect", "model", model, "--display-as", "trt", "--show", "layers")
    assert shown.exit_code == 0, shown
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("TensorRT network")
    assert "  1 input(s)" in lines and "  1 output(s)" in lines
    assert any("[ELEMENTWISE]" in line for line in lines) and any("[ACTIVATION]" in line for line in lines)
    # --display-as onnx is the default view
    assert invoke("inspect", "model", model, "--display-as", "onnx").stdout == invoke("inspect", "model", model).stdout


def test_display_as_trt_reports_what_the_parser_refuses(trt_backend, tmp_path):
    graph = helper.make_graph(
        [helper.make_node("NoSuchOp", ["x"], ["y"], domain="example.custom")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("example.custom", 1)])
    proto.ir_version = 10
    model = tmp_path / "custom.onnx"
    onnx.save(proto, model)
    shown = invoke("inspect", "model", model, "--display-as", "trt")
    assert shown.exit_code == 3 and shown.stdout == ""
    assert "NoSuchOp" in shown.stderr and len(shown.stderr.strip().splitlines()) == 1


def test_display_as_is_refused_where_it_cannot_apply(tmp_path):
    model = relu_add(tmp_path / "model.onnx", (2, 3))
    shown = invoke("inspect", "model", model, "--display-as", "trt", "--json")
    assert shown.exit_code == 2 and "--display-as trt and --json" in shown.stderr
    script = tmp_path / "net.py"
    script.write_text("def load_network():\n    raise SystemExit(1)\n")
    shown = invoke("inspect", "model", script, "--display-as", "trt")
    assert shown.exit_code == 2 and "trt-network-script is not ONNX" in shown.stderr


def test_display_as_a_view_no_plugin_registers_is_refused_naming_those_that_exist(tmp_path):
    model = relu_add(tmp_path / "model.onnx", (2, 3))
    shown = invoke("inspect", "model", model, "--display-as", "nosuch")
    assert shown.exit_code == 2 and shown.stdout == ""
    assert "no installed plugin reads ONNX models as 'nosuch'" in shown.stderr and "available: onnx, trt" in shown.stderr
