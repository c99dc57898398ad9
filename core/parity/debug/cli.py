"""The debug commands' CLI: the click options every ``debug`` command shares (:func:`debug_options`,
:func:`until_option`) and ``parity debug repeat``: run a check many times, sorting artifacts into good/ and bad/."""

from __future__ import annotations

from typing import Any

import click

from parity.cli.common import echo, verbosity_options, warn
from parity.cli.parsing import GreedyOption, ParityCommand, RemainderOption
from parity.debug.options import session_from_options
from parity.errors import ExitCode


def debug_options(default_artifact: str = "parity_debug.onnx", jobs: bool = True) -> list[click.Parameter]:
    """``--check ... --fail-code ... --artifacts ...``: add them with ``params=[..., *debug_options()]``."""
    params: list[click.Parameter] = [
        click.Option(
            ["--fail-code", "--fail-returncode"],
            "fail_code",
            type=int,
            multiple=True,
            metavar="CODE",
            help="Exit codes that mean bad (repeatable); other codes are good. Default: any non-zero code is bad.",
        ),
        click.Option(["--ignore-fail-code"], type=int, multiple=True, metavar="CODE", help="Exit codes that mean good even if not 0 (repeatable)."),
        GreedyOption(["--fail-regex"], metavar="REGEX", help="Bad iff the check's output matches one of these (with --fail-code: and the code matches)."),
        click.Option(
            ["--check-timeout"],
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            metavar="SECONDS",
            help="Kill a check (its whole process group) after this long; a hung check is bad.",
        ),
        click.Option(["--show-output"], is_flag=True, help="Show the output of good checks too."),
        click.Option(["--hide-fail-output"], is_flag=True, help="Do not show the output of bad checks."),
        GreedyOption(["--artifacts"], metavar="PATH", help="Files to keep from each iteration, sorted into good/ and bad/ under --artifacts-dir."),
        click.Option(["--artifacts-dir", "--art-dir"], default="parity_artifacts", show_default=True, metavar="DIR", help="Where --artifacts are sorted."),
        click.Option(
            ["--iter-artifact", "--intermediate-artifact"],
            default=default_artifact,
            show_default=True,
            metavar="PATH",
            help="The file each iteration writes for the check (the check command names it; '{artifact}' works too).",
        ),
        click.Option(["--no-remove-intermediate"], is_flag=True, help="Keep the iteration's files after its check."),
        click.Option(["--iteration-info", "--iter-info"], metavar="PATH", help="Write a JSON file the check can read: iteration number, candidate, sizes."),
        click.Option(["--state"], "state", metavar="PATH", help="State file for resuming an interrupted run [<iter-artifact>.state.json]."),
        click.Option(["--no-resume"], is_flag=True, help="Start over even if a state file from an interrupted run exists."),
    ]
    if jobs:
        params.append(
            click.Option(
                ["--jobs", "-j"],
                type=click.IntRange(min=1),
                default=1,
                show_default=True,
                help="Check this many independent candidates at once (each with its own artifact file).",
            )
        )
    params.append(RemainderOption(["--check"], default=None, help="The check command: the rest of the line. Without it, you are asked at the terminal."))
    return params


def until_option() -> click.Option:
    return click.Option(["--until"], required=True, metavar="N|good|bad", help="Stop after N iterations, or at the first good or bad one.")


REPEAT_HELP = """Run the --check command until N iterations, or the first good or bad one.

\b
  parity debug repeat --until 10 --artifacts out.npz --check parity run model.onnx --onnxrt --save-outputs out.npz
  parity debug repeat --until bad --check ./flaky_test.sh

Exit code 1 if any iteration was bad; 3 if none was bad but some were unresolved (the check could
not find its input, or exited with a code --fail-code does not list); else 0."""


def make_repeat_command() -> click.Command:
    params = [until_option(), *[p for p in debug_options("parity_debug.artifact", jobs=False) if p.name != "iter_artifact"]]
    command = ParityCommand("repeat", params=params, callback=repeat_command, help=REPEAT_HELP, short_help="Run a check repeatedly; sort artifacts.")
    return verbosity_options(command)


def repeat_command(until: str, **params: Any) -> int:
    params["iter_artifact"] = "parity_debug.artifact"  # repeat writes no artifact of its own
    session = session_from_options(params, label="repeat", fingerprint={"until": until, "check": params.get("check")})
    verdicts = session.repeat_judged(lambda it: None, until)
    summary = session.finish()
    bad, unresolved = verdicts.count("bad"), verdicts.count("unresolved")
    echo(f"{summary.line()} | Pass rate: {100.0 * verdicts.count('good') / max(1, len(verdicts)):.1f}%")
    if bad:
        return int(ExitCode.MISMATCH)
    if unresolved:  # nothing observed fails, but not everything passed either
        warn(f"{unresolved} of {len(verdicts)} check(s) were unresolved (neither passed nor failed as a failure)")
        return int(ExitCode.FAILURE)
    return int(ExitCode.PASSED)
