"""``parity debug repeat``: run a check many times, sorting artifacts into good/ and bad/."""

from __future__ import annotations

from typing import Any

import click

from parity.cli.common import echo, verbosity_options, warn
from parity.cli.parsing import ParityCommand
from parity.debug.options import debug_options, session_from_options, until_option
from parity.errors import ExitCode

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
