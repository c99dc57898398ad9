"""``parity inspect model`` and ``parity inspect data``."""

from __future__ import annotations

import inspect
import json
import os
import sys
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import click

from parity.cli.common import echo, verbosity_options
from parity.cli.options import add_unique, external_data_read_options, onnx_load_options
from parity.cli.parsing import GreedyOption, ParityCommand
from parity.cli.tensorflow_flags import tensorflow_options
from parity.errors import UsageError
from parity.plugins import get_registry
from parity.util.fs import check_model_path

if TYPE_CHECKING:  # annotations only: inspect's --help must not import numpy
    from collections.abc import Mapping

    from parity.data.meta import TensorMeta
    from parity.registry import ModelKind


def make_model_command() -> click.Command:
    """``parity inspect model``, built when it is used: the model kinds' options come from the registry."""
    params: list[click.Parameter] = [
        click.Argument(["model"]),
        GreedyOption(["--show"], type=click.Choice(["layers", "attrs", "weights"]), help="Also show layers, their attributes, weights."),
        click.Option(["--model-type"], default=None, help="Model kind when the suffix does not tell."),
        click.Option(
            ["--display-as", "--convert-to", "display_as"], metavar="NAME", default=None,
            help="An ONNX model as ONNX (default) or as a backend reads it: NAME is a plugin's NAME-network model kind "
            "(with the TensorRT plugin, Polygraphy's choice: as TensorRT's ONNX parser builds the network). "
            "--convert-to is Polygraphy's other name of it.",
        ),
        click.Option(
            ["--list-unbounded-dds"], is_flag=True,
            help="ONNX: also list the tensors that give a Range/Pad/Resize/Tile/Expand output an unbounded data-dependent shape.",
        ),
        # with --list-unbounded-dds: shape inference first (tensors without shape info count as data-dependent)
        *onnx_load_options(),  # --fp-to-fp16: the model shown as the fp16 converter writes it
        click.Option(["--json", "as_json"], is_flag=True, help="Print inputs, outputs and model facts as JSON (schema: parity/schemas/model.schema.json)."),
        format_option(),
        click.Option(["--visual"], is_flag=True, help="ONNX: serve the graph as an interactive page on 127.0.0.1 (nodes clickable for "
                     "their tensors and attributes) until Ctrl+C; a browser opens only where there is a display."),
        click.Option(["--visual-port"], type=click.IntRange(0, 65535), default=None, metavar="PORT",
                     help="With --visual: the port to serve on [8000]; 0 picks a free one. Forward it to view from another machine."),
        click.Option(["--save-visual"], metavar="FILE", default=None,
                     help="ONNX: write --visual's page to FILE (one self-contained HTML file, no internet needed) instead of serving it."),
    ]
    # ONNX models' external data (Polygraphy's flags): inspect reads no weight byte, so the data files may be absent
    add_unique(params, external_data_read_options(ignore=True))
    for kind in get_registry().model_kinds.values():
        add_unique(params, kind.options)
    add_unique(params, [_save_timing_cache_option()])  # after the kinds': one that builds an engine would own it
    params += tensorflow_options(("--ckpt", "--freeze-graph"))  # hidden: each refuses in one line (no TensorFlow backend)
    return verbosity_options(ParityCommand(
        "model",
        params=params,
        callback=inspect_model,
        help=(
            "Show a model's inputs, outputs and (with --show) layers, attributes and weights.\n\n"
            "Of an ONNX model with external data no weight is read: its data files are checked to exist (in "
            "--external-data-dir, default the model's folder), or not at all with --ignore-external-data."
        ),
    ))


FORMAT_ENV = "PARITY_INSPECT_FORMAT"


def _save_timing_cache_option() -> click.Option:
    """Polygraphy's ``--save-timing-cache`` of inspect model (its TensorRT engine-building flags): inspect reads
    an engine or shows a network and builds none, so there is no timing cache to save; refused in one line."""

    def refuse(ctx: click.Context, param: click.Parameter, value: object) -> None:  # noqa: ARG001 - click's callback signature
        if value is not None:
            raise UsageError("--save-timing-cache: inspect model builds no engine (it reads one, or shows the network), so no timing cache is made")

    return click.Option(["--save-timing-cache"], metavar="PATH", default=None, expose_value=False, callback=refuse,
                        help="Polygraphy's engine-building flag: refused, inspect model builds no engine.")  # fmt: skip


