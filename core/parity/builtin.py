"""The core's own plugin: built-in metrics and data loaders, registered like any third party's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from parity.hookspecs import hookimpl


def _simple(options: Mapping[str, Any]):
    from parity.compare.simple import SimpleCompare

    return SimpleCompare(
        atol=options.get("atol"),
        rtol=options.get("rtol"),
        check_error_stat=options.get("check_error_stat"),
        error_quantile=options.get("error_quantile") or 0.99,
        infinities_equal=bool(options.get("infinities_compare_equal")),
        nans_equal=bool(options.get("nans_compare_equal")),
        preset=options.get("tolerance_preset"),
    )


def _indices(options: Mapping[str, Any]):
    from parity.compare.indices import IndicesCompare

    return IndicesCompare(k=options.get("top_k") or 1, index_tolerance=options.get("index_tolerance") or 0)


def _random(request: Any):
    from parity.data.loader import DataLoader

    return DataLoader(
        request.input_metadata,
        seed=request.seed,
        iterations=request.iterations,
        val_range=request.val_range,
        input_shapes=request.input_shapes,
        style="cli",  # hints name --input-shapes, not DataLoader(input_shapes=...)
    )


@hookimpl
def parity_register_comparators(register):
    from parity.registry import ComparatorSpec  # here, not at the top: `parity --help` imports this module and never needs the registry

    register(ComparatorSpec("simple", _simple, "absolute/relative error against --atol/--rtol (default)"))
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
