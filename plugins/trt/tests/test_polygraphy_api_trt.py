"""Polygraphy's TensorRT Python API as its example scripts use it, through parity_trt's public names (issue 15), against
the TensorRT model (trt_model: a behavioural model of TensorRT's documented Python API, NOT TensorRT) of every modelled
version, and the real TensorRT where it imports.

Each flow is one a Polygraphy cheatsheet script runs with only its module names changed: a ready ``IBuilderConfig``
given to ``engine_from_network`` with a ``(builder, network)`` tuple, TensorRT objects as context managers, a network
edited or built through the TensorRT network API (``add_identity``, ``add_input``/``add_constant``/``add_elementwise``),
``Calibrator(data_loader=..., cache=...)``, ``Profile().add(...)`` chains, and runners over execution contexts with
``optimization_profile=`` and ``set_profile``.
"""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

from parity.errors import UsageError
from parity.testing import relu_add


@pytest.fixture
def trt(trt_backend: types.ModuleType) -> types.ModuleType:  # noqa: F811 - the imported fixture, by a short name
    return trt_backend


def _major(trt: types.ModuleType) -> int:
    return int(str(trt.__version__).split(".")[0])


def expected(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0) * 2  # relu_add: y = relu(x) + relu(x)


X = np.array([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.25]], np.float32)


# ---- engine_from_network with a ready config, a (builder, network) tuple, context managers ----------------------
def test_engine_from_network_uses_a_ready_config_with_a_network_tuple(trt, static_model):
    from parity_trt import TrtRunner, create_config, engine_from_network, network_from_onnx_path

    builder, network, parser = network_from_onnx_path(str(static_model))
    config = create_config(builder, network, progress=False)
    assert isinstance(config, trt.IBuilderConfig)
    engine = engine_from_network((builder, network), config)  # before: the config object was called
    with TrtRunner(engine) as runner:
        np.testing.assert_array_equal(runner.infer({"x": X})["y"], expected(X))
    engine = engine_from_network((builder, network, parser), config=config)  # the parser may come along
    assert isinstance(engine, trt.ICudaEngine)


def test_engine_loaders_take_a_ready_config_or_any_config_callable(trt, static_model):
    from parity_trt import CreateConfig, EngineBytesFromNetwork, EngineFromNetwork, NetworkFromOnnxPath, extend, network_from_onnx_path

    seen = []

    @extend(CreateConfig(progress=False))
    def load_config(config):  # Polygraphy's func.extend(CreateConfig()): called with (builder, network)
        seen.append(config)

    engine = EngineFromNetwork(NetworkFromOnnxPath(str(static_model)), config=load_config)()
    assert isinstance(engine, trt.ICudaEngine) and isinstance(seen[0], trt.IBuilderConfig)
    with pytest.raises(UsageError, match="config must be a TensorRT IBuilderConfig or a callable"):
        EngineBytesFromNetwork(NetworkFromOnnxPath(str(static_model)), config="fp16")()
    builder, network, _parser = network_from_onnx_path(str(static_model))
    ready = CreateConfig(progress=False)(builder, network)
    assert EngineBytesFromNetwork((builder, network), config=ready)()  # the lazy loader takes a ready config too


def test_tensorrt_objects_are_context_managers_as_in_the_bindings(trt, static_model):
    # tensorrt_bindings/__init__.py: common_enter warns (DeprecationWarning) and returns the object; common_exit does nothing
    from parity_trt import TrtRunner, create_config, engine_from_network, network_from_onnx_path

    builder, network, parser = network_from_onnx_path(str(static_model))
    config = create_config(builder, network, progress=False)
    with pytest.warns(DeprecationWarning, match="Context managers for TensorRT types are deprecated"), \
            builder as b, network as n, parser as p, config as c:
        assert (b, n, p, c) == (builder, network, parser, config)
        engine = engine_from_network((builder, network), config)
    with pytest.warns(DeprecationWarning), engine, TrtRunner(engine) as runner:
        np.testing.assert_array_equal(runner.infer({"x": X})["y"], expected(X))
    context = engine.create_execution_context()
    with pytest.warns(DeprecationWarning), pytest.raises(KeyError), context:
        raise KeyError("an exception in the block is not suppressed")
    assert callable(trt.common_enter) and trt.common_exit(engine, None, None, None) is None


