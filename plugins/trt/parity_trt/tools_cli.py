"""Commands of Polygraphy 0.53.6's TensorRT tools: ``parity inspect capability``, ``parity template trt-network``,
``parity template trt-config``. Built when they run or show their ``--help``; TensorRT loads only when they work."""

from __future__ import annotations

import os
import shlex
from typing import Any

import click

from parity.api import GreedyOption, UsageError, command_line, echo, write_text_atomic
from parity.commands import ParityCommand, verbosity_options
from parity_trt.options import build_options

TF_WHY = "Parity has no TensorFlow backend; convert the model to ONNX (e.g. with tf2onnx) and use that"


def _refuse_tf(ctx: click.Context, param: click.Parameter, value: Any) -> None:  # noqa: ARG001 - click's callback signature
    if value not in (None, False, ()):
        raise UsageError(f"{param.opts[0]} is a TensorFlow option: {TF_WHY}")


def tensorflow_options() -> list[click.Parameter]:
    """Polygraphy's TensorFlow loading flags, hidden, each refused in one line."""
    kwargs: dict[str, Any] = {"hidden": True, "expose_value": False, "callback": _refuse_tf}
    return [
        click.Option(["--ckpt", "tf_ckpt"], default=None, **kwargs),
        GreedyOption(["--tf-outputs", "tf_outputs"], **kwargs),
        click.Option(["--freeze-graph", "tf_freeze_graph"], is_flag=True, default=False, **kwargs),
        click.Option(["--opset", "tf_opset"], default=None, **kwargs),
    ]


def external_read_options(ignore_help: str) -> list[click.Parameter]:
    return [
        click.Option(
            ["--external-data-dir", "--load-external-data", "--ext"], type=click.Path(file_okay=False), default=None,
            help="Folder of the model's external data (default: the model's folder).",
        ),
        click.Option(["--ignore-external-data"], is_flag=True, help=ignore_help),
    ]  # fmt: skip


def _model_type(model: str | None, kind: str | None) -> None:
    if kind not in (None, "onnx"):
        raise UsageError(f"--model-type {kind}: this command reads ONNX models only")
    if model is not None and not os.path.isfile(model):
        raise UsageError(f"{model}: no such file")


def _write(text: str, output: str | None, model: str | None) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    if model and os.path.exists(output) and os.path.samefile(model, output):
        raise UsageError(f"-o {output}: that is the input model")
    write_text_atomic(output, text)
    echo(f"wrote {output}", err=True)


# --- inspect capability -----------------------------------------------------------------------------


def _capability(model: str, output: str, with_partitioning: bool, **params: Any) -> int:
    """Which nodes of MODEL TensorRT's ONNX parser supports.

    \b
      parity inspect capability model.onnx
      parity inspect capability model.onnx --with-partitioning -o parts/
    Without --with-partitioning: the parser's errors, one row each (operator, node, reason), in
    OUTPUT/results.txt too. With it: the model is cut into the subgraphs TensorRT supports and the stretches
    between them, each written to OUTPUT as supported_subgraph-nodes-A-B.onnx or
    unsupported_subgraph-nodes-A-B.onnx (A, B: first and last node index), with a table of the unsupported
    operators, their reasons and node ranges. A fully supported model writes nothing.
    """
    from parity_trt.capability import run  # here: it loads onnx and TensorRT, which --help never needs

    return run(model, output, params, with_partitioning)


def capability_cmd() -> click.Command:
    params = [
        click.Argument(["model"], type=click.Path(exists=True, dir_okay=False)),
        click.Option(["--shape-inference", "--do-shape-inference"], is_flag=True, help="Run shape inference first (types of the cut points)."),
        click.Option(["--no-onnxruntime-shape-inference"], is_flag=True, help="With --shape-inference: ONNX's inference, not onnxruntime's symbolic one."),
        *external_read_options("Refused: TensorRT's parser needs the weights."),
        click.Option(["--fp-to-fp16"], is_flag=True, help="Convert float32 to float16 first (parity-surgeon's converter; inputs and outputs stay float32)."),
        click.Option(
            ["-o", "--output"], default="parity_capability_dumps", show_default=True, type=click.Path(file_okay=False),
            help="Folder for results.txt and the subgraphs.",
        ),
        click.Option(
            ["--save-external-data", "--external-data-path"], is_flag=False, flag_value="", default=None, metavar="[PATH]",
            help="Write the subgraphs' weights to external data files.",
        ),
        click.Option(["--external-data-size-threshold"], default=None, metavar="SIZE", help="With --save-external-data: smaller tensors stay inside [1024 bytes]."),
        click.Option(["--no-save-all-tensors-to-one-file"], is_flag=True, help="With --save-external-data: one data file per tensor."),
        click.Option(["--with-partitioning"], is_flag=True, help="Cut the model into supported and unsupported subgraphs."),
    ]  # fmt: skip
    command = click.Command("capability", callback=_capability, params=params, help=_capability.__doc__,
                            short_help="Which nodes of an ONNX model TensorRT's parser supports.")  # fmt: skip
    return verbosity_options(_as_parity(command))


def _as_parity(command: click.Command) -> click.Command:
    parity = ParityCommand(command.name, callback=command.callback, params=command.params, help=command.help, short_help=command.short_help)
    return parity


# --- template trt-network / trt-config ----------------------------------------------------------------

