"""Build-side behaviour of the plugin against a small model of TensorRT's documented Python API.

This is NOT TensorRT: ``_model_trt()`` builds a stand-in ``tensorrt`` module with just the names these tests
reach, each behaving as TensorRT's binding sources and headers say (citation beside each behaviour: file,
tag, line in NVIDIA/TensorRT), or, where TensorRT documents nothing, as Polygraphy's executed code relies on.
The tests drive Parity's config/network/factory code with it and assert what Parity does.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from parity.errors import UsageError


# ---- a model of the TensorRT API (only what these tests reach) --------------------------------------------
class _EnumValue:
    def __init__(self, enum: str, name: str, value: int) -> None:
        self.enum, self.name, self.value = enum, name, value

    def __int__(self) -> int:
        return self.value

    def __repr__(self) -> str:
        return f"{self.enum}.{self.name}"


def _enum(name: str, members: list[str]) -> type:
    # pybind11 enums: members are instances of the enum class (versions.enum_member relies on isinstance)
    cls = type(name, (_EnumValue,), {})
    for value, member in enumerate(members):
        setattr(cls, member, cls(name, member, value))
    return cls


class _Tensor:
    def __init__(self, network: _Network, name: str, shape: tuple[int, ...], is_shape_tensor: bool = False) -> None:
        self._network = network
        self.name = name
        self.shape = shape
        # ITensor.is_shape_tensor is a read-only property: pyGraph.cpp@v10.7.0:L344
        self._is_shape_tensor = is_shape_tensor
        self._layer: _Layer | None = None

    @property
    def is_shape_tensor(self) -> bool:
        return self._is_shape_tensor

    @property
    def is_network_output(self) -> bool:
        return self in self._network._outputs


class _Layer:
    def __init__(self, kind: Any, outputs: list[_Tensor | None], in_loop: bool = False) -> None:
        self.type = kind  # ILayer.type, read-only: pyGraph.cpp@v10.7.0:L359
        self._outputs = outputs
        self._in_loop = in_loop  # model-internal: TensorRT keeps loop membership to itself
        for tensor in outputs:
            if tensor is not None:
                tensor._layer = self

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    def get_output(self, index: int) -> _Tensor | None:
        # "The indexed output tensor, or nullptr if the index is out of range or the tensor is optional":
        # ILayer::getOutput, NvInfer.h@v10.7.0:L619-623; pybind11 turns nullptr into None (pyGraph.cpp@v10.7.0:L366)
        return self._outputs[index] if 0 <= index < len(self._outputs) else None


class _Network:
    def __init__(self, flags: int = 0) -> None:
        self.flags = flags
        self._inputs: list[_Tensor] = []
        self._layers: list[_Layer] = []
        self._outputs: list[_Tensor] = []

    # model helpers (not TensorRT API): build a network layer by layer
    def _input(self, name: str, shape: tuple[int, ...], is_shape_tensor: bool = False) -> _Tensor:
        tensor = _Tensor(self, name, shape, is_shape_tensor)
        self._inputs.append(tensor)
        return tensor

    def _layer(self, kind: Any, *names: str | None, in_loop: bool = False, shape_output: bool = False) -> _Layer:
        outs = [None if n is None else _Tensor(self, n, (2, 3), shape_output) for n in names]
        layer = _Layer(kind, outs, in_loop)
        self._layers.append(layer)
        return layer

    # the API
    num_inputs = property(lambda self: len(self._inputs))
    num_layers = property(lambda self: len(self._layers))
    num_outputs = property(lambda self: len(self._outputs))

    def get_input(self, index: int) -> _Tensor:
        return self._inputs[index]

    def get_layer(self, index: int) -> _Layer:
        return self._layers[index]

    def get_output(self, index: int) -> _Tensor:
        return self._outputs[index]

    def mark_output(self, tensor: _Tensor) -> None:
        # bound to markOutput(ITensor&) (pyGraph.cpp@v10.7.0:L855); pybind11 cannot bind None to a reference
        # and raises (reference_cast_error, a RuntimeError)
        if tensor is None:
            raise RuntimeError("Unable to cast Python instance to C++ type")
        if tensor not in self._outputs:
            self._outputs.append(tensor)

    def unmark_output(self, tensor: _Tensor) -> None:
        if tensor in self._outputs:
            self._outputs.remove(tensor)

    def mark_debug(self, tensor: _Tensor) -> bool:
        return True


class _Profile:
    def __init__(self) -> None:
        self.shapes: dict[str, tuple] = {}
        self.values: dict[str, tuple] = {}

    def set_shape(self, input: str, min: Any, opt: Any, max: Any) -> None:  # noqa: A002 - TensorRT's keyword names
        # pyCore.cpp@v10.7.0:L870 (opt_profile_set_shape, L30-43: raises when min/opt/max disagree)
        self.shapes[input] = (tuple(min), tuple(opt), tuple(max))

    def set_shape_input(self, input: str, min: Any, opt: Any, max: Any) -> None:  # noqa: A002
        # VALUES of a shape-tensor input: pyCore.cpp@v10.7.0:L59-68 (std::vector<int32_t> each; int64 from 10.16)
        for which in (min, opt, max):
            if any(not isinstance(v, int) for v in which):
                raise TypeError("set_shape_input takes lists of ints")
        if not len(min) == len(opt) == len(max):
            raise RuntimeError("min input provided for shape tensor is inconsistent with other inputs.")
        self.values[input] = (tuple(min), tuple(opt), tuple(max))


class _TimingCache:
    def __init__(self, entries: dict[str, str]) -> None:
        self.entries = dict(entries)

    def serialize(self) -> bytes:  # IHostMemory in TensorRT; bytes() of it is the file content
        return ";".join(f"{k}={v}" for k, v in sorted(self.entries.items())).encode() or b"empty"

    def combine(self, other: _TimingCache, ignore_mismatch: bool) -> bool:
        self.entries.update(other.entries)
        return True


def _parse_cache(data: bytes) -> dict[str, str]:
    text = bytes(data).decode()
    return dict(item.split("=", 1) for item in text.split(";") if "=" in item)


class _Config:
    def __init__(self) -> None:
        self.flags: set[str] = set()
        self.profiles: list[_Profile] = []
        self._cache: _TimingCache | None = None
        self.profiling_verbosity = None
        self.progress_monitor = None

    def set_flag(self, flag: Any) -> None:
        self.flags.add(flag.name)

    def clear_flag(self, flag: Any) -> None:
        self.flags.discard(flag.name)

    def add_optimization_profile(self, profile: _Profile) -> int:
        self.profiles.append(profile)
        return len(self.profiles) - 1

    def create_timing_cache(self, serialized_timing_cache: Any) -> _TimingCache:
        # takes any buffer, b"" included (an empty cache): pyCore.cpp@v10.7.0:L246-249, L1564
        return _TimingCache(_parse_cache(memoryview(serialized_timing_cache).tobytes()))

    def set_timing_cache(self, cache: _TimingCache, ignore_mismatch: bool) -> bool:
        # returns bool: pyCore.cpp@v10.7.0:L1566 (IBuilderConfig::setTimingCache)
        self._cache = cache
        return True

    def get_timing_cache(self) -> _TimingCache | None:
        # the cache "used in" this config, nullptr (None) while none was set: pyCore.cpp@v10.7.0:L1568,
        # NvInfer.h@v10.7.0:L9414-9419
        return self._cache


class _Builder:
    def __init__(self, logger: Any) -> None:
        self.logger = logger

    def create_network(self, flags: int = 0) -> _Network:
        return _Network(flags)

    def create_builder_config(self) -> _Config:
        return _Config()

    def create_optimization_profile(self) -> _Profile:
        return _Profile()

    def build_serialized_network(self, network: _Network, config: _Config) -> bytes | None:
        """None on failure, after logging the reason (as TensorRT does)."""
        errors = []
        dynamic = [t for t in network._inputs if not t.is_shape_tensor and any(d < 0 for d in t.shape)]
        shape_inputs = [t for t in network._inputs if t.is_shape_tensor]
        # a profile is needed "if the network has dynamic or shape input tensors": NvInfer.h@v10.7.0:L9171
        if (dynamic or shape_inputs) and not config.profiles:
            errors.append("network has dynamic or shape inputs, but no optimization profile has been defined")
        for profile in config.profiles:
            for tensor in shape_inputs:
                # values must be set for every shape-tensor input, as many as dims[0] (1 for a scalar):
                # NvInferRuntime.h@v10.7.0:L2664-2669
                want = tensor.shape[0] if tensor.shape else 1
                got = profile.values.get(tensor.name)
                if got is None or any(len(v) != want for v in got):
                    errors.append(f"shape tensor {tensor.name}: values not set or wrong count")
            for tensor in dynamic:
                if tensor.name not in profile.shapes:
                    errors.append(f"{tensor.name}: no profile shape")
        for tensor in network._outputs:
            layer = tensor._layer
            # loop-body tensors cannot be network outputs (Polygraphy backend/trt/util.py mark_layerwise: "Layers
            # within loops cannot be marked as network outputs"); nor outputs of SHAPE/CONSTANT layers (same code)
            if layer is not None and (layer._in_loop or layer.type.name in ("SHAPE", "CONSTANT")):
                errors.append(f"{tensor.name} cannot be a network output")
        if errors:
            self.logger.errors.extend(errors)
            return None
        if config._cache is not None:  # the build records its timings in the cache it was given
            for index in range(len(network._layers)):
                config._cache.entries[f"layer{index}"] = "tactic0"
        return b"serialized engine"


class _OnnxParser:
    """Reads the test's ONNX files into a model network: inputs (-1 for named dims), one layer per node."""

    def __init__(self, network: _Network, logger: Any) -> None:
        self.network = network
        self.num_errors = 0

    def parse_from_file(self, path: str) -> bool:
        import onnx

        trt = sys.modules["tensorrt"]
        graph = onnx.load(path).graph
        for value in graph.input:
            dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in value.type.tensor_type.shape.dim)
            self.network._input(value.name, dims)
        for node in graph.node:
            self.network._layer(trt.LayerType.ELEMENTWISE, *node.output)
        named = {t.name: t for layer in self.network._layers for t in layer._outputs if t is not None}
        for value in graph.output:
            self.network.mark_output(named[value.name])
        return True


