"""Custom-op libraries (``--onnxrt-custom-ops``) and session options from a file (``--onnxrt-session-options``),
tested with a real library: onnxruntime-extensions' ``ai.onnx.contrib`` ops."""

from __future__ import annotations

import json

import numpy as np
import pytest

ortx = pytest.importorskip("onnxruntime_extensions")

from parity_onnxrt import OnnxrtRunner, SessionFromOnnx, session_from_onnx  # noqa: E402

from parity.api import BackendError, ModelError, UsageError  # noqa: E402

LIB = ortx.get_library_path()


def one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if not line.startswith("parity: warning:")]
    assert len(lines) == 1, err
    assert lines[0].startswith("parity: error: ") and "Traceback" not in err
    return lines[0]


def expected(x: np.ndarray) -> np.ndarray:
    return np.linalg.inv(x.astype(np.float64) + 4 * np.eye(4)) @ x


def test_without_the_library_the_custom_op_is_named_with_the_option_to_use(build, parity_invoke):
    path = build("contrib_inverse")
    code, _, err = parity_invoke("run", path, "--onnxrt")
    assert code == 3, err
    line = one_error_line(err)
    assert "ai.onnx.contrib:Inverse(-1) is not a registered function/op" in line and "--onnxrt-custom-ops LIB.so" in line


def test_two_runners_with_the_library_agree_and_compute_the_inverse(build, parity_invoke, tmp_path):
    path = build("contrib_inverse")
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    code, out, err = parity_invoke(
        "run", path, "--onnxrt", "--onnxrt-custom-ops", LIB, f"--onnxrt=graph-optimization-level=disable,custom-ops={LIB}",
        "--iterations", "2", "--save-inputs", inputs, "--save-outputs", outputs,
    )  # fmt: skip
    assert code == 0, err
    assert "[onnxrt-0 vs onnxrt-1] iteration 1: PASSED" in out and "y: PASSED" in out
    from parity.api import RunResults, load_inputs

    feeds = load_inputs(inputs)
    for name, iterations in RunResults.load(outputs).items():
        for feed, result in zip(feeds, iterations):
            np.testing.assert_allclose(result["y"], expected(feed["x"]), rtol=1e-5, atol=1e-6, err_msg=name)


def test_the_option_is_per_runner(build, parity_invoke):
    # the library for the second runner only: the first cannot load the model
    code, _, err = parity_invoke("run", build("contrib_inverse"), "--onnxrt", f"--onnxrt=custom-ops={LIB}")
    assert code == 3 and "is not a registered function/op" in one_error_line(err)
    # one library twice (the global option and a per-runner repeat) is registered once
    code, _, err = parity_invoke("run", build("contrib_inverse"), "--onnxrt-custom-ops", LIB, f"--onnxrt=custom-ops={LIB},custom-ops={LIB}")
    assert code == 0, err


def test_a_custom_op_model_runs_layer_by_layer(build, parity_invoke, tmp_path):
    report = tmp_path / "r.json"
    code, out, err = parity_invoke(
        "run", build("contrib_inverse"), "--onnxrt", "--onnxrt=graph-optimization-level=disable", "--onnxrt-custom-ops", LIB,
        "--onnx-outputs", "mark", "all", "--report", report,
    )  # fmt: skip
    assert code == 0, err
    for tensor in ("a", "inv", "y"):
        assert f"  {tensor}: PASSED" in out
    assert "3 tensors in topological order: all within tolerance" in out
    (layerwise,) = json.loads(report.read_text())["layerwise"]
    assert [t["name"] for t in layerwise["tensors"]] == ["a", "inv", "y"]
    assert [t["op_type"] for t in layerwise["tensors"]] == ["Add", "Inverse", "MatMul"]


