"""The plugin as a user meets it: installed, found through its entry point, driven through the CLI."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

HAVE_TRT = importlib.util.find_spec("tensorrt") is not None


def test_entry_point_registers_backend_kind_and_converter():
    from parity.plugins import get_registry, reset

    reset()
    registry = get_registry()
    assert registry.owners[("backends", "trt")] == "parity-trt"
    assert registry.backends["trt"].cli_flag == "--trt"
    assert "engine" in registry.model_kinds and ".engine" in registry.model_kinds["engine"].suffixes
    assert registry.converters["trt"].suffixes[0] == ".engine"


def test_importing_the_plugin_does_not_import_tensorrt():
    code = "import parity_trt, parity_trt.hooks, parity_trt.options, sys; print('tensorrt' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_run_help_lists_trt_options(parity_invoke):
    code, out, _ = parity_invoke("run", "--help")
    assert code == 0
    for flag in ("--trt", "--trt-min-shapes", "--trt-outputs", "--mark-debug", "--save-engine", "--pool-limit"):
        assert flag in out


@pytest.mark.skipif(HAVE_TRT, reason="checks the behaviour without TensorRT")
@pytest.mark.parametrize(
    "args",
    [
        ("run", "{model}", "--trt", "--onnxrt"),
        ("convert", "{model}", "-o", "{tmp}/m.engine"),
        ("inspect", "model", "{tmp}/x.engine"),
        ("run", "{tmp}/x.engine", "--trt"),
    ],
)
def test_without_tensorrt_one_line_error(parity_invoke, args, onnx_model, tmp_path):
    (tmp_path / "x.engine").write_bytes(b"\0" * 64)
    code, _, err = parity_invoke(*(a.format(model=onnx_model, tmp=tmp_path) for a in args))
    assert code == 3
    assert err.strip().splitlines()[-1].startswith("parity: error: tensorrt is not installed; install it with: pip install")
    assert "Traceback" not in err


def test_usage_errors_come_before_tensorrt_is_needed(parity_invoke, onnx_model):
    code, _, err = parity_invoke("run", str(onnx_model), "--trt", "--trt-min-shapes", "x:[1,3]")
    assert code == 2
    assert "give min, opt and max together" in err and "Traceback" not in err


def test_onnxrt_unaffected_by_the_plugin(parity_invoke, onnx_model):
    code, out, err = parity_invoke("run", str(onnx_model), "--onnxrt", "--input-shapes", "x:[2,3]")
    assert code == 0, err
    assert "PASSED" in out
