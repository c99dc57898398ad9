"""The debug commands' CLI: the click options every ``debug`` command shares (:func:`debug_options`,
:func:`until_option`), the session they describe (:func:`session_from_options`), how a session shows itself at
the terminal (:class:`DebugProgress`) and ``parity debug repeat``: run a check many times, sorting artifacts into
good/ and bad/. The debug engine (:mod:`parity.debug`) prints nothing; it reports through a
:class:`parity.reporting.DebugReporter`, which this module provides."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from parity.cli import main as cli_main
from parity.cli.common import SETTINGS, echo, verbosity_options, warn
from parity.cli.parsing import GreedyOption, ParityCommand, RemainderOption
from parity.cli.progress import LiveProgress, progress_wanted
from parity.debug.check import BAD, GOOD, CommandCheck, InteractiveCheck, Verdict, indent_output
from parity.debug.executor import make_executor
from parity.debug.report import write_debug_report
from parity.debug.session import DebugSession
from parity.errors import ExitCode, ParityError, UsageError
from parity.reporting import DebugReporter


def debug_options(default_artifact: str = "parity_debug.onnx", jobs: bool = True) -> list[click.Parameter]:
    """``--check ... --fail-code ... --artifacts ...``: add them with ``params=[..., *debug_options()]``."""
    params: list[click.Parameter] = [
        GreedyOption(
            ["--fail-code", "--fail-returncode", "fail_code"],
            type=int,
            metavar="CODE",
            help="Exit codes that mean bad (one or more); other codes are good. Default: any non-zero code is bad.",
        ),
        GreedyOption(
            ["--ignore-fail-code", "--ignore-fail-returncode", "ignore_fail_code"], type=int, metavar="CODE", help="Exit codes that mean good even if not 0 (one or more)"
        ),
        GreedyOption(
            ["--fail-regex"],
            metavar="REGEX",
            help="Bad iff the check's output matches one of these (with --fail-code: and the code matches). One regex: the text it matched "
            "must be the original's (searches); several: a match of any of them is the failure, as in Polygraphy.",
        ),
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
        click.Option(["--state", "state"], metavar="PATH", help="State file for resuming an interrupted run [<iter-artifact>.state.json]."),
        click.Option(["--no-resume"], is_flag=True, help="Start over even if a state file from an interrupted run exists."),
        click.Option(
            ["--save-debug-replay"],
            metavar="PATH",
            help="Keep every verdict in this replay file (updated after each check; the state file is deleted when the run ends). "
            "While a check runs, <name>_skip_current<ext> has it as unresolved: load that after a crash to skip the check.",
        ),
        click.Option(
            ["--load-debug-replay"],
            metavar="PATH",
            help="Take the verdicts of a --save-debug-replay file (same command and model) instead of running those checks; "
            "Polygraphy's replays load into debug repeat and build.",
        ),
    ]
    if jobs:
        params.append(
            click.Option(
                ["--jobs", "-j"],
                type=click.IntRange(min=1),
                default=1,
                show_default=True,
                help="Check this many independent candidates at once (each with its own artifact file); with --executor, the checks in flight.",
            )
        )
        params += executor_options()
    params.append(
        RemainderOption(
            ["--check", "--check-inference", "check"], default=None, help="The check command: the rest of the line. Without it, you are asked at the terminal."
        )
    )
    return params


def executor_options() -> list[click.Parameter]:
    """``--executor NAME`` and the registered executors' own options (``parity_register_executors``)."""
    from parity.plugins import get_registry  # here: the registry is needed only when a debug command is built

    executors = get_registry().executors
    names = ", ".join(sorted(executors)) or "local"
    params: list[click.Parameter] = [
        click.Option(["--executor"], default="local", show_default=True, metavar="NAME", help=f"Where the checks run ({names}).")
    ]
    for spec in sorted(executors.values(), key=lambda e: e.name):
        params += list(spec.options)
    return params


def executor_param_names() -> set[str]:
    """The parameters that say where checks run, not what they find: left out of the state file's fingerprint,
    so a run resumes under another executor or --jobs."""
    from parity.plugins import get_registry  # here: the registry is needed only when a debug command runs

    names = {"executor", "jobs"}
    for spec in get_registry().executors.values():
        names |= {o.name for o in spec.options if o.name}
    return names


