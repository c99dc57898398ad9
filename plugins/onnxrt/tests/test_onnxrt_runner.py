"""OnnxrtRunner and the loaders through the Python API, on real onnxruntime and models the tests build."""

from __future__ import annotations

import shutil

import numpy as np
import onnx
import pytest
from parity_onnxrt import ModifyOnnxOutputs, OnnxFromPath, OnnxrtRunner, SessionFromOnnx, modify_onnx_outputs, onnx_from_path, session_from_onnx

from parity.api import RunResults, save_inputs
from parity.errors import BackendError, ModelError, UsageError

X = np.array([[1, 1, 1, 1], [-5, 5, -5, 5], [0, 0, 0, 0]], np.float32)
W = np.array([1, -2, 3, -4], np.float32)


def test_runner_runs_relu_add_and_reports_metadata(build):
    with OnnxrtRunner(SessionFromOnnx(str(build("relu_add")))) as runner:
        meta = runner.get_input_metadata()
        assert list(meta) == ["x"] and meta["x"].dtype == np.float32 and meta["x"].shape == ("N", 4)
        out = runner.infer({"x": X})
        assert list(out) == ["y"]
        np.testing.assert_array_equal(out["y"], np.maximum(X + W, 0))
        assert runner.last_inference_time is not None and runner.last_inference_time >= 0


def test_session_loader_takes_a_path_bytes_a_proto_or_a_loader(build):
    path = build("relu_add")
    sources = [str(path), path.read_bytes(), onnx.load(str(path)), OnnxFromPath(str(path)), onnx_from_path(str(path))]
    for source in sources:
        with OnnxrtRunner(SessionFromOnnx(source)) as runner:
            np.testing.assert_array_equal(runner.infer({"x": X})["y"], np.maximum(X + W, 0))
    session = session_from_onnx(str(path))  # the immediately evaluated twin: a ready session
    assert [i.name for i in session.get_inputs()] == ["x"]


def test_runner_takes_a_ready_session_and_survives_reactivation(build):
    session = session_from_onnx(str(build("relu_add")))
    runner = OnnxrtRunner(session, name="mine")
    assert runner.name == "mine"
    for _ in range(2):
        with runner:
            assert runner.is_active
            np.testing.assert_array_equal(runner.infer({"x": X[:1]})["y"], np.maximum(X[:1] + W, 0))
        assert not runner.is_active and runner.session is None


def test_infer_outside_activation_is_a_clear_error(build):
    runner = OnnxrtRunner(SessionFromOnnx(str(build("relu_add"))))
    with pytest.raises(BackendError, match="not active"):
        runner.infer({"x": X})
    runner.activate()
    runner.deactivate()
    with pytest.raises(BackendError, match="not active"):
        runner.get_input_metadata()


def test_one_session_serves_many_infer_calls_with_changing_batch(build):
    loads = []
    loader = SessionFromOnnx(str(build("relu_add")))

    def counting():
        loads.append(1)
        return loader()

    with OnnxrtRunner(counting) as runner:
        for batch in (1, 3, 2, 3):
            x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
            np.testing.assert_allclose(runner.infer({"x": x})["y"], np.maximum(x + W, 0))
    assert len(loads) == 1
    with OnnxrtRunner(counting) as runner:  # a lazy loader builds a fresh session per activation
        runner.infer({"x": X})
    assert len(loads) == 2


def test_metadata_and_inference_for_float16_int64_bool_and_string(build):
    with OnnxrtRunner(SessionFromOnnx(str(build("identities")))) as runner:
        meta = runner.get_input_metadata()
        assert meta["f16"].dtype == np.float16 and meta["f16"].shape == (2,)
        assert meta["i64"].dtype == np.int64 and meta["i64"].shape == (None, 3)  # an unnamed dynamic dim
        assert meta["b"].dtype == np.bool_
        assert meta["s"].shape == (2,)
        feed = {"f16": np.array([1.5, -2], np.float16), "i64": np.arange(6).reshape(2, 3), "b": np.array([True, False]), "s": np.array(["a", "bc"])}
        out = runner.infer(feed)
        assert out["f16_out"].dtype == np.float16 and out["i64_out"].dtype == np.int64 and out["b_out"].dtype == np.bool_
        np.testing.assert_array_equal(out["i64_out"], feed["i64"])
        assert list(out["s_out"]) == ["a", "bc"]
        with pytest.warns(UserWarning, match="casting input 'f16' from float32 to float16"):
            out = runner.infer({**feed, "f16": np.array([1.5, -2], np.float32)})
        assert out["f16_out"].dtype == np.float16
        with pytest.raises(UsageError, match="input 'i64' has dtype int32 but the model expects int64"):
            runner.infer({**feed, "i64": np.arange(6, dtype=np.int32).reshape(2, 3)})


