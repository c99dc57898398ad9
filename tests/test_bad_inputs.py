"""Broken, foreign and hostile input files: one line naming the problem and the file, exit 2, never a traceback.

Each file goes through every command that reads it (``run --load-outputs``, ``run --load-inputs``, ``inspect
data``, ``data concat``). Huge or negative ``.npy`` shapes must be refused from the header, before anything is
allocated (the test would die of ``MemoryError`` otherwise).
"""

from __future__ import annotations

from pathlib import Path

import core_models
import numpy as np
import onnx
import pytest
from bad_files import (
    IN,
    OUT,
    archive,
    corrupt_deflated_manifest,
    deflated_entry_with_unknown_method,
    npy,
    poly_array,
    poly_inputs,
    poly_iteration,
    poly_outputs,
    set_method,
    shape_header,
    zip_bytes,
)

from parity.results import save_inputs, save_results
from parity.results.model import IterationResult, RunResults

# name -> (builder(tmp_path) -> file, kind the file claims: "outputs" / "inputs", words the error must hold)
CASES = {
    "manifest is a list": (lambda d: archive(d / "m.npz", raw_manifest="[1, 2]"), "outputs", "holds a list"),
    "manifest version is a string (outputs)": (lambda d: archive(d / "m.npz", {**OUT, "version": "1"}), "outputs", "version '1'"),
    "manifest version is a string (inputs)": (lambda d: archive(d / "m.npz", {**IN, "version": "1"}), "inputs", "version '1'"),
    "manifest runtime is a string": (
        lambda d: archive(d / "m.npz", {**OUT, "runs": [{"runner": "r", "iterations": [{"runtime": "fast", "outputs": {"y": "a/0.npy"}}]}]}),
        "outputs",
        "runtime",
    ),
    "manifest runner name is a number": (lambda d: archive(d / "m.npz", {**OUT, "runs": [{"runner": 5, "iterations": []}]}), "outputs", "runner"),
    "manifest entry is a number": (lambda d: archive(d / "m.npz", {**IN, "iterations": [{"x": 5}]}), "inputs", "archive entry"),
    "manifest nested too deeply": (
        lambda d: archive(d / "m.npz", raw_manifest='{"format": "parity", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        "outputs",
        "nested too deeply",
    ),
    "corrupt deflated manifest": (lambda d: corrupt_deflated_manifest(d / "m.npz"), "outputs", "corrupt compressed data"),
    "unsupported zip compression (manifest)": (lambda d: set_method(archive(d / "m.npz", OUT), 77), "outputs", "zip feature"),
    "unsupported zip compression (array)": (lambda d: deflated_entry_with_unknown_method(d / "m.npz"), "outputs", "zip feature"),
    "duplicate runner (Parity)": (lambda d: archive(d / "m.npz", {**OUT, "runs": OUT["runs"] * 2}), "outputs", "runner 'r' appears twice"),
    "duplicate runner (Polygraphy)": (lambda d: poly_outputs(d / "m.json", [["r", [poly_iteration(poly_array(npy()))]]] * 2), "outputs", "runner 'r' appears twice"),
    "huge .npy shape (int64 overflow)": (lambda d: archive(d / "m.npz", IN, {"a/0.npy": npy(header=shape_header("(4611686018427387904, 4)"))}), "inputs", "needs"),
    "huge .npy shape (product overflows)": (lambda d: archive(d / "m.npz", OUT, {"a/0.npy": npy(header=shape_header("(3037000500, 3037000500)"))}), "outputs", "needs"),
    "negative .npy shape": (lambda d: archive(d / "m.npz", IN, {"a/0.npy": npy(header=shape_header("(-1, 4)"))}), "inputs", "negative dimension"),
    "structured .npy dtype": (lambda d: archive(d / "m.npz", IN, {"a/0.npy": npy(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))}), "inputs", "unsupported dtype"),
    "Polygraphy payload is a zip without arrays": (
        lambda d: poly_inputs(d / "m.json", poly_array(zip_bytes({"hello.txt": b"hi"}))),
        "inputs",
        "undecodable array payload",
    ),
    "Polygraphy payload is an empty zip": (lambda d: poly_inputs(d / "m.json", poly_array(zip_bytes({}))), "inputs", "undecodable array payload"),
    "Polygraphy payload is not latin-1": (
        lambda d: poly_inputs(d / "m.json", {"array": "\u20ac\u4e2d", "polygraphy_class": "ndarray"}),
        "inputs",
        "undecodable array payload",
    ),
    "Polygraphy payload has a malformed .npy header": (
        lambda d: poly_inputs(d / "m.json", poly_array(npy(header="{'descr': '<f4', 'shape': (1,4),,}"))),
        "inputs",
        "undecodable array payload",
    ),
    "Polygraphy payload with a huge shape": (lambda d: poly_inputs(d / "m.json", poly_array(npy(header=shape_header("(100000, 100000, 100000)")))), "inputs", "needs"),
    "Polygraphy output with a huge shape": (
        lambda d: poly_outputs(d / "m.json", [["r", [poly_iteration(poly_array(npy(header=shape_header("(1000000, 1000000)"))))]]]),
        "outputs",
        "needs",
    ),
    "Polygraphy npz payload with a huge shape": (
        lambda d: poly_inputs(d / "m.json", poly_array(zip_bytes({"arr_0.npy": npy(header=shape_header("(1000000, 1000000)"))}))),
        "inputs",
        "needs",
    ),
    "Polygraphy JSON nested too deeply (lists)": (lambda d: (d / "m.json").write_text("[" * 100_000 + "]" * 100_000) and d / "m.json", "inputs", "nested too deeply"),
    "Polygraphy JSON nested too deeply (objects)": (
        lambda d: (d / "m.json").write_text('{"a":' * 50_000 + "1" + "}" * 50_000) and d / "m.json",
        "inputs",
        "nested too deeply",
    ),
}

