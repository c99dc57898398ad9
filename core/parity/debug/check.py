"""Running one ``--check`` and turning what it did into a verdict (good or bad).

Three kinds of check, all callables ``check(iteration) -> Outcome``:

* :class:`CommandCheck`: the ``--check CMD ...`` command. A ``parity run ...`` command runs in this
  process through :func:`parity.cli.main` (no new interpreter, no re-import of onnxruntime per iteration)
  unless a timeout or parallel jobs need a killable process; anything else is a subprocess in its own
  process group, so ``--check-timeout`` kills the check *and* everything it started.
* :class:`InteractiveCheck`: no ``--check`` given: ask at the terminal.
* :class:`PredicateCheck`: the Python API: a function of the iteration (e.g. of the candidate model).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parity.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from parity.debug.session import Iteration


@dataclass
class Outcome:
    """What one check did. ``bad`` is the verdict: the iteration still shows the failure."""

    bad: bool
    code: int | None = None
    output: str = ""
    seconds: float = 0.0
    timed_out: bool = False
    note: str = ""


@dataclass
class Verdict:
    """Polygraphy-compatible rules that turn an exit code and output into good/bad.

    * an exit code in ``ignore_fail_codes`` is good;
    * with ``fail_codes``: bad iff the code is one of them (and, with ``fail_regex``, the output matches);
    * else with ``fail_regex``: bad iff the output matches one of them (even with exit code 0);
    * else bad iff the exit code is not 0.
    """

    fail_codes: tuple[int, ...] = ()
    ignore_fail_codes: tuple[int, ...] = ()
    fail_regex: tuple[str, ...] = ()
    _compiled: list[re.Pattern] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        try:
            self._compiled = [re.compile(r) for r in self.fail_regex]
        except re.error as exc:
            raise UsageError(f"--fail-regex: invalid regular expression ({exc})") from None

    def is_bad(self, code: int, output: str) -> bool:
        if code in self.ignore_fail_codes:
            return False
        matched = any(r.search(output) for r in self._compiled)
        if self.fail_codes:
            return code in self.fail_codes and (matched or not self._compiled)
        if self._compiled:
            return matched
        return code != 0


def is_parity_run(argv: Sequence[str]) -> bool:
    """``parity run ...`` (or ``python -m parity run ...``): can run in this process."""
    if len(argv) >= 2 and Path(argv[0]).name == "parity" and argv[1] == "run":
        return True
    return len(argv) >= 4 and Path(argv[0]).name.startswith("python") and argv[1:3] == ["-m", "parity"] and argv[3] == "run"


@dataclass
class CommandCheck:
    """The ``--check`` command. ``argv`` tokens equal to ``artifact_name`` are replaced by the iteration's
    own artifact path, so parallel jobs each check their own file."""

    argv: list[str]
    verdict: Verdict = field(default_factory=Verdict)
    timeout: float | None = None
    show_output: bool = False
    hide_fail_output: bool = False
    in_process: bool = True
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.argv:
            raise UsageError("--check needs a command")

    def command_for(self, iteration: Iteration) -> list[str]:
        subs = {iteration.default_artifact: iteration.artifact, "{artifact}": iteration.artifact}
        subs.update(iteration.substitutions)
        return [subs.get(tok, tok) for tok in self.argv]

    def __call__(self, iteration: Iteration) -> Outcome:
        argv = self.command_for(iteration)
        start = time.perf_counter()
        if self.in_process and self.timeout is None and iteration.exclusive and is_parity_run(argv):
            code, output = _run_in_process(argv[argv.index("run") :])
            outcome = Outcome(self.verdict.is_bad(code, output), code, output)
        else:
            outcome = self._subprocess(argv, iteration)
        outcome.seconds = time.perf_counter() - start
        self._echo(outcome)
        return outcome

    def _subprocess(self, argv: list[str], iteration: Iteration) -> Outcome:
        env = {**os.environ, **self.env, "PARITY_DEBUG_ITERATION": str(iteration.index), "PARITY_DEBUG_ARTIFACT": iteration.artifact}
        try:
            # A new session makes the check the leader of its own process group: a timeout kills the whole tree.
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        except OSError as exc:
            raise UsageError(f"--check: cannot run '{shlex.join(argv)}' ({exc.strerror or exc})") from None
        try:
            out, _ = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            out, _ = proc.communicate()
            text = out.decode(errors="replace")
            return Outcome(True, None, text, timed_out=True, note=f"timed out after {self.timeout:g}s; killed its process group")
        except BaseException:  # Ctrl-C: leave nothing running behind us
            kill_group(proc)
            if proc.stdout:
                proc.stdout.close()
            raise
        text = out.decode(errors="replace")
        return Outcome(self.verdict.is_bad(proc.returncode, text), proc.returncode, text)

    def _echo(self, outcome: Outcome) -> None:
        if outcome.output and (self.show_output or (outcome.bad and not self.hide_fail_output)):
            sys.stderr.write(_indent(outcome.output))


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the check's process group (children included), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.wait(timeout=5)


def _indent(text: str) -> str:
    lines = text.rstrip().splitlines()[-40:]
    return "".join(f"    | {line}\n" for line in lines)


def _run_in_process(args: list[str]) -> tuple[int, str]:
    """``parity run`` through :func:`parity.cli.main`, capturing what it prints (for ``--fail-regex``)."""
    from parity.cli import main
    from parity.cli.common import SETTINGS

    saved = dict(SETTINGS)
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            code = main(list(args))
    finally:
        SETTINGS.update(saved)
    return code, buffer.getvalue()


@dataclass
class InteractiveCheck:
    """No ``--check``: ask the user whether the artifact passed or failed."""

    prompt: Callable[[str], str] | None = None

    def __call__(self, iteration: Iteration) -> Outcome:
        import click

        ask = self.prompt or (lambda text: click.prompt(text, prompt_suffix=" ", err=True))
        start = time.perf_counter()
        while True:
            answer = str(ask(f">>> Did '{iteration.artifact}' [p]ass or [f]ail?")).strip().lower()
            if answer in ("p", "pass", "g", "good"):
                return Outcome(False, seconds=time.perf_counter() - start)
            if answer in ("f", "fail", "b", "bad"):
                return Outcome(True, seconds=time.perf_counter() - start)


@dataclass
class PredicateCheck:
    """A Python function ``fn(iteration) -> bool`` (True: bad, still failing)."""

    fn: Callable[[Any], bool]

    def __call__(self, iteration: Iteration) -> Outcome:
        start = time.perf_counter()
        return Outcome(bool(self.fn(iteration)), seconds=time.perf_counter() - start)