def inspect_model(model: str, **params: Any) -> int:
    """``--fp-to-fp16``: the model shown as the onnx converter writes it (a private copy, removed after); else as it is."""
    if not params.pop("fp_to_fp16", False):
        return _inspect_model(model, **params)
    import tempfile  # 4.5 ms at start-up: only --fp-to-fp16 stages a copy

    from parity.cli.run import detect_model_kind  # here: as _inspect_model's, which inspect --help never needs
    from parity.from_options import stage_loaded_onnx  # here: only --fp-to-fp16 stages a copy

    check_model_path(model)
    if detect_model_kind(model, get_registry(), params.get("model_type")) != "onnx":
        raise UsageError(f"--fp-to-fp16 converts an ONNX model; {model} is not one")
    if params.get("ignore_external_data"):
        raise UsageError("--fp-to-fp16 converts the weights, which --ignore-external-data leaves unread")
    with tempfile.TemporaryDirectory(prefix="parity-inspect-") as folder:
        staged, base = stage_loaded_onnx(model, {"fp_to_fp16": True, "external_data_dir": params.get("external_data_dir")}, folder)
        token = _STAGED.set((staged, model))
        try:
            return _inspect_model(staged, **{**params, "external_data_dir": base})
        finally:
            _STAGED.reset(token)


# (staged copy, the model given): what inspect shows names the model given, not its converted copy
_STAGED: ContextVar[tuple[str, str] | None] = ContextVar("parity_inspect_staged", default=None)


def _as_given(text: str) -> str:
    staged = _STAGED.get()
    return text.replace(json.dumps(staged[0])[1:-1], json.dumps(staged[1])[1:-1]).replace(staged[0], staged[1]) if staged else text


def format_option() -> click.Option:
    """``--format parity|polygraphy``: the text layout. Parity's by default; Polygraphy 0.53.6's (for scripts that
    parse it) with ``--format polygraphy`` or PARITY_INSPECT_FORMAT=polygraphy (refused for a model without it), or
    by default when the command runs under the name ``polygraphy`` (a link or script installed in Polygraphy's
    place; a model without it then prints Parity's)."""
    return click.Option(
        ["--format", "layout"], type=click.Choice(["parity", "polygraphy"]), default=None, envvar=FORMAT_ENV, show_envvar=True,
        help="Text layout: Parity's (default) or Polygraphy 0.53.6's exact one, for scripts that parse it (ONNX "
        "models, and model kinds whose plugin provides it). Run under the name 'polygraphy', the default is "
        "Polygraphy's where a model has it.",
    )


def resolve_layout(layout: str | None) -> tuple[str, bool]:
    """The layout asked for and whether it was asked for explicitly: the option (or its environment variable),
    else Polygraphy's under the name ``polygraphy`` (not explicit), else Parity's."""
    if layout:
        return layout, True
    return ("polygraphy" if os.path.basename(sys.argv[0] if sys.argv else "") == "polygraphy" else "parity"), False


def make_data_command() -> click.Command:
    return verbosity_options(ParityCommand(
        "data",
        params=[
            click.Argument(["path"]),
            click.Option(["-s", "--show-values"], is_flag=True, help="Print the values too."),
            click.Option(["-a", "--all", "show_all"], is_flag=True, help="Every iteration, not only the first."),
            click.Option(["--histogram"], is_flag=True, help="A histogram of each tensor's magnitudes."),
            click.Option(
                ["-n", "--num-items"], type=int, default=None,
                help="With --show-values: values shown at the start and end of each dimension (default 3); -1 shows every value.",
            ),
            click.Option(
                ["--line-width"], type=int, default=None,
                help="With --show-values: characters per line of values (default 100); -1 breaks lines only between rows.",
            ),
        ],
        callback=inspect_data,
        help="Show saved inputs or outputs (Parity or Polygraphy files) with statistics per tensor.",
    ))


_EXTERNAL = {"external_data_dir": "--external-data-dir", "ignore_external_data": "--ignore-external-data"}


