"""`parity run` end to end with real onnxruntime: verdicts, exit codes, data options, files, reports."""

from __future__ import annotations

import json
from pathlib import Path

import core_models as models
import numpy as np

from parity.results import load_inputs, load_results


def test_two_runners_pass_and_print_statistics(main, tiny_cnn):
    code, out, err = main("run", tiny_cnn, "--onnxrt", "--onnxrt=graph-optimization-level=disable", "--input-shapes", "x:[2,3,16,16]")
    assert code == 0, err
    assert "[onnxrt-0 vs onnxrt-1] iteration 0: PASSED" in out
    assert "cosine 1.0000" in out and "passes with atol>=" in out
    assert out.strip().splitlines()[-1].startswith("PASSED")


def test_subprocess_run_passes(parity_cli, tiny_cnn):
    result = parity_cli("run", tiny_cnn, "--onnxrt", "--onnxrt")
    assert result.returncode == 0, result.stderr
    # dynamic batch dim: warned once, naming the input and the shape used
    assert "input 'x' has dynamic shape" in result.stderr and "[1, 3, 16, 16]" in result.stderr


def test_mismatch_exits_1_and_names_output(main, tmp_path):
    golden = tmp_path / "golden.npz"
    models.affine(tmp_path / "a.onnx", scale=2.0)
    models.affine(tmp_path / "b.onnx", scale=2.001)
    assert main("run", tmp_path / "a.onnx", "--onnxrt", "--save-outputs", golden)[0] == 0
    code, out, _ = main("run", tmp_path / "b.onnx", "--onnxrt", "--load-outputs", golden)
    assert code == 1
    assert "FAILED | mismatched outputs: y" in out
    assert "abs error histogram" in out  # failing outputs get details


def test_tolerances_per_output_and_global(main, tmp_path):
    golden = tmp_path / "golden.npz"
    models.affine(tmp_path / "a.onnx", scale=2.0)
    models.affine(tmp_path / "b.onnx", scale=2.001)
    main("run", tmp_path / "a.onnx", "--onnxrt", "--save-outputs", golden)
    # max abs diff is 0.001 * x <= 0.001 for x in [0,1]
    assert main("run", tmp_path / "b.onnx", "--onnxrt", "--load-outputs", golden, "--atol", "y:2e-3", "1e-9", "--rtol", "0")[0] == 0
    assert main("run", tmp_path / "b.onnx", "--onnxrt", "--load-outputs", golden, "--atol", "y:1e-9", "1", "--rtol", "0")[0] == 1
    assert main("run", tmp_path / "b.onnx", "--onnxrt", "--load-outputs", golden, "--atol", "other:1", "1e-9")[0] == 2  # names no output
    # the fp16 preset is loose enough for this difference; explicit values win over it
    assert main("run", tmp_path / "b.onnx", "--onnxrt", "--load-outputs", golden, "--tolerance-preset", "fp16")[0] == 0
    assert main("run", tmp_path / "b.onnx", "--onnxrt", "--load-outputs", golden, "--tolerance-preset", "fp16", "--atol", "0", "--rtol", "0")[0] == 1


def test_check_error_stat(main, tmp_path):
    golden = tmp_path / "golden.npz"
    models.affine(tmp_path / "a.onnx", bias=0.5)
    models.affine(tmp_path / "b.onnx", bias=0.52)
    main("run", tmp_path / "a.onnx", "--onnxrt", "--save-outputs", golden)
    base = ("run", tmp_path / "b.onnx", "--onnxrt", "--load-outputs", golden, "--rtol", "0")
    assert main(*base, "--atol", "0.03", "--check-error-stat", "mean")[0] == 0
    assert main(*base, "--atol", "0.01", "--check-error-stat", "median")[0] == 1
    assert main(*base, "--atol", "0.03", "--check-error-stat", "quantile", "--error-quantile", "0.5")[0] == 0


def test_seed_val_range_iterations_and_save_inputs(main, affine_model, tmp_path):
    saved = tmp_path / "inputs.npz"
    assert main("run", affine_model, "--onnxrt", "--seed", "7", "--val-range", "x:[-3,-2]", "--iterations", "3", "--save-inputs", saved)[0] == 0
    feeds = load_inputs(saved)
    assert len(feeds) == 3
    assert all(f["x"].min() >= -3 and f["x"].max() <= -2 for f in feeds)
    assert not np.array_equal(feeds[0]["x"], feeds[1]["x"])
    again = tmp_path / "again.npz"
    main("run", affine_model, "--onnxrt", "--seed", "7", "--val-range", "[-3,-2]", "--iterations", "3", "--save-inputs", again)
    assert all(np.array_equal(a["x"], b["x"]) for a, b in zip(feeds, load_inputs(again)))


