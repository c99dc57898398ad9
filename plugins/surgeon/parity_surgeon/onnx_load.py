"""Polygraphy's ONNX loading flags for the commands that read a model and hand it on (``plugin list/match/replace``,
``template onnx-gs``): shape inference, external data, fp16, output marking, input shapes. Each given flag takes
effect on the loaded model or is refused in one line. click only at import; onnx loads inside :func:`load_model`."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

from parity.api import SETTINGS, GreedyOption, UsageError, echo, first_line, onnx_models, parse_shapes
from parity.commands import external_data_read_options, onnx_load_options

# flags that read the data loader (Polygraphy's DataLoaderArgs): the commands here run no inference, so each is refused
DATA_FLAGS = {
    "seed": "--seed", "val_range": "--val-range", "iterations": "--iterations", "data_loader_backend_module": "--data-loader-backend-module",
    "load_inputs": "--load-inputs", "data_loader_script": "--data-loader-script",
}  # fmt: skip


def read_options(*, input_shapes: bool = True, shape_inference: bool = True, outputs: bool = True) -> list[click.Parameter]:
    """The loading flags, Polygraphy's names and aliases."""
    params: list[click.Parameter] = []
    if input_shapes:
        params.append(GreedyOption(["--input-shapes", "--inputs"], metavar="NAME:[D0,D1,..]", help="Set the shapes of model inputs before anything reads the graph."))
    # the shared definitions (parity.commands): --shape-inference/--do-shape-inference, --no-onnxruntime-shape-inference,
    # --fp-to-fp16, --external-data-dir/--load-external-data/--ext, --ignore-external-data
    loading = onnx_load_options(shape_inference=shape_inference)
    params += [p for p in loading if p.name != "fp_to_fp16"]
    params += external_data_read_options(ignore=True)
    params += [p for p in loading if p.name == "fp_to_fp16"]
    if outputs:
        params += [
            GreedyOption(["--onnx-outputs"], metavar="NAME", help="Make these tensors the graph outputs (fnmatch patterns; '*' or 'mark all': every tensor)."),
            GreedyOption(["--onnx-exclude-outputs"], metavar="NAME", help="Outputs to leave out (fnmatch patterns)."),
            GreedyOption(["--onnx-outputs-by-type"], metavar="OP", help="Mark the outputs of nodes of these op types (case-insensitive) as graph outputs."),
        ]
    return params


def onnxrt_session_options() -> list[click.Parameter]:
    """The onnxrt backend's own ``--providers``/``--execution-providers`` and ``--graph-optimization-level`` (its
    definitions, from the registry), for a command that runs the model once in onnxruntime (``check lint``)."""
    from parity.api import get_registry  # here: only the commands that run onnxruntime build these

    backend = get_registry().backends.get("onnxrt")
    return [o for o in (backend.options if backend is not None else ()) if o.name in ("providers", "graph_optimization_level")]


def refused_data_options() -> list[click.Parameter]:
    """Polygraphy's data-loader flags, each refused when given (nothing here runs the model)."""
    return [
        click.Option(["--seed"], default=None, hidden=False, help="Refused: this command runs no inference."),
        GreedyOption(["--val-range"], help="Refused: this command runs no inference."),
        click.Option(["--iterations", "--iters"], default=None, help="Refused: this command runs no inference."),
        click.Option(["--data-loader-backend-module"], default=None, help="Refused: this command runs no inference."),
        GreedyOption(["--load-inputs", "--load-input-data"], help="Refused: this command runs no inference."),
        click.Option(["--data-loader-script"], default=None, help="Refused: this command runs no inference."),
    ]


def model_type_option() -> click.Option:
    return click.Option(["--model-type"], default=None, help="The model's kind: only onnx applies here.")


def refuse_unused(params: Mapping[str, Any], command: str) -> None:
    """One line for a data-loader flag or a model type that cannot apply to ``command``."""
    for key, flag in DATA_FLAGS.items():
        if params.get(key) not in (None, (), [], False):
            raise UsageError(f"{flag}: {command} runs no inference, so no data is generated or loaded")
    kind = params.get("model_type")
    if kind not in (None, "onnx"):
        raise UsageError(f"--model-type {kind}: {command} reads ONNX models only")


def _names(graph: Any) -> list[str]:
    names = [v.name for v in graph.input]
    names += [o for node in graph.node for o in node.output if o]
    return list(dict.fromkeys(names))


def expand(patterns: Sequence[str], names: Sequence[str], option: str) -> list[str]:
    """fnmatch ``patterns`` against tensor ``names``; a pattern that matches nothing is refused."""
    found: list[str] = []
    for pattern in patterns:
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        if not hits:
            raise UsageError(f"{option}: no tensor of the model matches '{pattern}'")
        found += hits
    return list(dict.fromkeys(found))


def check_flags(params: Mapping[str, Any]) -> None:
    if params.get("no_onnxruntime_shape_inference") and not params.get("shape_inference"):
        raise UsageError("--no-onnxruntime-shape-inference applies with --shape-inference")