def make_executor_from_options(params: Mapping[str, Any]) -> Any:
    """The executor ``--executor NAME`` picks (``local``: :func:`parity.debug.executor.make_executor`)."""
    name = params.get("executor") or "local"
    if name == "local" and "executor" not in params:
        return make_executor(int(params.get("jobs") or 1))
    from parity.plugins import get_registry  # here: the registry is needed only when a debug command runs

    executors = get_registry().executors
    for spec in executors.values():  # an executor's options mean nothing to another one
        for option in spec.options:
            if spec.name != name and option.name in params and params[option.name] not in (None, option.default, ()):
                raise UsageError(f"{option.opts[0]} needs --executor {spec.name}")
    if name not in executors:
        from parity import distributions  # the error path: a first-party executor that is not installed

        member = distributions.provider(executor=name)
        if member is not None:
            raise UsageError(f"--executor {name} is provided by {member.distribution}: {member.remedy()}")
    return get_registry().executor(name).factory(params)


def report_option(schema: str) -> click.Option:
    """``--report PATH``: the command writes its JSON report there (:func:`parity.debug.report.write_debug_report`);
    ``schema`` names the JSON Schema file in the help."""
    return click.Option(["--report"], metavar="PATH", help=f"Write a JSON report: verdict, every check's outcome, the result, the time ({schema}).")


def until_option() -> click.Option:
    return click.Option(["--until"], required=True, metavar="N|good|bad", help="Stop after N iterations, or at the first good or bad one.")


def make_check(params: Mapping[str, Any]) -> Callable:
    """The check the parsed :func:`debug_options` describe: ``--check CMD ...``, or a question at the terminal."""
    argv = params.get("check")
    if not argv:
        if (params.get("jobs") or 1) > 1:
            raise UsageError("--jobs needs a --check command (interactive mode checks one candidate at a time)")
        if (params.get("executor") or "local") != "local":
            raise UsageError(f"--executor {params['executor']} needs a --check command (interactive mode asks here)")
        return InteractiveCheck(prompt=lambda text: click.prompt(text, prompt_suffix=" ", err=True))
    verdict = Verdict(tuple(params.get("fail_code") or ()), tuple(params.get("ignore_fail_code") or ()), tuple(params.get("fail_regex") or ()))
    # `parity run` checks run in this process through the program itself (the engine never imports the CLI)
    return CommandCheck(
        list(argv), verdict, params.get("check_timeout"), bool(params.get("show_output")), bool(params.get("hide_fail_output")), program=cli_main
    )


def session_from_options(
    params: Mapping[str, Any], *, label: str, fingerprint: Mapping[str, Any], check: Callable | None = None, identity: Mapping[str, Any] | None = None
) -> DebugSession:
    """A :class:`DebugSession` configured from the parsed :func:`debug_options`, showing its progress on stderr
    (:class:`DebugProgress`; only warnings with ``--quiet``). ``identity``: what the run searches, which a
    --load-debug-replay file must match (default: ``fingerprint``)."""
    artifact = params.get("iter_artifact") or "parity_debug.onnx"
    state = params.get("state") or str(Path(artifact).with_name(Path(artifact).name + ".state.json"))
    skip = {"no_resume", "state", "show_output", "hide_fail_output", "save_debug_replay", "load_debug_replay", *executor_param_names()}
    options = {k: v for k, v in params.items() if k not in skip}
    check = check or make_check(params)
    return DebugSession(
        check,
        iter_artifact=artifact,
        artifacts=list(params.get("artifacts") or ()),
        artifacts_dir=params.get("artifacts_dir") or "parity_artifacts",
        iteration_info=params.get("iteration_info"),
        state_path=state,
        fingerprint={"label": label, **fingerprint, "options": options},
        resume=not params.get("no_resume"),
        remove_intermediate=not params.get("no_remove_intermediate"),
        executor=make_executor_from_options(params),
        reporter=DebugProgress(enabled=not SETTINGS["quiet"], label=label),
        label=label,
        identity=fingerprint if identity is None else identity,
        load_replay=params.get("load_debug_replay"),
        save_replay=params.get("save_debug_replay"),
    )