COMMANDS = ["run --load-outputs", "run --load-inputs", "inspect data", "data concat"]


def argv(command: str, bad: Path, tmp: Path, model: Path, good_outputs: Path) -> list:
    if command == "run --load-outputs":
        return ["run", "--load-outputs", bad, good_outputs]
    if command == "run --load-inputs":
        return ["run", model, "--onnxrt", "--load-inputs", bad]
    if command == "inspect data":
        return ["inspect", "data", bad, "--all", "--histogram"]
    return ["data", "concat", bad, bad, "-o", tmp / "concat.npz"]


def one_line_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("parity: error:")]
    assert len(lines) == 1 and "Traceback" not in err and "--verbose for the traceback" not in err, err
    return lines[0]


@pytest.fixture
def work(tmp_path):
    model = core_models.affine(tmp_path / "affine.onnx")
    good = tmp_path / "good_out.npz"
    save_results(RunResults([("r", [IterationResult({"y": np.ones((1, 4), np.float32)}, 0.1, "r")])]), good)
    return tmp_path, model, good


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_bad_file_is_one_line_exit_2(main, work, case, command):
    tmp, model, good = work
    build, kind, words = CASES[case]
    if command.startswith("run --load-") and not command.endswith(kind):
        pytest.skip(f"an {kind} file")
    bad = build(tmp)
    code, _, err = main(*argv(command, bad, tmp, model, good))
    line = one_line_error(err)
    assert code == 2, line
    assert str(bad) in line and words in line, line
    assert not (tmp / "concat.npz").exists()


# --- data loader scripts ------------------------------------------------------------------------------

SCRIPTS = {
    "raises": ("def load_data():\n    raise RuntimeError('no camera found')\n", "load_data() raised RuntimeError: no camera found"),
    "returns an int": ("def load_data():\n    return 5\n", "load_data() returned an int, not an iterable"),
    "returns None": ("def load_data():\n    pass\n", "load_data() returned None"),
    "generator raises": (
        "import numpy as np\ndef load_data():\n    yield {'x': np.ones((1, 4), np.float32)}\n    raise OSError('disk gone')\n",
        "load_data() raised OSError: disk gone while producing iteration 1",
    ),
    "item is not an array": ("def load_data():\n    return [{'x': [[1, 2], [3]]}]\n", "'x' is not an array"),
}


