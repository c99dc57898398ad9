"""Polygraphy's flags that many tools share, on Parity's commands: the logging flags (--log-file, --log-format,
-v/-q/--silent/--verbosity on the tool groups too) and the ONNX-loading and data-loader aliases that
core/parity/cli/options.py defines once for every command (--load-external-data, --external-data-path,
--load-input-data). Each test checks the flag's effect on a model it builds."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from parity import console
from parity.testing import relu_add


def _matmul(path: Path, external: bool = False) -> Path:
    """y = Relu(x @ W), W 4x4 (in model.onnx.data beside it with ``external``)."""
    weight = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4) - 8, "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"], name="relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    if external:
        onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=path.name + ".data", size_threshold=0)
    else:
        onnx.save(model, str(path))
    return path


# --- --log-file -------------------------------------------------------------------------------------


def test_log_file_copies_stdout_and_stderr_lines_and_keeps_the_terminal(parity_invoke, tmp_path):
    model = relu_add(tmp_path / "m.onnx")
    plain = parity_invoke("inspect", "model", model)
    log = tmp_path / "logs" / "inspect.log"  # its folder is made, as Polygraphy's logger makes it
    logged = parity_invoke("inspect", "model", model, "--log-file", log)
    assert logged.exit_code == plain.exit_code == 0
    assert logged.stdout == plain.stdout  # the terminal loses nothing
    assert log.read_text() == plain.stdout
    # stderr lines too (a note, then an error), in the order printed
    code, _, err = parity_invoke("surgeon", "sanitize", model, "-o", tmp_path / "s.onnx", "--log-file", log)
    assert code == 0 and "parity: note:" in err
    text = log.read_text()
    assert text.index("parity: note:") < text.index("wrote ")
    code, _, err = parity_invoke("run", tmp_path / "missing.onnx", "--onnxrt", "--log-file", log)
    assert code == 2 and err.strip() and err.strip() in log.read_text()


def test_log_file_on_a_tool_group_and_after_the_subtool(parity_invoke, tmp_path):
    model = relu_add(tmp_path / "m.onnx")
    for args in (("surgeon", "--log-file", tmp_path / "a.log", "sanitize"), ("surgeon", "sanitize", "--log-file", tmp_path / "b.log")):
        code, out, _ = parity_invoke(*args, model, "-o", tmp_path / f"{args[-1]}.onnx")
        assert code == 0
    assert (tmp_path / "a.log").read_text().splitlines()[-1].startswith("wrote ")
    assert (tmp_path / "b.log").read_text().splitlines()[-1].startswith("wrote ")


def test_log_file_that_is_an_input_is_refused_and_left_alone(parity_invoke, tmp_path):
    model = relu_add(tmp_path / "m.onnx")
    before = model.read_bytes()
    code, out, err = parity_invoke("inspect", "model", model, "--log-file", model)
    assert code == 2 and "--log-file" in err and out == ""
    assert model.read_bytes() == before


def test_log_file_in_a_subprocess_holds_what_the_console_script_printed(tmp_path):
    model = relu_add(tmp_path / "m.onnx")
    log = tmp_path / "run.log"
    done = subprocess.run(
        [sys.executable, "-m", "parity", "run", str(model), "--onnxrt", "--onnxrt", "--log-file", str(log)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    for line in [*done.stdout.splitlines(), *done.stderr.splitlines()]:
        assert line in text
    assert "PASSED" in text


# --- --log-format -----------------------------------------------------------------------------------


def test_log_format_timestamp_and_line_info_prefix_every_line(parity_invoke, tmp_path):
    model = relu_add(tmp_path / "m.onnx")
    plain = parity_invoke("inspect", "model", model).stdout.splitlines()
    code, out, _ = parity_invoke("inspect", "model", model, "--log-format", "timestamp", "line-info", "--log-file", tmp_path / "f.log")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == len(plain)
    pattern = re.compile(r"^\(\d\d:\d\d:\d\d\) \[parity/cli/inspect\.py:\d+\] (.*)$")
    for line, want in zip(lines, plain):
        match = pattern.match(line)
        assert match, line
        assert match.group(1) == want
    assert (tmp_path / "f.log").read_text().splitlines() == lines


def test_log_format_no_colors_asks_for_plain_output_while_the_command_runs(tmp_path, monkeypatch):
    from parity.cli.progress import progress_wanted

    monkeypatch.delenv("NO_COLOR", raising=False)

    class Tty:
        def isatty(self) -> bool:
            return True

    mark = console.log_mark()
    console.set_log_format(["no-colors"])
    try:
        assert os.environ.get("NO_COLOR") and not progress_wanted(Tty())
    finally:
        console.close_logs(mark)
    assert "NO_COLOR" not in os.environ  # given back with the command
    assert progress_wanted(Tty()) is True


def test_bad_log_format_is_refused(parity_invoke, tmp_path):
    code, _, err = parity_invoke("inspect", "model", relu_add(tmp_path / "m.onnx"), "--log-format", "colours")
    assert code == 2 and "--log-format" in err


# --- loudness on the tool groups ---------------------------------------------------------------------


@pytest.mark.parametrize("group", ["check", "data", "debug", "inspect", "surgeon"])
def test_tool_groups_take_the_logging_flags(parity_invoke, group):
    code, out, _ = parity_invoke(group, "--help")
    assert code == 0
    for flag in ("-v, --verbose", "-q, --quiet", "--silent", "--verbosity", "--log-file", "--log-format"):
        assert flag in out, (group, flag)


def test_quiet_and_verbosity_between_tool_and_subtool_take_effect(parity_invoke, tmp_path):
    model = relu_add(tmp_path / "m.onnx")
    loud = parity_invoke("inspect", "model", model)
    assert loud.exit_code == 0 and loud.stdout
    for flags in (["-q"], ["--silent"], ["--verbosity", "error"]):
        code, out, _ = parity_invoke("inspect", *flags, "model", model)
        assert code == 0 and out == "", flags
    # -v there shows the traceback of an unexpected failure
    code, _, err = parity_invoke("surgeon", "-v", "sanitize", tmp_path / "none.onnx", "-o", tmp_path / "o.onnx")
    assert code == 2


# --- aliases shared by every command that reads or writes ONNX ------------------------------------------


def test_load_external_data_is_the_external_data_dir(parity_invoke, tmp_path):
    folder = tmp_path / "weights"
    folder.mkdir()
    model = _matmul(folder / "m.onnx", external=True)
    moved = tmp_path / "m.onnx"
    model.rename(moved)  # the data stays in weights/
    code, _, err = parity_invoke("run", moved, "--onnxrt")
    assert code != 0
    code, out, err = parity_invoke("run", moved, "--onnxrt", "--load-external-data", folder)
    assert code == 0, err


def test_external_data_path_is_save_external_data(parity_invoke, tmp_path):
    model = _matmul(tmp_path / "m.onnx")
    out = tmp_path / "o.onnx"
    code, _, err = parity_invoke("surgeon", "sanitize", model, "-o", out, "--external-data-path", "w.bin", "--external-data-size-threshold", "0")
    assert code == 0, err
    assert (tmp_path / "w.bin").stat().st_size == 16 * 4
    assert any(t.data_location == TensorProto.EXTERNAL for t in onnx.load(str(out), load_external_data=False).graph.initializer)


def test_load_input_data_feeds_saved_inputs(parity_invoke, tmp_path):
    model = _matmul(tmp_path / "m.onnx")
    saved = tmp_path / "in.json"
    code, _, err = parity_invoke("run", model, "--onnxrt", "--seed", "7", "--save-inputs", saved)
    assert code == 0, err
    outputs = tmp_path / "out.json"
    code, _, err = parity_invoke("run", model, "--onnxrt", "--load-input-data", saved, "--save-outputs", outputs)
    assert code == 0, err
    again = tmp_path / "again.json"
    parity_invoke("run", model, "--onnxrt", "--seed", "7", "--save-outputs", again)
    other = tmp_path / "other.json"
    parity_invoke("run", model, "--onnxrt", "--seed", "8", "--save-outputs", other)

    def values(path: Path) -> dict:
        return json.loads(path.read_text())["lst"][0][1][0]["outputs"]

    assert values(outputs) == values(again) != values(other)


# --- --data-loader-backend-module ------------------------------------------------------------------------


def test_data_loader_backend_module_torch_draws_with_torch(parity_invoke, tmp_path):
    torch = pytest.importorskip("torch")
    from parity.api import load_inputs

    model = _matmul(tmp_path / "m.onnx")
    drawn = {}
    for backend in ("numpy", "torch"):
        saved = tmp_path / f"{backend}.json"
        code, _, err = parity_invoke("run", model, "--onnxrt", "--seed", "5", "--val-range", "[2,3]", "--data-loader-backend-module", backend, "--save-inputs", saved)
        assert code == 0, err
        drawn[backend] = load_inputs(str(saved))[0]["x"]
    expected = (torch.rand((1, 4), generator=torch.Generator().manual_seed(5), dtype=torch.float64).numpy() + 2).astype(np.float32)
    np.testing.assert_array_equal(drawn["torch"], expected)
    assert drawn["torch"].dtype == np.float32 and not np.array_equal(drawn["torch"], drawn["numpy"])
    np.testing.assert_array_equal(drawn["numpy"], (np.random.RandomState(5).random_sample((1, 4)) + 2).astype(np.float32))
    # saved inputs are not drawn: the flag is refused there, not ignored
    code, _, err = parity_invoke("run", model, "--onnxrt", "--data-loader-backend-module", "torch", "--load-inputs", tmp_path / "numpy.json")
    assert code == 2 and "--data-loader-backend-module" in err


# --- inspect model's shape-inference flags (the shared onnx_load_options) -------------------------------------


def test_inspect_model_do_shape_inference_and_no_onnxruntime_shape_inference(parity_invoke, tmp_path):
    """--do-shape-inference is --shape-inference (for --list-unbounded-dds); --no-onnxruntime-shape-inference says
    which inference it is (onnx.shape_inference, the one inspect runs) and needs it."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ReduceSum", ["s"], ["n"], keepdims=0),
        helper.make_node("Range", ["zero", "n", "one"], ["y"], name="range"),
    ]
    inits = [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in (("zero", 0), ("one", 1))]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], [helper.make_tensor_value_info("y", TensorProto.INT64, ["m"])], inits
    )
    model = tmp_path / "range.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), str(model))
    code, listed, err = parity_invoke("inspect", "model", model, "--list-unbounded-dds", "--shape-inference")
    assert code == 0 and "Found tensors with unbounded DDS: n (input 1 of Range 'range')" in listed, err
    for flags in (["--do-shape-inference"], ["--shape-inference", "--no-onnxruntime-shape-inference"]):
        code, text, err = parity_invoke("inspect", "model", model, "--list-unbounded-dds", *flags)
        assert code == 0 and text == listed, err
    code, _, err = parity_invoke("inspect", "model", model, "--do-shape-inference")
    assert code == 2 and "applies to --list-unbounded-dds" in err  # as --shape-inference: refused, not ignored
    code, _, err = parity_invoke("inspect", "model", model, "--no-onnxruntime-shape-inference")
    assert code == 2 and "add --shape-inference" in err