def test_wrong_shape_rank_missing_and_unknown_inputs_are_usage_errors(build):
    with OnnxrtRunner(SessionFromOnnx(str(build("relu_add")))) as runner:
        with pytest.raises(UsageError, match=r"input 'x' has shape \[3, 5\] but the model expects float32\[N,4\]"):
            runner.infer({"x": np.ones((3, 5), np.float32)})
        with pytest.raises(UsageError, match="expects rank 2"):
            runner.infer({"x": np.ones(4, np.float32)})
        with pytest.raises(UsageError, match="no data for input 'x'"):
            runner.infer({})
        with pytest.raises(UsageError, match="the model has no input 'xx'"):
            runner.infer({"x": X, "xx": X})


def test_input_without_a_shape_takes_any_rank(build):
    # onnxruntime reports an input with no shape as shape [], like a scalar: the runner took it for rank 0 and
    # refused every real feed ("has shape [2, 3] but the model expects rank 0")
    path = build("unshaped")
    for source in (SessionFromOnnx(str(path)), SessionFromOnnx(path.read_bytes()), session_from_onnx(str(path))):
        with OnnxrtRunner(source) as runner:
            assert runner.get_input_metadata()["x"].shape is None
            for shape in [(2, 3), (4,), (1, 2, 2)]:
                x = np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)
                np.testing.assert_array_equal(runner.infer({"x": x})["y"], np.maximum(x, 0))


def test_scalar_input_keeps_rank_0(build):
    # onnxruntime itself runs a scalar input fed [3] (broadcasting it): the rank check is Parity's
    path = build("scalar_scale")
    for source in (SessionFromOnnx(str(path)), SessionFromOnnx(ModifyOnnxOutputs(OnnxFromPath(str(path)), ["mark all"]))):
        with OnnxrtRunner(source) as runner:
            assert runner.get_input_metadata()["k"].shape == ()
            out = runner.infer({"x": np.array([1, 2], np.float32), "k": np.array(3, np.float32)})
            np.testing.assert_array_equal(out["y"], [3, 6])
            with pytest.raises(UsageError, match=r"input 'k' has shape \[1\] but the model expects rank 0"):
                runner.infer({"x": np.array([1, 2], np.float32), "k": np.array([3], np.float32)})


def test_string_input_fed_numbers_is_one_line_with_onnxruntimes_reason(build):
    feed = {"f16": np.zeros(2, np.float16), "i64": np.zeros((1, 3), np.int64), "b": np.zeros(2, bool), "s": np.array([1, 2])}
    with OnnxrtRunner(SessionFromOnnx(str(build("identities")))) as runner, pytest.raises(UsageError) as info:
        runner.infer(feed)
    text = str(info.value)
    assert "\n" not in text and "Unexpected input data type" in text and "expected: (tensor(string))" in text


