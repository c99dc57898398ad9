"""The click options every ``debug`` command shares, and the session they describe."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from parity.cli.parsing import GreedyOption, RemainderOption
from parity.debug.check import CommandCheck, InteractiveCheck, Verdict
from parity.debug.executor import make_executor
from parity.debug.session import DebugSession, Reporter
from parity.errors import UsageError


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


def make_check(params: Mapping[str, Any]) -> Callable:
    argv = params.get("check")
    if not argv:
        if params.get("jobs", 1) > 1:
            raise UsageError("--jobs needs a --check command (interactive mode checks one candidate at a time)")
        return InteractiveCheck()
    verdict = Verdict(tuple(params.get("fail_code") or ()), tuple(params.get("ignore_fail_code") or ()), tuple(params.get("fail_regex") or ()))
    return CommandCheck(list(argv), verdict, params.get("check_timeout"), bool(params.get("show_output")), bool(params.get("hide_fail_output")))


def session_from_options(params: Mapping[str, Any], *, label: str, fingerprint: Mapping[str, Any], check: Callable | None = None) -> DebugSession:
    """A :class:`DebugSession` configured from the parsed :func:`debug_options`."""
    from parity.cli.common import SETTINGS

    artifact = params.get("iter_artifact") or "parity_debug.onnx"
    state = params.get("state") or str(Path(artifact).with_name(Path(artifact).name + ".state.json"))
    options = {k: v for k, v in params.items() if k not in ("no_resume", "state", "jobs", "show_output", "hide_fail_output")}
    return DebugSession(
        check or make_check(params),
        iter_artifact=artifact,
        artifacts=list(params.get("artifacts") or ()),
        artifacts_dir=params.get("artifacts_dir") or "parity_artifacts",
        iteration_info=params.get("iteration_info"),
        state_path=state,
        fingerprint={"label": label, **fingerprint, "options": options},
        resume=not params.get("no_resume"),
        remove_intermediate=not params.get("no_remove_intermediate"),
        executor=make_executor(int(params.get("jobs") or 1)),
        reporter=Reporter(enabled=not SETTINGS["quiet"], label=label),
        label=label,
    )
