"""``parity run``: run a model on one or more backends and compare the outputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from parity.cli import options as opts
from parity.cli.common import verbosity_options
from parity.cli.owners import backend_setting_owner
from parity.cli.parsing import ParityCommand
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
    params = [click.Argument(["model"], required=False), *opts.model_options(), *opts.onnx_options(), *opts.external_data_read_options(), *opts.data_options()]
    params += [*opts.compare_options(registry), opts.marking_check_option(), *opts.backend_params(registry)]
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
    """The typed request the command line describes: backends in flag order, their settings cast by click."""
    from parity.run_engine import RunRequest

    return RunRequest(
        model,
        list(ctx.meta.get("parity.runners", [])),
        params,
        cast_settings=lambda backend, overrides: cast_runner_settings(backend, overrides, ctx),
    )


def run_command(ctx: click.Context, model: str | None, **params: Any) -> int:
    from parity.cli.report import ReportPrinter
    from parity.run_engine import run_comparison

    printer = ReportPrinter()
    try:
        outcome = run_comparison(run_request(ctx, model, params), printer, get_registry())
    finally:
        printer.close()  # an error mid-run: the bar goes before the error line
    return int(outcome.code)
