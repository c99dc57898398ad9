"""First-divergence report and ``debug localize`` on models with a planted divergence in a known node."""

from __future__ import annotations

import json

import models
import pytest

from parity.testing import mlp


def _marked_run(actual, reference):
    from parity_onnxrt.api import ModifyOnnxOutputs, OnnxFromPath, OnnxrtRunner, SessionFromOnnx

    from parity import run_engine

    runners = [OnnxrtRunner(SessionFromOnnx(ModifyOnnxOutputs(OnnxFromPath(str(p)), ["mark", "all"])), name=n) for p, n in ((actual, "a"), (reference, "b"))]
    return run_engine.run(runners)


def test_first_divergence_report_names_planted_node(planted, mlp_model):
    from parity.compare.divergence import first_divergence

    summary = _marked_run(planted, mlp_model)
    (report,) = first_divergence(summary, str(planted))
    assert [t.name for t in report.tensors] == ["h1", "h1b", "a1", "h2", "h2b", "a2", "y"]  # topological order
    assert report.first.name == "h2" and report.first.node == "fc2" and report.first.op_type == "MatMul"
    assert report.first.inputs == ("a1", "W2")
    assert all(t.passed for t in report.tensors[:3])
    command = report.extract_command()
    assert "--inputs a1:auto:auto" in command and "--outputs h2:auto" in command  # the weight stays inside
    out = "\n".join(report.lines())
    assert "First divergence: 'h2', produced by node 'fc2' (MatMul)" in out and "Extract it: parity surgeon extract" in out


def test_extract_command_from_report_works(planted, mlp_model, parity_invoke, tmp_path):
    from parity.compare.divergence import first_divergence

    (report,) = first_divergence(_marked_run(planted, mlp_model), str(planted))
    argv = report.extract_command(str(tmp_path / "fc2.onnx")).split()[1:]
    code, text, _ = parity_invoke(*argv)
    assert code == 0, text
    import onnx

    assert [n.name for n in onnx.load(str(tmp_path / "fc2.onnx")).graph.node] == ["fc2"]


@pytest.mark.parametrize("mode", ["batches", "bisect"])
def test_localize_finds_planted_node_and_says_it_introduces_error(planted, mlp_model, mode):
    from parity_surgeon import localize

    result = localize(str(planted), ["onnxrt"], reference_model=str(mlp_model), mode=mode)
    assert result.first.name == "h2" and result.first.node == "fc2"
    assert result.suspect is not None and result.suspect.verdict == "introduces"
    if mode == "bisect":
        assert len(result.tensors) < 7  # it did not compare everything


def test_localize_propagating_node_is_not_blamed(planted, mlp_model):
    """act2 (Tanh) is downstream of the planted node: alone, on the reference's inputs, it is exact."""
    from parity_surgeon import localize

    result = localize(str(planted), ["onnxrt"], reference_model=str(mlp_model), isolate="all", stop_at_first=False)
    verdicts = {v.node: v.verdict for v in result.isolation}
    assert verdicts["fc2"] == "introduces"
    assert verdicts["act2"] == "propagates" and verdicts["bias2"] == "propagates" and verdicts["fc3"] == "propagates"
    assert verdicts["fc1"] == "ok"


def test_localize_small_budget_uses_many_batches_and_same_answer(planted, mlp_model):
    from parity_surgeon import localize

    wide = mlp(planted.parent / "wide.onnx", planted=0.05, width=512)
    ref = mlp(planted.parent / "wide_ref.onnx", width=512)
    result = localize(str(wide), ["onnxrt"], reference_model=str(ref), memory_budget=1, isolate="none")
    assert result.first.node == "fc2"
    assert result.pair_runs == 4  # one tensor per batch up to and including h2, then it stops


def test_localize_bisect_walks_up_parallel_branches(tmp_path):
    """Only right2 differs; in topological order left2 sits between it and its input."""
    from parity_surgeon import localize

    base = models.branchy(tmp_path / "b.onnx")
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(base))
    for init in model.graph.initializer:
        if init.name == "kb":
            init.CopyFrom(numpy_helper.from_array(np.array(3.5, np.float32), "kb"))
    onnx.save(model, str(tmp_path / "b2.onnx"))
    for mode in ("bisect", "batches"):
        result = localize(str(tmp_path / "b2.onnx"), ["onnxrt"], reference_model=str(base), mode=mode)
        assert result.first.node == "right2", mode


def test_localize_fp16_overflow_is_found(tmp_path, parity_invoke):
    src = models.overflow(tmp_path / "ovf.onnx")
    half = tmp_path / "ovf16.onnx"
    assert parity_invoke("convert", "--fp-to-fp16", src, "-o", half)[0] == 0
    report = tmp_path / "loc.json"
    code, text, _ = parity_invoke(
        "debug", "localize", half, "--onnxrt", "--reference-model", src, "--tolerance-preset", "fp16", "--report", report, "--extract-to", tmp_path / "node.onnx"
    )
    assert code == 1, text
    assert "First divergence: 's2', produced by node 'scale2' (Mul)" in text
    data = json.loads(report.read_text())
    assert data["divergence"]["first"] == "s2" and data["isolation"][0]["verdict"] == "introduces"
    assert (tmp_path / "node.onnx").exists()


def test_localize_same_model_passes_and_cli_errors(mlp_model, parity_invoke, tmp_path):
    code, text, _ = parity_invoke("debug", "localize", mlp_model, "--onnxrt", "--onnxrt=graph-optimization-level=disable")
    assert code == 0 and "no divergence" in text
    code, _, err = parity_invoke("debug", "localize", mlp_model, "--onnxrt")
    assert code == 2 and "two runners" in err
    code, _, err = parity_invoke("debug", "localize", mlp_model, "--onnxrt", "--onnxrt", "--memory-budget", "lots")
    assert code == 2 and "--memory-budget" in err
    code, _, err = parity_invoke("debug", "localize", mlp_model, "--onnxrt", "--reference-model", tmp_path / "missing.onnx")
    assert code == 2 and "reference model not found" in err
    code, _, err = parity_invoke("debug", "localize", mlp_model, "--onnxrt", "--onnxrt", "--onnx-outputs", "h9")
    assert code == 2 and "no computed tensor 'h9'" in err
