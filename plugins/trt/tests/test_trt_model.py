"""trt_model, the model of TensorRT's documented Python API used by the behaviour tests (NOT TensorRT): it has exactly
each manifest version's names, refuses calls no pybind11 overload would take, and says what it does not model."""

from __future__ import annotations

import json

import pytest
import trt_model
from trt_model.manifest import Manifest

VERSIONS = trt_model.versions()


def test_every_manifest_version_is_modelled():
    assert len(VERSIONS) == 6 and "10.7.0" in VERSIONS and "11.4.0.106" in VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
def test_names_are_exactly_the_manifests(version):
    trt, manifest = trt_model.make(version), Manifest(version)
    public = {name for name in vars(trt) if not name.startswith("_")}  # _memory: the model's memory seam
    assert public == {n for n in manifest.children("") if not n.startswith("__")}
    for qual, (kind, _) in manifest.kinds.items():
        if qual.startswith(("plugin.", "__")) or kind == "callback_doc" or qual.rsplit(".", 1)[-1].startswith("__"):
            continue
        obj = trt
        for part in qual.split("."):
            obj = getattr(obj, part)  # every listed name is there
    for qual in manifest.types:
        if manifest.kinds[qual][0] == "class":
            cls = trt
            for part in qual.split("."):
                cls = getattr(cls, part)
            own = {n for n in vars(cls) if not n.startswith("_")}
            assert own <= {c.rsplit(".", 1)[-1] for c in manifest.children(qual)}, qual  # nothing more


def test_version_differences_show():
    assert not hasattr(trt_model.make("10.7.0"), "TimingCacheKey")
    assert hasattr(trt_model.make("11.0.0.114"), "TimingCacheKey")
    assert hasattr(trt_model.make("10.7.0").IBuilderConfig, "int8_calibrator")
    assert not hasattr(trt_model.make("11.0.0.114").IBuilderConfig, "int8_calibrator")


def test_calls_are_checked_against_the_signature_manifest():
    trt = trt_model.make("10.7.0")
    builder = trt.Builder(trt.Logger())
    with pytest.raises(TypeError, match=r"create_network\(\): incompatible function arguments"):
        builder.create_network(0, 1)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        builder.create_network(flags="0")
    with pytest.raises(TypeError, match="incompatible function arguments"):
        builder.create_network(flag=0)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        trt.Builder()
    with pytest.raises(TypeError, match="No constructor defined"):
        trt.IBuilderConfig()
    network = builder.create_network(flags=0)
    assert network.flags == 0


def test_profile_values_take_the_profile_index_first():
    # pyCore.cpp@v10.7.0:L1333 binds (profileIndex, tensorName) under the names ("name", "profile_index")
    from trt_model.engine import Program, engine

    trt = trt_model.make("10.7.0")
    program = Program({"s": ("INPUT", "INT64", (2,), True)}, [{}], [{"s": ([1, 1], [2, 2], [3, 3])}], lambda c: ({}, []))
    cuda_engine = engine(trt, program, None)
    assert cuda_engine.get_tensor_profile_values(0, "s") == [[1, 1], [2, 2], [3, 3]]
    with pytest.raises(TypeError, match="incompatible function arguments"):
        cuda_engine.get_tensor_profile_values("s", 0)


def test_what_is_not_modelled_says_so():
    trt = trt_model.make("10.7.0")
    builder = trt.Builder(trt.Logger())
    with pytest.raises(NotImplementedError, match="not modelled: Builder.is_network_supported"):
        builder.is_network_supported(builder.create_network(), builder.create_builder_config())
    with pytest.raises(NotImplementedError, match="not modelled: Builder.platform_has_fast_fp16"):
        builder.platform_has_fast_fp16  # noqa: B018
    config = builder.create_builder_config()
    config.max_aux_streams = 2  # an unmodelled read-write property keeps what was set
    assert config.max_aux_streams == 2
    with pytest.raises(AttributeError):
        builder.logger = trt.Logger()  # read-only


def test_enums_and_logger():
    trt = trt_model.make("10.16.1.11")
    assert isinstance(trt.float32, trt.DataType) and trt.float32 is trt.DataType.FLOAT and int(trt.DataType.BF16) == 7
    assert trt.Logger.Severity is trt.ILogger.Severity and trt.Logger.WARNING is trt.ILogger.Severity.WARNING
    assert trt.Logger().min_severity is trt.Logger.WARNING


def test_timing_cache_behaviour():
    trt = trt_model.make("11.0.0.114")
    config = trt.Builder(trt.Logger()).create_builder_config()
    assert config.get_timing_cache() is None  # until one is set
    key = "0x" + "0" * 31 + "1"
    cache = config.create_timing_cache(json.dumps({key: [5, 0.25]}).encode())
    assert config.set_timing_cache(cache, False) is True and config.get_timing_cache() is cache
    assert [str(k) for k in cache.queryKeys()] == [key] and cache.query(trt.TimingCacheKey.parse(key)).tacticHash == 5
    assert cache.update(trt.TimingCacheKey.parse(key), trt.TimingCacheValue(6, 0.5)) is True
    assert cache.update(trt.TimingCacheKey.parse("0x" + "f" * 32), trt.TimingCacheValue(6, 0.5)) is False  # unknown key
    other = config.create_timing_cache(json.dumps({key: [9, 9.0], "0x" + "2" * 32: [2, 2.0]}).encode())
    assert cache.combine(other, False) and cache.query(trt.TimingCacheKey.parse(key)).tacticHash == 6  # conflicts skipped


def test_failed_build_returns_none_and_logs():
    trt = trt_model.make("10.7.0")
    builder = trt.Builder(trt.Logger())
    network = builder.create_network()
    network._input("x", (-1, 3))
    assert builder.build_serialized_network(network, builder.create_builder_config()) is None
    assert "no optimization profile" in builder.logger._messages[0]


def test_argument_kinds_are_checked_as_pybind11_casts_them():
    trt = trt_model.make("10.7.0")
    builder = trt.Builder(trt.Logger())
    config, network = builder.create_builder_config(), builder.create_network(0)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        config.set_flag(int(trt.BuilderFlag.FP16))  # pybind11 enums do not convert from int
    config.set_flag(trt.BuilderFlag.FP16)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        network.mark_output(config)  # an ITensor parameter refuses another class
    profile = builder.create_optimization_profile()
    with pytest.raises(TypeError, match="incompatible function arguments"):
        profile.set_shape("x", (1, 3), (2, "3"), (4, 3))  # Dims: a sequence of ints
    profile.set_shape(b"x", [1, 3], (2, 3), (4, 3))  # std::string takes bytes too
    tensor = network._input("x", (-1, 3))
    with pytest.raises(TypeError, match="incompatible function arguments"):
        tensor.set_dynamic_range("0", 1.0)  # float parameters refuse str
