"""The core's own plugin: built-in metrics and data loaders, registered like any third party's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from parity.hookspecs import hookimpl


def _simple(options: Mapping[str, Any]):
    from parity.compare.simple import SimpleCompare

    return SimpleCompare.from_options(options)


def _simple_options() -> tuple[click.Option, ...]:
    """The simple metric's options, in the order ``parity run --help`` lists them. Like any metric's, they are owned
    by it (refused unless ``--compare-func`` chooses it), and a metavar starting ``[OUT:]`` makes an option
    per-output (its names are checked against the outputs: :mod:`parity.compare.names`)."""
    from parity.api import GreedyOption  # here: only when the comparators register, as a third party's metric does
    from parity.compare.tolerance import ERROR_STATS, PRESETS  # here: only when the comparators register (numpy-free, yet not needed by --help)

    return (
        GreedyOption(["--atol", "--abs-tol"], metavar="[OUT:]TOL", help="Absolute tolerance, for all outputs or one: 1e-5 y:1e-3."),
        GreedyOption(["--rtol", "--rel-tol"], metavar="[OUT:]TOL", help="Relative tolerance (relative to the reference, the later runner)."),
        click.Option(["--tolerance-preset"], type=click.Choice(sorted(PRESETS)), help="Default atol/rtol sized for a precision, e.g. fp16."),
        GreedyOption(["--check-error-stat"], metavar="[OUT:]STAT", help=f"Statistic checked against tolerances: {', '.join(ERROR_STATS)} [elemwise]."),
        click.Option(["--error-quantile"], type=click.FloatRange(0, 1), default=None, help="Quantile for --check-error-stat quantile [0.99]."),
        click.Option(["--infinities-compare-equal"], is_flag=True, help="Equal infinities are not a mismatch."),
        click.Option(["--nans-compare-equal"], is_flag=True, help="NaNs at the same place in both outputs are not a mismatch."),
    )


def _indices(options: Mapping[str, Any]):
    from parity.compare.indices import IndicesCompare
    from parity.compare.prepare import parse_postprocess  # here: only when the metric is made

    k = options.get("top_k")
    if not k:  # after --postprocess top-K the outputs are K indices per row: compare them all, as Polygraphy does
        k = max((top for top, _ in parse_postprocess(options.get("postprocess")).values()), default=1)
    return IndicesCompare(k=k, index_tolerance=options.get("index_tolerance") or 0)


def _random(request: Any):
    from parity.data.loader import DataLoader

    return DataLoader(
        request.input_metadata,
        seed=request.seed,
        iterations=request.iterations,
        val_range=request.val_range,
        input_shapes=request.input_shapes,
        style="cli",  # hints name --input-shapes, not DataLoader(input_shapes=...)
        backend=request.get("data_loader_backend_module") or "numpy",
    )


@hookimpl
def parity_register_comparators(register):
    from parity.registry import ComparatorSpec  # here, not at the top: `parity --help` imports this module and never needs the registry

    register(ComparatorSpec("simple", _simple, "absolute/relative error against --atol/--rtol (default)", _simple_options()))
    register(
        ComparatorSpec(
            "indices",
            _indices,
            "top-k class agreement along the last axis (integer outputs are taken as indices)",
            options=(
                click.Option(["--top-k"], type=int, default=None, help="indices: classes compared per row [1]"),
                click.Option(["--index-tolerance"], type=int, default=None, help="indices: extra reference positions allowed [0]"),
            ),
        )
    )


def _prepare_options() -> list[click.Option]:
    """Options of every comparison, whichever metrics run (:mod:`parity.compare.prepare`): Polygraphy's names."""
    from parity.api import GreedyOption  # here: only when the options register

    return [
        click.Option(["--no-shape-check"], is_flag=True, help="Outputs of different shapes: reshape or permute the reference to match, as Polygraphy does."),
        GreedyOption(
            ["--postprocess", "--postprocess-func"], metavar="[OUT:]top-K[,axis=N]", help="Before comparing: replace outputs by the indices of their K largest values."
        ),
        click.Option(["--postprocess-func-script"], metavar="FILE[:FUNC]", help="Before comparing: a Polygraphy (IterationResult) -> IterationResult function."),
        click.Option(["--compare-func-script"], metavar="FILE[:FUNC]", help="Compare with a Polygraphy compare function instead of --compare-func's metrics."),
    ]


def _refuse_when_nothing_compared(command: str, params: Mapping[str, Any], ctx: Any) -> None:
    """The option rule for these (they have no one metric as owner): refused when the run compares nothing."""
    runners = ctx.meta.get("parity.runners", []) if ctx is not None else []
    if len(runners) > 1 or params.get("load_outputs"):
        return
    for name in ("no_shape_check", "postprocess", "postprocess_func_script", "compare_func_script"):
        flag = "--" + name.replace("_", "-")
        if params.get(name) not in (None, False, (), []):
            from parity.errors import UsageError  # here: only a refusal needs it

            raise UsageError(f"{flag} applies to compared outputs; this command compares nothing (one runner: add another or --load-outputs)")


@hookimpl
def parity_register_options(register):
    from parity.registry import OptionSpec  # here, not at the top: `parity --help` imports this module and never needs the registry

    register(OptionSpec("compare", ("run",), _prepare_options(), validate=_refuse_when_nothing_compared, help="how outputs are prepared and compared"))


@hookimpl
def parity_register_data_loaders(register):
    from parity.registry import DataLoaderSpec  # here, not at the top: `parity --help` imports this module and never needs the registry

    register(DataLoaderSpec("random", _random, "reproducible random data (--seed, --val-range, --input-shapes)"))


def _local_executor(options: Mapping[str, Any]):
    from parity.debug.executor import make_executor  # here: `parity --help` never needs the debug engine

    return make_executor(int(options.get("jobs") or 1))


@hookimpl
def parity_register_executors(register):
    from parity.registry import ExecutorSpec  # here, not at the top: `parity --help` imports this module and never needs the registry

    register(ExecutorSpec("local", _local_executor, "checks run here: one at a time, or --jobs N at once"))


@hookimpl
def parity_register_model_kinds(register):
    from parity import onnx_inspect, onnx_models  # here: `parity --help` imports this module and never reads a model
    from parity.registry import ModelKind  # here, not at the top: `parity --help` imports this module and never needs the registry

    register(ModelKind("onnx", (".onnx",), onnx_models.read_inputs, onnx_inspect.describe, onnx_models.is_onnx, summarize=onnx_inspect.summarize))
