"""TrtRunner flows (Python API and CLI) against the TensorRT model (trt_model: a behavioural model of TensorRT's
documented Python API, NOT TensorRT), over every modelled version (and the real TensorRT where it imports).

What a TensorRT runner has to get right, as Polygraphy's TensorRT backend exercises it: shape-tensor inputs (values
in host memory, profiles of values), data-dependent output shapes (an output allocator), several optimisation
profiles chosen by the feed's shapes and switched between calls, one execution context per profile reused across
calls, wrong feeds refused in one line, and an engine another TensorRT version built refused in one line.
"""

from __future__ import annotations

import types
import warnings
from pathlib import Path

import numpy as np
import pytest

from parity.errors import BackendError, ModelError, UsageError
from parity.testing import relu_add, save_model

# ---- models ---------------------------------------------------------------------------------------------------

def reshape_by_values(path: Path) -> Path:
    """y = reshape(relu(x), s): ``s`` (int64[2]) is used as a shape, so TensorRT makes it a shape-tensor input."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    s = helper.make_tensor_value_info("s", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"), helper.make_node("Reshape", ["h", "s"], ["y"], name="reshape")]
    return save_model(path, nodes, [x, s], [y])


def nonzero(path: Path) -> Path:
    """y = NonZero(x): y's second dim is known only after the engine ran (a data-dependent shape)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    return save_model(path, [helper.make_node("NonZero", ["x"], ["y"], name="nonzero")], [x], [y])


# ---- helpers --------------------------------------------------------------------------------------------------
@pytest.fixture
def trt(trt_backend: types.ModuleType) -> types.ModuleType:  # noqa: F811 - the imported fixture, by a short name
    return trt_backend


def profile(**ranges: tuple) -> object:
    from parity_trt import Profile

    return Profile({name: tuple(tuple(s) for s in r) for name, r in ranges.items()})


def build(path: Path, profiles: list = (), **network_options: object) -> object:
    """A lazy loader of engine bytes for the ONNX model at ``path``."""
    from parity_trt import CreateConfig, EngineBytesFromNetwork, ModifyNetwork, NetworkFromOnnxPath

    network = NetworkFromOnnxPath(str(path))
    if network_options:
        network = ModifyNetwork(network, **network_options)
    return EngineBytesFromNetwork(network, CreateConfig(profiles=list(profiles), progress=False))


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text, text
    return text


