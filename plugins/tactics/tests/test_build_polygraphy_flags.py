"""Polygraphy 0.53.6's debug flags and summary on ``parity debug build``, through the real CLI against the TensorRT
model (trt_model, each modelled version; the real TensorRT where it imports): Polygraphy's ``Passed: x/y | Pass
Rate: z%`` line, ``--check-inference`` and ``--ignore-fail-returncode``."""

from __future__ import annotations

import sys

import pytest
from test_tactics_flows import make_model

from parity.testing import invoke


@pytest.mark.parametrize(
    ("until", "check", "line", "code"), [("good", "true", "Passed: 1/1 | Pass Rate: 100.0%", 0), ("bad", "false", "Passed: 0/1 | Pass Rate: 0.0%", 1)]
)
def test_pass_rate_line(trt_backend, tmp_path, monkeypatch, until, check, line, code):
    monkeypatch.chdir(tmp_path)
    model = make_model(tmp_path / "model.onnx")
    result = invoke("debug", "build", model, f"--until={until}", "--save-tactics=replay.json", "--artifacts", "replay.json", "--check", check)
    assert f"Finished 1 iteration(s) | {line}" in result.stdout, result
    assert "Finished 1 check(s)" in result.stdout  # Parity's own summary stays
    assert result.exit_code == code  # Parity's: 1 when a build was bad (Polygraphy exits 0)
    assert len(list((tmp_path / "parity_artifacts" / ("good" if code == 0 else "bad")).glob("replay_N0*.json"))) == 1


def test_check_inference_and_ignore_fail_returncode(trt_backend, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = make_model(tmp_path / "model.onnx")
    exit3 = [sys.executable, "-c", "raise SystemExit(3)"]
    result = invoke("debug", "build", model, "--until=2", "--check-inference", *exit3)
    assert "Passed: 0/2" in result.stdout and result.exit_code == 1, result
    result = invoke("debug", "build", model, "--until=2", "--ignore-fail-returncode", "3", "--check-inference", *exit3)
    assert "Passed: 2/2 | Pass Rate: 100.0%" in result.stdout and result.exit_code == 0, result
