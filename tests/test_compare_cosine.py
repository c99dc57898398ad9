"""Cosine similarity is reported only where it means something: not for an all-zero or ~0 reference.

"~0" is decided by the check's own absolute tolerance: a reference whose root mean square is at most atol
cannot be told from zero by the comparison, so its direction is noise (stats.cosine_undefined).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from parity.cli import main
from parity.compare import stats
from parity.compare.simple import SimpleCompare

pytestmark = pytest.mark.corpus

DET = ("--input-shapes", "x:[1,3,64,64]")
REC = ("--input-shapes", "x:[1,3,48,64]")
TWO = ("--onnxrt", "--onnxrt=graph-optimization-level=disable")


def _run(capsys, *args):
    from parity import plugins

    plugins.reset()
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _outputs(report):
    data = json.loads(report.read_text())  # strict JSON: json.loads would accept NaN, so check the text too
    assert "NaN" not in report.read_text() and "Infinity" not in report.read_text()
    return [o for pair in data["comparisons"] for it in pair["iterations"] for o in it["outputs"]]


def test_ppocr_det_near_zero_output_has_no_cosine(corpus_model, capsys, tmp_path):
    """On random inputs PP-OCR det's probability map is ~1e-8: two onnxruntime configurations agree within
    atol, and the cosine of that noise (0.73) must not be printed next to PASSED."""
    report = tmp_path / "r.json"
    code, out, err = _run(capsys, "run", corpus_model("ppocr_det"), *TWO, *DET, "--report", report)
    assert code == 0, out + err
    line = next(ln for ln in out.splitlines() if "sigmoid_0.tmp_0:" in ln)
    assert "cosine n/a (reference ~0: rms" in line and "<= atol 1e-05" in line, line
    (check,) = _outputs(report)
    assert check["values"]["cosine"] is None and check["values"]["cosine_undefined"].startswith("reference ~0")


def test_all_zero_reference_says_cosine_undefined(corpus_model, capsys, tmp_path):
    """A golden file whose output is all zero: the output fails, and the cosine is undefined (it printed
    'cosine 0.000000')."""
    model = corpus_model("ppocr_rec")
    golden, inputs = tmp_path / "golden.npz", tmp_path / "in.npz"
    assert _run(capsys, "run", model, "--onnxrt", *REC, "--save-inputs", inputs, "--save-outputs", golden)[0] == 0
    from parity.results.model import IterationResult, RunResults

    ((runner, (first, *_)),) = RunResults.load(golden).items()
    zeros = IterationResult({name: np.zeros(value.shape, value.dtype) for name, value in first.items()})
    RunResults([(runner, [zeros])]).save(tmp_path / "zero.npz")
    golden = tmp_path / "zero.npz"
    report = tmp_path / "r.json"
    code, out, err = _run(capsys, "run", model, "--onnxrt", "--load-inputs", inputs, "--load-outputs", golden, "--report", report)
    assert code == 1, out + err
    assert "cosine n/a (reference is all zero)" in out and "cosine 0.000000" not in out, out
    (check,) = _outputs(report)
    assert check["values"]["cosine"] is None and check["values"]["cosine_undefined"] == "reference is all zero"


def test_meaningful_cosine_is_still_reported(corpus_model, capsys, tmp_path):
    """PP-OCR rec's softmax is well above atol: its cosine is a number, in the text and the report."""
    report = tmp_path / "r.json"
    code, out, err = _run(capsys, "run", corpus_model("ppocr_rec"), *TWO, *REC, "--report", report)
    assert code == 0, out + err
    (check,) = _outputs(report)
    assert 0.999 < check["values"]["cosine"] <= 1.0 + 1e-9 and "cosine_undefined" not in check["values"]
    assert f"cosine {check['values']['cosine']:.6f}" in out


def test_mark_all_report_is_strict_json_with_reasons(corpus_model, capsys, tmp_path):
    """Marking every tensor of PP-OCR det includes empty shape tensors (no max error) and ~0 ones: the report
    is still strict JSON, and every cosine is a number or null with a reason."""
    report = tmp_path / "r.json"
    code, out, err = _run(capsys, "run", corpus_model("ppocr_det"), *TWO, *DET, "--onnx-outputs", "mark", "all", "--report", report)
    assert code in (0, 1), out + err
    checks = [c for c in _outputs(report) if c["metric"] == "simple"]
    assert len(checks) > 600
    for c in checks:
        v = c["values"]
        assert (v["cosine"] is None) == ("cosine_undefined" in v), c
    reasons = {c["values"].get("cosine_undefined", "").split(":")[0] for c in checks}
    assert {"empty tensor", "reference ~0"} <= reasons, reasons


def test_cosine_undefined_rule():
    compare = SimpleCompare(atol=1e-5, rtol=1e-5)
    ref = np.full(100, 1e-6, np.float32)
    assert compare("y", ref * 2, ref).values["cosine"] is None  # rms 1e-6 <= atol: ~0
    assert compare("y", ref * 2, ref * 100).values["cosine"] == pytest.approx(1.0)  # rms 1e-4: defined
    tight = SimpleCompare(atol=0.0, rtol=1e-5)
    assert tight("y", ref * 2, ref).values["cosine"] == pytest.approx(1.0)  # atol 0: only exact zero is ~0
    assert stats.cosine_undefined(1.0, 0.0, 4) == "reference is all zero"
    assert stats.cosine_undefined(float("nan"), 1.0, 4) == "NaN or Inf in the tensors"
    assert stats.cosine_undefined(0.0, 0.0, 0) == "empty tensor"
    assert stats.cosine_undefined(1.0, 4.0, 4, atol=1.0) == "reference ~0: rms 1 <= atol 1"
    assert stats.cosine_undefined(1.0, 4.01, 4, atol=1.0) is None