def _inspect_model(
    model: str,
    show: tuple[str, ...],
    model_type: str | None,
    as_json: bool = False,
    display_as: str | None = None,
    list_unbounded_dds: bool = False,
    shape_inference: bool = False,
    layout: str | None = None,
    visual: bool = False,
    visual_port: int | None = None,
    save_visual: str | None = None,
    **options: object,
) -> int:
    from parity.cli.run import detect_model_kind

    registry = get_registry()
    check_model_path(model)
    kind = detect_model_kind(model, registry, model_type)
    _check_external_options(kind, options)
    onnx_inference_only = bool(options.pop("no_onnxruntime_shape_inference", False))
    if onnx_inference_only and not shape_inference:  # with it: onnx.shape_inference, all inspect runs
        raise UsageError("--no-onnxruntime-shape-inference chooses how --shape-inference infers shapes: add --shape-inference")
    if list_unbounded_dds and (kind != "onnx" or as_json):
        raise UsageError("--list-unbounded-dds applies to an ONNX model, without --json")
    kind = _display_kind(kind, display_as, as_json, registry.model_kinds)
    if (as_json or visual or save_visual) and _given("layout"):
        raise UsageError(f"--format lays out inspect's text; {'--json prints JSON' if as_json else '--visual draws a page'}: leave out --format")
    if visual or save_visual or visual_port is not None:
        return _visual(model, kind, visual, visual_port, save_visual, as_json or list_unbounded_dds, options)
    layout, explicit = resolve_layout(layout)
    polygraphy = layout == "polygraphy" and not as_json and (explicit or _has_polygraphy_layout(kind, registry.model_kinds))
    # Polygraphy's layout of an ONNX model shows the inferred shapes of every tensor; Parity's shows none
    if shape_inference and not list_unbounded_dds and not (polygraphy and kind == "onnx"):
        raise UsageError("--shape-inference applies to --list-unbounded-dds, or to an ONNX model with --format polygraphy "
                         "(inspect model shows no intermediate shapes)")
    if polygraphy:
        options["onnx_inference_only"] = onnx_inference_only
        return _inspect_polygraphy(model, kind, set(show), list_unbounded_dds, shape_inference, options)
    if as_json and kind is not None:
        echo(_as_given(json.dumps(model_json(model, kind, registry.model_kinds[kind], options), indent=1)))
        return 0
    if kind is None or registry.model_kinds[kind].describe is None:
        raise UsageError(f"don't know how to read {model}; give --model-type ({', '.join(registry.model_kinds)})")
    describe = registry.model_kinds[kind].describe
    # describe(path, show) is the original contract; options came later: old plugins must keep working
    args = (model, set(show), options) if _takes_positional(describe, 3) else (model, set(show))
    echo(_as_given(describe(*args)))  # type: ignore[misc]
    if list_unbounded_dds:
        found = unbounded_dds_tensors(model, shape_inference)
        listed = ", ".join(f"{name} (input {index} of {op} '{node}')" for name, op, index, node in found)
        echo(f"Found tensors with unbounded DDS: {listed}" if found else "No tensors with unbounded DDS found.")
    return 0


def _inspect_polygraphy(
    model: str, kind: str | None, show: set[str], list_unbounded_dds: bool, shape_inference: bool, options: dict[str, object]
) -> int:
    """``--format polygraphy``: Polygraphy 0.53.6's text. ONNX models are laid out by the core; another model kind
    by its plugin where its ``describe`` takes ``layout=`` (else refused: no layout is guessed)."""
    from parity.cli import inspect_layout as pl  # here, not at the top: `inspect model --help` never needs it

    kinds = get_registry().model_kinds
    if not _has_polygraphy_layout(kind, kinds):
        raise UsageError(f"--format polygraphy: Polygraphy's layout is not available for {kind or 'this model'}; give --format parity")
    if kind == "onnx":
        found = [name for name, *_ in unbounded_dds_tensors(model, shape_inference)] if list_unbounded_dds else None
        inference = ("onnx" if options.get("onnx_inference_only") else "onnxruntime") if shape_inference else None
        echo(_as_given(pl.describe_onnx(model, show, options, inference, found)))
    else:
        echo(_as_given(kinds[kind].describe(model, show, options, layout="polygraphy")))  # type: ignore[call-arg,index,misc]
    return 0


def _given(name: str) -> bool:
    """Whether the option was given on the command line (not by its environment variable or default)."""
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE


def _visual(model: str, kind: str | None, visual: bool, port: int | None, save: str | None, text: bool, options: dict[str, object]) -> int:
    """--visual / --save-visual: the graph page instead of text (Polygraphy's flags); ONNX models only."""
    if port is not None and not visual:
        raise UsageError("--visual-port sets the port --visual serves on: give --visual too")
    if visual and save:
        raise UsageError("--visual serves the page and --save-visual writes it to a file: give one")
    flag = "--visual" if visual else "--save-visual"
    if kind != "onnx":
        raise UsageError(f"{flag} draws ONNX models; {kind or 'this model'} is not one (give the ONNX model, without --display-as)")
    if text:
        raise UsageError(f"{flag} shows the graph as a page, not text: leave out --json and --list-unbounded-dds")
    from parity.cli import inspect_visual  # here, not at the top: http.server alone costs 0.18 s at start-up

    if save:
        inspect_visual.save(model, save, options)
    else:
        inspect_visual.serve(model, 8000 if port is None else port, options)
    return 0


