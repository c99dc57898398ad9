"""Option sets shared by commands that run models (``run``, ``convert``, ``debug ...``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import click

from parity.cli.owners import owned
from parity.cli.parsing import BackendFlag, GreedyOption
from parity.console import echo
from parity.errors import UsageError
from parity.registry import Registry

if TYPE_CHECKING:  # pragma: no cover
    from parity.onnx_external import ExternalData, SavedModel


RANDOM = ("data", "random")  # generated inputs: --data-loader random, without --load-inputs or a script


def model_options() -> list[click.Parameter]:
    return [
        input_shapes_option("--input-shapes", "--inputs"),
        click.Option(["--model-type"], type=str, default=None, help="Model kind when the suffix does not tell (onnx, engine, ...)."),
    ]


def input_shapes_option(*flags: str) -> click.Option:
    """The shapes of the model's inputs (parameter ``input_shapes``): ``--input-shapes``/``--inputs``, or
    Polygraphy's ``--model-input-shapes``/``--model-inputs`` where a command's ``--inputs`` means something else."""
    # generated inputs read it, and backends that say so (TensorRT's default profile: Backend.honours)
    return owned(GreedyOption([*flags, "input_shapes"], metavar="NAME:[D0,D1,..]", help="Shapes of model inputs, e.g. x:[1,3,224,224] (sets dynamic dims)."), RANDOM)


def onnx_options() -> list[click.Parameter]:
    marking = GreedyOption(["--onnx-outputs"], metavar="NAME", help="Mark tensors as outputs: names, or 'mark all' for every tensor (layerwise).")
    return [
        owned(marking, ("core", marking.name)),  # read by the backends that declare it among their Backend.mark_options
        GreedyOption(["--onnx-exclude-outputs"], metavar="NAME", help="Outputs to leave out (with --onnx-outputs mark all)."),
    ]


def data_options() -> list[click.Parameter]:
    return [*data_loader_options(), click.Option(["--save-inputs"], type=click.Path(), help="Save the inputs used to PATH.")]


def data_loader_options() -> list[click.Parameter]:
    """Where a command's inputs come from (Polygraphy's data loader flags): generated, a script or saved files."""
    return [
        owned(click.Option(["--seed"], type=int, default=1, show_default=True, help="Seed of the random data."), RANDOM),
        owned(GreedyOption(["--val-range"], metavar="[NAME:][LO,HI]", help="Range of random values, per input or for all: [0,1] x:[-1,1]."), RANDOM),
        click.Option(["--iterations", "--iters"], type=click.IntRange(min=1), default=1, show_default=True, help="Number of inference iterations."),
        click.Option(["--data-loader-script"], metavar="FILE.py[:FUNC]", help="Python function (default load_data) returning an iterable of feed dicts."),
        click.Option(["--data-loader"], default="random", show_default=True, help="Registered data loader to use (see 'parity plugins')."),
        GreedyOption(["--load-inputs", "--load-input-data"], metavar="PATH", type=click.Path(), help="Feed saved inputs (Parity or Polygraphy files), in order."),
        owned(
            click.Option(
                ["--data-loader-backend-module"], type=click.Choice(["numpy", "torch"]), default=None,
                help="What draws the generated values: numpy (the default, Polygraphy's values) or torch's generator (same seeds); numpy arrays either way.",
            ),
            RANDOM,
        ),  # fmt: skip
    ]


def no_onnxruntime_shape_inference_option() -> click.Option:
    """Polygraphy's ``--no-onnxruntime-shape-inference`` (also on commands whose shape inference is on by default)."""
    return click.Option(
        ["--no-onnxruntime-shape-inference"], is_flag=True, help="Infer shapes with onnx.shape_inference only, not onnxruntime's symbolic shape inference."
    )


def onnx_load_options(*, shape_inference: bool = True, fp16: bool = True) -> list[click.Parameter]:
    """Polygraphy's ONNX loading flags besides the external-data ones: what is done to the model as it is read,
    before the command's own work (``--shape-inference``, ``--no-onnxruntime-shape-inference``, ``--fp-to-fp16``)."""
    params: list[click.Parameter] = []
    if shape_inference:
        params += [
            click.Option(["--shape-inference", "--do-shape-inference"], is_flag=True, help="Infer the shapes of the model's tensors as it is read."),
            no_onnxruntime_shape_inference_option(),
        ]
    if fp16:
        params.append(
            click.Option(["--fp-to-fp16"], is_flag=True, help="Convert float32 tensors and weights to float16 as the model is read (inputs and outputs stay float32).")
        )
    return params


def compare_options(registry: Registry) -> list[click.Parameter]:
    default = registry.comparators.get("simple")
    params: list[click.Parameter] = [
        GreedyOption(["--compare-func", "--compare"], metavar="NAME", help=f"Metrics that must all pass: {', '.join(sorted(registry.comparators))} [simple]."),
        # the default metric's options (simple's --atol, --rtol, ...) right after --compare-func; the other metrics' last
        *(default.options if default is not None else ()),
        click.Option(["--fail-fast"], is_flag=True, help="Stop at the first failing iteration."),
        click.Option(["--check-average"], is_flag=True, help="Judge each output's metric averaged over the iterations (with --check-error-stat mean|max|...)."),
        click.Option(["--validate"], is_flag=True, help="Fail when any output holds NaN or Inf."),
        GreedyOption(["--load-outputs", "--load-results"], metavar="PATH", type=click.Path(), help="Compare against saved (golden) outputs."),
        click.Option(["--save-outputs", "--save-results"], type=click.Path(), help="Save every runner's outputs to PATH."),
        click.Option(["--report"], type=click.Path(), help="Write a machine-readable JSON report to PATH."),
    ]
    for spec in registry.comparators.values():
        if spec is not default:
            params.extend(spec.options)
    return params


