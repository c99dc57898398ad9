"""The builder config loader (``CreateConfig``) and build extensions.

Build extensions let other plugins (e.g. tactic record/replay) act on a build without this plugin knowing
them: an extension is an object with optional ``postprocess_config(builder, network, config)`` (called last,
after every option is applied, before the build) and ``after_build(builder, network, config, engine_bytes)``
methods, or a plain callable used as ``postprocess_config``. Extensions come from three places:
``CreateConfig(postprocess=[...])`` in the Python API, :func:`register_build_extension` (a factory called with
the run options, for scripts), and plugins implementing the ``parity_trt_build_extension`` hook
(:mod:`parity_trt.hookspecs`), called through Parity's plugin manager like every other hook.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from parity.api import BackendError, BaseLoader, UsageError, call_hook, write_bytes_atomic
from parity.commands import LiveProgress, progress_wanted
from parity_trt import versions
from parity_trt._trt import import_trt
from parity_trt.callbacks import guard
from parity_trt.network import network_inputs
from parity_trt.options import CONSTRAINTS, ENUM_OPTIONS, FLAG_OPTIONS, PRECISION_FLAGS, Profile, complete_profile

BUILD_HOOK = "parity_trt_build_extension"
_FACTORIES: list[Callable[[Mapping[str, Any]], Any]] = []


def register_build_extension(factory: Callable[[Mapping[str, Any]], Any]) -> None:
    """``factory(run_options)`` returns an extension (or ``None`` when its options are not used)."""
    if factory not in _FACTORIES:
        _FACTORIES.append(factory)


def build_extensions(options: Mapping[str, Any]) -> list[Any]:
    """The extensions that apply to one build: from factories registered in this process, then from plugins
    (the ``parity_trt_build_extension`` hook, each implementation isolated by Parity's plugin manager)."""
    found = [ext for ext in (factory(options) for factory in _FACTORIES) if ext is not None]
    return found + call_hook(BUILD_HOOK, options=options)


def _postprocess_of(ext: Any) -> Callable[..., Any] | None:
    if hasattr(ext, "postprocess_config"):
        return ext.postprocess_config
    return ext if callable(ext) and not hasattr(ext, "after_build") else None


class ProgressMonitorFactory:
    """Builds an ``IProgressMonitor`` that shows one bar per build phase (nested phases indented) through
    Parity's live display (``parity.commands.LiveProgress``: on stderr, only for a person at a terminal)."""

    @staticmethod
    def create(display: Any = None) -> Any:
        trt = import_trt()
        bars = display if display is not None else LiveProgress(enabled=True)

        class ProgressBar(trt.IProgressMonitor):
            def __init__(self) -> None:
                trt.IProgressMonitor.__init__(self)
                self._phases: dict[str, tuple[int, int]] = {}  # name -> (depth, steps)

            @guard("the progress monitor's phase_start")
            def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
                depth = self._phases[parent_phase][0] + 1 if parent_phase in self._phases else 0
                self._phases[phase_name] = (depth, num_steps)
                bars.update(phase_name, 0, num_steps, label="  " * depth + phase_name[:40])

            @guard("the progress monitor's step_complete", default=True)
            def step_complete(self, phase_name: str, step: int) -> bool:
                depth, steps = self._phases.get(phase_name, (0, 0))
                bars.update(phase_name, step + 1, steps, label="  " * depth + phase_name[:40])
                return True  # False would cancel the build

            @guard("the progress monitor's phase_finish")
            def phase_finish(self, phase_name: str) -> None:
                self._phases.pop(phase_name, None)
                bars.remove(phase_name)
                if not self._phases:
                    bars.close()

        return ProgressBar()


def read_timing_cache(path: str | None) -> bytes:
    """A timing cache file's bytes; an absent file is an empty cache (the first build creates it)."""
    if path and Path(path).is_file():
        return Path(path).read_bytes()
    return b""


class CreateConfig(BaseLoader):
    """``CreateConfig(...)(builder, network) -> IBuilderConfig``, applying every builder option.

    Precision flags exist only on TensorRT 10 (11 is strongly typed) and fail with a message saying so.
    """

    def __init__(
        self,
        profiles: Sequence[Profile] = (),
        fp16: bool = False,
        bf16: bool = False,
        int8: bool = False,
        fp8: bool = False,
        tf32: bool | None = None,
        precision_constraints: str | None = None,
        calibrator: Any = None,
        pool_limits: Mapping[str, int] | None = None,
        builder_optimization_level: int | None = None,
        load_timing_cache: str | bytes | None = None,
        error_on_timing_cache_miss: bool = False,
        preview_features: Iterable[str] = (),
        flags: Iterable[str] = (),
        profiling_verbosity: str | None = "detailed",
        progress: bool | None = None,
        postprocess: Sequence[Any] = (),
        tactic_sources: Iterable[str] | None = None,
        use_dla: bool = False,
        allow_gpu_fallback: bool = False,
        max_aux_streams: int | None = None,
        quantization_flags: Iterable[str] | None = None,
        hardware_compatibility_level: str | None = None,
        runtime_platform: str | None = None,
        tiling_optimization_level: str | None = None,
        engine_capability: str | None = None,
        sparse_weights: bool = False,
        version_compatible: bool = False,
        exclude_lean_runtime: bool = False,
        restricted: bool = False,
        refittable: bool = False,
        strip_plan: bool = False,
        direct_io: bool = False,
        disable_compilation_cache: bool = False,
        weight_streaming: bool = False,
    ) -> None:
        self.profiles = list(profiles)
        self.precisions = {"fp16": fp16, "bf16": bf16, "int8": int8, "fp8": fp8}
        self.tf32 = tf32
        self.precision_constraints = precision_constraints
        self.calibrator = calibrator
        self.pool_limits = dict(pool_limits or {})
        self.builder_optimization_level = builder_optimization_level
        self.load_timing_cache = load_timing_cache
        self.error_on_timing_cache_miss = error_on_timing_cache_miss
        self.preview_features = list(preview_features)
        self.flags = list(flags)
        self.profiling_verbosity = profiling_verbosity
        self.progress = progress_wanted() if progress is None else progress
        self.postprocess = list(postprocess)
        # Polygraphy's CreateConfig names; None: TensorRT's default
        self.tactic_sources = None if tactic_sources is None else list(tactic_sources)
        self.use_dla, self.allow_gpu_fallback = use_dla, allow_gpu_fallback
        self.max_aux_streams = max_aux_streams
        self.quantization_flags = None if quantization_flags is None else list(quantization_flags)
        self.enums = {"hardware_compatibility_level": hardware_compatibility_level, "runtime_platform": runtime_platform,
                      "tiling_optimization_level": tiling_optimization_level, "engine_capability": engine_capability}
        self.builder_flags = {
            "sparse_weights": sparse_weights, "version_compatible": version_compatible, "exclude_lean_runtime": exclude_lean_runtime,
            "trt_safety_restricted": restricted, "refittable": refittable, "strip_plan": strip_plan, "direct_io": direct_io,
            "disable_compilation_cache": disable_compilation_cache, "weight_streaming": weight_streaming,
        }

    def __call__(self, builder: Any, network: Any) -> Any:
        trt = import_trt()
        config = builder.create_builder_config()
        self._precision(trt, config)
        if self.tf32 is not None:
            (config.set_flag if self.tf32 else config.clear_flag)(trt.BuilderFlag.TF32)
        for name, size in self.pool_limits.items():
            config.set_memory_pool_limit(versions.enum_member(trt, "MemoryPoolType", name, "--pool-limit"), size)
        if self.builder_optimization_level is not None:
            config.builder_optimization_level = self.builder_optimization_level
        if self.profiling_verbosity:
            config.profiling_verbosity = versions.enum_member(trt, "ProfilingVerbosity", self.profiling_verbosity, "--profiling-verbosity")
        for feature in self.preview_features:
            config.set_preview_feature(versions.enum_member(trt, "PreviewFeature", feature, "--preview-features"), True)
        for flag in self.flags:
            config.set_flag(versions.enum_member(trt, "BuilderFlag", flag, "--trt-flags"))
        self._polygraphy_options(trt, builder, config)
        self._timing_cache(trt, config)
        self._profiles(builder, network, config)
        if self.progress:
            self._monitor = ProgressMonitorFactory.create()  # kept here: TensorRT does not own the Python object
            config.progress_monitor = self._monitor
        for ext in self.postprocess:
            func = _postprocess_of(ext)
            if func is not None:
                func(builder, network, config)
        self._check_calibrator_used(trt, config)
        return config

    def _polygraphy_options(self, trt: Any, builder: Any, config: Any) -> None:
        """The builder options Polygraphy's CreateConfig sets, with the same TensorRT calls (backend/trt/config.py)."""
        for option, wanted in self.builder_flags.items():
            if wanted:
                config.set_flag(versions.require(trt, FLAG_OPTIONS[option], f"--{option.replace('_', '-')}"))
        for option, value in self.enums.items():
            if value is not None:
                enum, attribute = ENUM_OPTIONS[option]
                setattr(config, attribute, versions.enum_member(trt, enum, value, f"--{option.replace('_', '-')}"))
        if self.max_aux_streams is not None:
            config.max_aux_streams = self.max_aux_streams
        if self.tactic_sources is not None:
            # a bit mask of 1 << TacticSource (IBuilderConfig::setTacticSources, NvInfer.h@v10.7.0); none given: 0
            bits = 0
            for name in self.tactic_sources:
                bits |= 1 << int(versions.enum_member(trt, "TacticSource", name, "--tactic-sources"))
            if not config.set_tactic_sources(bits):
                raise UsageError(f"TensorRT {trt.__version__} refused --tactic-sources {' '.join(self.tactic_sources) or '(none)'}")
        if self.quantization_flags is not None:
            # every flag named is set and every other one cleared, as Polygraphy does
            enum = versions.require(trt, "QuantizationFlag", "--quantization-flags")
            wanted = {versions.enum_member(trt, "QuantizationFlag", name, "--quantization-flags") for name in self.quantization_flags}
            for flag in enum.__members__.values():
                (config.set_quantization_flag if flag in wanted else config.clear_quantization_flag)(flag)
        if self.use_dla:
            self._dla(trt, builder, config)

    def _dla(self, trt: Any, builder: Any, config: Any) -> None:
        # Polygraphy's CreateConfig: DLA core 0 as the default device, PREFER_PRECISION_CONSTRAINTS (TensorRT 10), and
        # GPU_FALLBACK, or else DIRECT_IO (reformatting runs on the GPU)
        if builder.num_DLA_cores == 0 and not self.allow_gpu_fallback:
            raise UsageError("--use-dla: this machine has no DLA core; add --allow-gpu-fallback to run on the GPU instead")
        config.default_device_type = trt.DeviceType.DLA
        config.DLA_core = 0
        prefer = versions.lookup(trt, CONSTRAINTS["prefer"])  # gone in TensorRT 11
        if prefer is not None:
            config.set_flag(prefer)
        if self.allow_gpu_fallback:
            config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
        elif versions.major(trt) < 11:
            config.set_flag(trt.BuilderFlag.DIRECT_IO)

    def _check_calibrator_used(self, trt: Any, config: Any) -> None:
        # TensorRT ignores a calibrator unless BuilderFlag.INT8 is set: the build would quietly make no int8 engine
        int8 = versions.lookup(trt, PRECISION_FLAGS["int8"])
        if self.calibrator is not None and int8 is not None and not config.get_flag(int8):
            raise UsageError("a calibrator (or --calibration-cache) was given without int8 (--int8); TensorRT would ignore it")

    def _precision(self, trt: Any, config: Any) -> None:
        for name, wanted in self.precisions.items():
            if wanted:
                config.set_flag(versions.require(trt, PRECISION_FLAGS[name], f"--{name}"))
        constraint = CONSTRAINTS.get(self.precision_constraints or "none")
        if constraint:
            config.set_flag(versions.require(trt, constraint, f"--precision-constraints {self.precision_constraints}"))
        if self.calibrator is not None:
            versions.require(trt, "IBuilderConfig.int8_calibrator", "int8 calibration")
            config.int8_calibrator = self.calibrator

    def _timing_cache(self, trt: Any, config: Any) -> None:
        # Always attach a cache, empty unless one is loaded, as Polygraphy's CreateConfig does (its
        # backend/trt/config.py: "Create an empty timing cache by default so it will be populated during engine
        # build"). A config returns the cache "used in" it (IBuilderConfig::getTimingCache, NvInfer.h@v10.7.0:
        # L9414-9419), None while none was set, so --save-timing-cache alone would write nothing and
        # --error-on-timing-cache-miss and per-build caches would have nothing to look in.
        data = self.load_timing_cache
        if isinstance(data, str):
            data = read_timing_cache(data)
        cache = config.create_timing_cache(bytes(data or b""))
        if cache is None or not config.set_timing_cache(cache, False):
            what = "the loaded timing cache (made by another TensorRT version or GPU?)" if data else "an empty timing cache"
            raise BackendError(f"TensorRT rejected {what}")
        if self.error_on_timing_cache_miss:
            config.set_flag(trt.BuilderFlag.ERROR_ON_TIMING_CACHE_MISS)

    def _profiles(self, builder: Any, network: Any, config: Any) -> None:
        inputs = network_inputs(network)
        shape_inputs = {network.get_input(i).name for i in range(network.num_inputs) if network.get_input(i).is_shape_tensor}
        # A network with dynamic or shape-tensor inputs needs at least one profile (NvInfer.h@v10.7.0:L9171,
        # addOptimizationProfile), even when every shape tensor's dims are static: its VALUES are what vary.
        needs_profile = bool(shape_inputs) or any(d < 0 for s in inputs.values() for d in s)
        wanted = self.profiles or ([Profile()] if needs_profile else [])
        for index, partial in enumerate(wanted):
            full = complete_profile(partial, inputs, index, shape_inputs)
            profile = builder.create_optimization_profile()
            for name, (lo, mid, hi) in full.shapes.items():
                if name in shape_inputs:  # shape tensors take values, not shapes (NvInferRuntime.h@v10.7.0:L2664)
                    profile.set_shape_input(name, lo, mid, hi)
                else:
                    profile.set_shape(name, lo, mid, hi)
            if config.add_optimization_profile(profile) < 0:
                raise UsageError(f"TensorRT rejected optimization profile {index}: {full}")
        if self.calibrator is not None and wanted:
            # the last profile, as Polygraphy's CreateConfig does; TensorRT reads dynamic inputs' calibration batches
            # at its OPT shape ("MIN and MAX values will be overwritten by kOPT", NvInfer.h@v10.7.0:L9244-9252)
            config.set_calibration_profile(profile)
            from parity_trt.calibrator import expect_calibration_shapes

            expect_calibration_shapes(self.calibrator, {n: s[1] for n, s in full.shapes.items() if n not in shape_inputs})


class ConfigFromScript(BaseLoader):
    """``--trt-config-script``: ``func(builder, network)`` makes the whole ``IBuilderConfig`` (Polygraphy's
    ``load_config``); build extensions (e.g. tactic record/replay) still act on it."""

    def __init__(self, func: Callable[[Any, Any], Any], postprocess: Sequence[Any] = ()) -> None:
        self.func = func
        self.postprocess = list(postprocess)

    def __call__(self, builder: Any, network: Any) -> Any:
        trt = import_trt()
        config = self.func(builder, network)
        if not isinstance(config, trt.IBuilderConfig):
            raise UsageError(f"--trt-config-script: the function must return a TensorRT IBuilderConfig; got {type(config).__name__}")
        if config.get_timing_cache() is None:  # as CreateConfig: an empty cache the build fills (--save-timing-cache)
            config.set_timing_cache(config.create_timing_cache(b""), False)
        for ext in self.postprocess:
            func = _postprocess_of(ext)
            if func is not None:
                func(builder, network, config)
        return config


def save_timing_cache(config: Any, path: str) -> None:
    """Write the config's timing cache, merged into an existing file (so runs accumulate timings)."""
    timing_cache = config.get_timing_cache()
    if timing_cache is None:
        return
    old = read_timing_cache(path)
    if old:
        cache = config.create_timing_cache(old)
        cache.combine(timing_cache, True)
        timing_cache = cache
    write_bytes_atomic(path, bytes(timing_cache.serialize()))


def create_config(builder: Any, network: Any, **kwargs: Any) -> Any:
    """Immediately build an ``IBuilderConfig``; keyword arguments as :class:`CreateConfig`."""
    return CreateConfig(**kwargs)(builder, network)
