"""``parity inspect tactics``, ``parity inspect diff-tactics`` (and its old ``debug diff-tactics`` name)."""

from __future__ import annotations

import json

import click
from parity.cli.common import echo, verbosity_options


@click.command("tactics")
@click.argument("replay", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the replay in parity-tactics v1 JSON (converts Polygraphy files).")
@verbosity_options
def inspect_tactics(replay: str, as_json: bool) -> None:
    """Show a tactic replay file (Parity or Polygraphy) as a table."""
    from parity_tactics.render import render_replay
    from parity_tactics.replay import load_replay

    loaded = load_replay(replay)
    echo(loaded.dumps().rstrip() if as_json else render_replay(loaded))


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
    def diff(directory: str | None, good: tuple[str, ...], bad: tuple[str, ...], top: int, as_json: bool) -> None:
        """Find the tactics that appear in bad builds and not (or rarely) in good ones.

        Each tactic seen in a bad replay is ranked by a one-sided Fisher exact test on how many bad and good
        builds used it, so a culprit that also slipped into one good build still ranks first.
        """
        from parity.cli.common import SETTINGS

        from parity_tactics.diff import diff_tactics
        from parity_tactics.render import render_diff

        result = diff_tactics(directory, good, bad)
        if as_json:
            echo(json.dumps(result.to_json(), indent=2))
            return
        echo(render_diff(result, None if top == 0 else top))
        if SETTINGS["verbose"]:
            for path, reason in result.skipped:
                echo(f"skipped {path}: {reason}", err=True)

    return diff


inspect_diff_tactics = _diff_command("diff-tactics")
debug_diff_tactics = _diff_command("diff-tactics", hidden=True)  # Polygraphy's older spelling, used by the seeds


def debug_build_command() -> click.Command:
    """``parity debug build``: TensorRT builder options + tactic options + the debug loop's options."""
    from parity.cli.parsing import ParityCommand, RemainderOption

    from parity_tactics.debug_build import DEFAULT_ARTIFACTS_DIR, DEFAULT_ITER_ARTIFACT
    from parity_tactics.options import tactic_options

    try:
        from parity_trt.options import build_options
    except ImportError:  # without the TensorRT plugin the command still explains what is missing
        build_options = list  # type: ignore[assignment]
    params: list[click.Parameter] = [
        click.Argument(["model"]),
        click.Option(["--input-shapes"], multiple=True, help="Static input shapes name:[d0,...] (the default profile)."),
        *build_options(),
        *tactic_options(),
        click.Option(["--until"], required=True, help="Stop after N builds, or at the first 'good' or 'bad' one."),
        click.Option(["--artifacts"], multiple=True, help="Files to sort into good/ and bad/ after each build (e.g. the --save-tactics path)."),
        click.Option(["--artifacts-dir", "--art-dir"], default=DEFAULT_ARTIFACTS_DIR, show_default=True, help="Where good/ and bad/ go."),
        click.Option(["--iter-artifact"], default=DEFAULT_ITER_ARTIFACT, show_default=True, help="Where each build writes its engine."),
        RemainderOption(["--check"], default=None, help="Command judging each engine, exit 0 = good (must come last)."),
    ]
    command = ParityCommand(
        "build",
        params=params,
        callback=_debug_build,
        help="Rebuild a TensorRT engine repeatedly to catch flaky tactics; sort each build's tactic replay and "
        "timing cache into good/ and bad/ (then run: parity inspect diff-tactics --dir ARTIFACTS_DIR).",
        short_help="Rebuild an engine repeatedly, sorting tactic replays by a check.",
    )
    return verbosity_options(command)


def _debug_build(model: str, until: str, artifacts: tuple[str, ...], artifacts_dir: str, iter_artifact: str,
                 check: list[str] | None, **options: object) -> int:
    from parity.errors import UsageError
    from parity.plugins import module_available

    from parity_tactics.debug_build import debug_build

    if not module_available("parity_trt"):
        raise UsageError("debug build needs the TensorRT plugin: pip install parity-trt")

    def show(iteration) -> None:
        verdict = "good" if iteration.good else "bad"
        why = f" (build failed: {iteration.build_error})" if iteration.build_error else ""
        echo(f"iteration {iteration.index}: {verdict}{why}")

    result = debug_build(model, options, check, until, artifacts, artifacts_dir, iter_artifact, report=show)
    echo(f"{len(result.iterations)} builds: {result.good} good, {result.bad} bad; artifacts sorted under {artifacts_dir}/")
    return 0
