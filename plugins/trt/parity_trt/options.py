"""The ``--trt-*`` and builder options, and their parsing. Nothing here imports TensorRT.

Profiles: ``--trt-min-shapes/--trt-opt-shapes/--trt-max-shapes`` take ``name:[d0,d1,...]`` values. A value may
hold several shapes separated by spaces, and the flag may repeat; a new optimisation profile starts whenever
an input name repeats, so ``--trt-min-shapes x:[1,3] --trt-min-shapes x:[4,3]`` is two profiles and
``--trt-min-shapes a:[1] b:[2]`` is one.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence

import click

from parity.api import UsageError, did_you_mean, parse_shape, parse_size
from parity_trt.versions import STRONG_TYPING, trt_name

Shape = tuple[int, ...]

PRECISIONS = ("fp16", "bf16", "int8", "fp8")
# TensorRT names as strings go through trt_name() so the conformance walk checks them too.
PRECISION_FLAGS = {
    "fp16": trt_name("BuilderFlag.FP16"),
    "bf16": trt_name("BuilderFlag.BF16"),
    "int8": trt_name("BuilderFlag.INT8"),
    "fp8": trt_name("BuilderFlag.FP8"),
}
CONSTRAINTS = {
    "obey": trt_name("BuilderFlag.OBEY_PRECISION_CONSTRAINTS"),
    "prefer": trt_name("BuilderFlag.PREFER_PRECISION_CONSTRAINTS"),
    "none": None,
}
MARK_ALL = "mark-all"


# ---- shapes and profiles --------------------------------------------------------------------------------
_NEW_DICT = object()  # the default of Profile.shapes: a new dict for each profile


class Profile:
    """One optimisation profile: ``{input name: (min, opt, max)}``.

    Behaves as the ``@dataclass`` it was (``Profile()`` gets a new dict, ``==`` compares the shapes, the same
    ``repr``, unhashable), written out because every ``parity run`` and ``run --help`` imports this module and
    the decorator costs ~0.6 ms of start-up (with the ``dataclasses`` import, ~2 ms)."""

    __match_args__ = ("shapes",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, shapes: dict[str, tuple[Shape, Shape, Shape]] = _NEW_DICT) -> None:  # type: ignore[assignment]
        self.shapes = {} if shapes is _NEW_DICT else shapes

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}(shapes={self.shapes!r})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self.shapes == other.shapes  # type: ignore[attr-defined]
        return NotImplemented

    def __str__(self) -> str:
        return ", ".join(f"{n}: min={list(a)} opt={list(b)} max={list(c)}" for n, (a, b, c) in self.shapes.items())

    def add(self, name: str, min: Sequence[int], opt: Sequence[int], max: Sequence[int]) -> Profile:  # noqa: A002 - Polygraphy's names
        """Set input ``name``'s min/opt/max shapes (tuples or lists of ints; a shape-tensor input's VALUES), as
        Polygraphy's ``Profile.add``; returns the profile, so calls chain: ``Profile().add("a", ...).add("b", ...)``."""
        lo, mid, hi = (_int_dims(name, which, dims) for which, dims in (("min", min), ("opt", opt), ("max", max)))
        if not len(lo) == len(mid) == len(hi):
            raise UsageError(f"Profile.add: '{name}' has different ranks in min {list(lo)}, opt {list(mid)}, max {list(hi)}")
        if not all(a <= b <= c for a, b, c in zip(lo, mid, hi)):
            raise UsageError(f"Profile.add: '{name}' needs min <= opt <= max in every dim; got {list(lo)}, {list(mid)}, {list(hi)}")
        self.shapes[name] = (lo, mid, hi)
        return self


def _int_dims(name: str, which: str, dims: Sequence[int]) -> Shape:
    if isinstance(dims, (str, bytes)) or not hasattr(dims, "__iter__"):
        raise UsageError(f"Profile.add: '{name}' {which} must be a tuple or list of ints; got {dims!r}")
    out = []
    for d in dims:
        if isinstance(d, bool) or not hasattr(d, "__index__"):
            raise UsageError(f"Profile.add: '{name}' {which} {list(dims)} holds {d!r}; profiles need whole numbers")
        out.append(int(d))
    return tuple(out)


