"""``parity run``: run a model on one or more backends and compare the outputs."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from parity.cli import options as opts
from parity.cli.common import verbosity_options
from parity.cli.owners import backend_setting_owner
from parity.cli.parsing import BackendFlag, GreedyOption, ParityCommand
from parity.cli.tensorflow_flags import tensorflow_options
from parity.errors import UsageError
from parity.from_options import (  # the engine's building blocks, re-exported for plugins that import them from here
    detect_model_kind,
    drop_extra_tensors,
    make_compare_funcs,
    make_data_loader,
    refuse_overwrite_inputs,
)
from parity.plugins import get_registry
from parity.registry import Backend, DataRequest

if TYPE_CHECKING:  # pragma: no cover
    from parity.run_engine import RunRequest


def add_to(cli: click.Group) -> None:
    cli.add_command(make_command())


def make_command() -> click.Command:
    """``parity run``, built when it is used: its options come from the registry (backends, metrics)."""
    registry = get_registry()
    params = [click.Argument(["model"], required=False), *opts.model_options(), *opts.onnx_options(), *opts.external_data_read_options(ignore=True), *opts.data_options()]
    params += opts.onnx_load_options()  # --shape-inference, --no-onnxruntime-shape-inference, --fp-to-fp16: on the model the runners load
    params += [*opts.compare_options(registry), opts.marking_check_option(), *run_options(), *opts.backend_params(registry)]
    params += tensorflow_options()  # hidden: each refuses in one line (Parity has no TensorFlow backend)
    _polygraphy_spellings(params)
    command = ParityCommand(
        "run",
        params=params,
        callback=click.pass_context(run_command),
        help=RUN_HELP,
        short_help="Run a model on backends and compare the outputs.",
        context_settings={"max_content_width": 110},
    )
    return verbosity_options(command)


RUN_HELP = """Run MODEL with each backend flag given (in order) and compare each runner with the next.

\b
  parity run model.onnx --onnxrt --onnxrt=graph-optimization-level=disable
  parity run model.onnx --onnxrt --save-inputs in.npz --save-outputs golden.npz
  parity run model_fp16.onnx --onnxrt --load-inputs in.npz --load-outputs golden.npz --tolerance-preset fp16
  parity run big.onnx --onnxrt --onnxrt=graph-optimization-level=disable --onnx-outputs mark all

Per-runner settings follow the flag: --onnxrt=OPTION=VALUE[,OPTION=VALUE]. Runners run one after the
other: each is released before the next loads, so a run holds one model in memory at a time.
Exit codes: 0 passed, 1 mismatch, 2 usage error, 3 model or backend failure."""


def run_options() -> list[click.Parameter]:
    """How the run goes and what else it writes: Polygraphy's run flags that are not a backend's or a metric's."""
    return [
        GreedyOption(
            ["--onnx-outputs-by-type"], metavar="OP",
            help="Also mark the outputs of every node of these op types (case-insensitive), e.g. Conv Add.",
        ),
        click.Option(
            ["--save-onnx"], type=click.Path(dir_okay=False), default=None, metavar="PATH",
            help="Save the ONNX model as the runners load it (outputs marked) to PATH; checked (onnx.checker, onnxruntime) before it appears.",
        ),
        *opts.external_data_write_options(),
        click.Option(
            ["--warm-up"], type=click.IntRange(min=0), default=0, metavar="N",
            help="Untimed inferences on the first input before each runner's iterations; not compared or saved.",
        ),
        click.Option(["--use-subprocess"], is_flag=True, help="Run each runner in a process of its own (a crash there is one line, exit 3)."),
        click.Option(
            ["--sequential-runners"], is_flag=True, expose_value=False,
            help="Polygraphy's mode, and Parity's only one: each runner runs every iteration and is released before the next loads.",
        ),
        click.Option(
            ["--save-input-blob"], is_flag=False, flag_value=".", default=None, metavar="[DIR]", type=click.Path(file_okay=False),
            help="Save each input as raw bytes: DIR/<iteration, 10 digits>/<name>.bin (ndarray.tofile) [DIR: .].",
        ),
        click.Option(
            ["--gen-script", "--gen"], metavar="FILE", default=None,
            help="Write a Python script (Parity's API) that does what this command would, and exit; - prints it.",
        ),
    ]  # fmt: skip


def _polygraphy_spellings(params: list[click.Parameter]) -> None:
    """Polygraphy's spellings of shared options, on ``run`` only (its ``--save-input-data``, ``--external-data-path``)
    and its ``--iterations 0`` (a run that infers nothing and compares nothing: it passes)."""
    by_name = {p.name: p for p in params}
    for name, alias in (("save_inputs", "--save-input-data"), ("save_external_data", "--external-data-path")):
        option = by_name.get(name)
        if isinstance(option, click.Option) and alias not in option.opts:
            option.opts.append(alias)
    iterations = by_name.get("iterations")
    if isinstance(iterations, click.Option):
        iterations.type = click.IntRange(min=0)