def _model_trt(version: str = "10.7.0") -> types.ModuleType:
    trt = types.ModuleType("tensorrt")
    trt.__version__ = version
    trt.BuilderFlag = _enum("BuilderFlag", ["FP16", "BF16", "INT8", "FP8", "TF32", "ERROR_ON_TIMING_CACHE_MISS",
                                            "OBEY_PRECISION_CONSTRAINTS", "PREFER_PRECISION_CONSTRAINTS"])
    trt.ProfilingVerbosity = _enum("ProfilingVerbosity", ["LAYER_NAMES_ONLY", "NONE", "DETAILED"])
    trt.LayerType = _enum("LayerType", ["ELEMENTWISE", "CONSTANT", "SHAPE", "TRIP_LIMIT", "ITERATOR", "RECURRENCE",
                                        "LOOP_OUTPUT", "TOPK"])
    trt.NetworkDefinitionCreationFlag = _enum("NetworkDefinitionCreationFlag", ["EXPLICIT_BATCH", "STRONGLY_TYPED"])
    severity = _enum("Severity", ["INTERNAL_ERROR", "ERROR", "WARNING", "INFO", "VERBOSE"])

    class Logger:
        # Logger(min_severity=WARNING) with a read-write min_severity: pyCore.cpp@v10.7.0:L826-828
        def __init__(self, min_severity: Any = severity.WARNING) -> None:
            self.min_severity = min_severity
            self.errors: list[str] = []

    for name in ("INTERNAL_ERROR", "ERROR", "WARNING", "INFO", "VERBOSE"):
        setattr(Logger, name, getattr(severity, name))
    trt.Logger = Logger
    trt.Builder = _Builder
    trt.OnnxParser = _OnnxParser
    trt.IProgressMonitor = type("IProgressMonitor", (), {"__init__": lambda self: None})
    trt.init_libnvinfer_plugins = lambda logger, namespace: True
    trt.get_plugin_registry = lambda: types.SimpleNamespace(load_library=lambda path: object())
    return trt