def _trt_network(model: str | None, output: str | None, model_type: str | None, **params: Any) -> int:
    """Write a Python script whose load_network() builds a TensorRT network: an empty one to fill with the network
    API, or MODEL parsed by TensorRT's ONNX parser with the network options given here applied.

    \b
      parity template trt-network -o my_network.py
      parity template trt-network model.onnx --trt-outputs mark all -o my_network.py
    Run it with: parity run my_network.py --trt
    """
    from parity_trt import templates  # here: --help never needs it

    _model_type(model, model_type)
    if params.pop("ignore_external_data", False):
        raise UsageError("--ignore-external-data: TensorRT's parser needs the weights to build the network")
    if model is None:
        given = [k for k, v in params.items() if v not in (None, False, (), []) and k != "strongly_typed"]
        if given:
            raise UsageError(f"--{given[0].replace('_', '-')} applies to a parsed model: give MODEL, or edit the empty network in the script")
    options = {k: v for k, v in params.items() if v not in (None, False, (), [])}
    templates.load_network_with(model, options) if model else None  # the options checked, the model parsed, before writing
    _write(templates.network_script(model, options, shlex.join(command_line())), output, model)
    return 0


def _network_params() -> list[click.Parameter]:
    offered = [p for p in build_options() if p.name in _network_names()]
    return [
        click.Argument(["model"], required=False, type=click.Path(dir_okay=False)),
        click.Option(["--model-type"], default=None, help="The model's kind: only onnx applies."),
        *tensorflow_options(),
        *external_read_options("Refused: TensorRT's parser needs the weights."),
        GreedyOption(["--onnx-outputs"], metavar="NAME", help="Make these ONNX tensors outputs before parsing (fnmatch patterns; '*' or 'mark all': all)."),
        GreedyOption(["--onnx-exclude-outputs"], metavar="NAME", help="ONNX outputs to leave out (fnmatch patterns)."),
        GreedyOption(["--onnx-outputs-by-type"], metavar="OP", help="Mark the outputs of ONNX nodes of these op types (case-insensitive)."),
        click.Option(["--fp-to-fp16"], is_flag=True, help="Convert the ONNX model to float16 before parsing (parity-surgeon's converter)."),
        *offered,
        click.Option(["-o", "--output"], type=click.Path(dir_okay=False), default=None, help="Where to write the script [stdout]."),
    ]


def _network_names() -> frozenset[str]:
    from parity_trt.templates import NETWORK_OPTIONS  # light: no TensorRT

    return NETWORK_OPTIONS


def trt_network_cmd() -> click.Command:
    command = click.Command("trt-network", callback=_trt_network, params=_network_params(), help=_trt_network.__doc__,
                            short_help="Write a script that builds a TensorRT network.")  # fmt: skip
    return verbosity_options(_as_parity(command))


def _trt_config(model: str | None, output: str | None, model_type: str | None, data_loader_backend_module: str | None, **params: Any) -> int:
    """Write a Python script whose load_config(builder, network) returns the TensorRT builder config the build
    options given here make (precisions, profiles, pools, timing cache, calibration, ...).

    \b
      parity template trt-config --fp16 --pool-limit workspace:1G -o my_config.py
    """
    from parity_trt import factory, templates  # here: --help never needs them

    _model_type(model, model_type)
    if data_loader_backend_module not in (None, "numpy"):
        raise UsageError(f"--data-loader-backend-module {data_loader_backend_module}: Parity's data loader makes numpy arrays only")
    if params.get("save_tactics"):
        raise UsageError("--save-tactics: the replay is written when a build ends, and this script only makes the config; "
                         "give --save-tactics to the parity run or convert that builds with it")
    options = {k: v for k, v in params.items() if v not in (None, False, (), [])}
    factory.check_options(options)
    _write(templates.config_script(model, options, shlex.join(command_line())), output, model)
    return 0


def _config_params() -> list[click.Parameter]:
    from parity_trt.templates import NEITHER, NETWORK_OPTIONS  # light: no TensorRT

    offered = [p for p in build_options() if p.name not in NETWORK_OPTIONS | NEITHER]
    offered += _extension_options()
    return [
        click.Argument(["model"], required=False, type=click.Path(dir_okay=False)),
        click.Option(["--model-type"], default=None, help="The model's kind: only onnx applies."),
        GreedyOption(["--input-shapes", "--inputs"], metavar="NAME:[D0,D1,..]", help="Input shapes: the profile when no --trt-*-shapes are given."),
        click.Option(["--seed"], type=int, default=None, help="Seed of the random int8 calibration data."),
        GreedyOption(["--val-range"], metavar="[NAME:][LO,HI]", help="Range of the random int8 calibration data."),
        click.Option(["--iterations", "--iters"], type=click.IntRange(min=1), default=None, help="Batches of random int8 calibration data."),
        click.Option(["--data-loader-backend-module"], type=click.Choice(["numpy", "torch"]), default=None, help="numpy (torch is refused)."),
        GreedyOption(["--load-inputs", "--load-input-data"], metavar="PATH", type=click.Path(), help="Saved inputs to calibrate int8 with."),
        click.Option(["--data-loader-script"], metavar="FILE.py[:FUNC]", default=None, help="Function giving int8 calibration feeds."),
        *offered,
        click.Option(["-o", "--output"], type=click.Path(dir_okay=False), default=None, help="Where to write the script [stdout]."),
    ]


def _extension_options() -> list[click.Parameter]:
    """Other plugins' options of TensorRT builds (parity-tactics' --save-tactics, ...): the build extensions
    (``parity_trt_build_extension``) read them from the same options, so the config the script makes applies them."""
    from parity.api import get_registry  # here: the registry is read when the command is built, not at start-up

    specs = get_registry().command_options.values()
    return [param for spec in specs if "trt" in spec.backends and "convert" in spec.commands for param in spec.options]


def trt_config_cmd() -> click.Command:
    command = click.Command("trt-config", callback=_trt_config, params=_config_params(), help=_trt_config.__doc__,
                            short_help="Write a script that makes a TensorRT builder config.")  # fmt: skip
    return verbosity_options(_as_parity(command))