def test_mark_all_makes_every_main_graph_tensor_an_output_and_skips_subgraph_tensors(build):
    path = str(build("control_flow"))
    feed = {"x": np.array([1, -2], np.float32), "c": np.array(True)}
    for outputs in (["mark", "all"], ["mark all"], ["*"]):
        with OnnxrtRunner(SessionFromOnnx(ModifyOnnxOutputs(OnnxFromPath(path), outputs))) as runner:
            out = runner.infer(feed)
        assert sorted(out) == ["s", "y", "z"]  # t_in, t_out, e_out, acc_out, cond_out live in If/Loop bodies
    x = feed["x"]
    np.testing.assert_allclose(out["s"], 1 / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_array_equal(out["y"], -np.maximum(x, 0))
    np.testing.assert_allclose(out["z"], out["s"] + 3 * x, rtol=1e-6)
    with OnnxrtRunner(SessionFromOnnx(ModifyOnnxOutputs(OnnxFromPath(path), ["mark all"], exclude=["s", "z"]))) as runner:
        assert sorted(runner.infer(feed)) == ["y"]
    with OnnxrtRunner(SessionFromOnnx(modify_onnx_outputs(onnx_from_path(path), ["s"]))) as runner:
        assert sorted(runner.infer(feed)) == ["s"]
    with pytest.raises(UsageError, match="the model has no tensor 't_in'"):  # a body tensor is not the graph's
        modify_onnx_outputs(onnx_from_path(path), ["t_in"])


def test_mark_all_on_relu_add_exposes_the_add(build):
    with OnnxrtRunner(SessionFromOnnx(ModifyOnnxOutputs(OnnxFromPath(str(build("relu_add"))), ["mark all"]))) as runner:
        out = runner.infer({"x": X})
    assert list(out) == ["a", "y"]
    np.testing.assert_array_equal(out["a"], X + W)


def test_external_data_model_runs_from_its_path_and_after_mark_all(build, tmp_path):
    path = build("external")
    assert (tmp_path / "external.data").is_file()
    x = np.ones((1, 1024), np.float32)
    expected = x + np.arange(1024, dtype=np.float32)
    with OnnxrtRunner(SessionFromOnnx(str(path))) as runner:
        np.testing.assert_array_equal(runner.infer({"x": x})["y"], expected)
    with OnnxrtRunner(SessionFromOnnx(ModifyOnnxOutputs(OnnxFromPath(str(path)), ["mark all"]))) as runner:
        np.testing.assert_array_equal(runner.infer({"x": x})["y"], expected)
    # moved elsewhere without its data file: one line naming the file that is missing
    lonely = tmp_path / "alone"
    lonely.mkdir()
    shutil.copy(path, lonely / "external.onnx")
    with pytest.raises(ModelError) as info:
        SessionFromOnnx(str(lonely / "external.onnx"))()
    assert "\n" not in str(info.value) and "external.data" in str(info.value)
    with pytest.raises(ModelError, match="external data file 'external.data' of tensor 'w' is missing"):
        OnnxFromPath(str(lonely / "external.onnx"))()


def test_ir3_model_with_weights_listed_as_inputs(build):
    path = str(build("ir3_weights_as_inputs"))
    x = np.array([[-5, 0, 1, 2]], np.float32)
    expected = np.maximum(x + [1, 2, 3, 4], 0)
    for source in (SessionFromOnnx(path), SessionFromOnnx(ModifyOnnxOutputs(OnnxFromPath(path), ["mark all"]))):
        with OnnxrtRunner(source) as runner:
            assert list(runner.get_input_metadata()) == ["x"]  # the weight is no input to feed
            out = runner.infer({"x": x})
            np.testing.assert_array_equal(out["y"], expected)
    assert sorted(out) == ["a", "y"]


def test_session_options_are_applied(build):
    import onnxruntime as ort

    path = str(build("relu_add"))
    for level, name in [("disable", "ORT_DISABLE_ALL"), ("basic", "ORT_ENABLE_BASIC"), ("extended", "ORT_ENABLE_EXTENDED"), ("all", "ORT_ENABLE_ALL")]:
        session = session_from_onnx(path, graph_optimization_level=level, intra_op_num_threads=1)
        options = session.get_session_options()
        assert options.graph_optimization_level == getattr(ort.GraphOptimizationLevel, name)
        assert options.intra_op_num_threads == 1
    assert session.get_providers() == ["CPUExecutionProvider"]
    layout = session_from_onnx(path, graph_optimization_level="layout")
    assert layout.get_session_options().graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_LAYOUT


def test_providers_match_partial_names_and_an_unavailable_one_is_one_line(build):
    import onnxruntime as ort

    path = str(build("relu_add"))
    assert session_from_onnx(path, providers=["cpu"]).get_providers() == ["CPUExecutionProvider"]
    missing = next(p for p in ("tensorrt", "cuda", "openvino", "coreml") if not any(p in a.lower() for a in ort.get_available_providers()))
    with pytest.raises(BackendError) as info:
        session_from_onnx(path, providers=[missing])
    text = str(info.value)
    assert "\n" not in text and f"no provider matching '{missing}'" in text and "CPUExecutionProvider" in text
    assert "could not load" not in text  # the model is fine: the provider is what is missing


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("custom_op", "my.ops:Frobnicate(-1) is not a registered function/op"),
        ("no_kernel", "Could not find an implementation for Tan"),
    ],
)
def test_load_failures_are_one_line_with_onnxruntimes_reason(build, model, expected):
    path = str(build(model))
    with pytest.raises(ModelError) as info:
        SessionFromOnnx(path)()
    text = str(info.value)
    assert "\n" not in text and expected in text and path in text and "[ONNXRuntimeError]" not in text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\x08\x07not a protobuf \xff\xff", "not a valid ONNX model"),
        (b"", "No graph was found"),
    ],
)
def test_bad_model_files_are_one_line_errors_naming_the_file(tmp_path, content, expected):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(ModelError) as info:
        SessionFromOnnx(str(path))()
    assert "\n" not in str(info.value) and expected in str(info.value) and str(path) in str(info.value)
    with pytest.raises(UsageError, match="model not found"):
        SessionFromOnnx(str(tmp_path / "absent.onnx"))()