@pytest.fixture
def trt(monkeypatch: pytest.MonkeyPatch):
    from parity_trt import _trt

    model = _model_trt()
    monkeypatch.setitem(sys.modules, "tensorrt", model)
    monkeypatch.delenv("PARITY_TRT_LOG", raising=False)
    _trt.import_trt.cache_clear()
    _trt.get_logger.cache_clear()
    yield model
    _trt.import_trt.cache_clear()
    _trt.get_logger.cache_clear()


def _build(builder: Any, network: Any, config: Any) -> bytes:
    data = builder.build_serialized_network(network, config)
    assert data is not None, builder.logger.errors
    return data


# ---- item 2: a timing cache is always attached ---------------------------------------------------------
def test_config_always_has_a_timing_cache(trt, tmp_path: Path) -> None:
    from parity_trt.config import CreateConfig
    from parity_trt.network import CreateNetwork

    builder, network = CreateNetwork()()
    config = CreateConfig(progress=False)(builder, network)
    assert config.get_timing_cache() is not None and config.get_timing_cache().entries == {}
    # a loaded cache is the one attached
    path = tmp_path / "old.cache"
    path.write_bytes(b"old=tactic9")
    config = CreateConfig(load_timing_cache=str(path), progress=False)(builder, network)
    assert config.get_timing_cache().entries == {"old": "tactic9"}