# --- convert's loading flags ---------------------------------------------------------------------------------


def test_convert_shape_inference_writes_the_inferred_model(parity_invoke, tmp_path):
    model = _matmul(tmp_path / "m.onnx")
    assert not onnx.load(str(model)).graph.value_info
    out = tmp_path / "inferred.onnx"
    code, _, err = parity_invoke("convert", model, "-o", out, "--do-shape-inference")
    assert code == 0, err
    inferred = onnx.load(str(out))
    assert [v.name for v in inferred.graph.value_info] == ["h"]
    onnx.checker.check_model(inferred, full_check=True)
    code, _, err = parity_invoke("convert", model, "-o", tmp_path / "both.onnx", "--shape-inference", "--no-onnxruntime-shape-inference")
    assert code == 0, err
    for flags, message in ((["--no-onnxruntime-shape-inference"], "add --shape-inference"), (["--ignore-external-data"], "--ignore-external-data")):
        code, _, err = parity_invoke("convert", model, "-o", tmp_path / "x.onnx", "--fp-to-fp16", *flags)
        assert code == 2 and message in err
    assert not (tmp_path / "x.onnx").exists()


# --- debug reduce's loading flags ----------------------------------------------------------------------------


def test_debug_reduce_loading_flags(parity_invoke, tmp_path, monkeypatch):
    pytest.importorskip("parity_reduce")
    monkeypatch.chdir(tmp_path)
    _matmul(tmp_path / "m.onnx")
    check = ("--check", "false")  # takes the rest of the line: last

    def reduce(*flags: str):
        return parity_invoke("debug", "reduce", "m.onnx", "--no-repro", *flags, *check)

    code, _, err = reduce("-o", "plain.onnx")
    assert code == 0, err
    # reduce infers shapes with onnx.shape_inference: --no-onnxruntime-shape-inference asks for what it does
    code, _, err = reduce("-o", "onnx_only.onnx", "--no-onnxruntime-shape-inference")
    assert code == 0, err
    assert onnx.load("onnx_only.onnx") == onnx.load("plain.onnx")
    code, _, err = reduce("-o", "x.onnx", "--no-onnxruntime-shape-inference", "--force-fallback-shape-inference")
    assert code == 2 and "exclude each other" in err
    code, _, err = reduce("-o", "x.onnx", "--ignore-external-data")
    assert code == 2 and "--ignore-external-data" in err
    assert not Path("x.onnx").exists()