def _has_polygraphy_layout(kind: str | None, kinds: Mapping[str, ModelKind]) -> bool:
    """ONNX (the core's), or a plugin's model kind whose ``describe`` takes ``layout=``."""
    if kind == "onnx":
        return True
    describe = kinds[kind].describe if kind in kinds else None
    try:
        return describe is not None and "layout" in inspect.signature(describe).parameters
    except (TypeError, ValueError):  # no signature: assume the original contract
        return False


# op -> the inputs that, when computed at run time, give its output a data-dependent size with no upper bound
_DDS_INPUTS = {"Range": (1,), "Pad": (1,), "Resize": (3,), "Tile": (1,), "Expand": (1,)}


def unbounded_dds_tensors(model: str, shape_inference: bool = False) -> list[tuple[str, str, int, str]]:
    """``(tensor, op, input index, node name)`` for each run-time tensor that sets the size of a Range, Pad, Resize,
    Tile or Expand output whose shape brings a new dynamic dimension (or has no shape information): TensorRT needs
    an upper bound on it (a Min before it gives one). The main graph, in node order."""
    from parity.onnx_models import load  # here, not at the top: `inspect model --help` never needs the ONNX helpers

    proto = load(model, load_external_data=False, ignore_external_data=True)
    if shape_inference:
        import onnx  # here, not at the top: only --shape-inference needs it

        proto = onnx.shape_inference.infer_shapes(proto)
    graph = proto.graph
    shapes = {v.name: v.type.tensor_type.shape for v in (*graph.input, *graph.value_info, *graph.output) if v.type.tensor_type.HasField("shape")}
    seen = {d.dim_param for v in graph.input if v.name in shapes for d in shapes[v.name].dim if d.dim_param}
    constants = {t.name for t in graph.initializer}
    producer: dict[str, str] = {}
    found: list[tuple[str, str, int, str]] = []
    for node in graph.node:
        if node.op_type == "Constant":
            constants.update(node.output)
        new_dim = False
        for out in node.output:
            if out not in shapes:
                new_dim = True  # no shape information: it may be data-dependent
                continue
            for dim in shapes[out].dim:
                if dim.dim_param and dim.dim_param not in seen:
                    seen.add(dim.dim_param)
                    new_dim = True
        for index in _DDS_INPUTS.get(node.op_type, ()) if new_dim else ():
            name = node.input[index] if index < len(node.input) else ""
            # a graph input, a constant or a Min's output (the bound) is not the cause
            if name and name not in constants and producer.get(name, "Min") != "Min" and name not in {f[0] for f in found}:
                found.append((name, node.op_type, index, node.name))
        producer.update({out: node.op_type for out in node.output})
    return found


def _display_kind(kind: str | None, display_as: str | None, as_json: bool, kinds: Mapping[str, ModelKind]) -> str | None:
    """The model kind that describes the model: ``--display-as X`` reads an ONNX model through the model kind
    ``X-network`` a plugin registers (the TensorRT plugin's reads it through TensorRT's parser, as Polygraphy's
    ``--display-as`` does)."""
    if display_as is None or display_as == kind:
        return kind
    if kind != "onnx":
        raise UsageError(f"--display-as {display_as} shows an ONNX model another way; {kind or 'this model'} is not ONNX")
    if as_json:
        raise UsageError(f"--display-as {display_as} and --json: --json describes the ONNX model itself")
    network = f"{display_as}-network"  # a plugin that reads ONNX models its own way registers this model kind
    if network not in kinds:
        shown = sorted(["onnx", *(k.removesuffix("-network") for k in kinds if k.endswith("-network"))])
        raise UsageError(f"--display-as {display_as}: no installed plugin reads ONNX models as '{display_as}' (model kind '{network}'); "
                         f"available: {', '.join(shown)} ('parity plugins' lists what is installed)")
    return network


def _check_external_options(kind: str | None, options: dict[str, object]) -> None:
    """``--external-data-dir`` and ``--ignore-external-data`` apply to ONNX models, and not together."""
    given = [flag for key, flag in _EXTERNAL.items() if options.get(key)]
    if given and kind != "onnx":
        raise UsageError(f"{given[0]} applies to ONNX models; {kind or 'this model'} has no external data")
    if len(given) == 2:
        raise UsageError("--external-data-dir and --ignore-external-data: give one (the second skips the data the first locates)")
    if options.get("external_data_dir"):
        from parity.onnx_models import data_dir  # here, not at the top: `inspect model --help` never needs the ONNX helpers

        data_dir("", options["external_data_dir"])  # one line when it is not a folder