def test_save_timing_cache_alone_writes_one(trt, tmp_path: Path) -> None:
    from parity_trt.config import CreateConfig
    from parity_trt.engine import EngineBytesFromNetwork
    from parity_trt.network import CreateNetwork

    builder, network = CreateNetwork()()
    network._input("x", (2, 3))
    network.mark_output(network._layer(trt.LayerType.ELEMENTWISE, "y").get_output(0))
    path = tmp_path / "timing.cache"
    EngineBytesFromNetwork((builder, network), CreateConfig(progress=False), save_timing_cache=str(path))()
    assert path.is_file() and _parse_cache(path.read_bytes()) == {"layer0": "tactic0"}


# ---- item 3: shape-tensor inputs take values, and always need a profile ------------------------------
def _shape_tensor_network(trt: Any, dims: tuple[int, ...] = (2,)) -> tuple[Any, Any]:
    from parity_trt.network import CreateNetwork

    builder, network = CreateNetwork()()
    network._input("data", (-1, 3))
    network._input("new_shape", dims, is_shape_tensor=True)
    network.mark_output(network._layer(trt.LayerType.ELEMENTWISE, "y").get_output(0))
    return builder, network


def test_static_shape_tensor_input_still_gets_a_profile(trt) -> None:
    from parity_trt.config import CreateConfig
    from parity_trt.network import CreateNetwork

    builder, network = CreateNetwork()()
    network._input("new_shape", (2,), is_shape_tensor=True)  # static dims: only its values vary
    network.mark_output(network._layer(trt.LayerType.ELEMENTWISE, "y").get_output(0))
    with pytest.warns(UserWarning, match="shape-tensor input 'new_shape' has no profile values"):
        config = CreateConfig(progress=False)(builder, network)
    assert len(config.profiles) == 1
    assert config.profiles[0].values == {"new_shape": ((1, 1), (1, 1), (1, 1))}
    _build(builder, network, config)


