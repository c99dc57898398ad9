"""Parity hooks of the surgeon plugin. Thin: click only; onnx, graphsurgeon and numpy load inside commands."""

from __future__ import annotations

import shlex

from parity import hookimpl


def _convert(request) -> None:
    from parity_surgeon.cli import convert_fp16

    convert_fp16(request)


@hookimpl
def parity_register_converters(register):
    import click

    from parity.api import ConverterSpec, GreedyOption  # here: discovery imports this module and never needs the registry

    register(
        ConverterSpec(
            name="onnx",
            suffixes=(".onnx",),
            convert=_convert,
            help="Write an ONNX model; --fp-to-fp16 converts float32 to float16.",
            options=(
                click.Option(["--fp-to-fp16"], is_flag=True, help="onnx: convert float32 tensors and weights to float16."),
                click.Option(
                    ["--keep-io-types/--no-keep-io-types", " /--fp16-io"],
                    default=True,
                    help="onnx: with --fp-to-fp16, keep float32 graph inputs and outputs (Cast at the edges; the default), or make them float16.",
                ),
                click.Option(
                    ["--clamp-out-of-range"],
                    is_flag=True,
                    help="onnx: with --fp-to-fp16, clamp weights beyond +-65504 to the fp16 range instead of keeping them and their readers float32.",
                ),
                GreedyOption(["--op-block-list"], metavar="OP", help="onnx: with --fp-to-fp16, op types that stay float32, e.g. Softmax LayerNormalization."),
                GreedyOption(["--node-block-list"], metavar="NODE", help="onnx: with --fp-to-fp16, node names that stay float32."),
                click.Option(["--no-ort-check"], is_flag=True, help="onnx: with --fp-to-fp16, do not keep op types onnxruntime cannot run in fp16 in float32."),
            ),
        )
    )


@hookimpl
def parity_describe_commands(register):
    # parity_surgeon.cli (click, onnx helpers) is imported only when one of these runs or shows its --help
    register("surgeon", None, "Edit ONNX models: sanitize, extract, insert, prune, weight-strip, weight-reconstruct.")
    register("check", None, "Check models for problems.")
    register("surgeon sanitize", "parity_surgeon.cli:sanitize_cmd", "Fold constants, clean up, toposort, fix input shapes.")
    register("surgeon extract", "parity_surgeon.cli:extract_cmd", "Cut out the subgraph between given tensors.")
    register("surgeon insert", "parity_surgeon.cli:insert_cmd", "Replace the subgraph between tensors with one node.")
    register("surgeon prune", "parity_surgeon.weights_cli:prune_cmd", "Prune weights to 2:4 structured sparsity (for functional tests).")
    register("surgeon weight-strip", "parity_surgeon.weights_cli:weight_strip_cmd", "Write the model with its weights stripped (TensorRT refit).")
    register("surgeon weight-reconstruct", "parity_surgeon.weights_cli:weight_reconstruct_cmd", "Fill stripped weights with random values.")
    register("inspect sparsity", "parity_surgeon.sparsity_cli:sparsity_cmd", "Which weights follow the 2:4 structured sparsity pattern.")
    register("check lint", "parity_surgeon.cli:lint_cmd", "ONNX checker plus common model problems, one line each.")
    register("debug localize", "parity_surgeon.cli:make_localize_cmd", "Find the first divergent node, in bounded memory.")
    register("plugin", None, "Find subgraphs a TensorRT plugin could replace, and replace them.")
    register("template", None, "Write Python scripts to start from (onnx-graphsurgeon, TensorRT network and config).")
    register("plugin list", "parity_surgeon.plugin_tools:list_cmd", "Count the subgraphs each plugin's pattern matches.")
    register("plugin match", "parity_surgeon.plugin_tools:match_cmd", "Write the subgraphs plugins could replace to a config file.")
    register("plugin replace", "parity_surgeon.plugin_tools:replace_cmd", "Replace the subgraphs of a plugin config with plugin nodes.")
    register("plugin autotune", "parity_surgeon.plugin_tools:autotune_cmd", "Keep the plugin replacements that make the TensorRT engine faster.")
    register("template onnx-gs", "parity_surgeon.templates:onnx_gs_cmd", "Write a script that edits an ONNX model with onnx-graphsurgeon.")
    register("multi-device", None, "Shard ONNX models across devices for TensorRT's multi-device collectives.")
    register("multi-device shard", "parity_surgeon.shard_cli:shard_cmd", "Shard an ONNX model's attention layers across devices (context parallel).")
    register("template shard-hints", "parity_surgeon.shard_cli:shard_hints_cmd", "Write the hints multi-device shard follows (attention layers, I/O).")


@hookimpl
def parity_divergence_hint(report, output):
    """``parity surgeon extract``: the first divergent node alone, its non-constant inputs fed from outside."""
    from parity_surgeon.naming import safe_name  # here: `parity --help` imports this module and never needs it

    first = report.first
    parts = ["parity", "surgeon", "extract", report.model]
    inputs = report.outside_inputs()
    if inputs:
        parts += ["--inputs", *(f"{t}:auto:auto" for t in inputs)]
    parts += ["--outputs", f"{first.name}:auto", "-o", output or f"{safe_name(first.node)}.onnx"]
    return " ".join(shlex.quote(p) for p in parts)