def load_model(model: str, params: Mapping[str, Any], note: Callable[[str], None] | None = None) -> tuple[Any, Any]:
    """The model with every loading flag applied; returns ``(ModelProto, base_dir)``. Weights stay in their files
    (``base_dir``) unless --fp-to-fp16 needs them."""
    from parity_surgeon import graph as g  # here, not at the top: the commands' --help never needs onnx

    check_flags(params)
    base = onnx_models.data_dir(model, params.get("external_data_dir"))
    proto = g.load(model, lazy=True, external_data_dir=base, ignore_external_data=bool(params.get("ignore_external_data")))
    if params.get("input_shapes"):
        try:
            g.set_input_shapes(proto, parse_shapes(list(params["input_shapes"])))
        except UsageError as exc:
            raise UsageError(f"--input-shapes: {exc}") from None
    if params.get("fp_to_fp16"):
        from parity_surgeon.fp16 import Fp16Converter  # here: the converter loads onnx, which --help never needs

        proto, report = Fp16Converter(proto, keep_io_types=True, base_dir=base).build()
        for line in report.lines():
            echo(line, err=True)
    if params.get("shape_inference"):
        proto = infer_shapes(proto, onnxruntime=not params.get("no_onnxruntime_shape_inference"), note=note)
    _mark(proto, params)
    return proto, base


def infer_shapes(proto: Any, onnxruntime: bool = True, note: Callable[[str], None] | None = None) -> Any:
    """onnxruntime's symbolic shape inference (it resolves more dims), else ONNX's; a failure of the first falls
    back to the second with a note."""
    external = any(onnx_models.is_external(t) for t in proto.graph.initializer)
    if onnxruntime and external:  # it would look for the data files relative to the working folder
        (note or (lambda m: echo(m, err=True)))("parity: note: the weights are in external data files; used ONNX's shape inference")
    elif onnxruntime:
        try:
            return onnx_models.symbolic_shapes(proto)
        except Exception as exc:  # noqa: BLE001 - its failures are many and unnamed; ONNX's inference is the fallback
            (note or (lambda m: echo(m, err=True)))(f"parity: note: onnxruntime's shape inference failed ({first_line(exc, 120)}); used ONNX's")
    from parity_surgeon import graph as g  # here: see load_model

    inferred, _status = g.infer_shapes(proto)
    return inferred


def _mark(proto: Any, params: Mapping[str, Any]) -> None:
    outputs = list(params.get("onnx_outputs") or ())
    exclude = list(params.get("onnx_exclude_outputs") or ())
    by_type = [t.lower() for t in params.get("onnx_outputs_by_type") or ()]
    if not (outputs or exclude or by_type):
        return
    graph = proto.graph
    names = _names(graph)
    wanted: list[str] = []
    if outputs:
        wanted = [*names] if onnx_models.wants_all(outputs) else expand(outputs, names, "--onnx-outputs")
        if onnx_models.wants_all(outputs):
            wanted = [o for node in graph.node for o in node.output if o]
    else:
        wanted = [o.name for o in graph.output]
    if by_type:
        types = {node.op_type.lower() for node in graph.node}
        for missing in [t for t in by_type if t not in types]:
            echo(f"parity: warning: --onnx-outputs-by-type: the model has no node of type '{missing}'", err=True)
        wanted += [o for node in graph.node if node.op_type.lower() in by_type for o in node.output if o]
    dropped = set(expand(exclude, names, "--onnx-exclude-outputs")) if exclude else set()
    onnx_models.mark_outputs(proto, [n for n in dict.fromkeys(wanted) if n not in dropped])


def write_options(func: Callable) -> Callable:
    """Polygraphy's model-writing flags (with ``--external-data-path``, its alias of ``--save-external-data``), as a
    decorator; ``parity.commands.external_data_from_params`` reads them."""
    params = [
        click.Option(
            ["--save-external-data", "--external-data-path"], is_flag=False, flag_value="", default=None, metavar="[PATH]",
            help="Write weights to an external data file beside the output (PATH: its name, default OUTPUT.data).",
        ),
        click.Option(["--external-data-size-threshold"], default=None, metavar="SIZE", help="With --save-external-data: smaller tensors stay inside [1024 bytes]."),
        click.Option(["--no-save-all-tensors-to-one-file"], is_flag=True, help="With --save-external-data: one data file per tensor."),
    ]  # fmt: skip
    func.__dict__.setdefault("__click_params__", []).extend(reversed(params))
    return func


def quiet_graphsurgeon() -> None:
    """graphsurgeon's pattern matcher logs every node it tries at INFO on stdout: only its errors, unless -v."""
    from onnx_graphsurgeon.logger import G_LOGGER  # here: the commands' --help never needs graphsurgeon

    if not SETTINGS.get("verbose"):
        G_LOGGER.severity = G_LOGGER.ERROR
