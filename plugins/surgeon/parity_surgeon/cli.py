"""The surgeon plugin's commands. Heavy imports happen inside the callbacks."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import click

from parity.api import (
    SETTINGS,
    ExitCode,
    GreedyOption,
    UsageError,
    check_model_path,
    echo,
    get_registry,
    json_default,
    onnx_external,
    onnx_models,
    parse_shapes,
    parse_size,
    refuse_overwrite,
    write_text_atomic,
)
from parity.commands import (
    ParityCommand,
    data_loader_options,
    external_data_from_params,
    external_data_options,
    input_shapes_option,
    no_onnxruntime_shape_inference_option,
    note_external_data,
    onnx_load_options,
    verbosity_options,
    with_params,
)
from parity_surgeon.onnx_load import onnxrt_session_options


def _check_model(model: str, output: str | None = None) -> None:
    check_model_path(model)
    refuse_overwrite(model, output)


def _open_lazy(model: str, output: str | None, params: dict[str, Any]) -> tuple[Any, Any, Any, list[Path]]:
    """The surgeon commands' reading half: refuse a bad writing flag, read the graph with its weights left in
    their files (``--external-data-dir`` or the model's folder; each data file checked, none read) and refuse an
    output that would land on the input or one of its data files, all before any work.
    Returns ``(model proto, base_dir, ExternalData, the input's data files)``."""
    from parity_surgeon import graph as g  # here, not at the top: the commands' --help imports this module and never needs it

    _check_model(model, output)
    if params.get("ignore_external_data") and output is not None:
        raise UsageError(
            "--ignore-external-data: this command writes a model, and a written model carries its weights (one onnxruntime "
            "cannot load is never written); give --external-data-dir where they are"
        )  # fmt: skip
    if params.get("no_onnxruntime_shape_inference") and "shape_inference" in params and not params["shape_inference"]:
        raise UsageError("--no-onnxruntime-shape-inference chooses how --shape-inference infers shapes: add --shape-inference")
    external = external_data_from_params(params)
    base = onnx_models.data_dir(model, params.get("external_data_dir"))
    proto = g.load(model, lazy=True, external_data_dir=base)
    sources = onnx_external.data_files(proto, base)
    if output is not None:
        outs = onnx_external.planned_data_files(proto, output, external)
        refuse_overwrite({"the input model": model, "the input model's external data": sources}, output, **{"the output's data file": outs})
    return _as_read(proto, base, params), base, external, sources


def _as_read(proto: Any, base: Any, params: dict[str, Any]) -> Any:
    """Polygraphy's loading steps, in its order: ``--fp-to-fp16``, then ``--shape-inference`` (onnxruntime's
    symbolic inference where it applies, unless ``--no-onnxruntime-shape-inference``)."""
    if params.get("fp_to_fp16"):
        from parity_surgeon.fp16 import Fp16Converter  # here: only --fp-to-fp16 needs the converter

        proto, report = Fp16Converter(proto, keep_io_types=True, base_dir=base).build()
        for line in report.lines():
            echo(line, err=True)
    if params.get("shape_inference"):
        from parity_surgeon.sanitizer import infer_shapes  # here: only --shape-inference needs it

        proto, status, symbolic, notes = infer_shapes(proto, onnxruntime=not params.get("no_onnxruntime_shape_inference"))
        for note in notes if SETTINGS["verbose"] else ():
            echo(f"parity: note: {note}", err=True)
        if status != "ok":
            echo(f"parity: note: --shape-inference {status}", err=True)
        elif SETTINGS["verbose"]:
            echo(f"Inferred shapes in the model with {'`onnxruntime.tools.symbolic_shape_infer`' if symbolic else '`onnx.shape_inference`'}")
    return proto


def _feed(model: str, params: dict[str, Any], run: str) -> Mapping[str, Any] | None:
    """The inputs of the one onnxruntime run a command makes (``run`` names it), from the data loader flags
    given; None when none is given (the command generates its own)."""
    from parity.api import as_feed, make_data_loader  # here: only a run that the user feeds needs them

    if not data_flags_given():
        return None
    if params.get("iterations", 1) > 1:
        raise UsageError(f"--iterations {params['iterations']}: {run} runs the model once")
    return _LazyFeed(lambda: as_feed(next(iter(make_data_loader(params, model, "onnx", get_registry()))), 0))


class _LazyFeed(Mapping):
    """Inputs made when first read: a run that turns out not to be needed makes (and warns about) none."""

    def __init__(self, make: Callable[[], dict[str, Any]]) -> None:
        self._make, self._data = make, None

    def _feed(self) -> dict[str, Any]:
        if self._data is None:
            self._data = self._make()
        return self._data

    def __getitem__(self, name: str) -> Any:
        return self._feed()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._feed())

    def __len__(self) -> int:
        return len(self._feed())


# the data loader's parameters (parity.commands.data_loader_options, and the input shapes it reads)
_DATA_PARAMS = ("seed", "val_range", "iterations", "data_loader_script", "data_loader", "load_inputs", "input_shapes", "data_loader_backend_module")


def data_flags_given() -> list[str]:
    """The data loader flags on the command line, as written (``--seed``)."""
    ctx = click.get_current_context()
    given = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
    return [p.opts[0] for p in ctx.command.params if p.name in _DATA_PARAMS and ctx.get_parameter_source(p.name or "") in given]


def _wrote(saved: Any) -> str:
    data = f" + {', '.join(f.name for f in saved.data_files)}" if saved.data_files else ""
    return f"wrote {saved.path}{data}"


def _size(text: str | None, option: str) -> int | None:
    if text is None or str(text).lower() in ("none", "0", "off"):
        return None
    return parse_size(text, option, "{option}: cannot read '{text}'; write a size such as 16M or 1G (or none)")


# --- surgeon sanitize -------------------------------------------------------------------------------


@click.command("sanitize", cls=ParityCommand, short_help="Fold constants, clean up, toposort, fix input shapes.")
@click.argument("model")
@click.option("-o", "--output", required=True, type=click.Path(), help="Where to write the sanitized model.")
@click.option("--fold-constants", is_flag=True, help="Fold constant subgraphs, repeating until nothing changes.")
@click.option("--cleanup", is_flag=True, help="Remove unused nodes, tensors and initializers.")
@click.option("--toposort", is_flag=True, help="Sort nodes topologically.")
@click.option(
    "--override-input-shapes", "--override-inputs", cls=GreedyOption, metavar="NAME:[D0,..]",
    help="Set input shapes, e.g. x:[1,3,224,224] (then inference and folding use them).",
)  # fmt: skip
@click.option("--fold-size-threshold", default="64M", show_default=True, metavar="SIZE", help="Largest folded tensor kept as a constant (none: no limit).")
@click.option("--num-passes", "--num-const-fold-passes", type=click.IntRange(min=1), default=10, show_default=True, help="Most folding passes.")
@click.option("--no-fold-shapes", is_flag=True, help="Do not fold Shape nodes (keeps dynamic shapes dynamic).")
@click.option(
    "--partitioning", type=click.Choice(["basic", "recursive"]), default=None,
    help="Fold in partitions: a part that fails to fold leaves the rest folded (recursive: split those).",
)  # fmt: skip
@click.option("--no-per-pass-shape-inference", is_flag=True, help="Do not infer shapes between folding passes.")
@click.option("--no-shape-inference", is_flag=True, help="Skip shape inference.")
@with_params(no_onnxruntime_shape_inference_option())
@click.option("--force-fallback-shape-inference", is_flag=True, help="Every tensor's shape and dtype from one onnxruntime run (dynamic dims become static).")
@click.option("--outputs", cls=GreedyOption, metavar="TENSOR", help="Make these tensors the graph outputs ('mark all': every tensor); what no output needs is removed.")
@click.option("--exclude-outputs", cls=GreedyOption, metavar="TENSOR", help="Graph outputs to unmark (fnmatch patterns); what no output needs is removed.")
@click.option("--outputs-by-type", cls=GreedyOption, metavar="OP", help="Make the outputs of nodes of these op types (any case) graph outputs (with --outputs: both).")
@click.option(
    "--set-unbounded-dds-upper-bound", "upper_bounds", cls=GreedyOption, metavar="[TENSOR:]BOUND",
    help="Clamp tensors setting a data-dependent size (Range limit, Pad pads, Resize sizes, Tile repeats, Expand shape) with Min: 1000, x:4000.",
)  # fmt: skip
@with_params(*onnx_load_options(shape_inference=False))
@with_params(*data_loader_options())  # the inputs of the --force-fallback-shape-inference run
@external_data_options(ignore=True)
@verbosity_options
def sanitize_cmd(
    model: str,
    output: str,
    fold_constants: bool,
    cleanup: bool,
    toposort: bool,
    override_input_shapes: tuple[str, ...],
    fold_size_threshold: str | None,
    num_passes: int,
    no_fold_shapes: bool,
    partitioning: str | None,
    no_per_pass_shape_inference: bool,
    no_shape_inference: bool,
    no_onnxruntime_shape_inference: bool,
    force_fallback_shape_inference: bool,
    outputs: tuple[str, ...],
    exclude_outputs: tuple[str, ...],
    outputs_by_type: tuple[str, ...],
    upper_bounds: tuple[str, ...],
    **params: Any,
) -> int:
    """Sanitize MODEL and write it to -o OUTPUT, reporting what changed.

    \b
      parity surgeon sanitize model.onnx -o folded.onnx --fold-constants
      parity surgeon sanitize model.onnx -o static.onnx --override-input-shapes x:[1,3,224,224] --fold-constants
      parity surgeon sanitize llm.onnx -o llm_folded.onnx --fold-constants --save-external-data
      parity surgeon sanitize nms.onnx -o bounded.onnx --fold-constants --set-unbounded-dds-upper-bound 1000
    Shapes are inferred with onnxruntime's symbolic shape inference where it applies (all weights inside the
    model), else with onnx.shape_inference. Weights in external data files stay there: only those a
    foldable node reads are read; the rest are copied file to file into the output's data
    (--save-external-data, or automatically past 2 GiB).
    """
    # here, not at the top: the command's --help imports this module and never needs these
    from parity_surgeon import graph as g
    from parity_surgeon.sanitizer import outputs_of_types, sanitize

    if no_shape_inference and force_fallback_shape_inference:
        raise UsageError("--no-shape-inference and --force-fallback-shape-inference: give one")
    shapes = parse_shapes(override_input_shapes, "--override-input-shapes")
    threshold = _size(fold_size_threshold, "--fold-size-threshold")
    bounds = _parse_bounds(upper_bounds)
    if not fold_constants:
        ignored = [f for f, v in (("--partitioning", partitioning), ("--no-per-pass-shape-inference", no_per_pass_shape_inference)) if v]
        if ignored:
            raise UsageError(f"{' and '.join(ignored)}: only with --fold-constants")
    data_flags = data_flags_given()
    if data_flags and not force_fallback_shape_inference:
        raise UsageError(f"{data_flags[0]} sets the inputs of the --force-fallback-shape-inference run; this command runs no model without it")
    proto, base, external, sources = _open_lazy(model, output, params)
    feed = _feed(model, {**params, "input_shapes": override_input_shapes}, "--force-fallback-shape-inference") if data_flags else None
    if outputs_by_type:
        outputs = (*outputs, *outputs_of_types(proto, outputs_by_type))  # with --outputs: both
    result, report = sanitize(
        proto, fold_constants, cleanup, toposort, shapes, threshold, num_passes, not no_fold_shapes, not no_shape_inference, base_dir=base,
        partitioning=partitioning, per_pass_shape_inference=not no_per_pass_shape_inference, onnxruntime_shape_inference=not no_onnxruntime_shape_inference,
        outputs=outputs, force_fallback=force_fallback_shape_inference, upper_bounds=bounds, exclude_outputs=exclude_outputs, feed=feed,
    )  # fmt: skip
    if not (fold_constants or cleanup or toposort or shapes or outputs or exclude_outputs or bounds or force_fallback_shape_inference):
        echo("parity: note: no --fold-constants/--cleanup/--toposort/--override-input-shapes given: only shape inference ran", err=True)
    saved = g.save(result, output, model, "the sanitized model", base_dir=base, external=external, source_data=sources)
    for note in report.notes + (report.verbose_notes if SETTINGS["verbose"] else []):
        echo(f"parity: note: {note}", err=True)
    if report.shape_inference == "ok" and SETTINGS["verbose"]:
        echo(f"Inferred shapes in the model with {'`onnxruntime.tools.symbolic_shape_infer`' if report.symbolic else '`onnx.shape_inference`'}")
    for line in report.lines():
        echo(line)
    echo(_wrote(saved))
    return 0


def _parse_bounds(items: tuple[str, ...]) -> dict[str, int]:
    """``1000`` (every unbounded tensor) and ``name:4000`` (one tensor) -> {"": 1000, "name": 4000}."""
    bounds: dict[str, int] = {}
    for item in items:
        name, _, value = item.rpartition(":")
        try:
            bounds[name] = int(value)
        except ValueError:
            raise UsageError(f"--set-unbounded-dds-upper-bound: cannot read '{item}'; write a bound (1000) or tensor:bound (x:4000)") from None
        if bounds[name] < 0:
            raise UsageError(f"--set-unbounded-dds-upper-bound: '{item}': a bound is a whole number >= 0")
    return bounds


# --- surgeon extract --------------------------------------------------------------------------------


@click.command("extract", cls=ParityCommand, short_help="Cut out the subgraph between given tensors.")
@click.argument("model")
@click.option("-o", "--output", required=True, type=click.Path(), help="Where to write the subgraph.")
@click.option(
    "--inputs", cls=GreedyOption, metavar="NAME:SHAPE:DTYPE",
    help="Subgraph inputs; shape and dtype may be auto: x:auto:auto, x:[1,64]:float32 (default: the model's inputs the subgraph reads).",
)  # fmt: skip
@click.option("--outputs", cls=GreedyOption, metavar="NAME:DTYPE", help="Subgraph outputs; dtype may be auto: y:auto or y (default: the model's outputs).")
@click.option(
    "--force-fallback-shape-inference", is_flag=True,
    help="Boundary shapes and dtypes from one onnxruntime run, over the model's own (dynamic dims become static).",
)  # fmt: skip
@with_params(*onnx_load_options())
@with_params(input_shapes_option("--model-input-shapes", "--model-inputs"), *data_loader_options())  # the inputs of the fallback run
@external_data_options(ignore=True)
@verbosity_options
def extract_cmd(model: str, output: str, inputs: tuple[str, ...], outputs: tuple[str, ...], force_fallback_shape_inference: bool, **params: Any) -> int:
    """Extract the subgraph of MODEL that computes --outputs from --inputs.

    \b
      parity surgeon extract model.onnx --inputs x:auto:auto --outputs relu_out:auto -o sub.onnx
    Shapes and dtypes written auto come from the model, else from shape inference, else from running the
    model once on generated inputs (dynamic dims 1; noted). Of a model with external data only the kept
    nodes' weights are copied into the output (inside it, or in its data file with --save-external-data)."""
    # here, not at the top: the command's --help imports this module and never needs these
    from parity_surgeon import graph as g
    from parity_surgeon.extractor import RAN, extract, parse_input_spec, parse_output_spec

    in_specs, out_specs = [parse_input_spec(t) for t in inputs], [parse_output_spec(t) for t in outputs]
    proto, base, external, sources = _open_lazy(model, output, params)
    notes: list[str] = []
    events: list[str] = []
    feed = _feed(model, params, "the fallback shape inference")
    result = extract(proto, in_specs, out_specs, feed=feed, base_dir=base, force_fallback=force_fallback_shape_inference, notes=notes, events=events)
    if feed is not None and RAN not in events:
        notes.append(f"{', '.join(data_flags_given())}: the shapes and dtypes were known, so the model did not run on these inputs")
    saved = g.save(result, output, model, "the subgraph", base_dir=base, external=external, source_data=sources)
    for note in notes:
        echo(f"parity: note: {note}", err=True)
    if SETTINGS["verbose"]:
        for event in events:
            echo(event)
    echo(f"subgraph: {len(result.graph.node)} node(s), inputs {[i.name for i in result.graph.input]}, outputs {[o.name for o in result.graph.output]}")
    echo(_wrote(saved))
    return 0


# --- surgeon insert ---------------------------------------------------------------------------------


@click.command("insert", cls=ParityCommand, short_help="Replace the subgraph between tensors with one node.")
@click.argument("model")
@click.option("-o", "--output", required=True, type=click.Path(), help="Where to write the edited model.")
@click.option("--op", required=True, help="Op type of the new node (a custom op needs --domain).")
@click.option("--inputs", cls=GreedyOption, metavar="TENSOR", help="Tensors the new node reads.")
@click.option(
    "--outputs", cls=GreedyOption, metavar="TENSOR",
    help="Existing tensors the new node produces (old producers are removed if unused); one also in --inputs puts the node on that tensor.",
)  # fmt: skip
@click.option("--name", default=None, help="Name of the new node [OP_inserted].")
@click.option("--attrs", cls=GreedyOption, metavar="NAME=VALUE", help="Attributes as Python literals: alpha=0.5 axes=[0,1] mode=linear.")
@click.option("--domain", default=None, help="Op domain of the new node (added to the opset imports at version 1) [an op ONNX lacks: custom].")
@with_params(*onnx_load_options())
@external_data_options(ignore=True)
@verbosity_options
def insert_cmd(
    model: str, output: str, op: str, inputs: tuple[str, ...], outputs: tuple[str, ...], name: str | None, attrs: tuple[str, ...], domain: str | None, **params: Any
) -> int:
    """Insert one --op node computing --outputs from --inputs, replacing whatever computed them.

    \b
      parity surgeon insert model.onnx --op MyGelu --domain my.ops --inputs h --outputs g -o custom.onnx
      parity surgeon insert model.onnx --op MyPlugin --inputs h --outputs h --attrs alpha=0.5 -o plugged.onnx
    A tensor in both --inputs and --outputs gets the node inserted on it: its readers read the node's output
    (h_polygraphy_surgeon_insert_output; a graph output keeps its name). --attrs values are Python literals:
    0 int, 0.0 float, '0' or name str, [1,2] lists.
    """
    # here, not at the top: the command's --help imports this module and never needs these
    from parity_surgeon import graph as g
    from parity_surgeon.inserter import insert_node, parse_attrs

    parsed = parse_attrs(attrs)
    before, base, external, sources = _open_lazy(model, output, params)
    notes: list[str] = []
    result = insert_node(before, op, list(inputs), list(outputs), name, parsed, domain, notes=notes)
    saved = g.save(result, output, model, base_dir=base, external=external, source_data=sources)
    for note in notes:
        echo(f"parity: note: {note}", err=True)
    echo(f"nodes: {len(before.graph.node)} -> {len(result.graph.node)} (inserted {name or op + '_inserted'} ({op}))")
    echo(_wrote(saved))
    return 0


# --- check lint -------------------------------------------------------------------------------------


@click.command("lint", cls=ParityCommand, short_help="ONNX checker plus common model problems, one line each.")
@click.argument("model")
@click.option("-o", "--output", "report_path", type=click.Path(), help="Write a JSON report to PATH.")
@click.option("--no-onnxruntime", is_flag=True, help="Skip the onnxruntime load and run checks.")
@with_params(*onnx_load_options(shape_inference=False))
@with_params(input_shapes_option("--input-shapes", "--inputs"), *data_loader_options())  # the inputs of the onnxruntime run
@with_params(*onnxrt_session_options())  # its session: the onnxrt backend's --providers, --graph-optimization-level
@external_data_options(write=False, ignore=True)
@verbosity_options
def lint_cmd(model: str, report_path: str | None, no_onnxruntime: bool, external_data_dir: str | None, ignore_external_data: bool, **params: Any) -> int:
    """Check MODEL; exit 1 if any error is found (warnings alone pass).

    \b
      parity check lint model.onnx -o lint.json
      parity check lint llm.onnx --ignore-external-data
    External data files are checked to exist and be long enough, and onnxruntime maps them; with
    --ignore-external-data they need not exist, and the onnxruntime load is skipped. A model that loads runs
    once in onnxruntime, on generated inputs or those the data loader flags give (an error only running shows
    is an 'inference' error); one whose weights are in external data files runs only with such a flag (no
    weight is read otherwise). The JSON report holds Polygraphy's lint_entries and
    summary.passing/failing next to Parity's issues.
    """
    # here, not at the top: the command's --help imports this module and never needs these
    from parity_surgeon import graph as g
    from parity_surgeon.linter import lint

    _check_model(model)
    if external_data_dir is not None and ignore_external_data:
        raise UsageError("--external-data-dir and --ignore-external-data: give one (the second skips the data the first locates)")
    if report_path:
        refuse_overwrite(model, **{"-o/--output": report_path})
    data_flags = data_flags_given()
    if no_onnxruntime and data_flags:
        raise UsageError(f"{data_flags[0]} sets the inputs of the onnxruntime run, which --no-onnxruntime skips")
    source: Any = model
    if params.get("fp_to_fp16"):
        source = _as_read(g.load(model, lazy=True, external_data_dir=external_data_dir), onnx_models.data_dir(model, external_data_dir), params)
    feed, no_feed = (None, None) if no_onnxruntime else _lint_feed(model, params, bool(data_flags))
    report = lint(
        source, model, onnxruntime=not no_onnxruntime, external_data_dir=external_data_dir, ignore_external_data=ignore_external_data,
        feed=feed, run_external=bool(data_flags), providers=params.get("providers") or (), graph_optimization_level=params.get("graph_optimization_level"),
    )  # fmt: skip
    if no_feed:
        report.skipped.append(f"the onnxruntime run ({no_feed})")
    for skipped in report.skipped:
        echo(f"parity: note: skipped {skipped}", err=True)
    for issue in report.issues:
        echo(issue.line())
    counts = report.to_json()["summary"]
    click.echo(f"{'PASSED' if report.passed else 'FAILED'} | {counts['error']} error(s), {counts['warning']} warning(s) | {model}")
    if report_path:
        write_text_atomic(report_path, json.dumps(report.to_json(), indent=1))
    return int(ExitCode.PASSED if report.passed else ExitCode.MISMATCH)


def _lint_feed(model: str, params: dict[str, Any], given: bool) -> tuple[Mapping[str, Any] | None, str | None]:
    """The inputs lint runs the model on, from the data loader flags, or generated; and why there are none.
    Where no input can be made without flags (a dynamic dim Parity does not guess, a broken model), the run
    is left out, and the report says why."""
    if given:
        feed = _feed(model, params, "check lint")
        return (dict(feed) if feed is not None else None), None  # made now: a bad flag is a usage error, not the model's
    from parity.api import as_feed, first_line, make_data_loader  # here: only lint's run needs them

    try:
        return as_feed(next(iter(make_data_loader(params, model, "onnx", get_registry()))), 0), None
    except Exception as exc:  # noqa: BLE001 - a model whose inputs cannot be made: the checks say what is wrong with it
        return None, first_line(exc)


# --- convert --fp-to-fp16 ----------------------------------------------------------------------------


def convert_fp16(request: Any) -> None:
    """``parity convert --fp-to-fp16``: written tensor by tensor (weights read through memory maps, converted
    as they are written), in the layout the external-data flags ask for (see ``parity_surgeon.fp16.write_fp16``)."""
    # here, not at the top: the command's --help imports this module and never needs these
    from parity_surgeon.fp16 import write_fp16

    if not request.get("fp_to_fp16"):
        raise UsageError("writing an .onnx model needs a conversion: add --fp-to-fp16 (or pick --convert-to)")
    external = external_data_from_params(request.options)  # a modifier without --save-external-data: exit 2
    saved, report = write_fp16(
        request.model,
        request.output,
        external=external,
        external_data_dir=request.get("external_data_dir"),
        keep_io_types=request.get("keep_io_types") is not False,
        op_block_list=list(request.get("op_block_list", ())),
        node_block_list=list(request.get("node_block_list", ())),
        check_onnxruntime=not request.get("no_ort_check"),
        keep_out_of_range=not request.get("clamp_out_of_range"),
    )  # validated on the path before it appears: checker full check and an onnxruntime load, or a ModelError (exit 3)
    note_external_data(saved)
    for line in report.lines():
        echo(line)


# --- debug localize ---------------------------------------------------------------------------------


def _localize_html_data(result: Any, details: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The HTML report's data (parity.api.write_html_report) for one localization."""
    # here, not at the top: only --save-report-html needs them, and `debug localize --help` imports this module
    from parity_reports.api import layerwise_panels, layerwise_section

    from parity.api import GraphInfo, command_line  # here, as the line above: only --save-report-html needs them

    first = result.first
    section = layerwise_section(result.report.to_json(), details)
    section["compared_of"] = result.candidates
    notes = list(result.notes)
    if len(result.tensors) < result.candidates:
        notes.append(
            f"{len(result.tensors)} of {result.candidates} tensors were compared: the search stops after the batch holding the first divergence"
            + ("" if params.get("mode") == "bisect" else " (--all-tensors compares every one)")
        )
    facts = [
        ["model", result.model],
        ["reference model", result.reference_model or "(the same model)"],
        ["mode", result.mode],
        ["runs", f"{result.pair_runs} paired, {result.single_runs} single-node"],
        ["memory budget", f"{result.budget / (1 << 20):.0f} MiB (largest batch {result.largest_batch / (1 << 20):.1f} MiB)"],
        ["time", f"{result.seconds:.2f} s"],
    ]
    isolation = [
        {
            "node": v.node,
            "op_type": v.op_type,
            "tensor": v.tensor,
            "verdict": v.verdict,
            "own_max_abs": v.own.max_abs if v.own else None,
            "own_max_rel": v.own.max_rel if v.own else None,
            "full_max_abs": v.full.max_abs if v.full else None,
        }
        for v in result.isolation
    ]
    return {
        "title": "parity debug localize",
        "passed": first is None,
        "verdict": "PASSED" if first is None else "FAILED",
        "command": command_line(),
        "facts": facts,
        "layerwise": [section],
        "outputs": layerwise_panels(section, details, GraphInfo.from_onnx(result.model).outputs),
        "isolation": isolation,
        "notes": notes,
    }


def _extract_first(model: str, node: str, path: str, external_data_dir: str | None) -> None:
    """``--extract-to``: the node alone, cut from the model's graph with its weights read from their files
    (only this node's) and written with :func:`parity.api.save_model` (validated, atomic)."""
    from parity.api import onnx_models, save_model  # here: only --extract-to needs them
    from parity_surgeon.extractor import extract_node  # here: only --extract-to needs it

    proto = onnx_models.load(model, load_external_data=False, external_data_dir=external_data_dir)
    saved = save_model(extract_node(proto, node), path, base_dir=onnx_models.data_dir(model, external_data_dir), what=f"node '{node}' alone", missing_kernels_ok=True)
    if saved.automatic:
        echo(f"parity: note: the weights ({saved.weight_bytes / 2**30:.2f} GiB) are in {saved.data_files[0].name}: one file would pass protobuf's 2 GiB limit", err=True)
    echo(f"wrote {path} (node '{node}' alone)")


LOCALIZE_HELP = """Find the first node of MODEL whose output differs between two runners, and whether it introduces
the error or only propagates it; or, with --validate and one runner, the first node whose output holds
NaN or Inf.

\b
  parity debug localize model.onnx --onnxrt --onnxrt=graph-optimization-level=disable
  parity debug localize model.onnx --onnxrt --reference-model model_fp16.onnx --tolerance-preset fp16
  parity debug localize model_qdq.onnx --onnxrt --reference-model model.onnx --all-tensors
  parity debug localize big.onnx --onnxrt --onnxrt --memory-budget 1G
  parity debug localize model.onnx --onnxrt --onnxrt --mode bisect --isolate all
  parity debug localize model.onnx --onnxrt --validate

Tensors are compared in topological order, marked as outputs in batches that fit --memory-budget (default:
a quarter of available memory, at most 2 GiB); --mode bisect marks one tensor at a time instead. Each
batch runs as a segment of each runner's model, one runner after the other: the nodes its tensors need
that earlier segments did not run, reading only their weights from the external data files, fed the
tensors earlier segments of that runner computed; the budget counts those weights, the tensors and the
ones kept between segments, so a model past 2 GiB is searched in a fraction of its size. The
suspect node is then run alone on the first runner with the reference runner's inputs. A quantized (QDQ)
MODEL is paired with its float --reference-model through its DequantizeLinear outputs, with the SQNR of
each pair.
Exit codes: 0 no divergence (no NaN/Inf), 1 divergence (NaN/Inf) found, 2 usage error, 3 model or backend
failure."""

_SKIP_COMPARE = {
    "load_outputs", "save_outputs", "fail_fast", "validate",
    "check_average", "save_heatmaps", "show_heatmaps", "save_error_metrics_plot", "show_error_metrics_plot",
}  # fmt: skip


def make_localize_cmd() -> click.Command:
    from parity_reports.api import report_file_options  # here, as the options below: built when the command loads

    from parity.commands import backend_params, compare_options, data_options, external_data_read_options, model_options, onnx_options  # here, as above

    registry = get_registry()
    params: list[click.Parameter] = [
        click.Argument(["model"]),
        click.Option(["--reference-model"], type=click.Path(), default=None, help="The second runner runs this model (e.g. the fp32 original of an fp16 model)."),
        click.Option(["--memory-budget"], default=None, metavar="SIZE", help="Peak memory to aim for, e.g. 1G, 512M [1/4 of available, at most 2G]."),
        click.Option(
            ["--mode"],
            type=click.Choice(["batches", "bisect"]),
            default="batches",
            show_default=True,
            help="Mark tensors in budgeted batches, or bisect one tensor at a time.",
        ),
        click.Option(
            ["--isolate"], type=click.Choice(["suspect", "all", "none"]), default="suspect", show_default=True, help="Nodes to re-run alone with the reference's inputs."
        ),
        click.Option(["--all-tensors"], is_flag=True, help="Compare every tensor instead of stopping after the batch with the first divergence."),
        click.Option(["--extract-to"], type=click.Path(), default=None, help="Also write the first divergent node as a standalone model to PATH."),
        click.Option(
            ["--validate"], is_flag=True, help="With one runner and no reference: find the first node whose output holds NaN or Inf (in the same batches)."
        ),
        *model_options(),
        *onnx_options(),
        *external_data_read_options(),
        *data_options(),
        *[p for p in compare_options(registry) if p.name not in _SKIP_COMPARE],
        *report_file_options("per-node errors of the compared tensors"),
        *backend_params(registry),
    ]
    command = ParityCommand(
        "localize", params=params, callback=click.pass_context(localize_command), help=LOCALIZE_HELP, short_help="Find the first divergent node, in bounded memory."
    )
    command.parity_consumes = ("onnx_outputs", "onnx_exclude_outputs")  # localize marks these tensors itself, whatever the runners
    return verbosity_options(command)


def localize_command(ctx: click.Context, model: str, **params: Any) -> int:
    # here, not at the top: the command's --help imports this module and never needs these
    from parity.api import OutputNames, as_feed, check_output_path, make_compare_funcs, make_data_loader
    from parity.commands import cast_runner_settings
    from parity_surgeon.localizer import localize, runner_specs_from_cli

    registry = get_registry()
    _check_model(model)
    reference = params.get("reference_model")
    if reference:
        check_model_path(reference, "reference model")
    writes = {f"--{k.replace('_', '-')}": params.get(k) for k in ("report", "extract_to", "save_report_html", "save_model_explorer")}
    refuse_overwrite({"the model": model, "the --reference-model": reference, "the --load-inputs file": params.get("load_inputs")}, **writes)
    for option, path in writes.items():  # a bad output path fails before any work
        if path:
            check_output_path(path, option)
    html_path, explorer_path = params.get("save_report_html"), params.get("save_model_explorer")
    if params.get("validate") and (html_path or explorer_path):
        raise UsageError(f"{'--save-report-html' if html_path else '--save-model-explorer'} draws a comparison of two runners; --validate compares none")
    details: dict[str, Any] = {}
    observe = None
    if html_path or explorer_path:
        from parity_reports.api import tensor_detail  # only for the report options

        def observe(name: str, actual: Any, expected: Any, checks: Any) -> None:
            details[name] = tensor_detail(checks, actual, expected, sample=bool(html_path))

    chosen = ctx.meta.get("parity.runners", [])
    if not chosen:
        raise UsageError("choose the runners to compare: two backend flags (--onnxrt --onnxrt=...), or one and --reference-model (or one and --validate)")
    specs = runner_specs_from_cli(chosen, params, lambda backend, overrides: cast_runner_settings(backend, overrides, ctx))
    if params.get("iterations", 1) > 1:
        echo("parity: note: localize uses the first iteration's inputs", err=True)
    loader = make_data_loader({**params, "iterations": 1}, model, "onnx", registry)
    feed = as_feed(next(iter(loader)), 0)
    # each tensor's row needs the verdict, max errors, cosine and SQNR; the HTML report and Model Explorer each
    # tensor's histogram (details); nobody a median or percentile (VGG-19's 3 MB activations spent most of a
    # localize selecting medians nobody saw)
    statistics = "histogram" if html_path or explorer_path else "shown"
    funcs = make_compare_funcs({"compare_statistics": statistics, **params}, registry)
    OutputNames.from_options(params, registry).check_model(model, "onnx", None, marked=True, external_data_dir=params.get("external_data_dir"))
    result = localize(
        model,
        specs,
        reference_model=reference,
        feed=feed,
        compare_func=funcs,
        memory_budget=params.get("memory_budget"),
        mode=params["mode"],
        isolate=params["isolate"],
        stop_at_first=not params.get("all_tensors"),
        tensors=list(params.get("onnx_outputs") or ()) or None,
        exclude=list(params.get("onnx_exclude_outputs") or ()),
        progress=lambda msg: echo(f"  {msg}", err=True),
        validate=bool(params.get("validate")),
        observe=observe,
        external_data_dir=params.get("external_data_dir"),
    )
    for line in result.lines():
        echo(line)
    first = result.first
    if first is not None and params.get("extract_to") and first.node:
        _extract_first(model, first.node, params["extract_to"], params.get("external_data_dir"))
    if params.get("report"):
        write_text_atomic(params["report"], json.dumps(result.to_json(), indent=1, default=json_default, allow_nan=False))
    if html_path:
        from parity_reports.api import write_html_report  # only for --save-report-html

        write_html_report(html_path, _localize_html_data(result, details, params))
    if explorer_path:
        from parity_reports.api import error_node_data, write_node_data  # only for --save-model-explorer

        rows = [{"name": t.name, "passed": t.passed, "max_abs": t.max_abs, **{k: details.get(t.name, {}).get(k) for k in ("atol", "nan", "inf")}} for t in result.tensors]
        label = f"parity: max abs error, {result.report.actual} vs {result.report.reference}"
        write_node_data(explorer_path, error_node_data(model, rows, first.name if first else None, label))
    if result.validated:
        scanned = len(result.nonfinite.rows) if result.nonfinite else 0
        verdict = f"no NaN or Inf in {scanned} tensor(s)" if first is None else f"first NaN/Inf at '{first.name}' ({first.op_type})"
    else:
        verdict = "no divergence" if first is None else f"first divergence at '{first.name}' ({first.op_type})"
    click.echo(f"{'PASSED' if first is None else 'FAILED'} | {verdict} | {result.seconds:.2f}s")
    return int(ExitCode.PASSED if first is None else ExitCode.MISMATCH)
