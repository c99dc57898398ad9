"""Polygraphy 0.53.6's debug flags and summary on ``parity debug build``, through the real CLI against the TensorRT
model (trt_model, each modelled version; the real TensorRT where it imports): Polygraphy's ``Passed: x/y | Pass
Rate: z%`` line, ``--check-inference``, ``--ignore-fail-returncode``, the data loader flags (int8 calibration data, as
in Polygraphy's debug build; refused without --int8) and ``--external-data-dir``/``--ext``."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from test_tactics_flows import make_model
from test_trt_flows_int8 import ONES, data_script, drawn, one_op, trt10  # noqa: F401 - trt10: a fixture (used by name)

from parity.api import save_inputs
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
    exit3 = [sys.executable, "-S", "-c", "raise SystemExit(3)"]
    result = invoke("debug", "build", model, "--until=2", "--check-inference", *exit3)
    assert "Passed: 0/2" in result.stdout and result.exit_code == 1, result
    result = invoke("debug", "build", model, "--until=2", "--ignore-fail-returncode", "3", "--check-inference", *exit3)
    assert "Passed: 2/2 | Pass Rate: 100.0%" in result.stdout and result.exit_code == 0, result


# ---- Polygraphy's data loader flags: int8 calibration data for each build (TensorRT 10.x) ---------------------------


@pytest.mark.usefixtures("trt10")
def test_data_loader_script_and_load_inputs_calibrate_each_build(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = one_op(tmp_path / "identity.onnx")
    loader = data_script(tmp_path / "data_loader.py", ONES)
    result = invoke("debug", "build", model, "--int8", "--data-loader-script", loader, "--until=2", "--check", "true")
    assert result.exit_code == 0, result
    assert drawn(loader) == 10  # both builds calibrated on the script's 5 batches
    assert "calibrating on random inputs" not in result.stderr
    save_inputs([{"x": np.ones((1, 1, 2, 2), np.float32)}], str(tmp_path / "feeds.npz"))
    result = invoke("debug", "build", model, "--int8", "--load-inputs", "feeds.npz", "--until=1", "--check", "true")
    assert result.exit_code == 0 and "calibrating on random inputs" not in result.stderr, result


@pytest.mark.usefixtures("trt10")
def test_val_range_and_seed_shape_the_random_calibration_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = one_op(tmp_path / "identity.onnx")
    runs = {"narrow": ["--val-range", "[0,1]"], "narrow again": ["--val-range", "[0,1]"], "wide": ["--val-range", "[0,50]", "--seed", "7", "--iterations", "2"]}
    engines = {}
    for name, extra in runs.items():
        folder = name.replace(" ", "_")
        result = invoke("debug", "build", model, "--int8", *extra, "--artifacts", "parity_debug.engine", "--art-dir", folder, "--until=1", "--check", "true")
        assert result.exit_code == 0, result
        assert "calibrating on random inputs" in result.stderr  # Polygraphy's behaviour without data, with a warning
        engines[name] = next((tmp_path / folder / "good").glob("parity_debug_N0*.engine")).read_bytes()
    # the engine holds the ranges TensorRT calibrated, which follow --val-range
    assert engines["narrow"] == engines["narrow again"] and engines["narrow"] != engines["wide"]


@pytest.mark.parametrize("flag", [["--seed", "3"], ["--val-range", "[0,1]"], ["--iterations", "2"], ["--load-inputs", "feeds.npz"]])
def test_data_flags_without_int8_are_refused(trt_backend, tmp_path, monkeypatch, flag):
    monkeypatch.chdir(tmp_path)
    model = make_model(tmp_path / "model.onnx")
    result = invoke("debug", "build", model, *flag, "--until=1", "--check", "true")
    assert result.exit_code == 2 and f"{flag[0]}: debug build reads input data only to calibrate int8" in result.stderr, result
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "parity_artifacts").exists()


def test_external_data_dir(trt_backend, tmp_path, monkeypatch):
    import onnx

    monkeypatch.chdir(tmp_path)
    model = make_model(tmp_path / "model.onnx")
    proto = onnx.load(str(model))
    (tmp_path / "weights").mkdir()
    onnx.save(proto, str(tmp_path / "weights" / "ext.onnx"), save_as_external_data=True, location="ext.data", size_threshold=0)
    (tmp_path / "ext.onnx").write_bytes((tmp_path / "weights" / "ext.onnx").read_bytes())  # the graph alone, its data elsewhere
    without = invoke("debug", "build", "ext.onnx", "--until=1", "--check", "true")
    assert "Passed: 0/1" in without.stdout and "build failed" in without.stderr, without  # the data is not beside the model
    result = invoke("debug", "build", "ext.onnx", "--ext", "weights", "--until=1", "--check", "true")
    assert "Passed: 1/1" in result.stdout and result.exit_code == 0, result
