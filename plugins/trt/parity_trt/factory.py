"""From parsed CLI options (``RunnerRequest.options``) to a chain of lazy loaders and a runner."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from parity.api import RunnerRequest, TensorMeta, UsageError, parse_shapes, parse_val_ranges
from parity_trt import options as opt
from parity_trt._trt import import_trt
from parity_trt.versions import major

ENGINE_SUFFIXES = (".engine", ".plan", ".trt")


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def input_shapes(options: Mapping[str, Any]) -> dict[str, tuple]:
    """``--input-shapes`` as the core hands it over: already a dict, or the raw strings."""
    value = options.get("input_shapes")
    if not value:
        return {}
    if isinstance(value, Mapping):
        return {str(k): tuple(v) for k, v in value.items()}

    return parse_shapes(opt.split_values(_as_list(value)))


def is_engine(model: str | None, kind: str | None) -> bool:
    return kind == "engine" or bool(model and model.lower().endswith(ENGINE_SUFFIXES))


def check_options(options: Mapping[str, Any]) -> None:
    """Everything that can be checked without TensorRT, before any work: fail at once, in one line."""
    opt.build_profiles(options.get("trt_min_shapes"), options.get("trt_opt_shapes"), options.get("trt_max_shapes"), input_shapes(options))
    opt.parse_pool_limits(_as_list(options.get("pool_limit")))
    outputs = opt.parse_outputs(_as_list(options.get("trt_outputs")))
    if outputs is None and options.get("trt_exclude_outputs"):
        raise UsageError("--trt-exclude-outputs only applies with --trt-outputs mark all")
    opt.check_polygraphy_options(options)


def _names(options: Mapping[str, Any], key: str) -> list[str] | None:
    """A names option: ``None`` when not given; ``[]`` when given with no value (Polygraphy: disable them all)."""
    values = _as_list(options.get(key))
    if not values:
        return None
    return [n for v in values for n in v.replace(",", " ").split()]


def parser_flags(options: Mapping[str, Any]) -> list[str] | None:
    """``--onnx-flags`` with ``--enable-uint8-asymmetric-quantization-dla``, and NATIVE_INSTANCENORM added for
    version- or hardware-compatible builds, which need it (Polygraphy's TrtOnnxFlagArgs does the same)."""
    flags = _names(options, "onnx_flags")
    lowered = [f.lower() for f in flags or []]
    if options.get("enable_uint8_asymmetric_quantization_dla") and "enable_uint8_and_asymmetric_quantization_dla" not in lowered:
        flags = [*(flags or []), "ENABLE_UINT8_AND_ASYMMETRIC_QUANTIZATION_DLA"]
    if flags is not None and (options.get("version_compatible") or options.get("hardware_compatibility_level")) \
            and "native_instancenorm" not in lowered:
        warnings.warn("version or hardware compatibility needs the NATIVE_INSTANCENORM parser flag; added to --onnx-flags", stacklevel=2)
        flags.append("NATIVE_INSTANCENORM")
    if flags is not None and options.get("plugin_instancenorm") and "native_instancenorm" in [f.lower() for f in flags]:
        raise UsageError("--plugin-instancenorm clears the NATIVE_INSTANCENORM parser flag that --onnx-flags sets; give one of them")
    return flags


def network_edits(options: Mapping[str, Any]) -> dict[str, Any]:
    """``ModifyNetwork`` keyword arguments of the layer, I/O type and format options."""
    dtypes: Any = options.get("all_tensor_datatypes") or opt.parse_named(options.get("tensor_datatypes"), "--tensor-datatypes", "tensor:dtype")
    formats: Any = _names(options, "all_tensor_formats") or opt.parse_formats(options.get("tensor_formats"))
    return {
        "outputs_by_type": _names(options, "trt_outputs_by_type") or (),
        "layer_precisions": opt.parse_named(options.get("layer_precisions"), "--layer-precisions", "layer:dtype"),
        "tensor_datatypes": dtypes or None,
        "tensor_formats": formats or None,
        "decomposable_attentions": bool(options.get("decomposable_attentions")),
    }


def network_loader(model: str, options: Mapping[str, Any]) -> Any:
    from parity.api import BytesFromPath  # here: it imports numpy, which building the command line never needs
    from parity_trt.network import ModifyNetwork, NetworkFromOnnxBytes, NetworkFromOnnxPath, NetworkFromScript
    from parity_trt.script import load_function

    func = options.get("trt_network_func")
    typed, plugins = bool(options.get("strongly_typed")), _as_list(options.get("trt_plugins"))
    data_dir = options.get("external_data_dir")
    parser = {"flags": parser_flags(options), "plugin_instancenorm": bool(options.get("plugin_instancenorm"))}
    if func or model.endswith(".py"):
        if parser["flags"] is not None or parser["plugin_instancenorm"]:
            raise UsageError("--onnx-flags/--plugin-instancenorm set ONNX parser flags; a network script uses no parser")
        network: Any = NetworkFromScript(model if not func or ":" in model else f"{model}:{func}")
    elif data_dir and os.path.realpath(data_dir) != os.path.dirname(os.path.realpath(model)):
        # --external-data-dir: the parser finds external data beside the path it is given, so it gets the model's
        # bytes (the graph, small) with a path in the data folder
        network = NetworkFromOnnxBytes(BytesFromPath(model), path=os.path.join(data_dir, os.path.basename(model)), strongly_typed=typed,
                                       plugins=plugins, **parser)
    else:
        network = NetworkFromOnnxPath(model, strongly_typed=typed, plugins=plugins, **parser)
    npps = options.get("trt_network_postprocess_script")
    post = [load_function(npps, "postprocess", "--trt-network-postprocess-script")] if npps else []
    return ModifyNetwork(
        network,
        outputs=opt.parse_outputs(_as_list(options.get("trt_outputs"))),
        exclude=_as_list(options.get("trt_exclude_outputs")),
        debug=[n for v in _as_list(options.get("mark_debug")) for n in v.split()],
        unfused=bool(options.get("mark_unfused_tensors_as_debug_tensors")),
        postprocess=post,
        **network_edits(options),
    )


def synthetic_calibration_data(options: Mapping[str, Any]) -> Callable[[Mapping[str, tuple[Any, tuple[int, ...]]]], Any]:
    """``--int8`` with neither data nor a cache calibrates on the run's synthetic inputs (``--seed``, ``--val-range``,
    ``--iterations``, ``--data-loader-backend-module``), as Polygraphy does, with a warning: ranges from random data rarely fit real inputs."""

    def feeds(inputs: Mapping[str, tuple[Any, tuple[int, ...]]]) -> Any:
        import numpy as np  # here: this module is imported to build the command line, which never loads numpy

        from parity.api import DataLoader

        warnings.warn("--int8 with no --data-loader-script, --load-inputs or --calibration-cache: calibrating on "
                      "random inputs, whose ranges rarely fit real data", stacklevel=2)
        meta = {name: TensorMeta(np.dtype(dtype), tuple(shape)) for name, (dtype, shape) in inputs.items()}
        return DataLoader(meta, seed=options.get("seed", 1), iterations=options.get("iterations") or 1,
                          val_range=parse_val_ranges(options.get("val_range") or ()), style="cli",
                          backend=options.get("data_loader_backend_module") or "numpy")  # --data-loader-backend-module

    return feeds


def calibration_data(options: Mapping[str, Any], model: str) -> Iterable[Mapping[str, Any]] | None:
    """Feeds for int8 calibration: the run's data-loader script or saved inputs; ``None`` uses the cache only."""
    if options.get("data_loader_script"):
        from parity.api import load_script_loader

        return load_script_loader(options["data_loader_script"])
    if options.get("load_inputs"):
        from parity.api import load_inputs

        return [feed for path in _as_list(options["load_inputs"]) for feed in load_inputs(path)]
    return None


def config_loader(model: str, options: Mapping[str, Any], extensions: list[Any]) -> Any:
    from parity_trt.config import ConfigFromScript, CreateConfig
    from parity_trt.script import load_function

    if options.get("trt_config_script"):
        return ConfigFromScript(load_function(options["trt_config_script"], "load_config", "--trt-config-script"), postprocess=extensions)
    calibrator = None
    if options.get("int8"):
        from parity_trt.calibrator import Calibrator

        data = calibration_data(options, model)
        if data is None and not options.get("calibration_cache"):
            data = synthetic_calibration_data(options)
        base = options.get("calibration_base_class")
        legacy = {k: options[k] for k in ("quantile", "regression_cutoff") if options.get(k) is not None}
        calibrator = Calibrator(data, cache=options.get("calibration_cache"), **({"base_class": base, **legacy} if base else {}))
    cpps = options.get("trt_config_postprocess_script")
    post = [*extensions]
    if cpps:
        post.append(load_function(cpps, "postprocess_config", "--trt-config-postprocess-script"))
    return CreateConfig(
        profiles=opt.build_profiles(options.get("trt_min_shapes"), options.get("trt_opt_shapes"), options.get("trt_max_shapes"),
                                    input_shapes(options)),
        fp16=bool(options.get("fp16")),
        bf16=bool(options.get("bf16")),
        int8=bool(options.get("int8")),
        fp8=bool(options.get("fp8")),
        tf32=options.get("tf32"),
        precision_constraints=options.get("precision_constraints"),
        calibrator=calibrator,
        pool_limits=opt.parse_pool_limits(_as_list(options.get("pool_limit"))),
        builder_optimization_level=options.get("builder_optimization_level"),
        load_timing_cache=options.get("load_timing_cache"),
        error_on_timing_cache_miss=bool(options.get("error_on_timing_cache_miss")),
        preview_features=[p for v in _as_list(options.get("preview_features")) for p in v.replace(",", " ").split()],
        flags=[f for v in _as_list(options.get("trt_flags")) for f in v.replace(",", " ").split()],
        profiling_verbosity=options.get("profiling_verbosity", "detailed"),
        progress=options.get("trt_progress"),
        postprocess=post,
        tactic_sources=_names(options, "tactic_sources"),
        use_dla=bool(options.get("use_dla")),
        allow_gpu_fallback=bool(options.get("allow_gpu_fallback")),
        max_aux_streams=options.get("max_aux_streams"),
        quantization_flags=_names(options, "quantization_flags"),
        hardware_compatibility_level=options.get("hardware_compatibility_level"),
        runtime_platform=options.get("runtime_platform"),
        tiling_optimization_level=options.get("tiling_optimization_level"),
        engine_capability=options.get("engine_capability"),
        restricted=bool(options.get("trt_safety_restricted")),
        **{name: bool(options.get(name)) for name in opt.FLAG_OPTIONS if name != "trt_safety_restricted"},
    )


def engine_loader(model: str, options: Mapping[str, Any], kind: str | None = None) -> Any:
    """The lazy chain for one model: engine file, or network -> config -> serialized engine (-> saved)."""
    from parity_trt.config import build_extensions
    from parity_trt.engine import EngineBytesFromNetwork, EngineFromPath, SaveEngine

    if is_engine(model, kind):
        return EngineFromPath(model, **runtime_kwargs(options))
    extensions = build_extensions(options)
    # CreateConfig runs their postprocess_config; EngineBytesFromNetwork runs the after_build of the extensions
    # its config holds, so they are not passed to it a second time (that ran after_build twice)
    config = config_loader(model, options, extensions)
    engine: Any = EngineBytesFromNetwork(network_loader(model, options), config, options.get("save_timing_cache"))
    if options.get("save_engine"):
        engine = SaveEngine(engine, options["save_engine"])
    return engine


def runtime_kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    """``EngineFromBytes`` keyword arguments of ``--load-runtime``, ``--dla-workspace-allocation-strategy`` and
    ``--version-compatible`` (its engines run their embedded lean runtime: host code)."""
    from parity_trt.engine import LoadRuntime

    kwargs: dict[str, Any] = {}
    if options.get("load_runtime"):
        kwargs["runtime"] = LoadRuntime(options["load_runtime"])
    if options.get("dla_workspace_allocation_strategy"):
        kwargs["dla_workspace_allocation_strategy"] = options["dla_workspace_allocation_strategy"]
    if options.get("version_compatible"):
        kwargs["host_code_allowed"] = True
    return kwargs


def make_runner(request: RunnerRequest) -> Any:
    """The ``Backend.make_runner`` of ``--trt``: checks options first, builds nothing until activation."""
    from parity_trt.network import apply_log_level
    from parity_trt.runner import TrtRunner

    if not request.model:
        raise UsageError("--trt needs a model (an ONNX file, an engine, or a network script)")
    check_options(request.options)
    opt.validate_precisions(request.options, major(import_trt()))
    apply_log_level()
    loader = engine_loader(request.model, request.options, request.model_kind)
    if not is_engine(request.model, request.model_kind) and runtime_kwargs(request.options):
        from parity_trt.engine import EngineFromBytes

        loader = EngineFromBytes(loader, "the engine just built", **runtime_kwargs(request.options))
    name = f"trt-runner-{request.index}" if request.index else None
    budget = opt.parse_weight_streaming_budget(request.options.get("weight_streaming_budget"))
    return TrtRunner(loader, name=name, optimization_profile=request.options.get("trt_profile_index"),
                     allocation_strategy=request.options.get("allocation_strategy"),
                     weight_streaming_budget=int(budget[1]) if budget and budget[0] == "bytes" else None,
                     weight_streaming_percent=budget[1] if budget and budget[0] == "percent" else None)


def convert(model: str, output: str, options: Mapping[str, Any], kind: str | None = None) -> str:
    """``parity convert model.onnx -o model.engine``: build and save; returns the output path."""
    from parity_trt.engine import SaveEngine
    from parity_trt.network import apply_log_level

    if is_engine(model, kind):
        raise UsageError(f"{model} is already a TensorRT engine")
    check_options(options)
    opt.validate_precisions(options, major(import_trt()))
    apply_log_level()
    SaveEngine(engine_loader(model, {**options, "save_engine": None}, kind), output)()
    return output
