"""Parity's TensorRT flows end to end, through the CLI, against the TensorRT model (trt_model: a model of TensorRT's
documented behaviour that runs built networks with onnxruntime, NOT TensorRT) for every manifest version, and against
the real ``tensorrt`` wherever it imports (``trt_backend``). Each test is a command users know from Polygraphy's
guides with ``parity`` in its place, and asserts what the user sees: the exit code, the verdict, the files written.

Tactic record/replay, ``debug build`` and ``diff-tactics`` are in plugins/tactics/tests/test_tactics_flows.py; int8
calibration in test_trt_flows_int8.py; the runner's and loaders' finer behaviours in test_trt_runner_flows.py and
test_trt_loader_flows.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from parity.testing import CliResult, invoke, relu_add, save_graph


def parity(*args: str | Path) -> CliResult:
    """``parity ARGS...`` through parity.testing's ``invoke``; no flow here may print a traceback."""
    result = invoke(*args)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def trt_output(results: Path, name: str) -> np.ndarray:
    """Output ``name`` of the TensorRT runner's first iteration in a saved results file."""
    from parity.results.files import load_results

    runs = load_results(results)
    return next(iterations for runner, iterations in runs.items() if runner.startswith("trt"))[0][name]


def loop_model(path: Path) -> Path:
    """y = x + 3 * 1, summed in a Loop of 3 iterations (a loop-carried value, a body tensor ``step``), then Relu."""
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "one"], ["step"]), helper.make_node("Identity", ["step"], ["acc_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2, 3])],
        [one],
    )
    trip = helper.make_tensor("trip", TensorProto.INT64, [], [3])
    cond = helper.make_tensor("cond", TensorProto.BOOL, [], [True])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trip", "cond", "x"], ["summed"], body=body, name="loop"),
         helper.make_node("Relu", ["summed"], ["y"], name="relu")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [trip, cond],
    )
    return save_graph(graph, path, check=True)


def reshape_model(path: Path) -> Path:
    """y = reshape(x, shape): ``shape`` is an int64 network input, so TensorRT makes it a shape tensor."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]), helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
    )
    return save_graph(graph, path, check=True)


def nonzero_model(path: Path) -> Path:
    """y = NonZero(x): its second dimension depends on the values of x (a data-dependent shape)."""
    graph = helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["y"], name="nonzero")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [1, "n"])],
    )
    return save_graph(graph, path, check=True)


def test_convert_then_inspect_and_run_an_engine_with_several_profiles(trt_backend, tmp_path):
    """The guides' dynamic-shapes example: an engine with 2 profiles, inspected, then run at a shape only the
    second profile admits; its outputs match onnxruntime's saved ones."""
    model = relu_add(tmp_path / "dynamic_identity.onnx")
    engine = tmp_path / "dynamic_identity.engine"
    built = parity("convert", model, "-o", engine,
                   "--trt-min-shapes", "x:[1,3]", "--trt-opt-shapes", "x:[4,3]", "--trt-max-shapes", "x:[8,3]",
                   "--trt-min-shapes", "x:[16,3]", "--trt-opt-shapes", "x:[32,3]", "--trt-max-shapes", "x:[64,3]")
    assert built.exit_code == 0 and engine.stat().st_size > 0, built
    shown = parity("inspect", "model", engine)
    assert shown.exit_code == 0, shown
    assert "profile 0: x min=[1, 3] opt=[4, 3] max=[8, 3]" in shown.stdout
    assert "profile 1: x min=[16, 3] opt=[32, 3] max=[64, 3]" in shown.stdout
    golden = tmp_path / "golden.npz"
    assert parity("run", model, "--onnxrt", "--input-shapes", "x:[32,3]", "--save-outputs", golden).exit_code == 0
    ran = parity("run", engine, "--trt", "--input-shapes", "x:[32,3]", "--load-outputs", golden)
    assert ran.exit_code == 0 and "PASSED" in ran.stdout, ran
    outside = parity("run", engine, "--trt", "--input-shapes", "x:[12,3]")
    assert outside.exit_code == 2 and "fit no optimization profile" in outside.stderr, outside


def test_run_trt_against_onnxrt_and_fp16_differences_are_reported(trt_backend, tmp_path):
    model = relu_add(tmp_path / "model.onnx")
    same = parity("run", model, "--trt", "--onnxrt", "--input-shapes", "x:[4,3]")
    assert same.exit_code == 0 and "PASSED" in same.stdout, same
    if not hasattr(trt_backend.BuilderFlag, "FP16") or trt_backend.__version__.startswith("11"):
        return  # 11.x refuses --fp16 (strongly typed networks only): test_options covers the message
    half = parity("run", model, "--trt", "--fp16", "--onnxrt", "--input-shapes", "x:[4,3]")
    assert half.exit_code == 1 and "FAILED | mismatched outputs: y" in half.stdout, half
    tolerant = parity("run", model, "--trt", "--fp16", "--onnxrt", "--input-shapes", "x:[4,3]", "--atol", "1e-2", "--rtol", "1e-2")
    assert tolerant.exit_code == 0, tolerant


