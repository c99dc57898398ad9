"""Polygraphy's TensorRT builder, parser, network and runtime flags on ``parity run --trt`` and ``parity convert``,
driven through the CLI against the TensorRT model (trt_model: a model of TensorRT's documented Python API, NOT
TensorRT). Each test asserts what the flag does to the builder config, network or parser the model's builder was
given (``trt._last_build``), or the one-line refusal where the flag cannot apply to that TensorRT version."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper
from trt_model.install import install, uninstall

from parity.testing import CliResult, invoke, relu_add, save_graph

V10, V11 = "10.7.0", "11.4.0.106"


@pytest.fixture
def trt10(monkeypatch: pytest.MonkeyPatch) -> Any:
    yield install(monkeypatch, V10)
    uninstall()


@pytest.fixture
def trt11(monkeypatch: pytest.MonkeyPatch) -> Any:
    yield install(monkeypatch, V11)
    uninstall()


def parity(*args: str | Path) -> CliResult:
    result = invoke(*args)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def convert(model: Path, tmp_path: Path, *flags: str) -> CliResult:
    return parity("convert", model, "-o", tmp_path / "model.engine", *flags)


def built(trt: Any) -> tuple[Any, Any]:
    """(network, config) of the last engine the model built."""
    return trt._last_build


def weighted_model(path: Path) -> Path:
    """y = Relu(x + w) with an initializer w (weights a weight-streaming build can stream)."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], np.arange(6, dtype=np.float32).tolist())
    nodes = [helper.make_node("Add", ["x", "w"], ["s"], name="add"), helper.make_node("Relu", ["s"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    return save_graph(graph, path)


# ---- builder config -----------------------------------------------------------------------------------------
def test_tactic_sources_set_the_bit_mask(trt10, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    assert convert(model, tmp_path, "--tactic-sources", "cublas", "CUDNN").exit_code == 0
    _, config = built(trt10)
    assert config.get_tactic_sources() == (1 << int(trt10.TacticSource.CUBLAS)) | (1 << int(trt10.TacticSource.CUDNN))
    # no value: every source disabled, as Polygraphy's bare --tactic-sources
    assert convert(model, tmp_path, "--tactic-sources").exit_code == 0
    assert built(trt10)[1].get_tactic_sources() == 0


def test_tactic_source_this_version_lacks_is_refused(trt11, tmp_path):
    result = convert(relu_add(tmp_path / "m.onnx", (2, 3)), tmp_path, "--tactic-sources", "cublas")
    assert result.exit_code == 2 and "has no TacticSource 'cublas'" in result.stderr and "jit_convolutions" in result.stderr


@pytest.mark.parametrize(("flag", "builder_flag"), [
    ("--sparse-weights", "SPARSE_WEIGHTS"), ("--refittable", "REFIT"), ("--strip-plan", "STRIP_PLAN"),
    ("--direct-io", "DIRECT_IO"), ("--disable-compilation-cache", "DISABLE_COMPILATION_CACHE"),
    ("--trt-safety-restricted", "SAFETY_SCOPE"), ("--version-compatible", "VERSION_COMPATIBLE"),
])
def test_flag_options_set_their_builder_flag(trt10, tmp_path, flag, builder_flag):
    assert convert(relu_add(tmp_path / "m.onnx", (2, 3)), tmp_path, flag).exit_code == 0
    config = built(trt10)[1]
    assert config.get_flag(getattr(trt10.BuilderFlag, builder_flag))
    assert not config.get_flag(trt10.BuilderFlag.EXCLUDE_LEAN_RUNTIME)


def test_exclude_lean_runtime_needs_version_compatible(trt10, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    refused = convert(model, tmp_path, "--exclude-lean-runtime")
    assert refused.exit_code == 2 and "--exclude-lean-runtime needs --version-compatible" in refused.stderr
    assert convert(model, tmp_path, "--version-compatible", "--exclude-lean-runtime").exit_code == 0
    assert built(trt10)[1].get_flag(trt10.BuilderFlag.EXCLUDE_LEAN_RUNTIME)


def test_enum_and_number_options_set_config_properties(trt10, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    result = convert(model, tmp_path, "--hardware-compatibility-level", "ampere_plus", "--runtime-platform", "windows_amd64",
                     "--engine-capability", "standard", "--max-aux-streams", "2", "--memory-pool-limit", "workspace:16M")
    assert result.exit_code == 0, result.stderr
    config = built(trt10)[1]
    assert config.hardware_compatibility_level == trt10.HardwareCompatibilityLevel.AMPERE_PLUS
    assert config.runtime_platform == trt10.RuntimePlatform.WINDOWS_AMD64
    assert config.engine_capability == trt10.EngineCapability.STANDARD
    assert config.max_aux_streams == 2
    assert config.get_memory_pool_limit(trt10.MemoryPoolType.WORKSPACE) == 16 << 20  # Polygraphy's name of --pool-limit
    bad = convert(model, tmp_path, "--runtime-platform", "amiga")
    assert bad.exit_code == 2 and "RuntimePlatform 'amiga'" in bad.stderr and "same_as_build" in bad.stderr


def test_tiling_optimization_level_needs_10_8(monkeypatch, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    install(monkeypatch, V10)
    try:
        refused = convert(model, tmp_path, "--tiling-optimization-level", "full")
        assert refused.exit_code == 2 and "not available on TensorRT 10.7.0 (needs TensorRT 10.8 or newer)" in refused.stderr
        trt = install(monkeypatch, "10.8.0.43")
        assert convert(model, tmp_path, "--tiling-optimization-level", "full").exit_code == 0
        assert built(trt)[1].tiling_optimization_level == trt.TilingOptimizationLevel.FULL
    finally:
        uninstall()


def test_quantization_flags_set_those_named_and_clear_the_rest(trt10, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    assert convert(model, tmp_path, "--quantization-flags", "calibrate_before_fusion").exit_code == 0
    assert built(trt10)[1].get_quantization_flag(trt10.QuantizationFlag.CALIBRATE_BEFORE_FUSION)
    assert convert(model, tmp_path, "--quantization-flags").exit_code == 0
    assert not built(trt10)[1].get_quantization_flag(trt10.QuantizationFlag.CALIBRATE_BEFORE_FUSION)


def test_quantization_flags_are_refused_on_11(trt11, tmp_path):
    result = convert(relu_add(tmp_path / "m.onnx", (2, 3)), tmp_path, "--quantization-flags", "calibrate_before_fusion")
    assert result.exit_code == 2 and "--quantization-flags is not available on TensorRT 11.4.0.106" in result.stderr


def test_use_dla_without_a_dla_core_needs_gpu_fallback(trt10, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    refused = convert(model, tmp_path, "--use-dla")
    assert refused.exit_code == 2 and "no DLA core" in refused.stderr
    assert convert(model, tmp_path, "--allow-gpu-fallback").exit_code == 2  # no effect without --use-dla: refused
    assert convert(model, tmp_path, "--use-dla", "--allow-gpu-fallback").exit_code == 0
    config = built(trt10)[1]
    assert config.default_device_type == trt10.DeviceType.DLA and config.DLA_core == 0
    assert config.get_flag(trt10.BuilderFlag.GPU_FALLBACK) and config.get_flag(trt10.BuilderFlag.PREFER_PRECISION_CONSTRAINTS)


def test_weight_streaming_needs_strong_typing_on_10_and_sets_the_budget(trt10, tmp_path):
    model = weighted_model(tmp_path / "w.onnx")
    refused = parity("run", model, "--trt", "--weight-streaming")
    assert refused.exit_code == 2 and "--weight-streaming needs --strongly-typed" in refused.stderr
    result = parity("run", model, "--trt", "--strongly-typed", "--weight-streaming", "--weight-streaming-budget", "50%",
                    "--save-engine", tmp_path / "w.engine")
    assert result.exit_code == 0, result.stderr
    assert built(trt10)[1].get_flag(trt10.BuilderFlag.WEIGHT_STREAMING)
    engine = trt10.Runtime(trt10.Logger()).deserialize_cuda_engine((tmp_path / "w.engine").read_bytes())
    assert engine.streamable_weights_size == 24
    # an engine built without weight streaming: the budget could not apply
    plain = parity("run", relu_add(tmp_path / "m.onnx", (2, 3)), "--trt", "--weight-streaming-budget", "1K")
    assert plain.exit_code == 2 and "streams no weights" in plain.stderr
    assert parity("run", model, "--trt", "--weight-streaming-budget", "150%").exit_code == 2


def test_weight_streaming_budget_reaches_the_engine(trt10, tmp_path, monkeypatch):
    from parity_trt.runner import TrtRunner

    seen = {}
    original = TrtRunner._set_weight_streaming_budget

    def spy(self):
        original(self)
        seen["budget"] = self.engine.weight_streaming_budget_v2

    monkeypatch.setattr(TrtRunner, "_set_weight_streaming_budget", spy)
    model = weighted_model(tmp_path / "w.onnx")
    assert parity("run", model, "--trt", "--strongly-typed", "--weight-streaming", "--weight-streaming-budget", "50%").exit_code == 0
    assert seen["budget"] == 12  # half of the 24 streamable bytes kept on the GPU


@pytest.mark.parametrize("strategy", ["profile", "runtime"])
def test_allocation_strategy_gives_a_user_managed_context_its_memory(trt10, tmp_path, strategy):
    result = parity("run", relu_add(tmp_path / "m.onnx"), "--trt", "--onnxrt", "--allocation-strategy", strategy,
                    "--input-shapes", "x:[2,3]")
    assert result.exit_code == 0, result.stderr  # the model fails an enqueue on a USER_MANAGED context without memory


def test_trt_config_script_makes_the_config(trt10, tmp_path):
    script = tmp_path / "cfg.py"
    script.write_text("import tensorrt as trt\n\n"
                      "def load_config(builder, network):\n"
                      "    config = builder.create_builder_config()\n"
                      "    config.set_flag(trt.BuilderFlag.REFIT)\n"
                      "    return config\n")
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    assert convert(model, tmp_path, "--trt-config-script", script).exit_code == 0
    assert built(trt10)[1].get_flag(trt10.BuilderFlag.REFIT)
    clash = convert(model, tmp_path, "--trt-config-script", script, "--fp16")
    assert clash.exit_code == 2 and "--fp16 would not apply" in clash.stderr
    shapes = convert(model, tmp_path, "--trt-config-script", script, *(f"--trt-{w}-shapes=x:[2,3]" for w in ("min", "opt", "max")))
    assert shapes.exit_code == 2 and "--trt-min-shapes, --trt-opt-shapes, --trt-max-shapes would not apply" in shapes.stderr
    cache = tmp_path / "timing.cache"  # the script's config gets an empty timing cache, which the build fills
    assert convert(model, tmp_path, "--trt-config-script", script, "--save-timing-cache", cache).exit_code == 0
    assert cache.is_file()


def test_calibration_base_class_picks_the_calibrator(trt10, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    result = convert(model, tmp_path, "--int8", "--calib-base-cls", "IInt8MinMaxCalibrator")
    assert result.exit_code == 0, result.stderr
    assert isinstance(built(trt10)[1].int8_calibrator, trt10.IInt8MinMaxCalibrator)
    result = convert(model, tmp_path, "--int8", "--calibration-base-class", "IInt8LegacyCalibrator", "--quantile", "0.9")
    assert result.exit_code == 0, result.stderr
    calibrator = built(trt10)[1].int8_calibrator
    assert isinstance(calibrator, trt10.IInt8LegacyCalibrator) and calibrator.get_quantile() == 0.9
    assert convert(model, tmp_path, "--int8", "--quantile", "0.9").exit_code == 2  # only the legacy calibrator has one
    assert convert(model, tmp_path, "--calib-base-cls", "IInt8MinMaxCalibrator").exit_code == 2  # without --int8


# ---- parser and network -------------------------------------------------------------------------------------
def test_onnx_flags_and_plugin_instancenorm_set_the_parser_flags(monkeypatch, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    trt = install(monkeypatch, "10.7.0")
    try:
        refused = convert(model, tmp_path, "--onnx-flags", "enable_plugin_override")  # 10.7 has only NATIVE_INSTANCENORM
        assert refused.exit_code == 2 and "no OnnxParserFlag 'enable_plugin_override'" in refused.stderr
        trt = install(monkeypatch, "10.16.1.11")
        assert convert(model, tmp_path).exit_code == 0
        assert built(trt)[0]._parser.get_flag(trt.OnnxParserFlag.NATIVE_INSTANCENORM)  # TensorRT's default
        assert convert(model, tmp_path, "--plugin-instancenorm").exit_code == 0
        assert not built(trt)[0]._parser.get_flag(trt.OnnxParserFlag.NATIVE_INSTANCENORM)
        assert convert(model, tmp_path, "--onnx-flags", "enable_plugin_override").exit_code == 0
        assert built(trt)[0]._parser.flags == 1 << 3  # kENABLE_PLUGIN_OVERRIDE = 3: the flags are exactly those given
        assert convert(model, tmp_path, "--enable-uint8-asymmetric-quantization-dla").exit_code == 0
        assert built(trt)[0]._parser.get_flag(trt.OnnxParserFlag.ENABLE_UINT8_AND_ASYMMETRIC_QUANTIZATION_DLA)
    finally:
        uninstall()


def test_layer_precisions_set_layer_precision(trt10, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    network = _parsed(trt10, model)
    name = network.get_layer(0).name
    result = convert(model, tmp_path, "--layer-precisions", f"{name}:float16", "--precision-constraints", "obey")
    assert result.exit_code == 0, result.stderr
    assert built(trt10)[0].get_layer(0).precision == trt10.DataType.HALF
    missing = convert(model, tmp_path, "--layer-precisions", "nolayer:float16")
    assert missing.exit_code == 2 and "no layer 'nolayer'" in missing.stderr
    assert convert(model, tmp_path, "--layer-precisions", "oops").exit_code == 2


def test_layer_precisions_are_refused_on_11_as_fp16_is(trt11, tmp_path):
    result = convert(relu_add(tmp_path / "m.onnx", (2, 3)), tmp_path, "--layer-precisions", "x:float16")
    assert result.exit_code == 2 and "--layer-precisions: not available on TensorRT 11.x" in result.stderr
    assert "strongly typed" in result.stderr


def test_tensor_datatypes_and_formats_set_the_io_tensors(trt10, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    result = convert(model, tmp_path, "--tensor-dtypes", "x:float16", "--tensor-formats", "x:[linear,chw4]")
    assert result.exit_code == 0, result.stderr
    network = built(trt10)[0]
    x = network.get_input(0)
    assert x.dtype == trt10.DataType.HALF
    assert x.allowed_formats == (1 << int(trt10.TensorFormat.LINEAR)) | (1 << int(trt10.TensorFormat.CHW4))
    assert network.get_output(0).dtype == trt10.DataType.FLOAT
    assert convert(model, tmp_path, "--all-tensor-datatypes", "float16", "--all-tensor-formats", "linear").exit_code == 0
    network = built(trt10)[0]
    for tensor in (network.get_input(0), network.get_output(0)):
        assert tensor.dtype == trt10.DataType.HALF and tensor.allowed_formats == 1 << int(trt10.TensorFormat.LINEAR)
    bad = convert(model, tmp_path, "--tensor-formats", "x:[sideways]")
    assert bad.exit_code == 2 and "TensorFormat 'sideways'" in bad.stderr


def test_outputs_by_type_marks_those_layers_outputs(trt10, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    assert convert(model, tmp_path, "--trt-outputs-by-type", "activation").exit_code == 0
    network = built(trt10)[0]
    outputs = {network.get_output(i).name for i in range(network.num_outputs)}
    relu = [network.get_layer(i) for i in range(network.num_layers) if network.get_layer(i).type == trt10.LayerType.ACTIVATION]
    assert relu and {layer.get_output(0).name for layer in relu} <= outputs
    bad = convert(model, tmp_path, "--trt-outputs-by-type", "activaton")
    assert bad.exit_code == 2 and "LayerType 'activaton'" in bad.stderr


def test_decomposable_attentions_needs_10_16(trt10, tmp_path):
    result = convert(relu_add(tmp_path / "m.onnx", (2, 3)), tmp_path, "--decomposable-attentions")
    assert result.exit_code == 2 and "--decomposable-attentions is not available on TensorRT 10.7.0 (needs TensorRT 10.16" in result.stderr


# ---- runtime --------------------------------------------------------------------------------------------------
def test_load_runtime_deserializes_with_the_loaded_runtime(trt10, tmp_path, monkeypatch):
    from parity_trt import engine as engine_module

    model = relu_add(tmp_path / "m.onnx", (2, 3))
    assert convert(model, tmp_path, "--version-compatible").exit_code == 0
    lib = tmp_path / "libnvinfer_lean.so"
    lib.write_bytes(b"\x7fELF")
    used = []
    original = engine_module.EngineFromBytes._runtime

    def spy(self):
        runtime = original(self)
        used.append(runtime)
        return runtime

    monkeypatch.setattr(engine_module.EngineFromBytes, "_runtime", spy)
    result = parity("run", tmp_path / "model.engine", "--trt", "--load-runtime", lib)
    assert result.exit_code == 0, result.stderr
    assert used and used[-1]._loaded_from == str(lib) and used[-1].engine_host_code_allowed is True
    missing = parity("run", tmp_path / "model.engine", "--trt", "--load-runtime", tmp_path / "none.so")
    assert missing.exit_code == 2 and "--load-runtime: no such file" in missing.stderr


def test_dla_workspace_allocation_strategy_needs_11_3(trt10, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    assert convert(model, tmp_path).exit_code == 0
    result = parity("run", tmp_path / "model.engine", "--trt", "--dla-workspace-allocation-strategy", "shared_static")
    assert result.exit_code == 2 and "not available on TensorRT 10.7.0 (needs TensorRT 11.3 or newer)" in result.stderr


def test_tactic_replay_aliases(trt10, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    replay = tmp_path / "replay.json"
    assert convert(model, tmp_path, "--save-tactic-replay", replay).exit_code == 0 and replay.is_file()
    assert convert(model, tmp_path, "--load-tactic-replay", replay).exit_code == 0


def _parsed(trt: Any, model: Path) -> Any:
    from parity_trt.network import NetworkFromOnnxPath

    return NetworkFromOnnxPath(str(model))()[1]


# ---- inspect model ----------------------------------------------------------------------------------------------
def test_inspect_model_shows_the_network_the_options_make(trt10, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    plain = parity("inspect", "model", model, "--display-as", "trt")
    assert plain.exit_code == 0 and "x: float[2, 3]" in plain.stdout
    typed = parity("inspect", "model", model, "--display-as", "trt", "--tensor-datatypes", "x:float16")
    assert typed.exit_code == 0, typed.stderr
    assert "x: half[2, 3]" in typed.stdout
    refused = parity("inspect", "model", model, "--tensor-datatypes", "x:float16")  # shown as ONNX: no TensorRT network
    assert refused.exit_code == 2 and "add --display-as trt" in refused.stderr
    bad = parity("inspect", "model", model, "--display-as", "trt", "--onnx-flags", "sideways")
    assert bad.exit_code == 2 and "OnnxParserFlag 'sideways'" in bad.stderr


def test_inspect_model_loads_an_engine_with_the_runtime_options(trt10, tmp_path):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    assert convert(model, tmp_path).exit_code == 0
    lib = tmp_path / "lean.so"
    lib.write_bytes(b"\x7fELF")
    assert parity("inspect", "model", tmp_path / "model.engine", "--load-runtime", lib).exit_code == 0
    refused = parity("inspect", "model", tmp_path / "model.engine", "--dla-workspace-allocation-strategy", "default")
    assert refused.exit_code == 2 and "needs TensorRT 11.3 or newer" in refused.stderr
    onnx = parity("inspect", "model", model, "--load-runtime", lib)
    assert onnx.exit_code == 2 and "not one" in onnx.stderr