# ---- the network API: add_identity (s12), add_input/add_constant/add_elementwise (s7) ------------------------------
@pytest.mark.parametrize("dynamic", [False, True])
def test_add_identity_after_unmarking_the_output(trt, tmp_path, dynamic):
    from parity_trt import CreateConfig, Profile, TrtRunner, engine_from_network, network_from_onnx_path

    model = relu_add(tmp_path / "m.onnx", ("N", 3) if dynamic else (2, 3))
    builder, network, _parser = network_from_onnx_path(str(model))
    prev = network.get_output(0)
    network.unmark_output(prev)
    layer = network.add_identity(prev)  # before: NotImplementedError (not modelled)
    assert isinstance(layer, trt.IIdentityLayer) and layer.type == trt.LayerType.IDENTITY
    assert layer.num_inputs == 1 and layer.get_input(0).name == prev.name
    output = layer.get_output(0)
    assert tuple(output.shape) == tuple(prev.shape) and output.dtype == prev.dtype
    output.name = "output"
    network.mark_output(output)
    assert [network.get_output(i).name for i in range(network.num_outputs)] == ["output"]
    profiles = [Profile().add("x", min=[1, 3], opt=[2, 3], max=[4, 3])] if dynamic else []
    engine = engine_from_network((builder, network), CreateConfig(profiles=profiles, progress=False))
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    assert names == ["x", "output"]
    with TrtRunner(engine) as runner:
        assert list(runner.infer({"x": X})) == ["output"]
        np.testing.assert_array_equal(runner.infer({"x": X})["output"], expected(X))


def test_a_network_built_through_the_network_api_runs(trt):
    from parity_trt import CreateNetwork, EngineFromNetwork, TrtRunner, extend

    shape = (4, 5)

    @extend(CreateNetwork())
    def create_network(builder, network):
        inp = network.add_input(name="input", shape=shape, dtype=trt.float32)
        ones = network.add_constant(shape=shape, weights=np.ones(shape, np.float32))  # numpy converts to Weights
        assert isinstance(ones, trt.IConstantLayer) and ones.get_output(0).dtype == trt.DataType.FLOAT
        add = network.add_elementwise(inp, ones.get_output(0), op=trt.ElementWiseOperation.SUM)
        assert isinstance(add, trt.IElementWiseLayer)
        out = add.get_output(0)
        out.name = "output"
        network.mark_output(out)
        assert network.num_layers == 2

    feed = np.random.default_rng(0).random(shape, dtype=np.float32)
    with TrtRunner(EngineFromNetwork(create_network)) as runner:
        np.testing.assert_array_equal(runner.infer({"input": feed})["output"], feed + 1)


def test_weights_from_numpy_arrays_follow_the_bindings(trt):
    from parity_trt import create_network

    _builder, network = create_network()
    weights = trt.Weights(np.arange(6, dtype=np.int32))
    assert weights.dtype == trt.DataType.INT32 and weights.size == 6 and len(weights) == 6 and weights.nbytes == 24
    assert network.add_constant((2, 3), weights).get_output(0).dtype == trt.DataType.INT32
    # py::implicitly_convertible<py::array, Weights>: an array the Weights constructor refuses matches no overload
    with pytest.raises(TypeError):
        network.add_constant((2,), np.ones(4, np.float32)[::2])  # not contiguous
    with pytest.raises(TypeError):
        network.add_constant((2,), np.ones(2, np.float64))  # no TensorRT type
    with pytest.raises(ValueError, match="non-contiguous"):
        trt.Weights(np.ones(4, np.float32)[::2])


def test_comparisons_give_bool_outputs(trt):
    from parity_trt import TrtRunner, create_network, engine_from_network

    builder, network = create_network()
    a = network.add_input("a", trt.float32, (2, 2))
    b = network.add_input("b", trt.float32, (1, 2))  # broadcast over the first dim
    greater = network.add_elementwise(a, b, trt.ElementWiseOperation.GREATER).get_output(0)
    assert greater.dtype == trt.DataType.BOOL and tuple(greater.shape) == (2, 2)
    greater.name = "greater"
    network.mark_output(greater)
    engine = engine_from_network((builder, network))
    feed = {"a": np.array([[1, 2], [3, 4]], np.float32), "b": np.array([[2, 2]], np.float32)}
    with TrtRunner(engine) as runner:
        np.testing.assert_array_equal(runner.infer(feed)["greater"], [[False, False], [True, True]])