def test_layerwise_mark_all_skips_loop_bodies_and_compares_every_other_tensor(trt_backend, tmp_path):
    model = loop_model(tmp_path / "loop.onnx")
    result = parity("run", model, "--trt", "--onnxrt", "--trt-outputs", "mark", "all", "--onnx-outputs", "mark", "all")
    assert result.exit_code == 0, result
    assert "summed: PASSED" in result.stdout and "y: PASSED" in result.stdout
    assert "step: PASSED" not in result.stdout  # a loop-body tensor: TensorRT cannot make it an output


def test_debug_tensors_reach_the_comparison(trt_backend, tmp_path):
    """``--mark-debug h`` keeps the engine as built and still captures h, compared with onnxruntime's h."""
    model = relu_add(tmp_path / "model.onnx")
    result = parity("run", model, "--trt", "--onnxrt", "--mark-debug", "h", "--onnx-outputs", "h", "y", "--input-shapes", "x:[4,3]")
    assert result.exit_code == 0, result
    assert "h: PASSED | max abs" in result.stdout and "y: PASSED | max abs" in result.stdout


def test_timing_cache_saved_then_loaded_with_no_miss(trt_backend, tmp_path):
    model = relu_add(tmp_path / "model.onnx")
    cache = tmp_path / "timing.cache"
    first = parity("run", model, "--trt", "--input-shapes", "x:[4,3]", "--save-timing-cache", cache)
    assert first.exit_code == 0 and cache.stat().st_size > 0, first
    before = cache.read_bytes()
    again = parity("run", model, "--trt", "--onnxrt", "--input-shapes", "x:[4,3]", "--load-timing-cache", cache,
                   "--trt-flags", "ERROR_ON_TIMING_CACHE_MISS")
    assert again.exit_code == 0, again
    assert cache.read_bytes() == before  # loading never rewrites the user's cache
    other = relu_add(tmp_path / "static.onnx", (2, 3))
    missed = parity("run", other, "--trt", "--load-timing-cache", cache, "--trt-flags", "ERROR_ON_TIMING_CACHE_MISS")
    assert missed.exit_code == 3 and "\n" not in (missed.stdout + missed.stderr).strip(), missed
    assert "timing cache miss" in missed.stderr  # TensorRT's own reason, in Parity's one line


def test_shape_tensor_input_takes_values(trt_backend, tmp_path):
    model = reshape_model(tmp_path / "reshape.onnx")
    feeds = tmp_path / "feeds.py"
    feeds.write_text(
        "import numpy as np\n"
        "def load_data():\n"
        "    yield {'x': np.arange(12, dtype=np.float32).reshape(2, 6), 'shape': np.array([3, 4], np.int64)}\n"
    )
    out = tmp_path / "out.npz"
    result = parity("run", model, "--trt", "--onnxrt", "--data-loader-script", feeds, "--save-outputs", out,
                    "--trt-min-shapes", "shape:[1,1]", "--trt-opt-shapes", "shape:[3,4]", "--trt-max-shapes", "shape:[12,12]")
    assert result.exit_code == 0, result
    np.testing.assert_array_equal(trt_output(out, "y"), np.arange(12, dtype=np.float32).reshape(3, 4))


def test_data_dependent_output_shape(trt_backend, tmp_path):
    model = nonzero_model(tmp_path / "nonzero.onnx")
    feeds = tmp_path / "feeds.py"
    feeds.write_text("import numpy as np\ndef load_data():\n    yield {'x': np.array([0, 2, 0, 5], np.float32)}\n")
    out = tmp_path / "out.npz"
    result = parity("run", model, "--trt", "--onnxrt", "--data-loader-script", feeds, "--save-outputs", out)
    assert result.exit_code == 0, result
    np.testing.assert_array_equal(trt_output(out, "y"), [[1, 3]])


def test_an_engine_from_another_version_is_refused_in_one_line(trt_backend, tmp_path):
    if not hasattr(trt_backend, "_memory"):
        pytest.skip("needs two TensorRT versions: the model's")
    from trt_model import make

    model = relu_add(tmp_path / "static.onnx", (2, 3))
    engine = tmp_path / "m.engine"
    assert parity("convert", model, "-o", engine).exit_code == 0
    data = json.loads(engine.read_bytes().split(b"\n", 1)[1])
    other = "11.4.0.106" if trt_backend.__version__ != "11.4.0.106" else "10.7.0"
    data["version"] = make(other).__version__
    engine.write_bytes(engine.read_bytes().split(b"\n", 1)[0] + b"\n" + json.dumps(data).encode())
    result = parity("run", engine, "--trt")
    assert result.exit_code == 3, result
    error = [line for line in result.stderr.splitlines() if line.startswith("parity: error:")]
    assert len(error) == 1 and "not compatible with this version of TensorRT" in error[0], result  # TensorRT's reason


