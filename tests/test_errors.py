"""Bad input: one line naming the problem, the documented exit code, never a traceback."""

from __future__ import annotations

import json

import core_models as models
import numpy as np
import pytest

from parity.results import save_inputs


def one_line_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("parity: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_missing_model(main, tmp_path):
    code, _, err = main("run", tmp_path / "nope.onnx", "--onnxrt")
    assert code == 2 and "model not found" in one_line_error(err)


@pytest.mark.parametrize("content", [b"", b"\x08\x07garbage-not-protobuf\xff\xff\xff", b"hello world"])
def test_corrupt_model(main, tmp_path, content):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(content)
    code, _, err = main("run", bad, "--onnxrt")
    assert code == 3
    assert "bad.onnx" in one_line_error(err)


def test_ir_version_too_new_gives_the_fix(parity_cli, tmp_path):
    path = tmp_path / "new_ir.onnx"
    models.save(models.onnx.helper.make_graph(
        [models.helper.make_node("Relu", ["x"], ["y"])], "g",
        [models.tensor("x", 1, [1, 2])], [models.tensor("y", 1, [1, 2])]), path, ir_version=99)  # fmt: skip  (newer than any onnxruntime loads)
    result = parity_cli("run", path, "--onnxrt")
    assert result.returncode == 3
    line = one_line_error(result.stderr)
    assert "IR version" in line and "ir_version = 10" in line


def test_unknown_input_name_suggests_closest(main, affine_model):
    code, _, err = main("run", affine_model, "--onnxrt", "--input-shapes", "xx:[1,4]")
    line = one_line_error(err)
    assert code == 2 and "no input 'xx'" in line and "did you mean 'x'" in line


@pytest.mark.parametrize("shape", ["x:1x4x", "x:1x", "x:[1,4", "x:(1,4)"])
def test_broken_shape_suggests_the_form(main, affine_model, shape):
    """(The old ``x:1x4`` / ``x,1x4`` is read, with a warning: tests/test_polygraphy_flags.py.)"""
    code, _, err = main("run", affine_model, "--onnxrt", "--input-shapes", shape)
    line = one_line_error(err)
    assert code == 2 and "x:[" in line


def test_static_dim_conflict(main, affine_model):
    code, _, err = main("run", affine_model, "--onnxrt", "--input-shapes", "x:[2,4]")
    assert code == 2 and "static dims" in one_line_error(err)


def test_wrong_shape_and_dtype_in_loaded_inputs(main, affine_model, tmp_path):
    wrong_shape, wrong_dtype, wrong_name = tmp_path / "s.npz", tmp_path / "d.npz", tmp_path / "n.npz"
    save_inputs([{"x": np.zeros((1, 5), np.float32)}], wrong_shape)
    save_inputs([{"x": np.zeros((1, 4), np.int32)}], wrong_dtype)
    save_inputs([{"input": np.zeros((1, 4), np.float32)}], wrong_name)
    code, _, err = main("run", affine_model, "--onnxrt", "--load-inputs", wrong_shape)
    assert code == 2 and "shape [1, 5]" in one_line_error(err)
    code, _, err = main("run", affine_model, "--onnxrt", "--load-inputs", wrong_dtype)
    assert code == 2 and "dtype int32" in one_line_error(err)
    code, _, err = main("run", affine_model, "--onnxrt", "--load-inputs", wrong_name)
    assert code == 2 and f"--load-inputs {wrong_name}: no data for input 'x' (expected float32[1,4]); it has 'input' instead" in one_line_error(err)


def test_truncated_results_file(main, affine_model, tmp_path):
    good = tmp_path / "good.npz"
    main("run", affine_model, "--onnxrt", "--save-outputs", good)
    data = good.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(data[: len(data) // 2])
    code, _, err = main("run", affine_model, "--onnxrt", "--load-outputs", cut)
    assert code == 2 and "truncated" in one_line_error(err)


def test_foreign_and_broken_json_files(main, affine_model, tmp_path):
    foreign = tmp_path / "foreign.bin"
    foreign.write_bytes(b"\x00\x01binary")
    broken = tmp_path / "broken.json"
    broken.write_text('{"lst": [')
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"hello": 1}))
    for path, expect in ((foreign, "not a Parity"), (broken, "broken JSON"), (wrong, "not a Polygraphy RunResults")):
        code, _, err = main("run", affine_model, "--onnxrt", "--load-outputs", path)
        assert code == 2 and expect in one_line_error(err), err


def test_inputs_file_given_as_outputs(main, affine_model, tmp_path):
    inputs = tmp_path / "in.npz"
    main("run", affine_model, "--onnxrt", "--save-inputs", inputs)
    code, _, err = main("run", affine_model, "--onnxrt", "--load-outputs", inputs)
    assert code == 2 and "not outputs" in one_line_error(err)


def test_verbose_shows_traceback(parity_cli, tmp_path):
    result = parity_cli("run", tmp_path / "missing.onnx", "--onnxrt", "--verbose")
    assert result.returncode == 2 and "Traceback" in result.stderr


def test_unknown_option_is_usage_error(parity_cli, affine_model):
    result = parity_cli("run", affine_model, "--onnxrt", "--no-such-flag")
    assert result.returncode == 2 and "No such option" in result.stderr
