"""``polygraphy.backend.trt.config``: ``CreateConfig`` (a TensorRT ``IBuilderConfig`` from keyword arguments) and
``PostprocessConfig`` (a function applied to a config), with their immediately evaluated twins ``create_config`` and
``postprocess_config``.

TensorRT is imported on first call (``parity_trt.api.import_trt``). An argument left ``None`` keeps TensorRT's
default; a set argument this TensorRT has no API for raises ``PolygraphyException`` naming it and the version, never
silently does nothing. As in Polygraphy, TF32 is cleared unless ``tf32=True``, ``profiling_verbosity`` defaults to
DETAILED where settable, at least one optimization profile is added (static shapes filled in from the network),
and an empty timing cache is attached when none is loaded (a missing cache file is a warning, then an empty cache).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from parity_trt.api import import_trt, unavailable

from parity_polygraphy.backend._funcify import twin
from parity_polygraphy.backend.base import BaseLoader
from parity_polygraphy.backend.trt.profile import Profile
from parity_polygraphy.common.struct import TensorMetadata
from parity_polygraphy.datatype import DataType
from parity_polygraphy.logger import G_LOGGER
from parity_polygraphy.util import util

# keyword argument -> BuilderFlag set when it is true
_FLAG_ARGS = {
    "restricted": "SAFETY_SCOPE",
    "refittable": "REFIT",
    "strip_plan": "STRIP_PLAN",
    "direct_io": "DIRECT_IO",
    "sparse_weights": "SPARSE_WEIGHTS",
    "version_compatible": "VERSION_COMPATIBLE",
    "exclude_lean_runtime": "EXCLUDE_LEAN_RUNTIME",
    "error_on_timing_cache_miss": "ERROR_ON_TIMING_CACHE_MISS",
    "disable_compilation_cache": "DISABLE_COMPILATION_CACHE",
    "weight_streaming": "WEIGHT_STREAMING",
    "fp16": "FP16",
    "bf16": "BF16",
    "fp8": "FP8",
    "int8": "INT8",
}
# keyword argument -> IBuilderConfig attribute assigned when the argument is not None
_ATTR_ARGS = (
    "algorithm_selector", "engine_capability", "builder_optimization_level", "hardware_compatibility_level",
    "max_aux_streams", "progress_monitor", "runtime_platform", "tiling_optimization_level",
)  # fmt: skip
_PRECISION_CONSTRAINTS = {"obey": "OBEY_PRECISION_CONSTRAINTS", "prefer": "PREFER_PRECISION_CONSTRAINTS"}


def _unavailable(what: str, trt: Any, trt_name: str | None = None) -> None:
    """Refuse ``what``: for a known TensorRT name, with the releases that have it and what to do instead (the
    CLI's words, from parity_trt: TensorRT 11's strong typing for the precision flags)."""
    if trt_name is not None:
        G_LOGGER.critical(str(unavailable(trt, trt_name, what)))
    G_LOGGER.critical(f"{what} is not available on TensorRT version {trt.__version__}.")


def _layers(network: Any) -> list[Any]:
    return [network.get_layer(index) for index in range(network.num_layers)]


class _Setter:
    """Applies settings to one config, refusing (one ``PolygraphyException``) what this TensorRT lacks."""

    def __init__(self, trt: Any, config: Any) -> None:
        self.trt, self.config = trt, config

    def run(self, what: str, func: Callable[[], Any], trt_name: str | None = None) -> Any:
        try:
            return func()
        except AttributeError:
            _unavailable(what, self.trt, trt_name)

    def flag(self, name: str, on: bool = True) -> None:
        def apply() -> None:
            flag = getattr(self.trt.BuilderFlag, name)
            (self.config.set_flag if on else self.config.clear_flag)(flag)

        self.run(name.lower(), apply, f"BuilderFlag.{name}")

    def attr(self, name: str, value: Any) -> None:
        self.run(name, lambda: setattr(self.config, name, value))


class CreateConfig(BaseLoader):
    """``CreateConfig(**options)(builder, network) -> trt.IBuilderConfig``.

    Options (all default to ``None``: TensorRT's default, or off):
    ``profiles`` (list of ``Profile``; default one filled from the network), ``precision_constraints``
    ("obey"/"prefer"), ``load_timing_cache`` (path or file-like), ``algorithm_selector``, ``sparse_weights``,
    ``tactic_sources`` (list of ``trt.TacticSource``; [] disables all), ``restricted``, ``profiling_verbosity``,
    ``memory_pool_limits`` ({``trt.MemoryPoolType``: bytes}), ``refittable``, ``strip_plan``, ``preview_features``
    (list: exactly these on), ``engine_capability``, ``direct_io``, ``builder_optimization_level``,
    ``hardware_compatibility_level``, ``max_aux_streams``, ``version_compatible``, ``exclude_lean_runtime`` (needs
    ``version_compatible``), ``quantization_flags`` (list: exactly these on), ``error_on_timing_cache_miss``,
    ``disable_compilation_cache``, ``progress_monitor``, ``weight_streaming``, ``runtime_platform``,
    ``tiling_optimization_level``, ``tf32``, ``fp16``, ``int8``, ``fp8``, ``bf16``, ``calibrator`` (int8
    calibration when the network has no Q/DQ layers; calibrates at the last profile), ``use_dla`` (refused when the
    builder sees no DLA core, unless ``allow_gpu_fallback``), ``allow_gpu_fallback`` (sets GPU_FALLBACK).
    """

    def __init__(
        self,
        tf32: bool | None = None,
        fp16: bool | None = None,
        int8: bool | None = None,
        fp8: bool | None = None,
        bf16: bool | None = None,
        calibrator: Any = None,
        use_dla: bool | None = None,
        allow_gpu_fallback: bool | None = None,
        profiles: Sequence[Profile] | None = None,
        precision_constraints: str | None = None,
        load_timing_cache: Any = None,
        algorithm_selector: Any = None,
        sparse_weights: bool | None = None,
        tactic_sources: Sequence[Any] | None = None,
        restricted: bool | None = None,
        profiling_verbosity: Any = None,
        memory_pool_limits: Mapping[Any, int] | None = None,
        refittable: bool | None = None,
        strip_plan: bool | None = None,
        preview_features: Sequence[Any] | None = None,
        engine_capability: Any = None,
        direct_io: bool | None = None,
        builder_optimization_level: int | None = None,
        hardware_compatibility_level: Any = None,
        max_aux_streams: int | None = None,
        version_compatible: bool | None = None,
        exclude_lean_runtime: bool | None = None,
        quantization_flags: Sequence[Any] | None = None,
        error_on_timing_cache_miss: bool | None = None,
        disable_compilation_cache: bool | None = None,
        progress_monitor: Any = None,
        weight_streaming: bool | None = None,
        runtime_platform: Any = None,
        tiling_optimization_level: Any = None,
    ) -> None:
        given = dict(locals())
        if precision_constraints not in (None, "none", *_PRECISION_CONSTRAINTS):
            G_LOGGER.critical(f"precision_constraints must be 'obey', 'prefer' or None, not {precision_constraints!r}")
        self.profiles = util.default(profiles, [Profile()])
        self.precision_constraints = precision_constraints
        self.timing_cache_path = load_timing_cache
        self.tactic_sources = tactic_sources
        self.profiling_verbosity = profiling_verbosity
        self.memory_pool_limits = memory_pool_limits
        self.preview_features = preview_features
        self.quantization_flags = quantization_flags
        self.tf32 = bool(tf32)
        self.calibrator = calibrator
        self.use_dla = bool(use_dla)
        self.allow_gpu_fallback = bool(allow_gpu_fallback)
        for name in _FLAG_ARGS:
            setattr(self, name, bool(given[name]))
        for name in _ATTR_ARGS:
            setattr(self, name, given[name])
        if calibrator is not None and not self.int8:
            G_LOGGER.warning(
                "A calibrator was provided to `CreateConfig`, but int8 mode was not enabled. "
                "Did you mean to set `int8=True` to enable building with int8 precision?"
            )

    def call_impl(self, builder: Any, network: Any) -> Any:
        """``network`` may be None: the steps that need it (profiles, calibration setup) are skipped."""
        trt = import_trt()
        if self.exclude_lean_runtime and not self.version_compatible:
            G_LOGGER.critical("Cannot set EXCLUDE_LEAN_RUNTIME if version compatibility is not enabled.")
        config = builder.create_builder_config()
        setter = _Setter(trt, config)

        if self.preview_features is not None:
            for feature in setter.run("preview_features", lambda: list(trt.PreviewFeature.__members__.values())):
                setter.run("preview_features", lambda f=feature: config.set_preview_feature(f, f in self.preview_features))

        trt_profiles = self._add_profiles(builder, network, config)
        self._precision_constraints(setter, network)
        for name, flag in _FLAG_ARGS.items():
            if getattr(self, name) and name not in ("fp16", "bf16", "fp8", "int8"):
                setter.flag(flag)

        if self.profiling_verbosity is not None:
            setter.attr("profiling_verbosity", self.profiling_verbosity)
        elif hasattr(trt, "ProfilingVerbosity"):
            config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
        for pool, size in (self.memory_pool_limits or {}).items():
            setter.run("memory_pool_limits", lambda p=pool, s=size: config.set_memory_pool_limit(p, s))
        if self.tactic_sources is not None:
            mask = sum(1 << int(source) for source in set(self.tactic_sources))
            setter.run("tactic_sources", lambda: config.set_tactic_sources(mask))
        self._timing_cache(trt, config)
        if self.algorithm_selector is not None and not self.timing_cache_path:
            G_LOGGER.warning("Disabling tactic timing cache because algorithm selector is enabled.")
            setter.flag("DISABLE_TIMING_CACHE")
        for name in _ATTR_ARGS:
            if getattr(self, name) is not None:
                setter.attr(name, getattr(self, name))
        if self.hardware_compatibility_level is not None or self.version_compatible:
            G_LOGGER.info("Version or hardware compatibility was enabled. If you are using an ONNX model, please set the "
                          "NATIVE_INSTANCENORM ONNX parser flag, e.g. `--onnx-flags NATIVE_INSTANCENORM`")  # fmt: skip
        if self.quantization_flags is not None:
            for flag in setter.run("quantization_flags", lambda: list(trt.QuantizationFlag.__members__.values())):
                method = config.set_quantization_flag if flag in self.quantization_flags else config.clear_quantization_flag
                setter.run("quantization_flags", lambda m=method, f=flag: m(f))

        # precision: TF32 is on in TensorRT by default; Polygraphy turns it off unless asked
        if self.tf32:
            setter.flag("TF32")
        elif hasattr(trt.BuilderFlag, "TF32"):
            config.clear_flag(trt.BuilderFlag.TF32)
        for name in ("fp16", "bf16", "fp8", "int8"):
            if getattr(self, name):
                setter.flag(_FLAG_ARGS[name])
        if self.int8 and network is not None:
            self._calibration(trt, builder, network, config, trt_profiles)
        if self.use_dla:
            self._dla(trt, builder, setter)
        if self.allow_gpu_fallback:  # set even without use_dla, as Polygraphy's tests expect: the option is never a no-op
            setter.flag("GPU_FALLBACK")
        return config

    def _add_profiles(self, builder: Any, network: Any, config: Any) -> list[tuple[Profile, Any]]:
        if network is None:
            return []
        added = []
        for profile in copy.deepcopy(self.profiles):  # filling defaults must not change the loader's profiles
            full = profile.fill_defaults(network)
            trt_profile = full.to_trt(builder, network)
            config.add_optimization_profile(trt_profile)
            added.append((full, trt_profile))
        G_LOGGER.info("Configuring with profiles: [" + ", ".join(f"Profile {i}: {p}" for i, (p, _) in enumerate(added)) + "]")
        return added

    def _precision_constraints(self, setter: _Setter, network: Any) -> None:
        flag = _PRECISION_CONSTRAINTS.get(self.precision_constraints or "")
        if flag:
            setter.flag(flag)
            return
        if network is None:
            return
        try:
            shape = setter.trt.LayerType.SHAPE
            with_precision = {layer.name: layer.precision.name for layer in _layers(network) if layer.precision_is_set and layer.type != shape}
        except (AttributeError, NotImplementedError):  # NotImplementedError: a TensorRT model lacking these members
            with_precision = {}
        if with_precision:
            G_LOGGER.warning(
                "It looks like some layers in the network have compute precision set, but precision constraints were not enabled. "
                "\nPrecision constraints must be set to 'prefer' or 'obey' for layer compute precision to take effect. "
                f"\nNote: Layers and their requested precisions were: {with_precision}"
            )

    def _timing_cache(self, trt: Any, config: Any) -> None:
        data = b""
        if self.timing_cache_path:
            try:
                data = util.load_file(self.timing_cache_path, description="tactic timing cache")
            except FileNotFoundError:
                G_LOGGER.warning(f"Timing cache file {self.timing_cache_path} not found, falling back to empty timing cache.")
        if not hasattr(config, "create_timing_cache"):
            if self.timing_cache_path:
                _unavailable("load_timing_cache in CreateConfig", trt)
            return
        # an empty cache by default, so the build fills it and a caller can save it afterwards
        config.set_timing_cache(config.create_timing_cache(data or b""), ignore_mismatch=False)

    def _calibration(self, trt: Any, builder: Any, network: Any, config: Any, profiles: list[tuple[Profile, Any]]) -> None:
        qdq = (trt.LayerType.QUANTIZE, trt.LayerType.DEQUANTIZE)
        if any(layer.type in qdq for layer in _layers(network)):
            return  # explicit quantization: nothing to calibrate
        if self.calibrator is None:
            G_LOGGER.warning(
                "Network does not have explicit precision and no calibrator was provided. Please ensure "
                "that tensors in the network have dynamic ranges set, or provide a calibrator in order to use int8 mode."
            )
            return
        try:
            config.int8_calibrator = self.calibrator
        except AttributeError:
            _unavailable("int8_calibrator in CreateConfig", trt)
        if not profiles:
            return
        last, trt_profile = profiles[-1]
        if hasattr(config, "set_calibration_profile"):
            config.set_calibration_profile(trt_profile)
            G_LOGGER.info(f"Using calibration profile: {last}")
        if getattr(self.calibrator, "is_polygraphy_calibrator", False):
            # TensorRT calibrates at the OPT shapes only
            meta = TensorMetadata()
            for index in range(network.num_inputs):
                tensor = network.get_input(index)
                shape = None if tensor.is_shape_tensor else tuple(last[tensor.name].opt)
                meta.add(tensor.name, DataType.from_dtype(tensor.dtype, "tensorrt"), shape)
            self.calibrator.set_input_metadata(meta)

    def _dla(self, trt: Any, builder: Any, setter: _Setter) -> None:
        cores = getattr(builder, "num_DLA_cores", None)
        if cores is None:
            G_LOGGER.warning("Cannot determine if DLA is available on this system. Please ensure DLA hardware is present when using --use-dla.")
        elif cores == 0 and not self.allow_gpu_fallback:
            G_LOGGER.critical(
                "DLA was requested via --use-dla, but no DLA hardware is available on this system. "
                "Please use --allow-gpu-fallback to allow layers to fall back to GPU, or remove --use-dla."
            )
        elif cores == 0:
            G_LOGGER.warning("DLA was requested via --use-dla, but no DLA hardware is available on this system. "
                             "Layers will fall back to GPU due to --allow-gpu-fallback.")
        setter.attr("default_device_type", trt.DeviceType.DLA)
        setter.attr("DLA_core", 0)
        before_11 = int(str(trt.__version__).split(".")[0]) < 11  # these two flags are deprecated from TensorRT 11
        if before_11:
            setter.flag("PREFER_PRECISION_CONSTRAINTS")
        if not self.allow_gpu_fallback and before_11:
            setter.flag("DIRECT_IO")  # reformatting runs on the GPU: keep it off without fallback


class PostprocessConfig(BaseLoader):
    """``PostprocessConfig(config, func)(builder, network)``: ``config`` (an ``IBuilderConfig`` or a callable
    ``(builder, network) -> IBuilderConfig``) after ``func(builder, network, config)`` has modified it in place."""

    def __init__(self, config: Any, func: Callable[[Any, Any, Any], None]) -> None:
        if not callable(func):
            G_LOGGER.critical(f"Object {func} (of type {type(func)}) is not a callable.")
        self._config = config
        self._func = func

    def call_impl(self, builder: Any, network: Any) -> Any:
        config, _ = util.invoke_if_callable(self._config, builder, network)
        self._func(builder, network, config)
        return config


def create_config(builder: Any, network: Any, **kwargs: Any) -> Any:
    """Immediately evaluated twin of :class:`CreateConfig`: ``CreateConfig(**kwargs)(builder, network)``."""
    return CreateConfig(**kwargs)(builder, network)


postprocess_config = twin(PostprocessConfig, ("builder", "network"))

__all__ = ["CreateConfig", "PostprocessConfig", "create_config", "postprocess_config"]