# ---- Calibrator(data_loader=..., cache=...) (s6) ----------------------------------------------------------------
def test_calibrator_takes_polygraphys_data_loader_keyword(trt, static_model, tmp_path):
    from parity_trt import Calibrator, CreateConfig, EngineFromNetwork, NetworkFromOnnxPath, TrtRunner

    def calib_data():
        for _ in range(4):
            yield {"x": X}

    cache = tmp_path / "identity-calib.cache"
    if _major(trt) >= 11:  # TensorRT 11 removed implicit int8 calibration
        with pytest.raises(UsageError, match="not available on TensorRT 11"):
            Calibrator(data_loader=calib_data(), cache=str(cache))
        return
    calibrator = Calibrator(data_loader=calib_data(), cache=str(cache))  # before: TypeError (unexpected keyword)
    build = EngineFromNetwork(NetworkFromOnnxPath(str(static_model)), config=CreateConfig(int8=True, calibrator=calibrator, progress=False))
    with TrtRunner(build) as runner:
        out = runner.infer({"x": X})["y"]
    assert out.shape == (2, 3) and calibrator.batches == 4 and cache.stat().st_size > 0
    assert Calibrator([{"x": X}], str(cache)) is not None  # Parity's positional data still works


def test_calibrator_wants_its_data_once(trt):
    from parity_trt import Calibrator

    with pytest.raises(TypeError, match="not both"):
        Calibrator([], data_loader=[])
    with pytest.raises(TypeError, match="needs the calibration data"):
        Calibrator()


# ---- Profile().add chains, profiles, execution contexts, optimization_profile=, set_profile (s15) ------------------
def test_profile_add_chains_and_takes_tuples_or_lists():
    from parity_trt import Profile

    profile = Profile()
    assert profile.add("a", min=(1, 3), opt=[2, 3], max=(np.int64(4), 3)) is profile
    assert profile.add("b", [1], [1], [1]).shapes == {"a": ((1, 3), (2, 3), (4, 3)), "b": ((1,), (1,), (1,))}
    assert Profile().add("a", [1, 3], [2, 3], [4, 3]) == Profile({"a": ((1, 3), (2, 3), (4, 3))})
    for bad, message in [(((1, 3), (2,), (4, 3)), "different ranks"), (((2, 3), (1, 3), (4, 3)), "min <= opt <= max"),
                         (((1.5, 3), (2, 3), (4, 3)), "whole numbers"), (((True, 3), (2, 3), (4, 3)), "whole numbers"),
                         (("13", (2, 3), (4, 3)), "tuple or list")]:
        with pytest.raises(UsageError, match=message):
            Profile().add("a", *bad)


def three_profile_engine(trt, tmp_path: Path):
    from parity_trt import CreateConfig, Profile, engine_from_network, network_from_onnx_path

    profiles = [
        Profile().add("x", min=(1, 3), opt=(1, 3), max=(1, 3)),
        Profile().add("x", min=[1, 3], opt=[4, 3], max=[32, 3]),
        Profile().add("x", min=(128, 3), opt=(128, 3), max=(128, 3)),
    ]
    engine = engine_from_network(network_from_onnx_path(str(relu_add(tmp_path / "m.onnx"))), config=CreateConfig(profiles=profiles, progress=False))
    assert engine.num_optimization_profiles == 3
    return engine


def batch(n: int) -> np.ndarray:
    return np.repeat(X[:1], n, axis=0)


def test_runners_over_execution_contexts(trt, tmp_path):
    from parity_trt import TrtRunner

    engine = three_profile_engine(trt, tmp_path)
    low_latency = TrtRunner(engine.create_execution_context())  # the context's profile: 0
    dynamic_context = engine.create_execution_context()
    dynamic_batching = TrtRunner(dynamic_context, optimization_profile=1)
    offline_context = engine.create_execution_context()
    offline = TrtRunner(offline_context)
    with low_latency:
        np.testing.assert_array_equal(low_latency.infer({"x": batch(1)})["y"], expected(batch(1)))
        with pytest.raises(UsageError, match="outside optimization profile 0"):
            low_latency.infer({"x": batch(4)})  # the context's profile, never another context
        with dynamic_batching:
            np.testing.assert_array_equal(dynamic_batching.infer({"x": batch(4)})["y"], expected(batch(4)))
    assert dynamic_context.active_optimization_profile == 1
    with dynamic_batching:
        np.testing.assert_array_equal(dynamic_batching.infer({"x": batch(16)})["y"], expected(batch(16)))
    with offline:
        with pytest.raises(UsageError, match="set_profile"):
            offline.infer({"x": batch(128)})
        offline.set_profile(2)
        np.testing.assert_array_equal(offline.infer({"x": batch(128)})["y"], expected(batch(128)))
    assert offline_context.active_optimization_profile == 2  # it stays set on the context the runner was given
    with offline:
        assert offline.infer({"x": batch(128)})["y"].shape == (128, 3)