def marking_check_option() -> click.Option:
    """``parity run``'s switch for the unmarked rerun of each marked runner (:mod:`parity.compare.marking`)."""
    return click.Option(
        ["--marking-check/--no-marking-check"],
        default=True,
        show_default=True,
        help="With marked outputs, also run each marked runner without the marks and say where marking changed the model's own outputs; "
        "--no-marking-check saves that second session (TensorRT: a second engine build).",
    )


def backend_params(registry: Registry) -> list[click.Parameter]:
    params: list[click.Parameter] = []
    for backend in registry.backends.values():
        params.append(BackendFlag(backend.cli_flag, backend.name, backend.help or f"Run with {backend.name} (repeatable)."))
    for backend in registry.backends.values():
        params.extend(backend.options)
    return params


def add_unique(params: list[click.Parameter], options: Iterable[click.Option]) -> None:
    """Append ``options`` whose flags are not taken yet: several plugins may offer the same shared option
    (e.g. a backend's builder options on both ``run`` and ``convert``)."""
    seen = {o for p in params for o in getattr(p, "opts", [])}
    for option in options:
        if not seen & set(option.opts):
            params.append(option)
            seen.update(option.opts)


def external_data_read_options(ignore: bool = False) -> list[click.Parameter]:
    """Polygraphy's reading flags: ``--external-data-dir`` (alias ``--ext``) and, where structure is enough,
    ``--ignore-external-data``."""
    params: list[click.Parameter] = [
        click.Option(
            ["--external-data-dir", "--load-external-data", "--ext"],
            type=click.Path(file_okay=False),
            default=None,
            help="Folder of the model's external data files (default: the model's folder).",
        ),
    ]
    if ignore:
        params.append(click.Option(["--ignore-external-data"], is_flag=True, help="Read the model's structure only; its external data files need not exist."))
    return params


def external_data_write_options() -> list[click.Parameter]:
    """Polygraphy's writing flags, same names and meaning (docs/big-models.md)."""
    return [
        click.Option(
            ["--save-external-data", "--external-data-path"], is_flag=False, flag_value="", default=None, metavar="[PATH]",
            help="Write weights to an external data file beside the output (PATH: its name, default OUTPUT.data).",
        ),
        click.Option(
            ["--external-data-size-threshold"], default=None, metavar="SIZE",
            help="With --save-external-data: tensors smaller than this stay inside the model [default: 1024 bytes].",
        ),
        click.Option(["--no-save-all-tensors-to-one-file"], is_flag=True, help="With --save-external-data: one data file per tensor, named after it."),
    ]  # fmt: skip


def external_data_options(write: bool = True, ignore: bool = False) -> Callable[[Callable], Callable]:
    """The same options as a decorator, for commands written with ``@click.command``."""

    return with_params(*external_data_read_options(ignore), *(external_data_write_options() if write else []))


def with_params(*params: click.Parameter) -> Callable[[Callable], Callable]:
    """Shared option sets (lists of click parameters) as a decorator, for commands written with ``@click.command``."""

    def decorate(func: Callable) -> Callable:
        if isinstance(func, click.Command):
            func.params.extend(params)
        else:  # click reverses the decorators' list when it builds the command
            func.__dict__.setdefault("__click_params__", []).extend(reversed(params))
        return func

    return decorate


def external_data_from_params(params: Mapping[str, Any]) -> ExternalData:
    """How to write a model, from the writing flags; refuses a modifier given without ``--save-external-data``."""
    # here: only a command that writes a model reads these flags; `--help` never needs the writing layer
    from parity.onnx_external import ExternalData
    from parity.util.units import parse_size

    location = params.get("save_external_data")
    threshold = params.get("external_data_size_threshold")
    one_file = not params.get("no_save_all_tensors_to_one_file")
    if location is None:
        for flag, given in (("--external-data-size-threshold", threshold is not None), ("--no-save-all-tensors-to-one-file", not one_file)):
            if given:
                raise UsageError(f"{flag} applies to weights written as external data: add --save-external-data [PATH]")
        return ExternalData()
    size = 1024 if threshold is None else parse_size(threshold, "--external-data-size-threshold", "{option}: cannot read '{text}'; write a size such as 1024, 64K or 1M")
    return ExternalData(location, size, one_file)


def note_external_data(saved: SavedModel | None) -> None:
    """The one line a command prints when ``save_model`` chose external data itself (``SavedModel.automatic``)."""
    if saved is not None and saved.automatic:
        names = ", ".join(f.name for f in saved.data_files) or f"{saved.path.name}.data"
        echo(f"parity: note: the weights ({saved.weight_bytes / 2**30:.2f} GiB) are in {names}: one file would pass protobuf's 2 GiB limit", err=True)
