"""Polygraphy's ONNX loading flags on every command that loads a model (issue 29): ``--fp-to-fp16``,
``--shape-inference``/``--do-shape-inference``, ``--no-onnxruntime-shape-inference`` and ``--ignore-external-data``
on ``run`` and ``debug build`` (with ``--model-type`` and ``--data-loader-backend-module``), ``debug reduce
--fp-to-fp16``, ``inspect model --fp-to-fp16`` (and its refused ``--save-timing-cache``, ``--ckpt``,
``--freeze-graph``), and ``check lint``'s onnxruntime session flags. Each test asserts the flag's effect."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from parity.testing import invoke

FLOAT16 = TensorProto.FLOAT16


def mlp(path: Path, name: str = "g") -> Path:
    """x[1,4] -> MatMul(w) -> Relu -> y[1,4]: one float32 weight, no intermediate shape recorded."""
    w = numpy_helper.from_array((np.arange(16, dtype=np.float32).reshape(4, 4) - 5) / 7, "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"], name="relu")],
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [w],
    )
    onnx.save(helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def dtypes(path: Path) -> list[int]:
    return [init.data_type for init in onnx.load(str(path)).graph.initializer]


# --- parity run ---------------------------------------------------------------------------------------------


def test_run_fp_to_fp16_runs_and_saves_the_fp16_model(tmp_path):
    model = mlp(tmp_path / "m.onnx")
    saved = tmp_path / "as_run.onnx"
    result = invoke("run", model, "--onnxrt", "--fp-to-fp16", "--save-onnx", saved, "--save-outputs", tmp_path / "fp16.json")
    assert result.exit_code == 0, result
    assert dtypes(saved) == [FLOAT16]  # the runners loaded the converted model
    assert [n.op_type for n in onnx.load(str(saved)).graph.node] == ["Cast", "MatMul", "Relu", "Cast"]
    assert dtypes(model) == [TensorProto.FLOAT]  # the input model is untouched
    assert "fp16:" not in result.stdout  # the converter's note is not the run's report
    # fp16 outputs differ from fp32 ones by rounding: the two runs are not bit-identical
    assert invoke("run", model, "--onnxrt", "--save-outputs", tmp_path / "fp32.json").exit_code == 0
    compare = invoke("run", "--load-outputs", tmp_path / "fp32.json", tmp_path / "fp16.json", "--atol", "0", "--rtol", "0")
    assert compare.exit_code == 1, compare


@pytest.mark.parametrize("flag", ["--shape-inference", "--do-shape-inference"])
def test_run_shape_inference_gives_the_runners_inferred_shapes(tmp_path, flag):
    model = mlp(tmp_path / "m.onnx")
    saved = tmp_path / "as_run.onnx"
    plain = tmp_path / "plain.onnx"
    assert invoke("run", model, "--onnxrt", "--save-onnx", plain).exit_code == 0
    assert not onnx.load(str(plain)).graph.value_info
    result = invoke("run", model, "--onnxrt", flag, "--no-onnxruntime-shape-inference", "--save-onnx", saved)
    assert result.exit_code == 0, result
    (info,) = onnx.load(str(saved)).graph.value_info
    assert info.name == "h" and [d.dim_value for d in info.type.tensor_type.shape.dim] == [1, 4]


def test_run_refuses_loading_flags_that_cannot_apply(tmp_path):
    model = mlp(tmp_path / "m.onnx")
    result = invoke("run", model, "--onnxrt", "--no-onnxruntime-shape-inference")
    assert result.exit_code == 2 and "add --shape-inference" in result.stderr, result
    result = invoke("run", model, "--onnxrt", "--ignore-external-data")
    assert result.exit_code == 2 and "--ignore-external-data: parity run runs the model, which needs its weights" in result.stderr, result


def test_run_shape_inference_keeps_external_weights_where_they_are(tmp_path):
    (tmp_path / "src").mkdir()
    model = mlp(tmp_path / "src" / "m.onnx")
    proto = onnx.load(str(model))
    onnx.save(proto, str(model), save_as_external_data=True, all_tensors_to_one_file=True, location="m.data", size_threshold=0)
    result = invoke("run", model, "--onnxrt", "--shape-inference", "--fp-to-fp16", "--save-onnx", tmp_path / "out.onnx")
    assert result.exit_code == 0, result
    assert dtypes(tmp_path / "out.onnx") == [FLOAT16]


# --- debug reduce --fp-to-fp16 ------------------------------------------------------------------------------

FAILS_ON_FP16 = [sys.executable, "-c", "import onnx, sys; sys.exit(any(i.data_type == 10 for i in onnx.load('parity_debug.onnx').graph.initializer))"]


def test_reduce_fp_to_fp16_reduces_the_converted_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = mlp(tmp_path / "m.onnx")
    result = invoke("debug", "reduce", model, "-o", "reduced.onnx", "--fp-to-fp16", "--no-repro", "--check", *FAILS_ON_FP16)
    assert result.exit_code == 0, result
    reduced = onnx.load("reduced.onnx")
    assert [n.op_type for n in reduced.graph.node] == ["MatMul"] and dtypes(tmp_path / "reduced.onnx") == [FLOAT16]
    # without the flag the model holds no float16 weight: the check passes on it, nothing to reduce
    result = invoke("debug", "reduce", model, "-o", "reduced2.onnx", "--no-repro", "--check", *FAILS_ON_FP16)
    assert result.exit_code != 0 and not Path("reduced2.onnx").exists()


# --- inspect model ------------------------------------------------------------------------------------------


def test_inspect_model_fp_to_fp16_shows_the_converted_model(tmp_path):
    model = mlp(tmp_path / "m.onnx")
    shown = invoke("inspect", "model", model, "--fp-to-fp16", "--json")
    assert shown.exit_code == 0, shown
    facts = json.loads(shown.stdout)  # the converter's note goes to stderr: stdout stays JSON
    assert facts["nodes"] == 4 and facts["inputs"]["x"]["dtype"] == "float32" and facts["model"] == str(model)
    assert "float16" in invoke("inspect", "model", model, "--fp-to-fp16", "--show", "weights").stdout
    assert "float16" not in invoke("inspect", "model", model, "--show", "weights").stdout
    result = invoke("inspect", "model", model, "--fp-to-fp16", "--ignore-external-data")
    assert result.exit_code == 2 and "--ignore-external-data leaves unread" in result.stderr


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        (["--save-timing-cache", "cache.bin"], "--save-timing-cache: inspect model builds no engine"),
        (["--ckpt", "model.ckpt"], "--ckpt is a TensorFlow option"),
        (["--freeze-graph"], "--freeze-graph is a TensorFlow option"),
    ],
)
def test_inspect_model_refuses_what_cannot_apply(tmp_path, flag, words):
    result = invoke("inspect", "model", mlp(tmp_path / "m.onnx"), *flag)
    assert result.exit_code == 2 and words in result.stderr and len(result.stderr.strip().splitlines()) == 1, result
    assert not (tmp_path / "cache.bin").exists()


# --- check lint: the onnxruntime session's providers and optimization level --------------------------------


def test_lint_session_flags_reach_onnxruntime(tmp_path, monkeypatch):
    import onnxruntime as ort

    seen: list[tuple[list[str], object]] = []
    real = ort.InferenceSession

    def spy(source, sess_options=None, providers=None, **kwargs):
        seen.append((list(providers or ()), sess_options.graph_optimization_level))
        return real(source, sess_options=sess_options, providers=providers, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", spy)
    model = mlp(tmp_path / "m.onnx")
    result = invoke("check", "lint", model, "--execution-providers", "cpu", "--graph-optimization-level", "extended")
    assert result.exit_code == 0 and "PASSED" in result.stdout, result
    assert seen[-1] == (["CPUExecutionProvider"], ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED)
    assert invoke("check", "lint", model).exit_code == 0
    assert seen[-1] == (["CPUExecutionProvider"], ort.GraphOptimizationLevel.ORT_DISABLE_ALL)  # lint's default session
    result = invoke("check", "lint", model, "--providers", "nosuchprovider")
    assert result.exit_code == 2 and "no provider matching 'nosuchprovider'" in result.stderr, result


# --- debug build (against the behavioural model of TensorRT) ------------------------------------------------


@pytest.fixture
def trt10(monkeypatch):
    """TensorRT 10.16 as the behavioural model of it (plugins/trt/tests/trt_model: NOT TensorRT)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins" / "trt" / "tests"))
    try:
        from trt_model.install import install, uninstall
    except ImportError:
        pytest.skip("the behavioural model of TensorRT is not here")
    finally:
        sys.path.pop(0)
    yield install(monkeypatch, "10.16.1.11")
    uninstall()


