"""``parity debug precision``: the minimal fp32 node set, with onnxruntime as the backend."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
from parity_reduce import PrecisionSearch
from parity_reduce.precision import MixedPrecision
from parity_reduce.testing import fp16_sensitive

from parity.cli import main

PLANTED = ["shift_a", "unshift_a", "shift_b", "unshift_b"]


def test_cli_finds_exactly_the_planted_fp16_sensitive_nodes(tmp_path):
    onnx.save(fp16_sensitive(), "model.onnx")
    assert main(["run", "model.onnx", "--onnxrt", "--save-inputs", "in.npz", "--save-outputs", "golden.npz"]) == 0
    code = main(
        [
            "debug",
            "precision",
            "model.onnx",
            "-o",
            "mixed.onnx",
            "--save-nodes",
            "nodes.json",
            "--check",
            "parity",
            "run",
            "parity_debug.onnx",
            "--onnxrt",
            "--load-inputs",
            "in.npz",
            "--load-outputs",
            "golden.npz",
            "--atol",
            "1e-2",
            "--rtol",
            "1e-2",
        ]
    )
    assert code == 0
    report = json.loads((tmp_path / "nodes.json").read_text())
    assert sorted(report["fp32_nodes"]) == sorted(PLANTED)  # a set of distant nodes, not a prefix or suffix
    mixed = onnx.load("mixed.onnx")
    onnx.checker.check_model(mixed)
    casts = [n for n in mixed.graph.node if n.op_type == "Cast"]
    assert casts and any(a.i == onnx.TensorProto.FLOAT16 for n in casts for a in n.attribute)
    # The written model passes the same check.
    assert main(["run", "mixed.onnx", "--onnxrt", "--load-inputs", "in.npz", "--load-outputs", "golden.npz", "--atol", "1e-2", "--rtol", "1e-2"]) == 0


def test_python_api_and_all_fp16_fails():
    model = fp16_sensitive()
    x = np.random.default_rng(0).uniform(0.5, 1, (4, 4)).astype(np.float32)
    ref = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]

    def passes(candidate):
        out = ort.InferenceSession(candidate.SerializeToString()).run(None, {"x": x})[0]
        return bool(np.allclose(out, ref, rtol=1e-2, atol=1e-2))

    assert not passes(MixedPrecision(model).build(set()))  # everything in fp16 fails
    result = PrecisionSearch(model, passes).run()
    assert sorted(result.fp32_nodes) == sorted(PLANTED)
    assert passes(result.model)
    bisect = PrecisionSearch(model, passes, mode="bisect").run()
    assert len(bisect.fp32_nodes) > len(result.fp32_nodes)  # Polygraphy-style search keeps a whole range


def test_check_that_fails_in_fp32_is_reported(tmp_path, capsys):
    onnx.save(fp16_sensitive(), "model.onnx")
    assert main(["debug", "precision", "model.onnx", "-o", "m.onnx", "--check", "false"]) == 1
    assert "even with every node in fp32" in capsys.readouterr().err