def error_line(err: str) -> str:
    """Parity's one error line of a failing command (TensorRT's own log lines may come before it; no traceback)."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("parity: error")]
    assert len(lines) == 1, err
    return lines[0]


X = np.array([[-1.0, 2.0, -3.0, 4.0], [5.0, -6.0, 7.0, -8.0]], np.float32)


# ---- shape tensors --------------------------------------------------------------------------------------------
def test_shape_tensor_input_values_shape_the_output(trt, tmp_path: Path) -> None:
    from parity_trt import TrtRunner

    engine = build(reshape_by_values(tmp_path / "m.onnx"), [profile(x=((1, 4), (2, 4), (4, 4)), s=((1, 1), (2, 4), (16, 16)))])
    with TrtRunner(engine) as runner:
        meta = runner.get_input_metadata()
        assert meta["s"].dtype == np.int64 and tuple(meta["s"].shape) == (2,)
        assert runner.shape_io == {"s"}  # TensorRT reads its values from host memory
        for values in ([4, 2], [8, 1], [2, 4]):  # new values on the same context, each call
            out = runner.infer({"x": X, "s": np.array(values, np.int64)})
            assert out["y"].shape == tuple(values)
            np.testing.assert_array_equal(out["y"], np.maximum(X, 0).reshape(values))
        assert list(runner.contexts) == [0]


def test_shape_tensor_values_select_the_profile(trt, tmp_path: Path) -> None:
    from parity_trt import TrtRunner

    small = profile(x=((1, 4), (2, 4), (2, 4)), s=((1, 1), (2, 4), (2, 4)))
    large = profile(x=((1, 4), (2, 4), (2, 4)), s=((1, 1), (4, 2), (8, 8)))
    with TrtRunner(build(reshape_by_values(tmp_path / "m.onnx"), [small, large])) as runner:
        assert runner.select_profile({"x": X, "s": np.array([2, 4], np.int64)}) == 0
        assert runner.select_profile({"x": X, "s": np.array([8, 1], np.int64)}) == 1  # by VALUES: same shape (2,)
        out = runner.infer({"x": X, "s": np.array([8, 1], np.int64)})
        np.testing.assert_array_equal(out["y"], np.maximum(X, 0).reshape(8, 1))
        with pytest.raises(UsageError) as exc:
            runner.infer({"x": X, "s": np.array([16, 1], np.int64)})
        assert "s:values [16, 1]" in one_line(exc) and "profile 1: " in one_line(exc)


def test_shape_tensor_values_outside_the_chosen_profile_are_bad_input(trt, tmp_path: Path) -> None:
    # --optimization-profile 0 with values only profile 1 admits: the feed is wrong (exit 2), not TensorRT (3)
    from parity_trt import TrtRunner

    small = profile(x=((1, 4), (2, 4), (2, 4)), s=((1, 1), (2, 4), (2, 4)))
    large = profile(x=((1, 4), (2, 4), (2, 4)), s=((1, 1), (4, 2), (8, 8)))
    with TrtRunner(build(reshape_by_values(tmp_path / "m.onnx"), [small, large]), optimization_profile=0) as runner:
        with pytest.raises(UsageError) as exc:
            runner.infer({"x": X, "s": np.array([8, 1], np.int64)})
        assert "s:values [8, 1] are outside optimization profile 0 (profile 0: " in one_line(exc)


# ---- data-dependent output shapes ----------------------------------------------------------------------------
def test_data_dependent_output_comes_through_the_allocator(trt, tmp_path: Path) -> None:
    from parity_trt import TrtRunner

    with TrtRunner(build(nonzero(tmp_path / "m.onnx"))) as runner:
        for count in (2, 9, 0, 5):  # the output grows, empties and shrinks between calls
            x = np.zeros((3, 4), np.float32)
            x.reshape(-1)[np.linspace(0, 11, count).astype(int)] = 1.0
            out = runner.infer({"x": x})
            assert out["y"].dtype == np.int64 and out["y"].shape == (2, count)
            np.testing.assert_array_equal(out["y"], np.array(np.nonzero(x)))
        assert list(runner.allocators) == ["y"]  # one allocator, reused


# ---- optimisation profiles -----------------------------------------------------------------------------------
TWO_PROFILES = [profile(x=((1, 3), (2, 3), (2, 3))), profile(x=((3, 3), (4, 3), (6, 3)))]


def test_profiles_are_chosen_by_shape_and_switched_between_calls(trt, tmp_path: Path) -> None:
    from parity_trt import TrtRunner

    with TrtRunner(build(relu_add(tmp_path / "m.onnx"), TWO_PROFILES)) as runner:
        assert runner.engine.num_optimization_profiles == 2
        seen = {}
        for rows, want in ((1, 0), (5, 1), (2, 0), (6, 1), (3, 1)):
            x = np.linspace(-1, 1, rows * 3, dtype=np.float32).reshape(rows, 3)
            assert runner.select_profile({"x": x}) == want
            out = runner.infer({"x": x})
            np.testing.assert_allclose(out["y"], 2 * np.maximum(x, 0))
            seen.setdefault(want, runner.contexts[want])
            assert runner.contexts[want] is seen[want]  # one context per profile, made once, reused
        assert sorted(runner.contexts) == [0, 1]


def test_a_shape_no_profile_admits_is_refused_in_one_line(trt, tmp_path: Path) -> None:
    from parity_trt import TrtRunner

    with TrtRunner(build(relu_add(tmp_path / "m.onnx"), TWO_PROFILES)) as runner:
        with pytest.raises(UsageError) as exc:
            runner.infer({"x": np.zeros((9, 3), np.float32)})
        text = one_line(exc)
        assert "x:[9, 3]" in text and "profile 0: x [1, 3]..[2, 3]" in text and "profile 1: x [3, 3]..[6, 3]" in text


def test_an_explicit_profile_is_kept_and_checked(trt, tmp_path: Path) -> None:
    from parity_trt import TrtRunner

    engine = build(relu_add(tmp_path / "m.onnx"), TWO_PROFILES)
    with TrtRunner(engine, optimization_profile=1) as runner:
        x = np.ones((4, 3), np.float32)
        np.testing.assert_allclose(runner.infer({"x": x})["y"], 2 * x)
        assert list(runner.contexts) == [1]
        with pytest.raises(UsageError) as exc:  # profile 0's shape, but profile 1 was asked for
            runner.infer({"x": np.ones((1, 3), np.float32)})
        assert "x:[1, 3] are outside optimization profile 1 (profile 1: x [3, 3]..[6, 3])" in one_line(exc)
    with pytest.raises(UsageError) as exc, TrtRunner(engine, optimization_profile=2):
        pass
    assert "2 profile(s)" in one_line(exc)


# ---- wrong feeds ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("feed", "words"),
    [
        ({"x": np.ones((2, 3), np.int32)}, ["'x'", "int32", "float32"]),
        ({"x": np.ones((2, 4), np.float32)}, ["'x'", "[2, 4]"]),
        ({"x": np.ones((2, 3, 1), np.float32)}, ["'x'"]),
        ({}, ["no data for input 'x'"]),
        ({"x": np.ones((2, 3), np.float32), "xx": np.ones(1)}, ["no input 'xx'"]),
    ],
    ids=["dtype", "static-dim", "rank", "missing", "unknown"],
)
def test_wrong_feeds_are_refused_in_one_line(trt, tmp_path: Path, feed: dict, words: list[str]) -> None:
    from parity_trt import TrtRunner

    with TrtRunner(build(relu_add(tmp_path / "m.onnx", ("N", 3)), [profile(x=((1, 3), (2, 3), (4, 3)))])) as runner:
        with pytest.raises(UsageError) as exc:
            runner.infer(feed)
        text = one_line(exc)
        assert all(w in text for w in words), text
        # the runner still works after a refused feed
        np.testing.assert_allclose(runner.infer({"x": np.ones((2, 3), np.float32)})["y"], 2.0)


def test_wrong_shape_tensor_feeds_are_refused_in_one_line(trt, tmp_path: Path) -> None:
    from parity_trt import TrtRunner

    engine = build(reshape_by_values(tmp_path / "m.onnx"), [profile(x=((1, 4), (2, 4), (4, 4)), s=((1, 1), (2, 4), (16, 16)))])
    with TrtRunner(engine) as runner:
        for bad in (np.array([4.0, 2.0]), np.array([4, 2, 1], np.int64)):  # float values; three values for two
            with pytest.raises(UsageError) as exc:
                runner.infer({"x": X, "s": bad})
            assert "'s'" in one_line(exc)


def test_float_feeds_of_another_width_are_cast_with_a_warning(trt, tmp_path: Path) -> None:
    from parity_trt import TrtRunner

    with TrtRunner(build(relu_add(tmp_path / "m.onnx", (2, 3)))) as runner:
        with pytest.warns(UserWarning, match="casting input 'x' from float64 to float32"):
            out = runner.infer({"x": np.full((2, 3), 1.5)})
        assert out["y"].dtype == np.float32 and np.allclose(out["y"], 3.0)


# ---- contexts and buffers across calls ----------------------------------------------------------------------
def test_context_and_buffers_are_reused_across_calls(trt, tmp_path: Path) -> None:
    from parity_trt import TrtRunner

    runner = TrtRunner(build(relu_add(tmp_path / "m.onnx"), [profile(x=((1, 3), (4, 3), (8, 3)))]))
    with runner:
        first = runner.infer({"x": np.ones((4, 3), np.float32)})
        context, buffer = runner.contexts[0], runner.device["x"].ptr
        second = runner.infer({"x": -np.ones((2, 3), np.float32)})  # smaller: the buffer is reused
        third = runner.infer({"x": np.full((4, 3), 3.0, np.float32)})
        assert runner.contexts[0] is context and runner.device["x"].ptr == buffer
        assert first["y"].shape == (4, 3) and second["y"].shape == (2, 3)
        np.testing.assert_allclose(first["y"], 2.0)  # an earlier result is not overwritten by later calls
        np.testing.assert_allclose(second["y"], 0.0)
        np.testing.assert_allclose(third["y"], 6.0)
        assert runner.last_inference_time is not None and runner.last_inference_time >= 0
    with runner:  # activated again: fresh contexts, same answers
        assert runner.contexts == {}
        np.testing.assert_allclose(runner.infer({"x": np.ones((1, 3), np.float32)})["y"], 2.0)


# ---- engines from elsewhere ---------------------------------------------------------------------------------
def _other_version(trt: types.ModuleType) -> str:
    import trt_model

    if getattr(trt, "_memory", None) is None:
        pytest.skip("needs two modelled versions; the real TensorRT has one")
    return next(v for v in trt_model.versions() if v != trt.__version__)


def test_an_engine_another_version_built_is_refused_in_one_line(trt, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from parity_trt import TrtRunner, engine_from_bytes, engine_from_path, save_engine
    from trt_model.install import install

    data = build(relu_add(tmp_path / "m.onnx", (2, 3)))()
    save_engine(data, str(tmp_path / "m.engine"))
    built_with = trt.__version__
    other = install(monkeypatch, _other_version(trt))  # the same process now has another TensorRT version
    for load in (lambda: engine_from_bytes(data), lambda: engine_from_path(str(tmp_path / "m.engine"))):
        with pytest.raises(ModelError) as exc:
            load()
        assert f"this is TensorRT {other.__version__}" in one_line(exc) and built_with in one_line(exc)
    with pytest.raises(ModelError) as exc, TrtRunner(data):
        pass
    assert built_with in one_line(exc)  # TensorRT's own reason names the version that built it


def test_bytes_that_are_no_engine_are_refused_in_one_line(trt, tmp_path: Path) -> None:
    from parity_trt import TrtRunner

    with pytest.raises(ModelError) as exc, TrtRunner(b"not an engine"):
        pass
    assert "could not deserialize" in one_line(exc)


def test_cli_refuses_an_engine_another_version_built(trt, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parity_invoke) -> None:
    from parity_trt import save_engine
    from trt_model.install import install

    engine = tmp_path / "m.engine"
    save_engine(build(relu_add(tmp_path / "m.onnx", (2, 3)))(), str(engine))
    built_with = trt.__version__
    code, _, _ = parity_invoke("run", engine, "--trt")
    assert code == 0
    other = install(monkeypatch, _other_version(trt))
    code, _, err = parity_invoke("run", engine, "--trt")
    assert code == 3, err
    line = error_line(err)
    assert "could not deserialize" in line and other.__version__ in line and built_with in line


# ---- the CLI ----------------------------------------------------------------------------------------------------
def test_cli_runs_with_two_profiles_and_the_chosen_one(trt, tmp_path: Path, parity_invoke) -> None:
    model = relu_add(tmp_path / "m.onnx")
    shapes = ["--trt-min-shapes", "x:[1,3]", "x:[3,3]", "--trt-opt-shapes", "x:[2,3]", "x:[4,3]",
              "--trt-max-shapes", "x:[2,3]", "x:[6,3]"]
    code, out, err = parity_invoke("run", model, "--trt", "--onnxrt", "--input-shapes", "x:[5,3]", *shapes)
    assert code == 0, err
    code, out, err = parity_invoke("run", model, "--trt", "--onnxrt", "--input-shapes", "x:[5,3]", *shapes, "--optimization-profile", "1")
    assert code == 0, err
    code, _, err = parity_invoke("run", model, "--trt", "--input-shapes", "x:[5,3]", *shapes, "--optimization-profile", "0")
    assert code == 2 and "[5, 3]" in error_line(err)
    code, _, err = parity_invoke("run", model, "--trt", "--input-shapes", "x:[5,3]", *shapes, "--optimization-profile", "7")
    assert code == 2 and "2 profile(s)" in error_line(err)


def test_cli_shape_no_profile_admits_exits_2(trt, tmp_path: Path, parity_invoke) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code, _, err = parity_invoke("run", relu_add(tmp_path / "m.onnx"), "--trt", "--input-shapes", "x:[9,3]",
                                     "--trt-min-shapes", "x:[1,3]", "--trt-opt-shapes", "x:[2,3]", "--trt-max-shapes", "x:[4,3]")
    assert code == 2 and "fit no optimization profile" in error_line(err)


def test_backend_failure_at_enqueue_is_one_line_exit_3_with_tensorrt_s_reason(trt, tmp_path: Path) -> None:
    # execute_async_v3 returns False after TensorRT logged why ("If an error recorder is not set, messages will be
    # sent to the global log stream": NvInferRuntime.h@v10.7.0:L4283); that reason is the user's one line
    from parity_trt import TrtRunner
    from parity_trt._trt import get_logger

    if getattr(trt, "_memory", None) is None:
        pytest.skip("replaces a method of the TensorRT model's execution context")
    reason = "IExecutionContext::enqueueV3: Error Code 1: Cuda Runtime (an illegal memory access was encountered)"

    def failing_enqueue(stream: int) -> bool:
        get_logger().log(trt.ILogger.Severity.ERROR, reason)
        return False

    with TrtRunner(build(relu_add(tmp_path / "m.onnx", (2, 3)))) as runner:
        runner._context(0).execute_async_v3 = failing_enqueue
        with pytest.raises(BackendError) as exc:
            runner.infer({"x": np.ones((2, 3), np.float32)})
        assert "execute_async_v3 failed" in one_line(exc) and reason in one_line(exc) and exc.value.exit_code == 3