def split_values(values: Iterable[str] | str | None) -> list[str]:
    """Click gives one string per flag; a string may hold several space-separated ``name:[...]`` values."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for value in values:
        out.extend(part for part in re.split(r"\s+(?=[^\s\[\]]+:\[)", value.strip()) if part)
    return out


def _numeric(name: str, dims: tuple, option: str) -> Shape:
    if any(not isinstance(d, int) for d in dims):
        raise UsageError(f"{option}: '{name}' has named dims {list(dims)}; TensorRT profiles need numbers")
    return tuple(dims)  # type: ignore[return-value]


def group_profiles(values: Iterable[str] | str | None, option: str) -> list[dict[str, Shape]]:
    """Split parsed shapes into profiles: a repeated input name starts the next profile."""
    groups: list[dict[str, Shape]] = []
    for text in split_values(values):
        name, dims = parse_shape(text, option)
        if not groups or name in groups[-1]:
            groups.append({})
        groups[-1][name] = _numeric(name, dims, option)
    return groups


def build_profiles(
    min_shapes: Iterable[str] | str | None,
    opt_shapes: Iterable[str] | str | None,
    max_shapes: Iterable[str] | str | None,
    input_shapes: Mapping[str, tuple] | None = None,
) -> list[Profile]:
    """Profiles from the three ``--trt-*-shapes`` options, or one static profile from ``--input-shapes``.

    Checks: all three options given together, the same number of profiles and the same inputs in each,
    equal ranks, and ``min <= opt <= max`` in every dimension.
    """
    lists = {
        "--trt-min-shapes": group_profiles(min_shapes, "--trt-min-shapes"),
        "--trt-opt-shapes": group_profiles(opt_shapes, "--trt-opt-shapes"),
        "--trt-max-shapes": group_profiles(max_shapes, "--trt-max-shapes"),
    }
    given = [k for k, v in lists.items() if v]
    if not given:
        if not input_shapes:
            return []
        static = {n: _numeric(n, tuple(s), "--input-shapes") for n, s in input_shapes.items()}
        return [Profile({n: (s, s, s) for n, s in static.items()})]
    if len(given) != 3:
        missing = [k for k in lists if k not in given]
        raise UsageError(f"{', '.join(given)} given without {', '.join(missing)}; give min, opt and max together")
    mins, opts, maxs = lists.values()
    if not len(mins) == len(opts) == len(maxs):
        raise UsageError(
            f"profile counts differ: {len(mins)} min, {len(opts)} opt, {len(maxs)} max "
            "(a repeated input name starts a new profile)"
        )
    profiles = []
    for index, (lo, mid, hi) in enumerate(zip(mins, opts, maxs)):
        if not set(lo) == set(mid) == set(hi):
            raise UsageError(f"profile {index}: min/opt/max name different inputs: {sorted(lo)} / {sorted(mid)} / {sorted(hi)}")
        built = Profile()
        for name in lo:
            check_range(name, lo[name], mid[name], hi[name], index)
            built.shapes[name] = (lo[name], mid[name], hi[name])
        profiles.append(built)
    return profiles


def check_range(name: str, lo: Shape, mid: Shape, hi: Shape, index: int = 0) -> None:
    if not len(lo) == len(mid) == len(hi):
        raise UsageError(f"profile {index}: '{name}' has different ranks in min {list(lo)}, opt {list(mid)}, max {list(hi)}")
    for a, b, c in zip(lo, mid, hi):
        if not a <= b <= c:
            raise UsageError(f"profile {index}: '{name}' needs min <= opt <= max in every dim; got {list(lo)}, {list(mid)}, {list(hi)}")


def shape_value_count(dims: Sequence[int]) -> int:
    """How many values a shape-tensor input holds: 1 for a scalar, ``dims[0]`` for a vector.

    TensorRT fixes a shape tensor's dims at network definition and wants exactly this many values in each of
    min/opt/max (NvInferRuntime.h@v10.7.0:L2664-2669, ``IOptimizationProfile::setShapeValues``).
    """
    return int(dims[0]) if len(dims) >= 1 else 1


def complete_profile(partial: Profile, inputs: Mapping[str, Sequence[int]], index: int = 0,
                     shape_inputs: Collection[str] = ()) -> Profile:
    """Check a profile against the network's inputs (``-1`` = dynamic) and fill inputs it does not name.

    A dynamic input nobody gave a shape for gets 1 in its dynamic dims (with a warning naming the flag to set).
    For a shape-tensor input (in ``shape_inputs``) the profile holds its VALUES, not its shape: each of
    min/opt/max must have :func:`shape_value_count` values, and one nobody gave values for gets all ones.
    """
    for name in partial.shapes:
        if name not in inputs:
            raise UsageError(
                f"profile {index}: the network has no input '{name}'{did_you_mean(name, inputs)}; inputs: {', '.join(inputs)}"
            )
    filled = Profile(dict(partial.shapes))
    for name, dims in inputs.items():
        dims = tuple(int(d) for d in dims)
        if name in shape_inputs:
            count = shape_value_count(dims)
            if name in filled.shapes:
                for which, values in zip(("min", "opt", "max"), filled.shapes[name]):
                    if len(values) != count:
                        raise UsageError(
                            f"profile {index}: '{name}' is a shape tensor holding {count} value(s); "
                            f"its {which} values {list(values)} have {len(values)}"
                        )
                continue
            ones = (1,) * count
            warnings.warn(
                f"shape-tensor input '{name}' has no profile values; using {list(ones)} for min/opt/max "
                f"(set its VALUES with --trt-min-shapes/--trt-opt-shapes/--trt-max-shapes or --input-shapes)",
                stacklevel=2,
            )
            filled.shapes[name] = (ones, ones, ones)
            continue
        if name in filled.shapes:
            for which, shape in zip(("min", "opt", "max"), filled.shapes[name]):
                if len(shape) != len(dims):
                    raise UsageError(f"profile {index}: '{name}' has rank {len(dims)} {list(dims)}, but {which} shape {list(shape)}")
                for want, got in zip(dims, shape):
                    if want >= 0 and want != got:
                        raise UsageError(f"profile {index}: '{name}' has static dims {list(dims)}; {which} shape {list(shape)} differs")
            continue
        fixed = tuple(d if d >= 0 else 1 for d in dims)
        if fixed != dims:
            warnings.warn(
                f"input '{name}' has dynamic shape {list(dims)} and no profile shape; using {list(fixed)} for min/opt/max "
                f"(set --trt-min-shapes/--trt-opt-shapes/--trt-max-shapes or --input-shapes)",
                stacklevel=2,
            )
        filled.shapes[name] = (fixed, fixed, fixed)
    return filled


# ---- sizes and pools ------------------------------------------------------------------------------------
def parse_pool_limits(values: Iterable[str] | None) -> dict[str, int]:
    """``['workspace:1G', 'tactic_dram:256M']`` -> ``{'WORKSPACE': 1073741824, ...}`` (names checked later)."""
    pools: dict[str, int] = {}
    for value in split_values(values):
        name, sep, size = value.rpartition(":")
        if not sep or not name:
            raise UsageError(f"--pool-limit: cannot read '{value}'; write pool:size, e.g. workspace:1G")
        pools[name.strip().upper()] = parse_size(size, "--pool-limit")
    return pools


# ---- outputs to mark ------------------------------------------------------------------------------------
def parse_outputs(values: Iterable[str] | str | None) -> list[str] | str | None:
    """``--trt-outputs`` -> a list of tensor names, :data:`MARK_ALL` for every tensor, or ``None`` (keep outputs).

    ``mark all``, ``'*'`` and ``all`` (as one value or as two flags' values) all mean every tensor.
    """
    items = split_values(values) if not isinstance(values, str) else values.split()
    items = [v for value in items for v in value.split()]
    if not items:
        return None
    lowered = [v.lower() for v in items]
    if lowered in (["mark", "all"], ["*"], ["all"], ["mark-all"]):
        return MARK_ALL
    if "*" in lowered or "all" in lowered and "mark" in lowered:
        raise UsageError("--trt-outputs: 'mark all' (or '*') marks every tensor and cannot be combined with names")
    return items


# ---- user scripts ---------------------------------------------------------------------------------------
# ---- click options --------------------------------------------------------------------------------------
def _opt(*names: str, **kwargs) -> click.Option:
    return click.Option(list(names), **kwargs)


def _many(*names: str, **kwargs) -> click.Option:
    """A repeatable option that also takes space-separated values after one flag (the core's GreedyOption)."""
    try:
        from parity.api import GreedyOption
    except ImportError:  # an older core: one value per flag
        return click.Option(list(names), multiple=True, **kwargs)
    return GreedyOption(list(names), **kwargs)


def build_options() -> list[click.Option]:
    """Builder/network options shared by ``parity run --trt`` and ``parity convert``."""
    return [
        _many("--trt-min-shapes", help="Profile min shapes name:[d0,...]; a repeated name starts a new profile."),
        _many("--trt-opt-shapes", help="Profile opt shapes name:[d0,...]."),
        _many("--trt-max-shapes", help="Profile max shapes name:[d0,...]."),
        _opt("--fp16", is_flag=True, default=False, help="Allow fp16 kernels (TensorRT 10 only; 11 is strongly typed)."),
        _opt("--bf16", is_flag=True, default=False, help="Allow bf16 kernels (TensorRT 10 only)."),
        _opt("--int8", is_flag=True, default=False, help="Allow int8 kernels, calibrating if needed (TensorRT 10 only)."),
        _opt("--fp8", is_flag=True, default=False, help="Allow fp8 kernels (TensorRT 10 only)."),
        _opt("--tf32/--no-tf32", default=None, help="Allow or forbid TF32 for fp32 math (TensorRT's default: allowed)."),
        _opt("--strongly-typed", is_flag=True, default=False, help="Build a strongly typed network (always the case on TensorRT 11)."),
        _opt(
            "--precision-constraints",
            type=click.Choice(["obey", "prefer", "none"]),
            default=None,
            help="Layer precision constraints (TensorRT 10 only).",
        ),
        _opt(
            "--calibration-cache",
            type=click.Path(dir_okay=False),
            default=None,
            help="Int8 calibration cache: used if present and accepted, else written after a calibration that succeeds "
            "(never after one that fails). Needs --int8 (refused without it); TensorRT 10 only.",
        ),
        _many("--pool-limit", "--memory-pool-limit", "pool_limit", help="Memory pool limit pool:size, e.g. workspace:1G (repeatable)."),
        _opt("--builder-optimization-level", type=click.IntRange(0, 5), default=None, help="Builder optimisation level 0-5."),
        _opt("--load-timing-cache", type=click.Path(dir_okay=False), default=None, help="Timing cache to start from (missing file: empty)."),
        _opt("--save-timing-cache", type=click.Path(dir_okay=False), default=None, help="Write the timing cache here after the build."),
        _opt("--error-on-timing-cache-miss", is_flag=True, default=False, help="Fail the build on a timing cache miss."),
        _many("--preview-features", help="Preview features to enable, e.g. aliased_plugin_io_10_03."),
        _many("--trt-flags", help="Extra BuilderFlag names to set, e.g. sparse_weights (checked against your TensorRT)."),
        _opt(
            "--profiling-verbosity",
            type=click.Choice(["detailed", "layer_names_only", "none"]),
            default="detailed",
            show_default=True,
            help="How much layer detail the engine keeps (the inspector needs detailed).",
        ),
        _many("--plugins", "trt_plugins", type=click.Path(dir_okay=False), help="TensorRT plugin libraries to load."),
        _many(
            "--trt-outputs",
            help="Mark tensors as network outputs: names, or 'mark all' / '*' for every tensor (breaks fusions).",
        ),
        _many("--trt-exclude-outputs", help="Tensors to leave out of --trt-outputs mark all."),
        _many("--mark-debug", help="Capture these tensors through IDebugListener without changing the engine's outputs."),
        _opt(
            "--mark-unfused-tensors-as-debug-tensors",
            is_flag=True,
            default=False,
            help="Capture every tensor that survives fusion (TensorRT 10.16+); fusions are kept.",
        ),
        _opt("--trt-network-func", default=None, help="Build the network with file.py[:load_network] (the model path is the .py)."),
        _opt("--trt-network-postprocess-script", "--trt-npps", default=None, help="Edit the network: file.py[:postprocess](network)."),
        _opt(
            "--trt-config-postprocess-script",
            "--trt-cpps",
            default=None,
            help="Edit the builder config: file.py[:postprocess_config](builder, network, config).",
        ),
        _opt("--trt-progress/--no-trt-progress", default=None, help="Show a build progress bar (default: when stderr is a terminal)."),
        *builder_flag_options(),
        *network_edit_options(),
    ]


# ---- Polygraphy's other builder, parser and network options ---------------------------------------------------
# flag option -> the BuilderFlag it sets (config.set_flag), as Polygraphy's CreateConfig does
FLAG_OPTIONS = {
    "sparse_weights": trt_name("BuilderFlag.SPARSE_WEIGHTS"),
    "version_compatible": trt_name("BuilderFlag.VERSION_COMPATIBLE"),
    "exclude_lean_runtime": trt_name("BuilderFlag.EXCLUDE_LEAN_RUNTIME"),
    "trt_safety_restricted": trt_name("BuilderFlag.SAFETY_SCOPE"),
    "refittable": trt_name("BuilderFlag.REFIT"),
    "strip_plan": trt_name("BuilderFlag.STRIP_PLAN"),
    "direct_io": trt_name("BuilderFlag.DIRECT_IO"),
    "disable_compilation_cache": trt_name("BuilderFlag.DISABLE_COMPILATION_CACHE"),
    "weight_streaming": trt_name("BuilderFlag.WEIGHT_STREAMING"),
}
# option -> the TensorRT enum its value names (case-insensitive), set as an IBuilderConfig property
ENUM_OPTIONS = {
    "hardware_compatibility_level": ("HardwareCompatibilityLevel", "hardware_compatibility_level"),
    "runtime_platform": ("RuntimePlatform", "runtime_platform"),
    "tiling_optimization_level": ("TilingOptimizationLevel", "tiling_optimization_level"),
    "engine_capability": ("EngineCapability", "engine_capability"),
}
# the options that configure the builder config: refused with --trt-config-script, whose function makes the config
CONFIG_PARAMS = (
    "fp16", "bf16", "int8", "fp8", "tf32", "precision_constraints", "calibration_cache", "pool_limit",
    "builder_optimization_level", "load_timing_cache", "error_on_timing_cache_miss", "preview_features", "trt_flags",
    "trt_config_postprocess_script", "tactic_sources", "use_dla", "allow_gpu_fallback", "max_aux_streams",
    "quantization_flags", "calibration_base_class", "quantile", "regression_cutoff", "trt_min_shapes", "trt_opt_shapes",
    "trt_max_shapes", *FLAG_OPTIONS, *ENUM_OPTIONS,
)


def _flag(name: str, help: str) -> click.Option:  # noqa: A002 - click's keyword
    return _opt(name, is_flag=True, default=False, help=help)


def builder_flag_options() -> list[click.Option]:
    """Polygraphy's builder-config options that Parity's own names above do not cover."""
    empty = {"is_flag": False, "flag_value": ""}  # given with no value: '' (Polygraphy: disable them all)
    return [
        _many("--tactic-sources", **empty,
              help="Tactic sources to allow (TacticSource names, e.g. cublas cudnn); no value: none. Default: TensorRT's."),
        _flag("--use-dla", "Build for DLA core 0 as the default device (DeviceType.DLA)."),
        _flag("--allow-gpu-fallback", "With --use-dla: layers DLA cannot run fall back to the GPU (BuilderFlag.GPU_FALLBACK)."),
        _flag("--sparse-weights", "Allow sparse-weight kernels (BuilderFlag.SPARSE_WEIGHTS)."),
        _flag("--version-compatible", "Build an engine later TensorRT versions can run (BuilderFlag.VERSION_COMPATIBLE)."),
        _flag("--exclude-lean-runtime", "With --version-compatible: leave the lean runtime out of the plan (load one with --load-runtime)."),
        _flag("--trt-safety-restricted", "Check the network against the safety scope (BuilderFlag.SAFETY_SCOPE)."),
        _flag("--refittable", "Build an engine whose weights can be refitted (BuilderFlag.REFIT)."),
        _flag("--strip-plan", "Leave refittable weights out of the plan (BuilderFlag.STRIP_PLAN)."),
        _flag("--direct-io", "No reformatting at I/O tensors with user formats (BuilderFlag.DIRECT_IO)."),
        _flag("--disable-compilation-cache", "Do not cache JIT-compiled code (BuilderFlag.DISABLE_COMPILATION_CACHE)."),
        _flag("--weight-streaming", "Build a weight-streamable engine (needs a strongly typed network; see --weight-streaming-budget)."),
        _opt("--hardware-compatibility-level", default=None, help="HardwareCompatibilityLevel name, e.g. ampere_plus."),
        _opt("--runtime-platform", default=None, help="RuntimePlatform name the engine runs on, e.g. same_as_build, windows_amd64."),
        _opt("--tiling-optimization-level", default=None, help="TilingOptimizationLevel name: none, fast, moderate, full."),
        _opt("--engine-capability", default=None, help="EngineCapability name: standard, safety, dla_standalone."),
        _opt("--max-aux-streams", type=click.IntRange(min=0), default=None, help="Most auxiliary streams TensorRT may use."),
        _many("--quantization-flags", **empty,
              help="QuantizationFlag names to set (the others are cleared); no value: clear all (TensorRT 10 only)."),
        _opt("--calibration-base-class", "--calib-base-cls", default=None,
             help="Calibrator base class with --int8: IInt8EntropyCalibrator2 (default), IInt8MinMaxCalibrator, "
             "IInt8EntropyCalibrator or IInt8LegacyCalibrator (TensorRT 10 only)."),
        _opt("--quantile", type=float, default=None, help="IInt8LegacyCalibrator's quantile (needs --calibration-base-class IInt8LegacyCalibrator)."),
        _opt("--regression-cutoff", type=float, default=None,
             help="IInt8LegacyCalibrator's regression cutoff (needs --calibration-base-class IInt8LegacyCalibrator)."),
        _opt("--trt-config-script", default=None,
             help="Make the builder config with file.py[:load_config](builder, network) -> IBuilderConfig (no other config options)."),
    ]


def network_edit_options() -> list[click.Option]:
    """Polygraphy's parser and network options: ONNX parser flags, per-layer precision, I/O types and formats."""
    return [
        _many("--onnx-flags", help="OnnxParserFlag names to set on the ONNX parser, e.g. native_instancenorm."),
        _flag("--plugin-instancenorm", "Clear OnnxParserFlag.NATIVE_INSTANCENORM: InstanceNormalization runs as the plugin."),
        _flag("--enable-uint8-asymmetric-quantization-dla",
              "Set OnnxParserFlag.ENABLE_UINT8_AND_ASYMMETRIC_QUANTIZATION_DLA (Polygraphy's older spelling of --onnx-flags)."),
        _many("--trt-outputs-by-type", help="Mark the outputs of every layer of these LayerType names, e.g. convolution activation."),
        _many("--layer-precisions", help="Per-layer compute precision layer:dtype, e.g. conv1:float16; TensorRT keeps "
              "it with --precision-constraints obey/prefer (TensorRT 10 only)."),
        _flag("--decomposable-attentions", "Mark every attention as decomposable (IAttention.decomposable; TensorRT 10.16+)."),
        _many("--tensor-datatypes", "--tensor-dtypes", "tensor_datatypes", help="Network I/O tensor types name:dtype, e.g. x:float16."),
        _opt("--all-tensor-datatypes", "--all-tensor-dtypes", "all_tensor_datatypes", default=None,
             help="One type for every network I/O tensor, e.g. float16 (wins over --tensor-datatypes)."),
        _many("--tensor-formats", help="Allowed formats of network I/O tensors name:[fmt,...], e.g. x:[linear,chw4]."),
        _many("--all-tensor-formats", help="Allowed formats of every network I/O tensor, e.g. linear chw4 (wins over --tensor-formats)."),
    ]


def runtime_options() -> list[click.Option]:
    """How a built or loaded engine is deserialized (``parity run --trt`` and ``inspect model``)."""
    return [
        _opt("--load-runtime", type=click.Path(dir_okay=False), default=None,
             help="Deserialize with the runtime in this shared library (for --version-compatible --exclude-lean-runtime engines)."),
        _opt("--dla-workspace-allocation-strategy", default=None,
             help="DLAWorkspaceAllocationStrategy name when deserializing: default, shared_static (TensorRT 11.3+)."),
    ]


# the network options of build_options() that ``inspect model --display-as trt-network`` applies too
INSPECT_NETWORK_OPTIONS = ("--strongly-typed", "--plugins", "--mark-debug", "--mark-unfused-tensors-as-debug-tensors",
                           "--trt-network-postprocess-script")


def inspect_options() -> list[click.Option]:
    """``inspect model``: the network options (with ``--display-as trt-network`` or a network script) and the
    runtime options (with an engine), as Polygraphy's inspect model has them."""
    shared = [o for o in build_options() if o.opts[0] in INSPECT_NETWORK_OPTIONS]
    edits = [o for o in network_edit_options() if o.opts[0] != "--trt-outputs-by-type"]
    return [*shared, *edits, *runtime_options()]


def check_inspect_options(command: str, params: Mapping[str, object], ctx: object = None) -> None:
    """Refuse, before any work, TensorRT network options where no TensorRT network is shown and runtime options
    where no engine is loaded (they would have no effect)."""
    names = {o.name: o.opts[0] for o in inspect_options()}
    runtime = {o.name for o in runtime_options()}

    def given(name: str) -> bool:
        return params.get(name) not in (None, False, (), [], "")

    network_flags = [flag for name, flag in names.items() if name not in runtime and given(name)]
    runtime_flags = [flag for name, flag in names.items() if name in runtime and given(name)]
    model = str(params.get("model") or "")
    kind = str(params.get("model_type") or "")
    engine = kind == "engine" or model.lower().endswith((".engine", ".plan", ".trt"))
    network = (params.get("display_as") in ("trt", "trt-network") or kind in ("trt-network", "trt-network-script")
               or model.endswith(".py"))
    if (network_flags or runtime_flags) and params.get("as_json"):
        raise UsageError(f"{', '.join(network_flags + runtime_flags)}: --json shows the model's inputs as read, without them")
    if network_flags and not network:
        raise UsageError(f"{', '.join(network_flags)}: these edit a TensorRT network; add --display-as trt to show one")
    if runtime_flags and not engine:
        raise UsageError(f"{', '.join(runtime_flags)}: these apply when loading a TensorRT engine; {model or 'the model'} is not one")


def _items(values: Iterable[str] | str | None) -> list[str]:
    """Names given space- or comma-separated, over one or more flags."""
    return [v for value in split_values(values) for v in value.replace(",", " ").split()]


def parse_named(values: Iterable[str] | str | None, option: str, what: str) -> dict[str, str]:
    """``['conv1:float16', 'x:int8']`` -> ``{'conv1': 'float16', 'x': 'int8'}`` (the last ':' splits: names may hold ':')."""
    out: dict[str, str] = {}
    for value in split_values(values):
        for item in value.split() if "[" not in value else [value]:
            name, sep, kind = item.rpartition(":")
            if not sep or not name or not kind:
                raise UsageError(f"{option}: cannot read '{item}'; write {what}")
            out[name] = kind
    return out


def parse_formats(values: Iterable[str] | str | None, option: str = "--tensor-formats") -> dict[str, list[str]]:
    """``['x:[linear,chw4]']`` -> ``{'x': ['linear', 'chw4']}``."""
    out: dict[str, list[str]] = {}
    for value in split_values(values):
        name, sep, rest = value.partition(":[")
        if not sep or not name or not rest.endswith("]"):
            raise UsageError(f"{option}: cannot read '{value}'; write name:[format,...], e.g. x:[linear,chw4]")
        out[name] = [f for f in rest[:-1].replace(",", " ").split() if f]
    return out


def parse_weight_streaming_budget(value: str | None) -> tuple[str, float] | None:
    """``'50%'`` -> ``('percent', 50.0)``; ``'1G'``, ``'-1'``, ``'-2'`` -> ``('bytes', n)``; ``None`` when not given."""
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    if text.endswith("%"):
        try:
            percent = float(text[:-1])
        except ValueError:
            percent = -1.0
        if not 0 <= percent <= 100:
            raise UsageError(f"--weight-streaming-budget: '{text}' is not a percentage from 0% to 100%")
        return ("percent", percent)
    if text in ("-1", "-2"):
        return ("bytes", int(text))
    return ("bytes", parse_size(text, "--weight-streaming-budget"))


def check_polygraphy_options(options: Mapping[str, object]) -> None:
    """Combinations Polygraphy refuses or that would have no effect (so are refused), checked before any work."""
    def given(name: str) -> bool:
        value = options.get(name)
        return value not in (None, False, (), [], "")

    if given("exclude_lean_runtime") and not given("version_compatible"):
        raise UsageError("--exclude-lean-runtime needs --version-compatible")
    if given("allow_gpu_fallback") and not given("use_dla"):
        raise UsageError("--allow-gpu-fallback applies only with --use-dla")
    for name in ("quantile", "regression_cutoff"):
        if given(name) and str(options.get("calibration_base_class") or "").lower() != "iint8legacycalibrator":
            raise UsageError(f"--{name.replace('_', '-')} applies only with --calibration-base-class IInt8LegacyCalibrator")
    if given("calibration_base_class") and not given("int8"):
        raise UsageError("--calibration-base-class needs --int8 (without it TensorRT does not calibrate)")
    if given("trt_config_script"):
        clash = [f"--{p.replace('_', '-')}" for p in CONFIG_PARAMS if p != "tf32" and given(p) or p == "tf32" and options.get(p) is not None]
        if clash:
            raise UsageError(f"--trt-config-script makes the whole builder config; {', '.join(clash)} would not apply: set them in the script")
    parse_named(options.get("layer_precisions"), "--layer-precisions", "layer:dtype, e.g. conv1:float16")
    parse_named(options.get("tensor_datatypes"), "--tensor-datatypes", "tensor:dtype, e.g. x:float16")
    parse_formats(options.get("tensor_formats"))
    parse_weight_streaming_budget(options.get("weight_streaming_budget"))  # type: ignore[arg-type]


def runner_options() -> list[click.Option]:
    """Options of ``parity run --trt`` on top of the builder options."""
    return [
        *build_options(),
        _opt("--save-engine", type=click.Path(dir_okay=False), default=None, help="Save the built engine here."),
        _opt("--optimization-profile", "trt_profile_index", type=int, default=None, help="Profile index to run with (default: the first that fits)."),
        _opt("--allocation-strategy", type=click.Choice(["static", "profile", "runtime"]), default=None,
             help="Activation memory: static (the most any profile needs, TensorRT's default), profile (what the profile "
             "in use needs) or runtime (what the current input shapes need)."),
        _opt("--weight-streaming-budget", default=None,
             help="GPU memory for the weights of a --weight-streaming engine: bytes (K/M/G suffixes), N%% of the "
             "streamable weights, -1 (TensorRT decides) or -2 (no streaming)."),
        *runtime_options(),
    ]


# ---- parity debug precision: each candidate (an ONNX model) built into an engine with these ----------------------
# debug precision's own flags (--fp16 is its -p float16; --int8/--tf32 it passes to the builder when it builds engines)
# and what cannot apply to an ONNX candidate (--trt-network-func builds from a script, not the candidate)
PRECISION_OWN = ("--fp16", "--int8", "--tf32", "--trt-network-func")


def precision_options() -> list[click.Option]:
    """The builder options of ``parity debug precision`` (the same definitions as ``run --trt``/``convert``/``debug
    build``): given any of them, each candidate is also built into an engine with them, for the check."""
    return [o for o in build_options() if o.opts[0] not in PRECISION_OWN]


def check_precision_options(command: str, params: Mapping[str, object], ctx: object = None) -> None:
    """Refuse, before any work, what cannot mean anything for debug precision's engines."""
    if params.get("layer_precisions"):
        raise UsageError("--layer-precisions: debug precision computes each node's precision (the fp32 set it searches) "
                         "and writes it into each candidate; give the other builder flags for its engines")
    check_polygraphy_options({**params, "tf32": params.get("tf32") or None})


def validate_precisions(options: Mapping[str, object], trt_major: int) -> list[str]:
    """Precision flags requested, or a :class:`UsageError` on TensorRT 11, which has no such flags."""
    asked = [p for p in PRECISIONS if options.get(p)]
    if options.get("precision_constraints") not in (None, "none"):
        asked.append(f"precision-constraints {options['precision_constraints']}")
    if options.get("layer_precisions"):
        asked.append("layer-precisions")
    if trt_major >= 11 and asked:
        flags = ", ".join(f"--{a}" for a in asked)
        raise UsageError(f"{flags}: not available on TensorRT {trt_major}.x. {STRONG_TYPING}")
    if asked and options.get("strongly_typed"):
        # A strongly typed network takes its precision from its tensor types; TensorRT 10 does not allow the
        # builder's precision flags with it (trtexec drops them: samples/common/sampleOptions.cpp@v10.7.0:L1235-1250).
        flags = ", ".join(f"--{a}" for a in asked)
        raise UsageError(
            f"--strongly-typed with {flags}: a strongly typed network takes precision from the model's tensor types, "
            "so TensorRT does not allow precision flags with it; drop one of them"
        )
    if options.get("calibration_cache") and not options.get("int8"):
        if trt_major >= 11:
            raise UsageError("--calibration-cache: TensorRT 11 has no int8 calibration; quantize with Q/DQ nodes instead")
        # without --int8 TensorRT never calibrates nor reads the cache: the engine would silently not be int8
        raise UsageError("--calibration-cache needs --int8 (without it TensorRT builds no int8 engine and ignores the cache)")
    if options.get("weight_streaming") and trt_major < 11 and not options.get("strongly_typed"):
        # TensorRT streams weights only of strongly typed networks (NvInfer.h@v10.7.0 BuilderFlag::kWEIGHT_STREAMING)
        raise UsageError("--weight-streaming needs --strongly-typed on TensorRT 10")
    return [p for p in PRECISIONS if options.get(p)]


# ---- logging --------------------------------------------------------------------------------------------
LOG_ENV = "PARITY_TRT_LOG"
LOG_LEVELS = ("verbose", "info", "warning", "error", "internal_error")


def log_severity(environ: Mapping[str, str] | None = None) -> str | None:
    """``PARITY_TRT_LOG`` as a TensorRT ``ILogger.Severity`` member name (``'VERBOSE'``...), ``None`` when unset.

    A value that is not a level is a :class:`UsageError` naming the choices.
    """
    value = (os.environ if environ is None else environ).get(LOG_ENV, "").strip()
    if not value:
        return None
    wanted = value.lower().replace("-", "_")
    if wanted not in LOG_LEVELS:
        raise UsageError(f"{LOG_ENV}={value}: not a TensorRT log level{did_you_mean(wanted, LOG_LEVELS)}; choices: {', '.join(LOG_LEVELS)}")
    return wanted.upper()