@pytest.mark.parametrize(("content", "reason"), [(None, "cannot open shared object file"), (b"not an ELF file", "file too short")])
def test_a_missing_or_broken_library_is_one_line_with_onnxruntimes_reason(build, parity_invoke, tmp_path, content, reason):
    lib = tmp_path / "libmyops.so"
    if content is not None:
        lib.write_bytes(content)
    code, _, err = parity_invoke("run", build("contrib_inverse"), "--onnxrt", "--onnxrt-custom-ops", lib)
    assert code == 3, err
    line = one_error_line(err)
    assert f"could not load the custom-op library {lib}: Failed to load library" in line and reason in line and "[ONNXRuntimeError]" not in line


def test_session_options_from_a_file(build, parity_invoke, tmp_path):
    options = tmp_path / "session.json"
    options.write_text(json.dumps({
        "intra_op_num_threads": 1, "execution_mode": "ORT_SEQUENTIAL", "graph_optimization_level": "basic",
        "enable_mem_pattern": False, "config_entries": {"session.intra_op.allow_spinning": "0", "session.use_env_allocators": 0},
    }))  # fmt: skip
    before = options.read_bytes()
    code, out, err = parity_invoke("run", build("contrib_inverse"), "--onnxrt", "--onnxrt-custom-ops", LIB, "--onnxrt-session-options", options, "--onnxrt")
    assert code == 0 and "PASSED" in out, err
    assert options.read_bytes() == before  # read, never written
    code, _, err = parity_invoke("run", build("relu_add"), "--onnxrt", "--onnxrt-session-options", options, "--save-outputs", options)
    assert code == 2 and "refusing to overwrite the --onnxrt-session-options file" in one_error_line(err)
    assert options.read_bytes() == before


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"intra_op_threads": 2}', "unknown key 'intra_op_threads' (did you mean 'intra_op_num_threads'"),
        ('{"intra_op_num_threads": "two"}', "'intra_op_num_threads': expected an integer, got 'two'"),
        ('{"enable_profiling": 1}', "'enable_profiling': expected true or false, got 1"),
        ('{"execution_mode": "sideways"}', "'execution_mode': expected one of ORT_SEQUENTIAL, ORT_PARALLEL, got 'sideways'"),
        ('{"config_entries": ["a"]}', "'config_entries' must be a JSON object"),
        ('{"config_entries": {"session.x": [1]}}', "config_entries 'session.x': expected a string"),
        ("[1, 2]", "must hold a JSON object of SessionOptions attributes, not list"),
        ("{not json", "is not valid JSON"),
    ],
)
def test_bad_session_options_are_one_line_naming_the_key_and_the_file(build, parity_invoke, tmp_path, content, expected):
    options = tmp_path / "session.json"
    options.write_text(content)
    code, _, err = parity_invoke("run", build("relu_add"), "--onnxrt", "--onnxrt-session-options", options, "--save-outputs", tmp_path / "o.npz")
    assert code == 2, err
    line = one_error_line(err)
    assert expected in line and (f"--onnxrt-session-options {options}: " in line or f"{options} " in line)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["relu_add.onnx", "session.json"]  # nothing written


def test_a_missing_session_options_file(build, parity_invoke, tmp_path):
    code, _, err = parity_invoke("run", build("relu_add"), "--onnxrt", "--onnxrt-session-options", tmp_path / "none.json")
    assert code == 2 and f"--onnxrt-session-options: cannot read {tmp_path / 'none.json'}" in one_error_line(err)


def test_settings_given_twice_to_a_single_valued_option_are_refused(build, parity_invoke):
    code, _, err = parity_invoke("run", build("relu_add"), "--onnxrt=graph-optimization-level=disable,graph-optimization-level=all")
    assert code == 2 and "setting 'graph_optimization_level' is given 2 times" in one_error_line(err)


