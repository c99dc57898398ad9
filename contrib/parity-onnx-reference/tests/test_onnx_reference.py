"""The --onnx-ref backend, installed as a third party would install it, driven through the CLI and the API."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from parity.testing import IR_VERSION, OPSET, save_graph

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "models"


def save(graph: onnx.GraphProto, path: Path) -> str:
    """parity.testing's ``save_graph`` with onnx's full check (ir_version 10: onnxruntime cannot load the newest)."""
    return str(save_graph(graph, path, check=True))


def weight(rng: np.random.Generator, name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def small_cnn(path: Path) -> str:
    """Conv -> BatchNorm -> Relu -> MaxPool -> strided Conv -> SiLU -> pool -> Gemm -> Softmax, dynamic batch."""
    rng = np.random.default_rng(1)
    inits = [
        weight(rng, "c1.w", 6, 3, 3, 3), weight(rng, "c1.b", 6),
        numpy_helper.from_array(np.abs(rng.standard_normal(6)).astype(np.float32) + 0.5, "bn.scale"), weight(rng, "bn.bias", 6),
        weight(rng, "bn.mean", 6, scale=0.1), numpy_helper.from_array(np.full(6, 0.9, np.float32), "bn.var"),
        weight(rng, "c2.w", 8, 6, 3, 3), weight(rng, "fc.w", 8, 5), weight(rng, "fc.b", 5),
    ]  # fmt: skip
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "c1.w", "c1.b"], ["c1"], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c1", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["bn"]),
        node("Relu", ["bn"], ["relu"]),
        node("MaxPool", ["relu"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["mp", "c2.w"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Sigmoid", ["c2"], ["sig"]),
        node("Mul", ["c2", "sig"], ["silu"]),
        node("GlobalAveragePool", ["silu"], ["gap"]),
        node("Flatten", ["gap"], ["flat"]),
        node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"]),
        node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 5])],
        inits,
    )  # fmt: skip
    return save(graph, path)


def transformer_block(path: Path, d: int = 8, hidden: int = 16) -> str:
    """Pre-norm single-head self-attention and an Erf-GELU MLP, each with a residual: x[batch, seq, d]."""
    rng = np.random.default_rng(2)
    inits = [
        numpy_helper.from_array(np.ones(d, np.float32), "ln.g"), numpy_helper.from_array(np.zeros(d, np.float32), "ln.b"),
        weight(rng, "wq", d, d), weight(rng, "wk", d, d), weight(rng, "wv", d, d), weight(rng, "wo", d, d),
        weight(rng, "w1", d, hidden), weight(rng, "b1", hidden), weight(rng, "w2", hidden, d), weight(rng, "b2", d),
        numpy_helper.from_array(np.array(1 / np.sqrt(d), np.float32), "scale"),
        numpy_helper.from_array(np.array(1 / np.sqrt(2), np.float32), "inv_sqrt2"),
        numpy_helper.from_array(np.array(0.5, np.float32), "half"), numpy_helper.from_array(np.array(1.0, np.float32), "one"),
    ]  # fmt: skip
    node = helper.make_node
    nodes = [
        node("LayerNormalization", ["x", "ln.g", "ln.b"], ["ln1"], axis=-1),
        node("MatMul", ["ln1", "wq"], ["q"]), node("MatMul", ["ln1", "wk"], ["k"]), node("MatMul", ["ln1", "wv"], ["v"]),
        node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        node("MatMul", ["q", "kt"], ["scores"]), node("Mul", ["scores", "scale"], ["scaled"]),
        node("Softmax", ["scaled"], ["attn"], axis=-1),
        node("MatMul", ["attn", "v"], ["ctx"]), node("MatMul", ["ctx", "wo"], ["proj"]), node("Add", ["x", "proj"], ["res1"]),
        node("LayerNormalization", ["res1", "ln.g", "ln.b"], ["ln2"], axis=-1),
        node("MatMul", ["ln2", "w1"], ["h0"]), node("Add", ["h0", "b1"], ["h"]),
        node("Mul", ["h", "inv_sqrt2"], ["hs"]), node("Erf", ["hs"], ["erf"]), node("Add", ["erf", "one"], ["erf1"]),
        node("Mul", ["h", "erf1"], ["g0"]), node("Mul", ["g0", "half"], ["gelu"]),
        node("MatMul", ["gelu", "w2"], ["f0"]), node("Add", ["f0", "b2"], ["ffn"]), node("Add", ["res1", "ffn"], ["y"]),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes, "transformer_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, d])],
        inits,
    )  # fmt: skip
    return save(graph, path)


def test_installed_and_listed(parity_invoke):
    eps = {ep.name: ep for ep in importlib.metadata.entry_points(group="parity")}
    assert "onnx-ref" in eps, "install the plugin first: pip install -e contrib/parity-onnx-reference"
    result = parity_invoke("plugins", "--json")
    assert result.exit_code == 0, result.stderr
    rows = {row["distribution"]: row for row in json.loads(result.stdout)}
    row = rows["parity-onnx-reference"]
    assert row["status"] == "loaded" and row["registered"] == {"backends": ["onnx-ref"]}


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.onnx")))
def test_shipped_examples_match_onnxrt(parity_invoke, name):
    result = parity_invoke("run", str(EXAMPLES / name), "--onnxrt", "--onnx-ref", "--iterations", "2")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "[onnxrt-0 vs onnx-ref-1] iteration 1: PASSED" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith("PASSED")


@pytest.mark.parametrize(("build", "shape"), [(small_cnn, "x:[2,3,16,16]"), (transformer_block, "x:[3,4,8]")])
def test_built_models_match_onnxrt(parity_invoke, tmp_path, build, shape):
    model = build(tmp_path / "model.onnx")
    report = tmp_path / "report.json"
    result = parity_invoke("run", model, "--onnxrt", "--onnx-ref", "--input-shapes", shape, "--atol", "1e-5", "--rtol", "1e-4", "--report", str(report))
    assert result.exit_code == 0, result.stdout + result.stderr
    checks = json.loads(report.read_text())["comparisons"][0]["iterations"][0]["outputs"]
    assert [c["name"] for c in checks] == [onnx.load(model).graph.output[0].name]
    assert checks[0]["passed"] and checks[0]["values"]["max_abs"] < 1e-5


def test_mark_all_outputs_compares_every_tensor(parity_invoke, tmp_path):
    model = transformer_block(tmp_path / "block.onnx")
    report = tmp_path / "report.json"
    result = parity_invoke(
        "run", model, "--onnx-ref", "--onnxrt", "--input-shapes", "x:[1,4,8]", "--onnx-outputs", "mark", "all", "--rtol", "1e-3", "--report", str(report)
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    names = {c["name"] for c in json.loads(report.read_text())["comparisons"][0]["iterations"][0]["outputs"]}
    produced = {out for node in onnx.load(model).graph.node for out in node.output}
    assert names == produced


def test_named_outputs_and_bad_name(parity_invoke, tmp_path):
    model = small_cnn(tmp_path / "cnn.onnx")
    result = parity_invoke("run", model, "--onnx-ref", "--save-outputs", str(tmp_path / "out.npz"), "--onnx-outputs", "relu", "gap")
    assert result.exit_code == 0, result.stderr
    from parity import load_results

    outputs = load_results(tmp_path / "out.npz")["onnx-ref-0"][0]
    assert sorted(outputs) == ["gap", "relu"] and outputs["relu"].min() >= 0
    result = parity_invoke("run", model, "--onnx-ref", "--onnx-outputs", "rleu")
    assert result.exit_code == 2 and result.stderr.strip().count("\n") == 0
    assert "no tensor 'rleu'" in result.stderr and "relu" in result.stderr


def test_unsupported_operator_is_a_one_line_error(parity_invoke, tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")], "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.example", 1)])
    model.ir_version = IR_VERSION
    onnx.save(model, tmp_path / "custom.onnx")
    result = parity_invoke("run", str(tmp_path / "custom.onnx"), "--onnx-ref")
    assert result.exit_code == 3, result.stderr
    assert result.stderr.startswith("parity: error: onnx.reference cannot load the model") and "Frobnicate" in result.stderr
    assert "Traceback" not in result.stderr


def test_python_api_against_onnxrt(tmp_path):
    from parity_onnx_reference import EvaluatorFromOnnx, OnnxReferenceRunner
    from parity_onnxrt.api import OnnxrtRunner, SessionFromOnnx

    from parity import Comparator, DataLoader

    model = transformer_block(tmp_path / "block.onnx")
    runners = [OnnxReferenceRunner(EvaluatorFromOnnx(model)), OnnxrtRunner(SessionFromOnnx(model))]
    results = Comparator.run(runners, data_loader=DataLoader(iterations=2, input_shapes={"x": (2, 4, 8)}))
    accuracy = Comparator.compare_accuracy(results)
    assert accuracy, accuracy
    reference = results["onnx-ref"][0]["y"]
    assert reference.shape == (2, 4, 8) and reference.dtype == np.float32
    # a wrong input is rejected by the runner before the NumPy kernels see it
    from parity.errors import UsageError

    with OnnxReferenceRunner(EvaluatorFromOnnx(model)) as runner, pytest.raises(UsageError, match="expects"):
        runner.infer({"x": np.zeros((2, 4, 9), np.float32)})