def test_bad_bytes_are_not_a_valid_model():
    with pytest.raises(ModelError) as info:
        SessionFromOnnx(b"junk")()
    assert "not a valid ONNX model" in str(info.value) and "protobuf parsing failed" in str(info.value).lower()


def test_prepacking_is_off_unless_asked_by_argument_or_session_options_file(tmp_path):
    """Packing weights at session creation costs about a second per GiB before the first inference: off by
    default; ``prepack=True`` or the file's config entry turns it on, and the argument wins over the file."""
    model = str(tmp_path / "tiny_cnn.onnx")
    shutil.copy("examples/models/tiny_cnn.onnx", model)
    on_file = tmp_path / "options.json"
    on_file.write_text('{"config_entries": {"session.disable_prepacking": "0"}}')

    def disabled(**kwargs):
        return SessionFromOnnx(model, **kwargs)().get_session_options().get_session_config_entry("session.disable_prepacking")

    assert disabled() == "1"
    assert disabled(prepack=True) == "0"
    assert disabled(session_options=str(on_file)) == "0"
    assert disabled(session_options=str(on_file), prepack=False) == "1"
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    packed, unpacked = (session_from_onnx(model, prepack=p).run(None, {"x": x})[0] for p in (True, False))
    np.testing.assert_allclose(unpacked, packed, rtol=1e-5, atol=1e-6)  # the same kernels' results to the last bits


def test_onnxrt_prepack_flag_reaches_the_session(tmp_path, parity_invoke):
    """The flag's effect is visible in the bits: tiny_cnn's packed and unpacked kernels round differently, and
    each saved output equals the session built with that setting."""
    model = str(tmp_path / "tiny_cnn.onnx")
    shutil.copy("examples/models/tiny_cnn.onnx", model)
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    save_inputs([{"x": x}], tmp_path / "in.npz")
    saved = {}
    for flag, prepack in (("--onnxrt-prepack", True), ("--no-onnxrt-prepack", False), (None, False)):
        out = tmp_path / f"{flag}.json"
        argv = ["run", model, "--onnxrt", *([flag] if flag else []), "--load-inputs", str(tmp_path / "in.npz"), "--save-outputs", str(out)]
        code, _, err = parity_invoke(*argv)
        assert code == 0, err
        saved[flag] = RunResults.load(out)[0][0]["probs"]
        np.testing.assert_array_equal(saved[flag], session_from_onnx(model, prepack=prepack).run(None, {"x": x})[0])
    assert not np.array_equal(saved["--onnxrt-prepack"], saved["--no-onnxrt-prepack"])
