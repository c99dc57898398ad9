"""``parity run ... --onnxrt`` as a user types it: options, per-runner settings, providers, mark all, errors."""

from __future__ import annotations

import shutil

import onnxruntime as ort
import pytest


def one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if not line.startswith("parity: warning:")]
    assert len(lines) == 1, err
    assert lines[0].startswith("parity: error: ") and "Traceback" not in err
    return lines[0]


def test_run_passes_and_two_runners_with_per_runner_levels_agree(build, parity_invoke):
    path = build("relu_add")
    code, out, err = parity_invoke("run", path, "--onnxrt", "--input-shapes", "x:[3,4]")
    assert code == 0, err
    assert "PASSED" in out and "onnxrt-0" in out
    code, out, err = parity_invoke("run", path, "--onnxrt", "--onnxrt=graph-optimization-level=disable,ort-threads=1", "--input-shapes", "x:[2,4]")
    assert code == 0, err
    assert "onnxrt-0 vs onnxrt-1" in out and "y: PASSED" in out


@pytest.mark.parametrize("level", ["disable", "basic", "extended", "layout", "all"])
def test_every_graph_optimization_level(build, parity_invoke, level):
    code, _, err = parity_invoke("run", build("relu_add"), "--onnxrt", "--graph-optimization-level", level, "--ort-threads", "1")
    assert code == 0, err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--graph-optimization-level", "bogus"], "'bogus' is not one of"),
        (["--onnxrt=graph-optimization-level=bogus"], "'bogus' is not one of"),
        (["--onnxrt=ort-threads=x"], "'x' is not a valid integer"),
        (["--onnxrt=bogus=1"], "unknown setting 'bogus'"),
        (["--onnxrt=providers"], "option=value"),
        (["--ort-threads", "-1"], "--ort-threads"),
    ],
)
def test_bad_option_values_are_usage_errors(build, parity_invoke, args, expected):
    code, _, err = parity_invoke("run", build("relu_add"), "--onnxrt", *args)
    assert code == 2, err
    assert expected in err and "Traceback" not in err


def test_an_unavailable_provider_is_one_line_naming_what_is_available(build, parity_invoke):
    missing = next(p for p in ("tensorrt", "cuda", "openvino", "coreml") if not any(p in a.lower() for a in ort.get_available_providers()))
    code, _, err = parity_invoke("run", build("relu_add"), "--onnxrt", "--providers", missing)
    assert code == 3, err
    line = one_error_line(err)
    assert f"no provider matching '{missing}'" in line and "CPUExecutionProvider" in line
    code, _, err = parity_invoke("run", build("relu_add"), f"--onnxrt=providers={missing}")
    assert code == 3 and f"no provider matching '{missing}'" in one_error_line(err)
    code, _, err = parity_invoke("run", build("relu_add"), "--onnxrt", "--providers", "cpu")
    assert code == 0, err


def test_mark_all_compares_every_main_graph_tensor(build, parity_invoke, tmp_path):
    path = build("control_flow")
    saved = tmp_path / "out.npz"
    code, out, err = parity_invoke("run", path, "--onnxrt", "--onnxrt=graph-optimization-level=disable", "--onnx-outputs", "mark", "all", "--save-outputs", saved)
    assert code == 0, err
    for name in ("s", "y", "z"):
        assert f"{name}: PASSED" in out
    for inner in ("t_in", "t_out", "e_out", "acc_out", "cond_out"):
        assert f"{inner}:" not in out
    code, out, err = parity_invoke("run", path, "--onnxrt", "--onnx-outputs", "mark", "all", "--onnx-exclude-outputs", "s")
    assert code == 0, err
    code, _, err = parity_invoke("run", path, "--onnxrt", "--onnx-outputs", "t_in")
    assert code == 2 and "no tensor 't_in'" in one_error_line(err)


def test_unshaped_input_runs_with_input_shapes(build, parity_invoke):
    code, _, err = parity_invoke("run", build("unshaped"), "--onnxrt", "--input-shapes", "x:[2,3]")
    assert code == 0, err


@pytest.mark.parametrize(
    ("model", "expected"),
    [("custom_op", "Frobnicate(-1) is not a registered function/op"), ("no_kernel", "Could not find an implementation for Tan")],
)
def test_model_failures_are_one_line_exit_3_with_onnxruntimes_reason(build, parity_invoke, model, expected):
    path = build(model)
    code, _, err = parity_invoke("run", path, "--onnxrt")
    assert code == 3, err
    line = one_error_line(err)
    assert expected in line and str(path) in line and "[ONNXRuntimeError]" not in line


def test_bad_files_are_one_line(parity_invoke, tmp_path):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07not a protobuf \xff\xff")
    code, _, err = parity_invoke("run", garbage, "--onnxrt")
    assert code == 3 and "not a valid ONNX model" in one_error_line(err) and str(garbage) in err


def test_external_data_and_ir3_models_run(build, parity_invoke, tmp_path):
    ext = build("external")
    assert parity_invoke("run", ext, "--onnxrt", "--onnx-outputs", "mark", "all")[0] == 0
    lonely = tmp_path / "alone"
    lonely.mkdir()
    shutil.copy(ext, lonely / "external.onnx")
    code, _, err = parity_invoke("run", lonely / "external.onnx", "--onnxrt")
    assert code == 3 and "external.data" in one_error_line(err)
    code, out, err = parity_invoke("run", build("ir3_weights_as_inputs"), "--onnxrt", "--onnxrt", "--onnx-outputs", "mark", "all")
    assert code == 0, err
    assert "a: PASSED" in out and "y: PASSED" in out


def test_run_help_shows_no_stray_default(parity_invoke, build):
    """--providers' parameter name had slipped into click's show_default slot: the help said
    '[default: (providers)]'. The name is a declaration again, and --providers still takes effect."""
    code, out, _ = parity_invoke("run", "--help")
    assert code == 0 and "[default: (" not in out
    code, out, err = parity_invoke("run", build("relu_add"), "--onnxrt", "--providers", "cpu", "--input-shapes", "x:[2,4]")
    assert code == 0, err
    code, out, err = parity_invoke("run", build("relu_add"), "--onnxrt", "--providers", "nosuchprovider", "--input-shapes", "x:[2,4]")
    assert code in (2, 3) and "nosuchprovider" in one_error_line(err)