def test_python_api_without_plugins_or_the_cli(build, tmp_path):
    path = str(build("contrib_inverse"))
    x = np.arange(16, dtype=np.float32).reshape(4, 4) / 10
    with OnnxrtRunner(SessionFromOnnx(path, custom_ops=[LIB])) as runner:
        np.testing.assert_allclose(runner.infer({"x": x})["y"], expected(x), rtol=1e-5, atol=1e-6)
    session = session_from_onnx(path, custom_ops=[LIB], session_options={"intra_op_num_threads": 1, "config_entries": {"session.intra_op.allow_spinning": "0"}})
    assert session.get_session_options().intra_op_num_threads == 1
    assert session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
    # explicit arguments win over the options
    session = session_from_onnx(path, custom_ops=[LIB], intra_op_num_threads=2, session_options={"intra_op_num_threads": 1})
    assert session.get_session_options().intra_op_num_threads == 2
    with pytest.raises(ModelError, match="not a registered function/op"):
        session_from_onnx(path)
    with pytest.raises(BackendError, match="could not load the custom-op library"):
        session_from_onnx(path, custom_ops=[str(tmp_path / "none.so")])
    with pytest.raises(UsageError, match="session_options: unknown key 'threads'"):
        session_from_onnx(path, custom_ops=[LIB], session_options={"threads": 1})
    # the whole of `parity run` from Python, the setting named as the option is
    from parity import RunRequest, run_comparison

    runners = [("onnxrt", {"onnxrt_custom_ops": [LIB]}), ("onnxrt", {"onnxrt_custom_ops": [LIB], "graph_optimization_level": "disable"})]
    outcome = run_comparison(RunRequest(path, runners))
    assert outcome.passed and outcome.code == 0


def test_a_real_classifier_with_a_custom_op_head_runs_layer_by_layer(corpus_model, parity_invoke, tmp_path):
    """PP-OCR's text-direction classifier (a corpus model) with an ai.onnx.contrib Inverse on its output
    (inverse of probs^T probs + I): it runs only with the library registered, and compares layer by layer."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(corpus_model("ppocr_cls"))
    probs = model.graph.output[0].name
    model.graph.initializer.append(numpy_helper.from_array(np.eye(2, dtype=np.float32), "eye2"))
    model.graph.node.extend([
        helper.make_node("Transpose", [probs], ["probs_t"], name="head_t", perm=[1, 0]),
        helper.make_node("MatMul", ["probs_t", probs], ["gram"], name="head_gram"),
        helper.make_node("Add", ["gram", "eye2"], ["gram_i"], name="head_add"),
        helper.make_node("Inverse", ["gram_i"], ["inv"], name="head_inverse", domain="ai.onnx.contrib"),
    ])
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("inv", TensorProto.FLOAT, [2, 2]))
    model.opset_import.append(helper.make_opsetid("ai.onnx.contrib", 1))
    model.ir_version = 8
    path = tmp_path / "cls_inverse.onnx"
    onnx.save(model, path)
    shapes = ("--input-shapes", "x:[1,3,48,192]")
    code, _, err = parity_invoke("run", path, "--onnxrt", *shapes)
    assert code == 3 and "ai.onnx.contrib:Inverse" in err and "--onnxrt-custom-ops" in err and len(err.strip().splitlines()) == 1, err
    report = tmp_path / "r.json"
    code, out, err = parity_invoke(
        "run", path, "--onnxrt", "--onnxrt=graph-optimization-level=disable", "--onnxrt-custom-ops", LIB, *shapes,
        "--onnx-outputs", "mark", "all", "--save-outputs", tmp_path / "out.npz", "--report", report, "--atol", "1e-4", "--rtol", "1e-3",
    )
    assert code == 0, out[-2000:] + err
    layerwise = json.loads(report.read_text())["layerwise"][0]
    assert layerwise["tensors"][-1]["op_type"] == "Inverse" and len(layerwise["tensors"]) > 100
    from parity import load_results

    run = load_results(tmp_path / "out.npz")["onnxrt-0"][0]
    gram = run["probs_t"] @ run[probs] + np.eye(2, dtype=np.float32)
    np.testing.assert_allclose(run["inv"], np.linalg.inv(gram), rtol=1e-4, atol=1e-5)