def model_json(model: str, kind: str, spec: ModelKind, options: dict[str, object] | None = None) -> dict[str, Any]:
    """``inspect model --json``: format parity-model, version 1 (parity/schemas/model.schema.json).
    ``options``: the command's options, given to ``summarize(path, options)`` where it takes them."""
    if not spec.summarize:
        facts: dict[str, Any] = {}
    elif options is not None and _takes_positional(spec.summarize, 2):
        facts = spec.summarize(model, options)  # type: ignore[call-arg]
    else:
        facts = spec.summarize(model)
    data: dict[str, Any] = {"format": "parity-model", "version": 1, "model": model, "kind": kind, "inputs": spec.read_inputs(model)}
    data.update(facts)
    for key in ("inputs", "outputs"):
        if key in data:
            data[key] = {name: _meta_json(meta) for name, meta in data[key].items()}
    return data


def _meta_json(meta: TensorMeta) -> dict[str, Any]:
    shape = None if meta.shape is None else [d if isinstance(d, (int, str)) or d is None else str(d) for d in meta.shape]
    return {"dtype": None if meta.dtype is None else str(meta.dtype), "shape": shape}


def _takes_positional(func: object, count: int) -> bool:
    try:
        params = inspect.signature(func).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):  # builtins without a signature: assume the current contract
        return True
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params) >= count


def describe_tensor(name: str, array, values: bool, histogram: bool, num_items: int = 3, line_width: int = 100) -> list[str]:
    import numpy as np

    from parity.compare import stats

    arr = np.asarray(array)
    lines = [f"  {name}: {arr.dtype.name}{list(arr.shape)}"]
    if arr.size and (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        s = stats.summarize(stats.as_float(arr))
        lines[0] += f" | mean {s.mean:.4g} std {s.std:.4g} min {s.min:.4g} max {s.max:.4g} median {s.median:.4g}"
        if s.nan or s.inf:
            lines[0] += f" | NaN {s.nan} Inf {s.inf}"
        if histogram:
            lines += [f"      {label:>16} {count}" for label, count in stats.decade_histogram(stats.as_float(arr))]
    if values:
        # -1 lifts the limit (Polygraphy's convention); sys.maxsize is numpy's "no limit"
        everything = num_items == -1
        with np.printoptions(
            threshold=sys.maxsize if everything else 200,
            edgeitems=sys.maxsize if everything else num_items,
            linewidth=sys.maxsize if line_width == -1 else line_width,
        ):
            lines += ["      " + line for line in str(arr).splitlines()]
    return lines


def _print_limit(flag: str, value: int | None, default: int, show_values: bool) -> int:
    if value is None:
        return default
    if not show_values:
        raise UsageError(f"{flag} shapes printed values: give --show-values too")
    if value < 1 and value != -1:
        raise UsageError(f"{flag} {value}: give a positive count, or -1 for no limit")
    return value


def inspect_data(
    path: str, show_values: bool, show_all: bool, histogram: bool, num_items: int | None = None, line_width: int | None = None
) -> int:
    from parity.results.files import file_kind, load_inputs, load_results

    printing = {
        "num_items": _print_limit("--num-items", num_items, 3, show_values),
        "line_width": _print_limit("--line-width", line_width, 100, show_values),
    }

    kind = file_kind(path)
    if kind == "inputs":
        feeds = load_inputs(path)
        echo(f"{path}: inputs, {len(feeds)} iteration(s)")
        for i, feed in enumerate(feeds if show_all else feeds[:1]):
            echo(f"iteration {i}:")
            for name, arr in feed.items():
                for line in describe_tensor(name, arr, show_values, histogram, **printing):
                    echo(line)
    else:
        results = load_results(path)
        echo(f"{path}: outputs of {len(results)} runner(s)")
        for runner, iterations in results:
            echo(f"{runner}: {len(iterations)} iteration(s)")
            for i, it in enumerate(iterations if show_all else iterations[:1]):
                runtime = f" (runtime {it.runtime * 1000:.3f} ms)" if it.runtime else ""
                echo(f" iteration {i}{runtime}:")
                for name, arr in it.items():
                    for line in describe_tensor(name, arr, show_values, histogram, **printing):
                        echo(line)
    return 0
