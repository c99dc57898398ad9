"""parity_polygraphy.backend.trt's CreateConfig / PostprocessConfig, run against Parity's behavioural model of TensorRT
(plugins/trt/tests/trt_model, NOT TensorRT: it models the builder config's flags, profiles and timing caches) for each
modelled version, then the real TensorRT where it imports (skipped otherwise)."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trt" / "tests"))  # trt_model lives with parity-trt's tests
from parity_polygraphy.backend.trt import (  # noqa: E402
    CreateConfig,
    EngineFromNetwork,
    NetworkFromOnnxBytes,
    PostprocessConfig,
    Profile,
    TrtRunner,
    create_config,
    network_from_onnx_bytes,
    postprocess_config,
)
from parity_polygraphy.datatype import DataType  # noqa: E402
from parity_polygraphy.exception import PolygraphyException  # noqa: E402
from trt_model.fixtures import trt_backend  # noqa: E402, F401 - each modelled TensorRT version, then the real one


@pytest.fixture
def trt(trt_backend):  # noqa: F811 - the fixture, by name
    return trt_backend


def _model_bytes(shape=(1, 1, 2, 2)) -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


@pytest.fixture
def builder_network(trt):
    builder, network, _parser = network_from_onnx_bytes(_model_bytes())
    return builder, network


def _has_flag(trt, name):
    return hasattr(trt.BuilderFlag, name)


def test_defaults(trt, builder_network):
    loader = CreateConfig()
    assert loader.timing_cache_path is None
    config = loader(*builder_network)
    for name in ("TF32", "FP16", "INT8", "BF16", "FP8", "REFIT", "SPARSE_WEIGHTS", "DISABLE_TIMING_CACHE", "VERSION_COMPATIBLE"):
        if _has_flag(trt, name):
            assert not config.get_flag(getattr(trt.BuilderFlag, name)), name
    assert config.get_timing_cache() is not None  # an empty cache, for the build to fill
    assert config.profiling_verbosity == trt.ProfilingVerbosity.DETAILED


def test_tf32_is_cleared_unless_asked(trt, builder_network, monkeypatch):
    builder, network = builder_network
    make = builder.create_builder_config

    def tensorrt_default():  # TensorRT's own new config has TF32 on
        config = make()
        config.set_flag(trt.BuilderFlag.TF32)
        return config

    monkeypatch.setattr(builder, "create_builder_config", tensorrt_default)
    assert not CreateConfig()(builder, network).get_flag(trt.BuilderFlag.TF32)
    assert CreateConfig(tf32=True)(builder, network).get_flag(trt.BuilderFlag.TF32)


@pytest.mark.parametrize(
    "kwarg, flag",
    [("refittable", "REFIT"), ("sparse_weights", "SPARSE_WEIGHTS"), ("restricted", "SAFETY_SCOPE"), ("strip_plan", "STRIP_PLAN"),
     ("direct_io", "DIRECT_IO"), ("error_on_timing_cache_miss", "ERROR_ON_TIMING_CACHE_MISS"), ("fp16", "FP16"), ("int8", "INT8"),
     ("bf16", "BF16"), ("fp8", "FP8"), ("disable_compilation_cache", "DISABLE_COMPILATION_CACHE"), ("weight_streaming", "WEIGHT_STREAMING"),
     ("allow_gpu_fallback", "GPU_FALLBACK")],
)  # fmt: skip
def test_flag_arguments_set_their_flag_or_are_refused(trt, builder_network, kwarg, flag):
    if not _has_flag(trt, flag):  # e.g. fp16 on TensorRT 11 (strongly typed): refused, not ignored
        with pytest.raises(PolygraphyException, match=f"{flag.lower()} is not available on TensorRT {re.escape(trt.__version__)}") as refused:
            CreateConfig(**{kwarg: True})(*builder_network)
        if flag in ("FP16", "INT8", "BF16", "FP8"):  # the precision flags say why, as the CLI does
            assert "strongly typed" in str(refused.value)
        return
    assert CreateConfig(**{kwarg: True})(*builder_network).get_flag(getattr(trt.BuilderFlag, flag))
    assert not CreateConfig(**{kwarg: False})(*builder_network).get_flag(getattr(trt.BuilderFlag, flag))


@pytest.mark.parametrize("mode", ["obey", "prefer", None])
def test_precision_constraints(trt, builder_network, mode):
    if mode and not _has_flag(trt, "OBEY_PRECISION_CONSTRAINTS"):
        with pytest.raises(PolygraphyException, match="precision_constraints is not available"):
            CreateConfig(precision_constraints=mode)(*builder_network)
        return
    config = CreateConfig(precision_constraints=mode)(*builder_network)
    for name in ("obey", "prefer"):
        flag = getattr(trt.BuilderFlag, f"{name.upper()}_PRECISION_CONSTRAINTS", None)
        if flag is not None:
            assert config.get_flag(flag) == (mode == name)


def test_bad_precision_constraints_are_refused_at_once():
    with pytest.raises(PolygraphyException, match="precision_constraints"):
        CreateConfig(precision_constraints="strict")


def test_exclude_lean_runtime_needs_version_compatible(trt, builder_network):
    with pytest.raises(PolygraphyException, match="EXCLUDE_LEAN_RUNTIME"):
        CreateConfig(exclude_lean_runtime=True)(*builder_network)
    config = CreateConfig(version_compatible=True, exclude_lean_runtime=True)(*builder_network)
    assert config.get_flag(trt.BuilderFlag.VERSION_COMPATIBLE) and config.get_flag(trt.BuilderFlag.EXCLUDE_LEAN_RUNTIME)


def test_attributes_are_assigned(trt, builder_network):
    config = CreateConfig(builder_optimization_level=2, max_aux_streams=1, engine_capability=trt.EngineCapability.STANDARD,
                          profiling_verbosity=trt.ProfilingVerbosity.NONE)(*builder_network)  # fmt: skip
    assert config.builder_optimization_level == 2
    assert config.max_aux_streams == 1
    assert config.engine_capability == trt.EngineCapability.STANDARD
    assert config.profiling_verbosity == trt.ProfilingVerbosity.NONE


def test_use_dla_without_a_dla_core_is_refused_unless_gpu_fallback(trt, builder_network, monkeypatch):
    builder, network = builder_network
    monkeypatch.setattr(type(builder), "num_DLA_cores", 0, raising=False)  # a builder that sees no DLA core
    with pytest.raises(PolygraphyException, match="no DLA hardware"):
        CreateConfig(use_dla=True)(builder, network)
    config = CreateConfig(use_dla=True, allow_gpu_fallback=True)(builder, network)
    assert config.default_device_type == trt.DeviceType.DLA
    assert config.get_flag(trt.BuilderFlag.GPU_FALLBACK)


def test_quantization_flags_on_a_version_without_them_are_refused(trt, builder_network):
    if hasattr(trt, "QuantizationFlag"):
        pytest.skip("this version has quantization flags")
    with pytest.raises(PolygraphyException, match="quantization_flags is not available"):
        CreateConfig(quantization_flags=[])(*builder_network)


@pytest.mark.parametrize("as_path", [True, False], ids=["path", "file-like"])
def test_timing_cache_is_loaded(trt, builder_network, tmp_path, as_path):
    builder, network = builder_network
    saved = builder.create_builder_config().create_timing_cache(b"")
    cache_file = tmp_path / "cache.bin"
    cache_file.write_bytes(bytes(saved.serialize()))
    source = str(cache_file) if as_path else io.BytesIO(cache_file.read_bytes())
    loader = CreateConfig(load_timing_cache=source)
    assert loader(builder, network).get_timing_cache() is not None
    assert cache_file.read_bytes() == bytes(saved.serialize())  # the input file is left as it was


def test_missing_timing_cache_falls_back_to_an_empty_one(trt, builder_network, tmp_path):
    config = CreateConfig(load_timing_cache=str(tmp_path / "absent.cache"))(*builder_network)
    assert config.get_timing_cache() is not None
    assert not (tmp_path / "absent.cache").exists()


def test_profiles_of_a_dynamic_network_build_and_run(trt):
    network_loader = NetworkFromOnnxBytes(_model_bytes(("N", 3)))
    profiles = [Profile().add("x", (1, 3), (2, 3), (4, 3)), Profile().add("x", (4, 3), (6, 3), (8, 3))]
    loader = CreateConfig(profiles=profiles)
    engine = EngineFromNetwork(network_loader, config=loader)()
    assert engine.num_optimization_profiles == 2
    assert list(profiles[0]) == ["x"] and len(profiles) == 2  # the loader's profiles are not modified
    with TrtRunner(engine) as runner:
        x = np.array([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]], np.float32)
        np.testing.assert_array_equal(runner.infer({"x": x})["y"], np.maximum(x, 0))


def test_unknown_profile_input_is_refused(trt, builder_network):
    with pytest.raises(PolygraphyException, match="Invalid inputs"):
        CreateConfig(profiles=[Profile().add("nope", (1,), (1,), (1,))])(*builder_network)


def test_polygraphy_calibrator_gets_input_metadata(trt, builder_network):
    if not _has_flag(trt, "INT8"):
        with pytest.raises(PolygraphyException, match="int8 is not available"):
            CreateConfig(int8=True)(*builder_network)
        return

    class Recorder:  # the part of Polygraphy's Calibrator that CreateConfig talks to
        is_polygraphy_calibrator = True
        metadata = None

        def set_input_metadata(self, metadata):
            self.metadata = metadata

    calibrator = Recorder()
    config = CreateConfig(int8=True, calibrator=calibrator)(*builder_network)
    assert config.int8_calibrator is calibrator
    assert list(calibrator.metadata) == ["x"]
    assert calibrator.metadata["x"].dtype == DataType.FLOAT32
    assert list(calibrator.metadata["x"].shape) == [1, 1, 2, 2]


def test_create_config_twin(trt, builder_network):
    builder, network = builder_network
    config = create_config(builder, network, refittable=True)
    assert config.get_flag(trt.BuilderFlag.REFIT)


@pytest.mark.parametrize("lazy", [True, False], ids=["loader", "config"])
def test_postprocess_config(trt, builder_network, lazy):
    builder, network = builder_network
    base = CreateConfig() if lazy else CreateConfig()(builder, network)
    config = PostprocessConfig(base, lambda b, n, c: c.set_flag(trt.BuilderFlag.REFIT))(builder, network)
    assert config.get_flag(trt.BuilderFlag.REFIT)


def test_postprocess_config_twin(trt, builder_network):
    builder, network = builder_network
    config = postprocess_config(CreateConfig(), func=lambda b, n, c: c.set_flag(trt.BuilderFlag.REFIT), builder=builder, network=network)
    assert config.get_flag(trt.BuilderFlag.REFIT)


def test_postprocess_config_refuses_a_non_callable():
    with pytest.raises(PolygraphyException, match="is not a callable"):
        PostprocessConfig(None, func=42)
