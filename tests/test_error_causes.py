"""Errors that name the cause (issue 26, part 6)."""

from __future__ import annotations

import os
from pathlib import Path

import core_models
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def _error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("parity: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_load_inputs_missing_input_named_before_the_extra_tensor(tmp_path: Path, main):
    from parity.results.files import save_inputs

    model = core_models.two_inputs(tmp_path / "two.onnx")
    data = tmp_path / "in.npz"
    save_inputs([{"a": np.ones((1, 8), np.float32), "extra": np.ones((1, 8), np.float32)}], data)
    code, _, err = main("run", model, "--onnxrt", "--load-inputs", data)
    line = _error(err)
    assert code == 2
    assert f"--load-inputs {data}: no data for input 'b' (expected float32[batch,8]); it has 'extra' instead" in line, line
    assert line.index("'b'") < line.index("'extra'")
    assert "has no input 'extra'" not in line


def test_load_inputs_two_missing_inputs_are_both_named(tmp_path: Path, main):
    from parity.results.files import save_inputs

    model = core_models.two_inputs(tmp_path / "two.onnx")
    data = tmp_path / "in.npz"
    save_inputs([{"extra": np.ones((1, 8), np.float32)}], data)
    code, _, err = main("run", model, "--onnxrt", "--load-inputs", data)
    assert code == 2 and f"--load-inputs {data}: no data for inputs 'a', 'b'; it has 'extra' instead" in _error(err)


def test_a_runner_fed_a_missing_input_names_it_before_the_extra_tensor(tmp_path: Path):
    """The same rule where no file is involved (Python API, data loader scripts): the runner's feed check."""
    from parity_onnxrt import OnnxrtRunner, session_from_onnx

    from parity.errors import UsageError

    model = core_models.two_inputs(tmp_path / "two.onnx")
    expected = r"no data for input 'b' \(expected float32\[batch,8\]\); the data has 'extra' instead"
    with OnnxrtRunner(session_from_onnx(str(model))) as runner, pytest.raises(UsageError, match=expected):
        runner.infer({"a": np.ones((1, 8), np.float32), "extra": np.ones((1, 8), np.float32)})


COMMANDS = [
    ("run", "{m}", "--onnxrt"),
    ("inspect", "model", "{m}"),
    ("convert", "{m}", "-o", "{out}"),
    ("surgeon", "sanitize", "{m}", "-o", "{out}"),
    ("surgeon", "extract", "{m}", "-o", "{out}", "--inputs", "x", "--outputs", "y"),
    ("surgeon", "insert", "{m}", "-o", "{out}", "--inputs", "x", "--outputs", "y", "--op", "Relu"),
    ("debug", "reduce", "{m}", "-o", "{out}", "--check", "true"),
    ("debug", "precision", "{m}", "-o", "{out}", "--check", "true"),
    ("debug", "localize", "{m}", "--onnxrt", "--onnxrt"),
    ("debug", "localize", "{good}", "--onnxrt", "--reference-model", "{m}"),
    ("check", "lint", "{m}"),
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]) + (" --reference-model" if "--reference-model" in a else ""))
@pytest.mark.parametrize("bad", ["missing", "directory"])
def test_missing_or_directory_model_is_bad_input(args, bad, tmp_path: Path, main):
    good = core_models.affine(tmp_path / "good.onnx")
    model = tmp_path / "absent.onnx" if bad == "missing" else tmp_path / "folder.onnx"
    if bad == "directory":
        model.mkdir()
    code, _, err = main(*(a.format(m=model, out=tmp_path / "out.onnx", good=good) for a in args))
    line = _error(err)
    assert code == 2, line  # a bad input, not a model or backend failure (3)
    assert ("not found" if bad == "missing" else "is a directory") in line and str(model) in line
    assert not (tmp_path / "out.onnx").exists()


def _non_utf8(folder: Path, name: bytes) -> str:
    """A path whose name is not UTF-8, as Python hands it over (surrogate-escaped)."""
    return os.fsdecode(os.path.join(os.fsencode(folder), name))


@pytest.mark.parametrize("name", [b"m\xff.onnx", b"caf\xe9.onnx"], ids=["byte-ff", "latin1-e-acute"])
def test_model_at_a_non_utf8_path_runs(name: bytes, tmp_path: Path):
    import subprocess

    model = _non_utf8(tmp_path, name)
    core_models.affine(Path(model))
    strict = {**os.environ, "PYTHONIOENCODING": "utf-8"}  # a UTF-8 locale's stdout: strict, surrogates cannot print
    for args in (["run", model, "--onnxrt"], ["check", "lint", model], ["inspect", "model", model]):  # the installed command, given the path's bytes
        done = subprocess.run(["parity", *args], capture_output=True, timeout=120, env=strict)
        assert done.returncode == 0 and b"Error" not in done.stderr, done.stdout + done.stderr
        assert b"PASSED" in done.stdout or os.fsencode(model) in done.stdout  # the name printed as its own bytes
    assert sorted(os.listdir(tmp_path)) == [os.fsdecode(name)]  # no alias or temporary left beside it


def test_model_with_external_data_in_a_non_utf8_folder_runs(tmp_path: Path, main):
    import tempfile

    plain = tmp_path / "plain"  # onnx itself cannot write external data under such a folder: written, then renamed
    plain.mkdir()
    weights = numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(1, 4096), "w")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4096])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4096])],
        [weights],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, plain / "model.onnx", save_as_external_data=True, location="model.data", size_threshold=0)
    folder = Path(_non_utf8(tmp_path, b"d\xe9"))
    plain.rename(folder)
    path = str(folder / "model.onnx")
    before = set(os.listdir(tempfile.gettempdir()))
    code, out, err = main("run", path, "--onnxrt", "--onnxrt", "--external-data-dir", str(folder))
    assert code == 0 and "PASSED" in out, err
    from parity_onnxrt.loaders import SessionFromOnnx

    session = SessionFromOnnx(path)()
    x = np.ones((1, 4096), np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], x + np.arange(4096, dtype=np.float32))
    leftover = {n for n in set(os.listdir(tempfile.gettempdir())) - before if n.startswith("parity-ort-")}
    assert not leftover  # the UTF-8 alias of the folder is removed once the session is made


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("inspect", "model"), "parity: error: missing MODEL; see 'parity inspect model --help'"),
        (("surgeon", "sanitize"), "parity: error: missing MODEL; see 'parity surgeon sanitize --help'"),
        (("convert", "m.onnx"), "parity: error: missing -o/--output; see 'parity convert --help'"),
        (("run", "--onnxrt"), "parity: error: missing MODEL: --onnxrt needs a model to run; see 'parity run --help'"),
    ],
)
def test_missing_argument_points_at_the_subcommand_help(args, expected, main):
    code, _, err = main(*args)
    assert code == 2 and _error(err) == expected


def test_one_node_is_singular(tmp_path: Path, main):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "one",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    core_models.save(graph, tmp_path / "one.onnx")
    code, out, _ = main("inspect", "model", tmp_path / "one.onnx")
    assert code == 0 and "  1 node, 0 initializers" in out
    from parity_surgeon.fp16 import Fp16Report

    assert Fp16Report(converted_tensors=1, casts_added=1, blocked_nodes=["relu"]).lines()[0] == "fp16: 1 tensor converted, 1 Cast node added, 1 node kept fp32"