@pytest.mark.parametrize("script", SCRIPTS, ids=list(SCRIPTS))
def test_data_loader_script_failure_names_the_script(main, work, script):
    tmp, model, _ = work
    source, words = SCRIPTS[script]
    path = tmp / "loader.py"
    path.write_text(source)
    code, _, err = main("run", model, "--onnxrt", "--data-loader-script", path)  # a script gives its own feeds: --iterations is refused with it
    line = one_line_error(err)
    assert code == 2, line
    assert words in line and ("loader.py" in line or script == "item is not an array"), line


# --- output paths -------------------------------------------------------------------------------------


def test_concat_output_under_a_regular_file(main, work):
    tmp, _, good = work
    (tmp / "notes.txt").write_text("x")
    code, _, err = main("data", "concat", good, "-o", tmp / "notes.txt" / "out.npz")
    line = one_line_error(err)
    assert code == 2 and "notes.txt is a file, not a directory" in line, line


def test_concat_output_onto_a_directory(main, work):
    tmp, _, good = work
    (tmp / "outdir").mkdir()
    code, _, err = main("data", "concat", good, "-o", tmp / "outdir")
    line = one_line_error(err)
    assert code == 2 and "is a directory" in line and "outdir" in line, line
    assert list((tmp / "outdir").iterdir()) == []


def test_save_api_refuses_bad_output_paths(tmp_path):
    from parity.errors import UsageError

    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UsageError, match="notes.txt is a file"):
        save_inputs([{"x": np.ones(2)}], tmp_path / "notes.txt" / "in.npz")
    with pytest.raises(UsageError, match="is a directory"):
        save_inputs([{"x": np.ones(2)}], tmp_path)


@pytest.mark.parametrize("option", ["--save-outputs", "--save-inputs"])
@pytest.mark.parametrize("where", ["under a file", "a directory"])
def test_run_save_to_a_bad_path(main, work, option, where):
    tmp, model, _ = work
    (tmp / "notes.txt").write_text("x")
    (tmp / "outdir").mkdir()
    target = tmp / "notes.txt" / "out.npz" if where == "under a file" else tmp / "outdir"
    code, _, err = main("run", model, "--onnxrt", option, target)
    line = one_line_error(err)
    assert code == 2 and ("notes.txt" in line or "outdir" in line), line


# --- models whose external data is missing ------------------------------------------------------------


@pytest.fixture
def model_without_its_data(tmp_path):
    model = onnx.load(core_models.affine(tmp_path / "affine.onnx"))
    (tmp_path / "ext").mkdir()
    path = tmp_path / "ext" / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    (tmp_path / "ext" / "weights.bin").unlink()
    return path


@pytest.mark.parametrize("command", [["convert", "--fp-to-fp16"], ["surgeon", "sanitize"]], ids=["convert", "surgeon"])
def test_missing_external_data_names_the_file(main, model_without_its_data, tmp_path, command):
    """A model file without its data is a broken model (exit 3, like a missing model), said in one line that
    names the model, the missing data file and the tensor, not as an onnx ValidationError."""
    code, _, err = main(*command, model_without_its_data, "-o", tmp_path / "out.onnx")
    line = one_line_error(err)
    assert code == 3, line
    assert str(model_without_its_data) in line and "'weights.bin'" in line and "tensor 'scale'" in line and "ValidationError" not in line, line
    assert not (tmp_path / "out.onnx").exists()


# --- the docs say which options run your code ---------------------------------------------------------

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize(
    ("page", "option"),
    [("cli.md", "`--plugin"), ("cli.md", "`--data-loader-script"), ("plugins/README.md", "`--plugin`"), ("plugins/README.md", "`PARITY_PLUGINS")],
)
def test_docs_warn_that_the_option_runs_code(page, option):
    """Where an option that executes a Python file is described, the docs say so in the same paragraph."""
    text = (DOCS / page).read_text()
    paragraphs = [p for p in text.split("\n\n") if option in p and "only use files you trust" in p]
    assert paragraphs, f"{page}: no paragraph describing {option} says it runs the file as Python"
