"""``parity convert MODEL -o OUT``: dispatches to the converter registered for the output kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from parity.cli import options as opts
from parity.cli.common import echo, verbosity_options
from parity.cli.parsing import GreedyOption, ParityCommand
from parity.cli.tensorflow_flags import CONVERT_FLAGS, tensorflow_options
from parity.errors import UsageError
from parity.from_options import convert_marked, plugin_files
from parity.plugins import get_registry
from parity.registry import ConvertRequest, _lookup
from parity.util.fs import check_model_path, refuse_overwrite


def make_command() -> click.Command:
    """``parity convert``, built when it is used: its options come from the registry (converters, backends)."""
    registry = get_registry()
    params: list[click.Parameter] = [
        click.Argument(["model"]),
        click.Option(["-o", "--output"], required=True, type=click.Path(), help="Where to write the converted model."),
        click.Option(["--convert-to"], default=None, help=f"Output kind: {', '.join(sorted(registry.converters)) or 'none installed'} (default: from the suffix)."),
        *opts.model_options(),
        *opts.external_data_read_options(ignore=True),  # --ignore-external-data: refused (a conversion needs the weights)
        *opts.external_data_write_options(),
        *opts.onnx_load_options(fp16=False),  # --fp-to-fp16 is the onnx converter's own
        *opts.data_options(),
        *onnx_marking_options(),
        *tensorflow_options(CONVERT_FLAGS),  # hidden: each refuses in one line (Parity has no TensorFlow backend)
    ]
    for conv in registry.converters.values():
        opts.add_unique(params, conv.options)
    for backend in registry.backends.values():  # builder options of backends (e.g. --fp16) apply to conversion too
        opts.add_unique(params, backend.options)
    command = ParityCommand("convert", params=params, callback=convert_command, help=CONVERT_HELP, short_help="Convert a model (ONNX fp16, TensorRT engine, ...).")
    command.parity_uses = _uses  # type: ignore[attr-defined]
    return verbosity_options(command)


CONVERT_HELP = """Convert MODEL and write it to -o OUTPUT; the converter is chosen by --convert-to or OUTPUT's suffix.

An ONNX output keeps its weights inside, or where --save-external-data [PATH] says (one file, or one per tensor
with --no-save-all-tensors-to-one-file; tensors under --external-data-size-threshold stay inside); one that
would pass protobuf's 2 GiB limit as one file gets OUTPUT.data, and a note says so.

\b
  parity convert --fp-to-fp16 model.onnx -o model_fp16.onnx
  parity convert --fp-to-fp16 llm.onnx -o llm_fp16.onnx --save-external-data
  parity convert model.onnx -o model.engine --fp16"""

# the writing flags: only converters that write ONNX honour them (--external-data-dir is for every converter)
_ONNX_ONLY = {
    "save_external_data": "--save-external-data",
    "external_data_size_threshold": "--external-data-size-threshold",
    "no_save_all_tensors_to_one_file": "--no-save-all-tensors-to-one-file",
}


def onnx_marking_options() -> list[click.Parameter]:
    """Polygraphy's ONNX output flags on convert: the model is converted with these tensors as its outputs."""
    return [
        GreedyOption(["--onnx-outputs"], metavar="NAME", help="Mark tensors as outputs before converting: names, or 'mark all'."),
        GreedyOption(["--onnx-exclude-outputs"], metavar="NAME", help="Outputs to unmark before converting."),
        GreedyOption(["--onnx-outputs-by-type"], metavar="OP", help="Also mark the outputs of every node of these op types (case-insensitive)."),
    ]


def _uses(ctx: click.Context) -> dict[str, set[str]]:
    """For the option rule: the converter this command picks, and the backend of that name (its builder options)."""
    output = ctx.params.get("output")
    conv = pick_converter(output, ctx.params.get("convert_to")) if output else None
    names = {conv.name} if conv is not None else set()
    return {"converter": names, "backend": names}


def pick_converter(output: str, convert_to: str | None):
    registry = get_registry()
    if convert_to:
        return registry.converters.get(convert_to) or _unknown(convert_to, registry)
    suffix = Path(output).suffix.lower()
    for conv in registry.converters.values():
        if suffix in conv.suffixes:
            return conv
    known = ", ".join(f"{c.name} ({' '.join(c.suffixes)})" for c in registry.converters.values()) or "none installed"
    raise UsageError(f"cannot tell what to convert to from '{output}'; use --convert-to ({known})")


def _unknown(name: str, registry: Any):
    return _lookup(registry.converters, name, "converter")


def convert_command(model: str, output: str, convert_to: str | None, **params: Any) -> int:
    check_model_path(model)
    if params.get("ignore_external_data"):
        raise UsageError("--ignore-external-data: a conversion writes the model's weights, so it reads them; give --external-data-dir where they are")
    if params.pop("no_onnxruntime_shape_inference", False) and not params.get("shape_inference"):  # with it: ONNX's inference, what convert runs
        raise UsageError("--no-onnxruntime-shape-inference chooses how --shape-inference infers shapes: add --shape-inference")
    reads, writes = plugin_files(params, get_registry())
    refuse_overwrite({"the model": model, **reads}, output, **writes)
    conv = pick_converter(output, convert_to)
    if ".onnx" not in conv.suffixes:
        for name, flag in _ONNX_ONLY.items():
            if params.get(name) not in (None, False):
                raise UsageError(f"{flag} applies to ONNX output; the {conv.name} converter does not take it")
    if not convert_marked(conv, model, output, params):
        conv.convert(ConvertRequest(model, output, params))
    echo(f"wrote {output} ({conv.name})")
    return 0