class DebugProgress(DebugReporter):
    """A :class:`parity.reporting.DebugReporter` for the terminal: one line per check on stderr, and on a
    terminal a live bar below them with the count, the time taken and, when the command knows how many checks
    remain (``--until N``, a binary search's steps), the time left (:mod:`parity.cli.progress`). Disabled
    (``--quiet``): warnings only."""

    def __init__(self, enabled: bool = True, label: str = "debug", live: bool | None = None) -> None:
        self.enabled = enabled
        self.label = label
        self._bar = LiveProgress(enabled=enabled and (progress_wanted() if live is None else live))
        self._count = 0
        self._remaining: int | None = None

    def expect(self, remaining: int | None) -> None:
        """About ``remaining`` more checks are coming (None: the command cannot tell)."""
        self._remaining = remaining
        self._show("")

    def _show(self, status: str) -> None:
        total = None if self._remaining is None else self._count + self._remaining
        self._bar.update("checks", self._count, total, status=status, label=f"{self.label} checks")

    def iteration(self, index: int, verdict: str, seconds: float, info: Mapping[str, Any], resumed: bool = False, note: str = "") -> None:
        if not self.enabled:
            return
        self._count += 1
        if self._remaining is not None:  # past the expected count: unknown again until the command says
            self._remaining = self._remaining - 1 if self._remaining > 0 else None
        shown = {BAD: "bad ", GOOD: "good"}.get(verdict, "unresolved")
        label = info.get("label", "")
        text = f"[N{index}] {shown} | {'resumed' if resumed else f'{seconds:.2f}s'}" + (f" | {label}" if label else "") + (f" | {note}" if note else "")
        self._bar.print(f"parity: {text}")
        self._show("")

    def check_output(self, text: str) -> None:
        # shown with --quiet too: --show-output / --hide-fail-output decide
        self._bar.print(indent_output(text).rstrip("\n"))

    def note(self, message: str) -> None:
        if self.enabled:
            self._bar.print(f"parity: {message}")

    def warn(self, message: str) -> None:
        warn(message)

    def close(self) -> None:
        self._bar.close()


REPEAT_HELP = """Run the --check command until N iterations, or the first good or bad one.

\b
  parity debug repeat --until 10 --artifacts out.npz --check parity run model.onnx --onnxrt --save-outputs out.npz
  parity debug repeat --until bad --check ./flaky_test.sh

Exit code 1 if any iteration was bad; 3 if none was bad but some were unresolved (the check could
not find its input, or exited with a code --fail-code does not list); else 0."""


def make_repeat_command() -> click.Command:
    params = [
        until_option(),
        report_option("parity/schemas/repeat-report.schema.json"),
        *[p for p in debug_options("parity_debug.artifact") if p.name != "iter_artifact"],
    ]
    command = ParityCommand("repeat", params=params, callback=repeat_command, help=REPEAT_HELP, short_help="Run a check repeatedly; sort artifacts.")
    return verbosity_options(command)


def repeat_command(until: str, report: str | None = None, **params: Any) -> int:
    started = time.perf_counter()
    params["iter_artifact"] = "parity_debug.artifact"  # repeat writes no artifact of its own
    if report:
        from parity.results.files import check_output_path  # here: it imports numpy, which `debug repeat --help` does not need

        check_output_path(report, "--report")
    session = session_from_options(params, label="repeat", fingerprint={"until": until, "check": params.get("check")}, identity={})
    fields: dict[str, Any] = {"name": "parity-repeat-report", "command": "debug repeat", "model": None, "started": started}
    try:
        verdicts = session.repeat_judged(lambda it: None, until)
    except ParityError as exc:
        if report:
            write_debug_report(report, session, exit_code=exc.exit_code, error=str(exc), **fields)
        raise
    summary = session.finish()
    bad, unresolved = verdicts.count("bad"), verdicts.count("unresolved")
    echo(f"{summary.line()} | Pass rate: {100.0 * verdicts.count('good') / max(1, len(verdicts)):.1f}%")
    echo(summary.pass_rate_line())
    code = ExitCode.PASSED
    if bad:
        code = ExitCode.MISMATCH
    elif unresolved:  # nothing observed fails, but not everything passed either
        warn(f"{unresolved} of {len(verdicts)} check(s) were unresolved (neither passed nor failed as a failure)")
        code = ExitCode.FAILURE
    if report:
        result = {"iterations": len(verdicts), "until": str(until), "good": verdicts.count("good"), "bad": bad, "unresolved": unresolved}
        write_debug_report(report, session, exit_code=code, result=result, **fields)
    return int(code)
