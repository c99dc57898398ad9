"""Parity hooks of the surgeon plugin. Thin: click only; onnx, graphsurgeon and numpy load inside commands."""

from __future__ import annotations

from parity import hookimpl


def _convert(request) -> None:
    from parity_surgeon.cli import convert_fp16

    convert_fp16(request)


@hookimpl
def parity_register_converters(register):
    import click

    from parity.api import ConverterSpec, GreedyOption

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
def parity_register_commands(cli):
    from parity.api import group
    from parity_surgeon import cli as commands

    surgeon = group(cli, "surgeon")
    for command in (commands.sanitize_cmd, commands.extract_cmd, commands.insert_cmd):
        surgeon.add_command(command)
    group(cli, "check").add_command(commands.lint_cmd)
    group(cli, "debug").add_command(commands.make_localize_cmd())