def test_shape_tensor_profile_takes_values(trt) -> None:
    from parity_trt.config import CreateConfig
    from parity_trt.options import Profile

    builder, network = _shape_tensor_network(trt)
    profile = Profile({"data": ((1, 3), (4, 3), (8, 3)), "new_shape": ((1, 6), (4, 6), (8, 6))})
    config = CreateConfig(profiles=[profile], progress=False)(builder, network)
    assert config.profiles[0].values == {"new_shape": ((1, 6), (4, 6), (8, 6))}
    assert config.profiles[0].shapes == {"data": ((1, 3), (4, 3), (8, 3))}
    _build(builder, network, config)


def test_shape_tensor_values_count_is_checked(trt) -> None:
    from parity_trt.config import CreateConfig
    from parity_trt.options import Profile

    builder, network = _shape_tensor_network(trt)
    profile = Profile({"data": ((1, 3), (4, 3), (8, 3)), "new_shape": ((1, 6, 1), (4, 6, 1), (8, 6, 1))})
    with pytest.raises(UsageError, match="'new_shape' is a shape tensor holding 2 value"):
        CreateConfig(profiles=[profile], progress=False)(builder, network)


def test_scalar_shape_tensor_holds_one_value(trt) -> None:
    from parity_trt.config import CreateConfig
    from parity_trt.options import Profile

    builder, network = _shape_tensor_network(trt, dims=())
    profile = Profile({"data": ((1, 3), (4, 3), (8, 3)), "new_shape": ((1,), (2,), (3,))})
    config = CreateConfig(profiles=[profile], progress=False)(builder, network)
    assert config.profiles[0].values == {"new_shape": ((1,), (2,), (3,))}
    _build(builder, network, config)


# ---- item 4: mark all skips what TensorRT refuses -----------------------------------------------------
def test_mark_all_skips_loops_shape_constant_and_missing_outputs(trt) -> None:
    from parity_trt.config import CreateConfig
    from parity_trt.network import CreateNetwork, mark_all_outputs

    builder, network = CreateNetwork()()
    network._input("x", (2, 3))
    L = trt.LayerType
    network._layer(L.CONSTANT, "const")
    network._layer(L.SHAPE, "shape_of_x")  # an execution tensor here (not is_shape_tensor), still a SHAPE layer
    network._layer(L.ELEMENTWISE, "before_loop")
    network._layer(L.TRIP_LIMIT, in_loop=True)
    network._layer(L.RECURRENCE, "state", in_loop=True)
    network._layer(L.ELEMENTWISE, "body", in_loop=True)
    network._layer(L.LOOP_OUTPUT, "loop_out")
    network._layer(L.LOOP_OUTPUT, "loop_out2")
    network._layer(L.TOPK, "values", None)  # an optional output left out: get_output(1) is None
    network._layer(L.ELEMENTWISE, "sizes", shape_output=True)
    count = mark_all_outputs(network)
    marked = [network.get_output(i).name for i in range(network.num_outputs)]
    assert marked == ["before_loop", "loop_out", "loop_out2", "values"]
    assert count == 4
    _build(builder, network, CreateConfig(progress=False)(builder, network))
    # --trt-exclude-outputs still leaves names out
    _, network = CreateNetwork()()
    network._layer(L.ELEMENTWISE, "a")
    network._layer(L.ELEMENTWISE, "b")
    assert mark_all_outputs(network, exclude=["a"]) == 1
    assert [network.get_output(i).name for i in range(network.num_outputs)] == ["b"]


# ---- item 7: after_build runs once on CLI builds -----------------------------------------------------------
class _CountingExtension:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def postprocess_config(self, builder: Any, network: Any, config: Any) -> None:
        self.calls.append("postprocess_config")

    def after_build(self, builder: Any, network: Any, config: Any, engine_bytes: bytes) -> None:
        self.calls.append("after_build")