@pytest.mark.gpu
def test_on_a_gpu_the_models_engines_use_real_device_memory(trt_backend, tmp_path):
    """Run with PARITY_TRT_MODEL_MEMORY=cuda on a GPU: Parity's CUDA layer (cuda-python) moves the data, and the
    model's engines read and write it in real device memory."""
    if not hasattr(trt_backend, "_memory") or type(trt_backend._memory).__name__ != "CudaMemory":
        pytest.skip("set PARITY_TRT_MODEL_MEMORY=cuda on a GPU machine")
    model = relu_add(tmp_path / "model.onnx")
    result = parity("run", model, "--trt", "--onnxrt", "--mark-debug", "h", "--input-shapes", "x:[4,3]")
    assert result.exit_code == 0, result
    assert trt_backend._memory.device_copies >= 3  # x in, y out, the debug tensor h


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["ppocr_det", "ppocr_rec", "silero_vad", "silero_vad_op15"])
def test_trained_models_run_layerwise(trt_backend, corpus_model, name):
    """Trained models from the wild (PP-OCRv4 from a Paddle export, silero-vad with If/Loop control flow), layer by
    layer: every tensor TensorRT can mark agrees with onnxruntime's (the model runs each engine with onnxruntime, so
    this checks Parity's marking, profiles from --input-shapes, shape-tensor and scalar inputs, not TensorRT's
    arithmetic)."""
    from corpus import MODELS

    result = parity("run", corpus_model(name), "--trt", "--onnxrt", *MODELS[name].run_args,
                    "--trt-outputs", "mark", "all", "--onnx-outputs", "mark", "all")
    assert result.exit_code == 0 and "PASSED |" in result.stdout, result
    assert "Layerwise comparison" in result.stdout and "all within tolerance" in result.stdout


@pytest.mark.parametrize("option", ["--save-engine", "--save-timing-cache", "--save-tactics"])
def test_files_the_build_writes_never_replace_the_model(trt_backend, tmp_path, option):
    """``run m.onnx --trt --save-engine m.onnx`` replaced the user's model with an engine and exited 0: every file
    the TensorRT and tactics plugins write is refused (exit 2, before any work) when it is the model or a file the
    command reads."""
    model = relu_add(tmp_path / "model.onnx", (2, 3))
    before = model.read_bytes()
    result = parity("run", model, "--trt", option, model)
    assert result.exit_code == 2 and "refusing to overwrite the model" in result.stderr, result
    assert model.read_bytes() == before
    cache = tmp_path / "timing.cache"
    assert parity("run", model, "--trt", "--save-timing-cache", cache).exit_code == 0
    kept = cache.read_bytes()
    clash = parity("run", model, "--trt", "--save-timing-cache", cache, "--save-engine", cache)
    assert clash.exit_code == 2 and "are the same file" in clash.stderr and cache.read_bytes() == kept, clash
    # one timing cache loaded and saved again is updated in place, as with Polygraphy
    assert parity("run", model, "--trt", "--load-timing-cache", cache, "--save-timing-cache", cache).exit_code == 0
    converted = parity("convert", model, "-o", tmp_path / "m.engine", "--save-timing-cache", model)
    assert converted.exit_code == 2 and model.read_bytes() == before, converted


def test_external_data_in_another_folder_reaches_the_parser(trt_backend, tmp_path):
    """--external-data-dir: TensorRT's parser gets the graph's bytes and a path in the data folder, so it finds
    the weights there (the same answer as onnxruntime, which reads them through the same option)."""
    import onnx

    from parity.testing import mlp

    (tmp_path / "m").mkdir()
    (tmp_path / "data").mkdir()
    proto = onnx.load(str(mlp(tmp_path / "src.onnx")))
    onnx.save_model(proto, str(tmp_path / "data" / "model.onnx"), save_as_external_data=True, location="model.onnx.data", size_threshold=0)
    moved = (tmp_path / "data" / "model.onnx").rename(tmp_path / "m" / "model.onnx")
    alone = parity("run", moved, "--trt")
    assert alone.exit_code == 3 and "model.onnx.data" in alone.stderr, alone
    both = parity("run", moved, "--trt", "--onnxrt", "--external-data-dir", tmp_path / "data")
    assert both.exit_code == 0 and "PASSED" in both.stdout, both
