"""``parity template onnx-gs``: write a Python script that loads an ONNX model (with the loading flags given) as an
onnx-graphsurgeon graph, leaves a place to edit it, and saves it as ``<model>_updated.onnx``."""

from __future__ import annotations

import os
import pprint
import shlex
from typing import Any

import click

from parity.api import UsageError, command_line, echo, write_text_atomic
from parity.commands import ParityCommand, verbosity_options
from parity_surgeon import onnx_load

_SCRIPT = '''\
#!/usr/bin/env python3
"""Loads {model_name} as an onnx-graphsurgeon graph, for you to edit, and saves it as {new_name}.
Written by: {command}"""
import os

import onnx
import onnx_graphsurgeon as gs
from onnx.external_data_helper import load_external_data_for_model

from parity_surgeon.onnx_load import load_model

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, {model!r})
NEW_MODEL = os.path.join(HERE, {new_model!r})
# the loading flags of the command that wrote this script
OPTIONS = {options}


def load_graph():
    model, data_dir = load_model(MODEL, OPTIONS)
    if not OPTIONS.get("ignore_external_data"):
        load_external_data_for_model(model, str(data_dir))
    return gs.import_onnx(model)


def main():
    graph = load_graph()

    # Edit the graph here. For example:
    #   tensors = graph.tensors()                # {{name: gs.Tensor}}
    #   graph.outputs = [tensors["some_tensor"]]
    #   for node in graph.nodes:
    #       print(node.name, node.op, [t.name for t in node.inputs], [t.name for t in node.outputs])

    graph.cleanup().toposort()
    model = gs.export_onnx(graph)
    onnx.checker.check_model(model)
    onnx.save(model, NEW_MODEL)
    print(f"wrote {{NEW_MODEL}}")


if __name__ == "__main__":
    main()
'''


def updated_path(model: str) -> str:
    root, ext = os.path.splitext(model)
    return f"{root}_updated{ext or '.onnx'}"


def script_text(model: str, options: dict[str, Any], output: str | None, command: str) -> str:
    """The script; paths are relative to where it is written (``output``'s folder, else the working folder)."""
    where = os.path.dirname(os.path.abspath(output)) if output else os.getcwd()
    kept = {k: (list(v) if isinstance(v, tuple) else v) for k, v in sorted(options.items()) if v not in (None, False, (), [])}
    for key in ("external_data_dir",):
        if kept.get(key):
            kept[key] = os.path.abspath(kept[key])
    return _SCRIPT.format(
        model_name=os.path.basename(model), new_name=os.path.basename(updated_path(model)), command=command,
        model=os.path.relpath(os.path.abspath(model), where), new_model=os.path.relpath(os.path.abspath(updated_path(model)), where),
        options=pprint.pformat(kept, indent=4, width=100),
    )  # fmt: skip


def write_script(text: str, output: str | None, inputs: tuple[str, ...] = ()) -> None:
    """To ``output`` (atomically; never over an input), or to stdout."""
    if output is None:
        click.echo(text, nl=False)
        return
    for path in inputs:
        if path and os.path.exists(output) and os.path.samefile(path, output):
            raise UsageError(f"-o {output}: that is the input model")
    write_text_atomic(output, text)
    echo(f"wrote {output}", err=True)


@click.command("onnx-gs", cls=ParityCommand, short_help="Write a script that edits an ONNX model with onnx-graphsurgeon.")
@click.argument("model")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Where to write the script [stdout].")
@verbosity_options
def onnx_gs_cmd(model: str, output: str | None, **params: Any) -> int:
    """Write a Python script that loads MODEL as an onnx-graphsurgeon graph, with the loading flags given here
    (shape inference, fp16, outputs, ...), leaves a place to edit it, and saves it as MODEL_updated.onnx.

    \b
      parity template onnx-gs model.onnx -o edit_model.py && python edit_model.py
    """
    if not os.path.isfile(model):
        raise UsageError(f"{model}: no such file")
    onnx_load.load_model(model, params)  # every flag is checked, and the model read, before the script is written
    text = script_text(model, params, output, shlex.join(command_line()))
    write_script(text, output, (model,))
    return 0


onnx_gs_cmd.params[1:1] = onnx_load.read_options()