def test_load_inputs_and_outputs_round_trip(main, tiny_cnn, tmp_path):
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    assert main("run", tiny_cnn, "--onnxrt", "--iterations", "2", "--save-inputs", inputs, "--save-outputs", outputs)[0] == 0
    code, out, _ = main("run", tiny_cnn, "--onnxrt", "--load-inputs", inputs, "--load-outputs", outputs, "--atol", "0", "--rtol", "0")
    assert code == 0
    assert "[onnxrt-0 vs out.npz:onnxrt-0] iteration 1: PASSED" in out
    assert len(load_results(outputs)["onnxrt-0"]) == 2


def test_compare_saved_results_without_running(main, tiny_cnn, tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    main("run", tiny_cnn, "--onnxrt", "--save-outputs", a)
    main("run", tiny_cnn, "--onnxrt", "--seed", "3", "--save-outputs", b)
    assert main("run", "--load-outputs", a, a)[0] == 0
    assert main("run", "--load-outputs", a, b)[0] == 1


def test_data_loader_script(main, tmp_path):
    models.two_inputs(tmp_path / "m.onnx")
    script = tmp_path / "data.py"
    script.write_text(
        "import numpy as np\n"
        "def load_data():\n"
        "    for i in range(3):\n"
        "        yield {'a': np.full((2, 8), i, np.float32), 'b': np.ones((2, 8), np.float32)}\n"
        "def other():\n"
        "    return [{'a': np.zeros((1, 8), np.float32), 'b': np.zeros((1, 8), np.float32)}]\n"
    )
    saved = tmp_path / "in.npz"
    assert main("run", tmp_path / "m.onnx", "--onnxrt", "--data-loader-script", script, "--save-inputs", saved)[0] == 0
    assert [f["a"][0, 0] for f in load_inputs(saved)] == [0, 1, 2]
    assert main("run", tmp_path / "m.onnx", "--onnxrt", "--data-loader-script", f"{script}:other", "--save-inputs", saved)[0] == 0
    assert load_inputs(saved)[0]["a"].shape == (1, 8)


def test_validate_finds_nan_and_inf(main, tmp_path):
    models.log_model(tmp_path / "log.onnx")
    code, out, _ = main("run", tmp_path / "log.onnx", "--onnxrt", "--validate", "--val-range", "[-1,0]")
    assert code == 1 and "VALIDATION FAILED" in out and "NaN" in out
    assert main("run", tmp_path / "log.onnx", "--onnxrt", "--validate", "--val-range", "[1,2]")[0] == 0


def test_indices_compare_func(main, tmp_path):
    models.two_inputs(tmp_path / "m.onnx")
    code, out, _ = main("run", tmp_path / "m.onnx", "--onnxrt", "--onnxrt", "--compare-func", "indices", "--input-shapes", "a:[4,8]", "b:[4,8]")
    assert code == 0, out
    assert "indices agreement=1" in out


def test_report_json(main, tmp_path):
    golden, report = tmp_path / "g.npz", tmp_path / "report.json"
    models.affine(tmp_path / "a.onnx", scale=2.0)
    models.affine(tmp_path / "b.onnx", scale=2.5)
    main("run", tmp_path / "a.onnx", "--onnxrt", "--save-outputs", golden, "--iterations", "2")
    code, _, _ = main("run", tmp_path / "b.onnx", "--onnxrt", "--load-outputs", golden, "--iterations", "2", "--report", report)
    assert code == 1
    data = json.loads(report.read_text())
    assert data["passed"] is False and data["exit_code"] == 1 and data["iterations"] == 2
    check = data["comparisons"][0]["iterations"][1]["outputs"][0]
    assert check["name"] == "y" and check["passed"] is False
    assert check["thresholds"]["atol"] == 1e-5 and check["values"]["max_abs"] > 0.1
    assert 0.99 < check["values"]["cosine"] <= 1.0


def test_per_runner_settings_are_validated(main, affine_model):
    code, _, err = main("run", affine_model, "--onnxrt", "--onnxrt=no-such-setting=1")
    assert code == 2 and "unknown setting 'no_such_setting'" in err


def test_needs_a_backend(main, affine_model):
    code, _, err = main("run", affine_model)
    assert code == 2 and "--onnxrt" in err


def test_outputs_written_atomically_on_failure(main, affine_model, tmp_path):
    target = tmp_path / "out.npz"
    code, _, _ = main("run", affine_model, "--onnxrt", "--input-shapes", "x:[2,9]", "--save-outputs", target)
    assert code == 2
    assert not target.exists() and not list(Path(tmp_path).glob(".out.npz*"))


def test_fp32_inputs_feed_an_fp16_model_with_a_warning(main, tmp_path):
    from onnx import TensorProto

    inputs, golden = tmp_path / "in.npz", tmp_path / "golden.npz"
    models.affine(tmp_path / "fp32.onnx")
    models.affine(tmp_path / "fp16.onnx", dtype=TensorProto.FLOAT16)
    assert main("run", tmp_path / "fp32.onnx", "--onnxrt", "--save-inputs", inputs, "--save-outputs", golden)[0] == 0
    code, _, err = main("run", tmp_path / "fp16.onnx", "--onnxrt", "--load-inputs", inputs, "--load-outputs", golden, "--tolerance-preset", "fp16")
    assert code == 0, err
    assert "casting input 'x' from float32 to float16" in err
    # fp16 rounding is visible at the default fp32 tolerances
    assert main("run", tmp_path / "fp16.onnx", "--onnxrt", "--load-inputs", inputs, "--load-outputs", golden)[0] == 1


def test_layerwise_run_names_the_first_divergent_node(main, tmp_path):
    import onnx
    from onnx import numpy_helper

    models.chain(tmp_path / "good.onnx")
    bad = onnx.load(tmp_path / "good.onnx")
    for init in bad.graph.initializer:
        if init.name == "c3":  # plant a divergence in node add3
            init.CopyFrom(numpy_helper.from_array(np.full((1, 4), 0.35, np.float32), "c3"))
    onnx.save(bad, tmp_path / "bad.onnx")
    golden = tmp_path / "golden.npz"
    assert main("run", tmp_path / "good.onnx", "--onnxrt", "--onnx-outputs", "mark", "all", "--save-outputs", golden)[0] == 0
    report = tmp_path / "report.json"
    code, out, _ = main("run", tmp_path / "bad.onnx", "--onnxrt", "--onnx-outputs", "mark", "all", "--load-outputs", golden, "--report", report)
    assert code == 1
    assert "First divergence: 't3', produced by node 'add3' (Add)" in out
    assert "parity surgeon extract" in out
    layerwise = json.loads(report.read_text())["layerwise"][0]
    assert layerwise["first"] == "t3" and "add3" in layerwise["extract_command"]


def test_load_inputs_with_extra_tensors_keeps_the_model_inputs(main, affine_model, tmp_path):
    from parity.results import save_inputs

    layerwise = tmp_path / "layerwise_inputs.npz"
    save_inputs([{"x": np.ones((1, 4), np.float32), "scaled": np.zeros((1, 4), np.float32)}], layerwise)
    code, _, err = main("run", affine_model, "--onnxrt", "--load-inputs", layerwise)
    assert code == 0, err
    assert "ignoring 1 tensor(s) the model does not take as inputs: scaled" in err


def test_click_runner_sees_the_same_exit_codes(tmp_path):
    from click.testing import CliRunner

    from parity.cli import build_cli

    models.affine(tmp_path / "a.onnx", scale=2.0)
    models.affine(tmp_path / "b.onnx", scale=3.0)
    golden = tmp_path / "g.npz"
    runner = CliRunner()
    cli = build_cli()
    passed = runner.invoke(cli, ["run", str(tmp_path / "a.onnx"), "--onnxrt", "--save-outputs", str(golden)])
    assert passed.exit_code == 0 and "PASSED" in passed.output
    mismatch = runner.invoke(cli, ["run", str(tmp_path / "b.onnx"), "--onnxrt", "--load-outputs", str(golden)])
    assert mismatch.exit_code == 1 and "FAILED | mismatched outputs: y" in mismatch.output
    missing = runner.invoke(cli, ["run", str(tmp_path / "nope.onnx"), "--onnxrt"])
    assert missing.exit_code == 2 and "parity: error: model not found" in missing.output
    usage = runner.invoke(cli, ["run", str(tmp_path / "a.onnx"), "--onnxrt", "--input-shapes", "x:1x4x"])
    assert usage.exit_code == 2 and "x:[1,4]" in usage.output