__all__ = [
    "DataRequest",
    "add_to",
    "cast_runner_settings",
    "detect_model_kind",
    "drop_extra_tensors",
    "make_compare_funcs",
    "make_data_loader",
    "refuse_overwrite_inputs",
    "run_command",
    "run_request",
]


# --- per-runner settings: click casts them ---------------------------------------------------------------


def cast_runner_settings(backend: Backend, overrides: Mapping[str, str | list[str]], ctx: click.Context) -> dict[str, Any]:
    """Per-runner ``--flag=opt=value`` settings, converted by the option's own click type. A repeatable option
    may be given more than once (``--onnxrt=custom-ops=a.so,custom-ops=b.so``); any other, once."""
    by_name = {p.name: p for p in ctx.command.params if p.name}
    out = {}
    for key, raw in overrides.items():
        param = by_name.get(key) or by_name.get(f"{backend.name.replace('-', '_')}_{key}")
        if param is None:
            raise UsageError(f"{backend.cli_flag}: unknown setting '{key}'")
        refused = backend_setting_owner(backend, param)  # --onnxrt=fp16=1: the option rule, per runner
        if refused:
            raise UsageError(refused)
        values = raw if isinstance(raw, list) else [raw]
        if getattr(param, "multiple", False):
            value: Any = values
        elif len(values) > 1:
            raise UsageError(f"{backend.cli_flag}: setting '{key}' is given {len(values)} times; it takes one value")
        else:
            value = values[0]
        out[param.name] = param.type_cast_value(ctx, value)
    return out


# --- the command: parse -> request -> engine -> print ---------------------------------------------------


def run_request(ctx: click.Context, model: str | None, params: Mapping[str, Any]) -> RunRequest:
    """The typed request the command line describes: backends in flag order with their settings cast by click,
    the core's options as fields, each plugin's options in its own group, and each option's flag as the
    command spells it (the engine names options in messages through these, never from a parameter name)."""
    from parity.run_engine import CORE_OPTIONS, RunRequest

    registry = get_registry()
    runners = [(name, cast_runner_settings(registry.backend(name), overrides, ctx)) for name, overrides in ctx.meta.get("parity.runners", [])]
    groups: dict[str, dict[str, Any]] = {}
    run_options = [spec for spec in registry.command_options.values() if "run" in spec.commands]
    for spec in [*registry.backends.values(), *registry.comparators.values(), *registry.data_loaders.values(), *run_options]:
        group = groups.setdefault(spec.name, {})
        group.update((o.name, params[o.name]) for o in spec.options if o.name in params)
    # an option of the command that no plugin declared and the core has no field for (none today) still reaches
    # the runners, as its own group: every option takes effect or is refused, none is dropped here
    placed = {*CORE_OPTIONS, *(name for group in groups.values() for name in group)}
    backend_flags = {p.name for p in ctx.command.params if isinstance(p, BackendFlag)}
    rest = {k: v for k, v in params.items() if k not in placed and k not in backend_flags}
    if rest:
        groups.setdefault("run", {}).update(rest)
    flags = {p.name: next((f for f in p.opts if f.startswith("--")), p.opts[0]) for p in ctx.command.params if isinstance(p, click.Option) and p.name}
    return RunRequest(model, runners, **{k: v for k, v in params.items() if k in CORE_OPTIONS}, plugin_options=groups, flags=flags)


def run_command(ctx: click.Context, model: str | None, **params: Any) -> int:
    from parity.cli.report import ReportPrinter
    from parity.run_engine import run_comparison

    script = params.pop("gen_script", None)
    if script is not None:
        return _gen_script(ctx, model, params, script)
    printer = ReportPrinter()
    try:
        outcome = run_comparison(run_request(ctx, model, params), printer, get_registry())
    finally:
        printer.close()  # an error mid-run: the bar goes before the error line
    return int(outcome.code)


def _gen_script(ctx: click.Context, model: str | None, params: dict[str, Any], path: str) -> int:
    """``--gen-script FILE``: write the script that does what this command would, and run nothing."""
    from parity.gen_script import refuse_inputs, script_for, write_script  # here: only --gen-script writes a script
    from parity.run_engine import check_work

    request = run_request(ctx, model, params)
    check_work(request, get_registry())  # a script that could only refuse is not written: the command's line now
    refuse_inputs(path, {"the model": model, "the --load-inputs file": list(request.load_inputs), "the --load-outputs file": list(request.load_outputs)})
    write_script(script_for(request, ["parity", *sys.argv[1:]] if sys.argv[1:2] == ["run"] else ()), path)
    return 0