def test_cli_build_runs_each_extension_hook_once(trt, static_model: Path) -> None:
    from parity_trt import config as config_module
    from parity_trt.factory import engine_loader

    ext = _CountingExtension()

    def factory(options: Any) -> Any:
        return ext

    config_module.register_build_extension(factory)
    try:
        data = engine_loader(str(static_model), {"trt_progress": False})()
    finally:
        config_module._FACTORIES.remove(factory)
    assert data == b"serialized engine"
    assert ext.calls == ["postprocess_config", "after_build"]


# ---- item 11: PARITY_TRT_LOG, and --strongly-typed with precision flags ---------------------------------
def test_parity_trt_log_sets_the_logger(trt, monkeypatch: pytest.MonkeyPatch) -> None:
    from parity_trt._trt import get_logger
    from parity_trt.network import CreateNetwork

    CreateNetwork()()
    assert get_logger().min_severity is trt.Logger.WARNING  # unset: the logger is left as it is
    monkeypatch.setenv("PARITY_TRT_LOG", "verbose")
    builder, _ = CreateNetwork()()
    assert builder.logger is get_logger()
    assert get_logger().min_severity is trt.Logger.VERBOSE


def test_parity_trt_log_rejects_unknown_levels(trt, monkeypatch: pytest.MonkeyPatch) -> None:
    from parity_trt.network import CreateNetwork

    monkeypatch.setenv("PARITY_TRT_LOG", "loud")
    with pytest.raises(UsageError, match="PARITY_TRT_LOG=loud: not a TensorRT log level.*choices: verbose"):
        CreateNetwork()()


def test_parity_trt_log_applies_to_cli_builds(trt, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, static_model: Path) -> None:
    from parity_trt._trt import get_logger
    from parity_trt.factory import convert

    monkeypatch.setenv("PARITY_TRT_LOG", "Info")
    convert(str(static_model), str(tmp_path / "m.engine"), {"trt_progress": False})
    assert get_logger().min_severity is trt.Logger.INFO


@pytest.mark.parametrize("flag", ["fp16", "bf16", "int8", "fp8"])
def test_strongly_typed_with_precision_flag_refused_on_10(flag: str) -> None:
    from parity_trt.options import validate_precisions

    with pytest.raises(UsageError, match=f"--strongly-typed with --{flag}") as info:
        validate_precisions({"strongly_typed": True, flag: True}, 10)
    assert "\n" not in str(info.value)
    assert validate_precisions({"strongly_typed": True}, 10) == []  # each alone is fine
    assert validate_precisions({flag: True}, 10) == [flag]


def test_progress_monitor_exception_resurfaces_after_the_build(trt) -> None:
    # pyCore.cpp's IProgressMonitor trampoline catches a Python exception, logs it and goes on: Parity keeps it.
    from parity_trt.callbacks import raise_pending
    from parity_trt.config import ProgressMonitorFactory

    from parity.errors import BackendError

    class BrokenStream:
        def write(self, text: str) -> None:
            raise OSError("terminal gone")

        def flush(self) -> None:
            pass

    monitor = ProgressMonitorFactory.create(BrokenStream())
    monitor.phase_start("Building", None, 3)  # does not raise into TensorRT
    assert monitor.step_complete("Building", 0) is True  # the default keeps the build going
    with pytest.raises(BackendError, match="progress monitor's phase_start raised OSError: terminal gone"):
        raise_pending(monitor)


def test_parity_trt_log_reaches_python_api_engine_loads(trt, monkeypatch: pytest.MonkeyPatch) -> None:
    # Loading an engine from Python creates the logger without building a network: it must honour the variable too.
    from parity_trt._trt import get_logger

    get_logger.cache_clear()
    monkeypatch.setenv("PARITY_TRT_LOG", "error")
    try:
        assert get_logger().min_severity is trt.Logger.ERROR
    finally:
        get_logger.cache_clear()
