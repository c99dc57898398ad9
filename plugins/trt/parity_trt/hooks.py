"""Parity hooks of the TensorRT plugin. Cheap on purpose: nothing imports tensorrt until a runner, engine
file or command is actually used, so ``parity --help`` and non-TensorRT commands work without TensorRT."""

from __future__ import annotations

from typing import Any

from parity import hookimpl
from parity_trt import hookspecs


def _make_runner(request: Any) -> Any:
    from parity_trt.factory import make_runner

    return make_runner(request)


def _read_engine_inputs(path: str) -> Any:
    from parity_trt.inspect import read_engine_inputs

    return read_engine_inputs(path)


def _describe_engine(path: str, show: Any = (), options: Any = None, layout: str = "parity") -> str:
    from parity_trt.inspect import describe_engine_file

    return describe_engine_file(path, show, options, layout)


def _read_onnx_inputs(path: str) -> Any:
    from parity.api import onnx_models  # here, not at the top: discovery imports this module and never needs them

    return onnx_models.read_inputs(path)


def _describe_onnx_as_network(path: str, show: Any = (), options: Any = None) -> str:
    from parity_trt.inspect import describe_onnx_as_network

    return describe_onnx_as_network(path, show, options)


def _read_script_inputs(path: str) -> Any:
    from parity_trt.inspect import read_script_inputs

    return read_script_inputs(path)


def _describe_script(path: str, show: Any = (), options: Any = None) -> str:
    from parity_trt.inspect import describe_script

    func = (options or {}).get("trt_network_func")
    return describe_script(f"{path}:{func}" if func else path, show, options)


@hookimpl
def parity_add_hookspecs(add):
    add(hookspecs)  # parity_trt_build_extension: other plugins' build extensions (docs/trt.md)


@hookimpl
def parity_register_backends(register):
    # here, not at the top: discovery imports this module and never needs these
    from parity.api import Backend
    from parity_trt._trt import INSTALL_HINT
    from parity_trt.options import runner_options

    register(
        Backend(
            name="trt",
            make_runner=_make_runner,
            help="Build and run a TensorRT 10.x/11.x engine (from ONNX, an engine file, or a network script).",
            options=runner_options(),
            model_kinds=("onnx", "engine", "trt-network-script"),
            requires=("tensorrt",),
            install_hint=INSTALL_HINT,
            mark_options=("trt_outputs", "mark_debug"),
            title="TensorRT",
            honours=("input_shapes",),  # the default optimisation profile, also with --load-inputs
            # --load-timing-cache is not a "read" here: loading and saving one timing cache updates it in place
            # (Polygraphy's --save-timing-cache appends), and a calibration cache is read and written by design
            writes=("save_engine", "save_timing_cache", "calibration_cache"),
        )
    )


@hookimpl
def parity_register_options(register):
    from parity.api import OptionSpec  # here: discovery imports this module and never needs the registry
    from parity_trt.options import check_inspect_options, check_precision_options, inspect_options, precision_options

    register(OptionSpec("trt-inspect", ("inspect model",), tuple(inspect_options()), check_inspect_options,
                        "TensorRT network and runtime options of inspect model", reads=("load_runtime",)))
    # debug precision builds each candidate into an engine with these (the "trt" converter), as Polygraphy's does
    register(OptionSpec("trt-precision", ("debug precision",), tuple(precision_options()), check_precision_options,
                        "TensorRT builder options of debug precision's engines", writes=("save_timing_cache",)))  # a timing cache loaded and saved is updated in place


@hookimpl
def parity_register_model_kinds(register):
    import click

    from parity.api import ModelKind  # here: discovery imports this module and never needs the registry
    from parity_trt.factory import ENGINE_SUFFIXES

    combine = click.Option(["--combine-tensor-info"], metavar="FILE", default=None,
                           help="engine, with --show layers: add min/max/avg of each tensor saved in FILE (parity run --trt "
                           "--mark-unfused-tensors-as-debug-tensors --save-outputs FILE) to the layers' inputs and outputs.")
    register(ModelKind(name="engine", suffixes=ENGINE_SUFFIXES, read_inputs=_read_engine_inputs, describe=_describe_engine, options=(combine,)))

    func = click.Option(["--trt-network-func"], default=None, help="trt-network-script: function building the network [load_network].")
    register(
        ModelKind(name="trt-network-script", suffixes=(".py",), read_inputs=_read_script_inputs, describe=_describe_script, options=(func,))
    )
    # no suffix: never detected; `inspect model x.onnx --display-as trt` shows an ONNX model through TensorRT's parser
    register(ModelKind(name="trt-network", suffixes=(), read_inputs=_read_onnx_inputs, describe=_describe_onnx_as_network))


def _convert(request: Any) -> None:
    from parity_trt.factory import convert

    convert(request.model, request.output, request.options)


@hookimpl
def parity_register_converters(register):
    from parity.api import ConverterSpec  # here: discovery imports this module and never needs the registry
    from parity_trt.factory import ENGINE_SUFFIXES
    from parity_trt.options import build_options

    register(
        ConverterSpec(
            name="trt",
            suffixes=ENGINE_SUFFIXES,
            convert=_convert,
            help="Build a TensorRT engine (builder options as for parity run --trt).",
            options=build_options(),
        )
    )


@hookimpl
def parity_describe_commands(register):
    # parity_trt.cli is imported only when the command runs or shows its --help
    text = "Print the TensorRT network a script builds (``file.py``, function from --trt-network-func)."
    register("inspect trt-network", "parity_trt.cli:inspect_network_command", text)
    register("inspect capability", "parity_trt.tools_cli:capability_cmd", "Which nodes of an ONNX model TensorRT's parser supports.")
    register("template", None, "Write Python scripts to start from (onnx-graphsurgeon, TensorRT network and config).")
    register("template trt-network", "parity_trt.tools_cli:trt_network_cmd", "Write a script that builds a TensorRT network.")
    register("template trt-config", "parity_trt.tools_cli:trt_config_cmd", "Write a script that makes a TensorRT builder config.")
