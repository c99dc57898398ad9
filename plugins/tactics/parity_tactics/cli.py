"""``parity inspect tactics``, ``parity inspect diff-tactics`` (and its old ``debug diff-tactics`` name)."""

from __future__ import annotations

import json
import tempfile

import click

from parity.api import SETTINGS, UsageError, echo, module_available
from parity.commands import verbosity_options
from parity_tactics.polygraphy_layout import format_option, resolve_layout


@click.command("tactics")
@click.argument("replay", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the replay in parity-tactics v1 JSON (converts Polygraphy files).")
@verbosity_options
def inspect_tactics(replay: str, as_json: bool, layout: str | None = None) -> None:
    """Show a tactic replay file (Parity or Polygraphy) as a table."""
    # here, not at the top: the command's --help imports this module and never needs these
    from parity_tactics.polygraphy_layout import has_layout, replay_text
    from parity_tactics.render import render_replay
    from parity_tactics.replay import load_replay

    polygraphy, explicit = _polygraphy_layout(layout, as_json)
    loaded = load_replay(replay)
    if as_json:
        echo(loaded.dumps().rstrip())
    else:
        echo(replay_text(loaded) if polygraphy and (explicit or has_layout([loaded])) else render_replay(loaded))


inspect_tactics.params.append(format_option())


def _polygraphy_layout(layout: str | None, as_json: bool) -> tuple[bool, bool]:
    """Whether to print Polygraphy's text, and whether it was asked for: --format (refused with --json), its
    environment variable or the name 'polygraphy' (where --json then wins)."""
    if as_json and click.get_current_context().get_parameter_source("layout") is click.core.ParameterSource.COMMANDLINE:
        raise UsageError("--format lays out text; --json prints JSON: give one")
    chosen, explicit = resolve_layout(layout)
    return chosen == "polygraphy" and not as_json, explicit


def _diff_command(name: str, hidden: bool = False) -> click.Command:
    @click.command(name, hidden=hidden)
    @click.option(
        "--dir", "directory", type=click.Path(file_okay=False), default=None, help="Folder with good/ and bad/ replays (as debug build sorts them)."
    )
    @click.option("--good", multiple=True, type=click.Path(), help="Good replay file or folder (repeatable; overrides DIR/good).")
    @click.option("--bad", multiple=True, type=click.Path(), help="Bad replay file or folder (repeatable; overrides DIR/bad).")
    @click.option("--top", type=click.IntRange(min=0), default=20, show_default=True, help="Show this many suspects (0: all).")
    @click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON.")
    @verbosity_options
    def diff(directory: str | None, good: tuple[str, ...], bad: tuple[str, ...], top: int, as_json: bool, layout: str | None = None) -> None:
        """Find the tactics that appear in bad builds and not (or rarely) in good ones.

        Each tactic seen in a bad replay is ranked by a one-sided Fisher exact test on how many bad and good
        builds used it, so a culprit that also slipped into one good build still ranks first.
        """
        # here, not at the top: the command's --help imports this module and never needs these
        from parity_tactics.diff import diff_tactics, load_good_bad
        from parity_tactics.polygraphy_layout import diff_text, has_layout
        from parity_tactics.render import render_diff

        polygraphy, explicit = _polygraphy_layout(layout, as_json)
        if polygraphy:
            good_set, bad_set = load_good_bad(directory, good, bad)
            if explicit or has_layout([*good_set.replays, *bad_set.replays]):
                if click.get_current_context().get_parameter_source("top") is click.core.ParameterSource.COMMANDLINE:
                    raise UsageError("--top limits Parity's ranked table; Polygraphy's layout lists every suspect (give --format parity)")
                echo(diff_text(good_set.replays, bad_set.replays, [*good_set.skipped, *bad_set.skipped], SETTINGS["verbose"]))
                return
        result = diff_tactics(directory, good, bad)
        if as_json:
            echo(json.dumps(result.to_json(), indent=2))
            return
        echo(render_diff(result, None if top == 0 else top))
        if SETTINGS["verbose"]:
            for path, reason in result.skipped:
                echo(f"skipped {path}: {reason}", err=True)

    diff.params.append(format_option())
    return diff


inspect_diff_tactics = _diff_command("diff-tactics")
debug_diff_tactics = _diff_command("diff-tactics", hidden=True)  # Polygraphy's older spelling, used by the seeds


def debug_build_command() -> click.Command:
    """``parity debug build``: TensorRT builder options + tactic options + the core debug engine's options."""
    from parity.commands import (  # here: built when the command loads, as below
        ParityCommand,
        data_options,
        debug_options,
        external_data_read_options,
        onnx_load_options,
        report_option,
        until_option,
    )
    from parity_tactics.debug_build import DEFAULT_ITER_ARTIFACT
    from parity_tactics.options import tactic_options

    try:
        from parity_trt.api import build_options
    except ImportError:  # a dependency, but if it is broken or removed the command still explains what is missing
        build_options = list  # type: ignore[assignment]
    params: list[click.Parameter] = [
        click.Argument(["model"]),
        click.Option(["--input-shapes"], multiple=True, help="Static input shapes name:[d0,...] (the default profile)."),
        *build_options(),
        *tactic_options(),
        *external_data_read_options(ignore=True),  # --ignore-external-data: refused (a build needs the weights)
        *onnx_load_options(),  # the model as the builder reads it: shapes inferred, float32 made float16
        click.Option(["--model-type"], type=str, default=None, help="The model's kind when the suffix does not tell: a build reads onnx."),
        *[p for p in data_options() if p.name in CALIBRATION_DATA],  # Polygraphy's data loader: int8 calibration data
        until_option(),
        report_option("parity_tactics/schemas/build-report.schema.json"),
        *debug_options(DEFAULT_ITER_ARTIFACT),
    ]
    command = ParityCommand(
        "build",
        params=params,
        callback=_debug_build,
        help=DEBUG_BUILD_HELP,
        short_help="Rebuild a TensorRT engine repeatedly, sorting tactic replays by a check.",
    )
    return verbosity_options(command)


DEBUG_BUILD_HELP = """Rebuild a TensorRT engine repeatedly to catch flaky tactics.

Each build's engine goes to --iter-artifact for the --check command; its timing cache and the --artifacts
(e.g. the --save-tactics replay) are sorted into good/ and bad/ under --artifacts-dir. A build that fails is
bad. Then find the culprits with: parity inspect diff-tactics --dir ARTIFACTS_DIR

\b
  parity debug build model.onnx --fp16 --save-tactics replay.json --artifacts replay.json \\
      --artifacts-dir replays --until 10 --check parity run parity_debug.engine --trt --load-outputs golden.json

Exit code 1 if any build was bad; 3 if none was bad but some checks were unresolved; else 0."""


# the data loader flags debug build takes, as Polygraphy's does: the TensorRT builder reads them to calibrate int8
CALIBRATION_DATA = ("seed", "val_range", "iterations", "data_loader_script", "load_inputs", "data_loader_backend_module")


def _refuse_data_without_int8(params: dict[str, object]) -> None:
    """A build reads input data only to calibrate int8: a data flag without --int8 would do nothing."""
    if params.get("int8"):
        return
    ctx = click.get_current_context()
    given = ["--" + name.replace("_", "-") for name in CALIBRATION_DATA if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
    if given:  # every data flag given is named: each one is refused
        raise UsageError(f"{', '.join(given)}: debug build reads input data only to calibrate int8 (--int8); this build has no --int8")


def _loaded_model(model: str, params: dict[str, object], folder: str) -> object | None:
    """Polygraphy's ONNX loading flags on a build: ``--model-type`` (onnx only: TensorRT builds from ONNX),
    ``--ignore-external-data`` refused, and with ``--shape-inference``/``--fp-to-fp16`` a build function that
    builds the changed copy of the model (staged in ``folder``); None when the model is built as it is."""
    from parity.api import check_model_path, loaded_onnx  # here: the command's --help never needs them

    declared = params.pop("model_type", None)
    if declared not in (None, "onnx"):
        raise UsageError(f"--model-type {declared}: debug build builds TensorRT engines from ONNX models")
    if not (params.get("shape_inference") or params.get("fp_to_fp16")):
        loaded_onnx(model, params, folder, "debug build")  # checks the flags; changes nothing
        return None
    check_model_path(model)
    from parity_trt.api import check_options, import_trt  # here: only a build of a changed model checks them first

    from parity_tactics.debug_build import trt_build

    check_options(params)  # what debug_build checks before its session, for its own build function
    import_trt()
    staged, base = loaded_onnx(model, params, folder, "debug build")
    return lambda _model, engine, options: trt_build(staged, engine, {**options, "external_data_dir": base})


def _debug_build(model: str, until: str, **params: object) -> int:
    from parity_tactics.debug_build import debug_build

    if not module_available("parity_trt"):
        raise UsageError("debug build needs the TensorRT plugin: pip install parity-trt")
    _refuse_data_without_int8(params)
    check = params.pop("check", None)
    with tempfile.TemporaryDirectory(prefix="parity-build-") as folder:
        staged = _loaded_model(model, params, folder)
        if staged is not None:  # each build reads the changed copy; the report and the fingerprint name the model
            params["build"] = staged
        result = debug_build(model, until, check, **params)  # type: ignore[arg-type]
    echo(f"{result.summary.line()} | builds: {result.good} good, {result.bad} bad, {result.unresolved} unresolved")
    echo(result.summary.pass_rate_line())  # Polygraphy's line, for scripts written for it
    if params.get("save_tactics") and params["save_tactics"] in (params.get("artifacts") or ()):
        echo(f"Next: parity inspect diff-tactics --dir {params.get('artifacts_dir')}")
    return int(result.exit_code)  # 3 when nothing failed, but not everything passed either
