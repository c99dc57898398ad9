from __future__ import annotations

import json

import models
import numpy as np
import onnx
import onnxruntime as ort


def test_fp16_convert_runs_against_fp32_golden(parity_invoke, mlp_model, tmp_path):
    out = tmp_path / "mlp16.onnx"
    code, text, _ = parity_invoke("convert", "--fp-to-fp16", "--fp16-io", mlp_model, "-o", out)
    assert code == 0, text
    model = onnx.load(str(out))
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    assert all(i.data_type == onnx.TensorProto.FLOAT16 for i in model.graph.initializer)
    inputs, golden = tmp_path / "in.npz", tmp_path / "gold.npz"
    assert parity_invoke("run", mlp_model, "--onnxrt", "--save-inputs", inputs, "--save-outputs", golden)[0] == 0
    # by default (--keep-io-types) the fp16 model takes the saved fp32 inputs as they are
    io32 = tmp_path / "mlp16_io32.onnx"
    assert parity_invoke("convert", "--fp-to-fp16", mlp_model, "-o", io32)[0] == 0
    code, text, _ = parity_invoke("run", "--onnxrt", io32, "--load-inputs", inputs, "--load-outputs", golden, "--tolerance-preset", "fp16")
    assert code == 0, text


def test_fp16_keep_io_types_and_block_lists(mlp_model, tmp_path):
    from parity_surgeon import convert_to_fp16

    model, report = convert_to_fp16(str(mlp_model), keep_io_types=True, op_block_list=["Tanh"], node_block_list=["fc1"])
    g = model.graph
    assert g.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert g.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    weights = {i.name: i.data_type for i in g.initializer}
    assert weights["W1"] == onnx.TensorProto.FLOAT  # read only by the blocked fc1
    assert weights["W2"] == onnx.TensorProto.FLOAT16
    assert set(report.blocked_nodes) == {"fc1", "act2"}
    # computed tensor names are kept, so layerwise comparison against the fp32 model matches by name
    produced = {t for n in g.node for t in n.output}
    assert {"h1", "a1", "h2", "a2"} <= produced
    x = np.random.RandomState(0).rand(2, 16).astype(np.float32)
    y16 = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    y32 = ort.InferenceSession(str(mlp_model)).run(None, {"x": x})[0]
    assert y16.dtype == np.float32
    np.testing.assert_allclose(y16, y32, atol=1e-2)


def test_fp16_errors(parity_invoke, mlp_model, tmp_path):
    code, _, err = parity_invoke("convert", mlp_model, "-o", tmp_path / "same.onnx")
    assert code == 2 and "--fp-to-fp16" in err
    code, _, err = parity_invoke("convert", "--fp-to-fp16", mlp_model, "-o", tmp_path / "o.onnx", "--node-block-list", "fc9")
    assert code == 2 and "no node 'fc9'" in err
    assert not (tmp_path / "o.onnx").exists()


def test_lint_reports_problems_one_line_each_with_json(parity_invoke, tmp_path):
    bad = models.lint_bad(tmp_path / "bad.onnx")
    report = tmp_path / "lint.json"
    code, text, _ = parity_invoke("check", "lint", bad, "-o", report)
    assert code == 1
    data = json.loads(report.read_text())
    rules = {i["rule"] for i in data["issues"]}
    assert {"dangling-input", "unused-initializer", "duplicate-node-name", "dead-node"} <= rules
    assert data["passed"] is False and data["summary"]["error"] >= 1
    lines = [line for line in text.splitlines() if line.startswith(("ERROR", "WARNING"))]
    assert len(lines) == len(data["issues"])  # one line per issue


def test_lint_clean_model_passes_and_flags_unsupported_opset(parity_invoke, mlp_model, tmp_path):
    code, text, _ = parity_invoke("check", "lint", mlp_model)
    assert code == 0 and "PASSED" in text
    model = onnx.load(str(mlp_model))
    model.opset_import[0].version = 99
    onnx.save(model, str(tmp_path / "future.onnx"))
    from parity_surgeon import lint

    issues = lint(str(tmp_path / "future.onnx")).issues
    assert any(i.rule == "opset" and "onnxruntime" in i.message for i in issues)


def test_lint_missing_file(parity_invoke, tmp_path):
    code, _, err = parity_invoke("check", "lint", tmp_path / "nope.onnx")
    assert code == 2 and "model not found" in err