def _build(tmp_path: Path, model: Path, folder: str, *flags: str):
    return invoke("debug", "build", model, *flags, "--artifacts", "parity_debug.engine", "--art-dir", folder, "--until=1", "--check", "true")


@pytest.mark.usefixtures("trt10")
def test_debug_build_fp_to_fp16_builds_the_converted_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = mlp(tmp_path / "m.onnx")
    engines = {}
    for name, flags in {"plain": (), "again": (), "fp16": ("--fp-to-fp16",), "inferred": ("--do-shape-inference", "--no-onnxruntime-shape-inference")}.items():
        result = _build(tmp_path, model, name, *flags)
        assert result.exit_code == 0, result
        engines[name] = next((tmp_path / name / "good").glob("parity_debug_N0*.engine")).read_bytes()
    assert engines["plain"] == engines["again"] and engines["fp16"] != engines["plain"]
    assert engines["inferred"] == engines["plain"]  # inferred shapes change no layer
    assert dtypes(model) == [TensorProto.FLOAT]


@pytest.mark.usefixtures("trt10")
@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--ignore-external-data"], "--ignore-external-data: debug build builds the model, which needs its weights"),
        (["--no-onnxruntime-shape-inference"], "add --shape-inference"),
        (["--model-type", "engine"], "--model-type engine: debug build builds TensorRT engines from ONNX models"),
        (["--data-loader-backend-module", "torch"], "--data-loader-backend-module: debug build reads input data only to calibrate int8"),
    ],
)
def test_debug_build_refuses_what_cannot_apply(tmp_path, monkeypatch, flags, words):
    monkeypatch.chdir(tmp_path)
    result = _build(tmp_path, mlp(tmp_path / "m.onnx"), "out", *flags)
    assert result.exit_code == 2 and words in result.stderr, result


@pytest.mark.usefixtures("trt10")
def test_debug_build_model_type_onnx_reads_a_file_of_any_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = mlp(tmp_path / "m.onnx").rename(tmp_path / "model.bin")
    result = _build(tmp_path, model, "out", "--model-type", "onnx")
    assert result.exit_code == 0, result


@pytest.mark.usefixtures("trt10")
def test_debug_build_data_loader_backend_module_draws_the_int8_calibration_data(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])],
    )  # fmt: skip
    model = tmp_path / "identity.onnx"
    onnx.save(helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)]), model)
    engines = {}
    for name, flags in {"numpy": (), "numpy_again": ("--data-loader-backend-module", "numpy"), "torch": ("--data-loader-backend-module", "torch")}.items():
        result = _build(tmp_path, model, name, "--int8", *flags)
        assert result.exit_code == 0, result
        engines[name] = next((tmp_path / name / "good").glob("parity_debug_N0*.engine")).read_bytes()
    # the engine holds the ranges TensorRT calibrated on the drawn values: torch's generator draws others
    assert engines["numpy"] == engines["numpy_again"] and engines["torch"] != engines["numpy"]