def test_set_profile_on_a_runner_that_owns_its_contexts(trt, tmp_path):
    from parity_trt import TrtRunner

    engine = three_profile_engine(trt, tmp_path)
    runner = TrtRunner(engine)
    with pytest.raises(UsageError, match="needs an active runner"):
        runner.set_profile(1)
    with runner:
        for index in (3, -1, "1"):
            with pytest.raises(UsageError, match="the engine has 3 optimization profile"):
                runner.set_profile(index)
        runner.set_profile(1)
        np.testing.assert_array_equal(runner.infer({"x": batch(1)})["y"], expected(batch(1)))  # fits 0 and 1: runs on 1
        assert list(runner.contexts) == [1] and runner.contexts[1].active_optimization_profile == 1
    with runner:  # a new activation chooses by shape again
        runner.infer({"x": batch(1)})
        assert list(runner.contexts) == [0]


# ---- saving and loading engines (s1, s2, s13) ---------------------------------------------------------------------
def test_save_engine_and_load_it_back(trt, static_model, tmp_path):
    from parity_trt import BytesFromPath, EngineFromBytes, EngineFromNetwork, NetworkFromOnnxPath, SaveEngine, TrtRunner, engine_from_bytes, save_engine

    path = tmp_path / "identity.engine"
    build = SaveEngine(EngineFromNetwork(NetworkFromOnnxPath(str(static_model))), path=str(path))
    with TrtRunner(build) as runner:
        np.testing.assert_array_equal(runner.infer(feed_dict={"x": X})["y"], expected(X))
    with TrtRunner(EngineFromBytes(BytesFromPath(str(path)))) as runner:
        np.testing.assert_array_equal(runner.infer({"x": X})["y"], expected(X))
    engine = engine_from_bytes(path.read_bytes())
    assert save_engine(engine, path=str(tmp_path / "copy.engine")) is engine
    with pytest.warns(DeprecationWarning), engine, TrtRunner(engine) as runner:
        np.testing.assert_array_equal(runner.infer({"x": X})["y"], expected(X))


# ---- G_LOGGER's verbosity reaches TensorRT's logger (Polygraphy's scripts raise it around a build) ----------------
def test_g_logger_verbosity_reaches_tensorrts_log(trt, capsys, monkeypatch):
    from parity_trt._trt import get_logger

    from parity.logger import G_LOGGER

    monkeypatch.delenv("PARITY_TRT_LOG", raising=False)
    get_logger.cache_clear()
    logger, severity = get_logger(), trt.ILogger.Severity

    def shown() -> str:
        for level in ("VERBOSE", "INFO", "WARNING"):
            logger.log(getattr(severity, level), f"a {level.lower()} line")
        return capsys.readouterr().err

    assert "a warning line" in shown() and "a info line" not in shown()  # by default: warnings and worse
    with G_LOGGER.verbosity(G_LOGGER.EXTRA_VERBOSE):
        assert "[TensorRT] [V] a verbose line" in shown()
    with G_LOGGER.verbosity(G_LOGGER.VERBOSE):
        out = shown()
        assert "a info line" in out and "a verbose line" not in out
    with G_LOGGER.verbosity(G_LOGGER.CRITICAL):
        assert shown() == ""  # above WARNING: TensorRT's warnings are hidden too
    monkeypatch.setenv("PARITY_TRT_LOG", "verbose")  # the variable wins over G_LOGGER
    get_logger.cache_clear()
    logger = get_logger()
    with G_LOGGER.verbosity(G_LOGGER.CRITICAL):
        assert "a verbose line" in shown()
    get_logger.cache_clear()
