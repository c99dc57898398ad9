"""Running one ``--check`` and turning what it did into a verdict: good, bad or unresolved.

Three kinds of check, all callables ``check(iteration) -> Outcome``:

* :class:`CommandCheck`: the ``--check CMD ...`` command. A ``parity run ...`` command runs in this
  process through the ``program`` its caller gives (the CLI gives its own ``main``; no new interpreter, no
  re-import of onnxruntime per iteration) unless a timeout or parallel jobs need a killable process;
  anything else, or any command when no ``program`` is given, is a subprocess in its own process group, so
  ``--check-timeout`` kills the check *and* everything it started.
* :class:`InteractiveCheck`: no ``--check`` given: ask at the terminal.
* :class:`PredicateCheck`: the Python API: a function of the iteration (e.g. of the candidate model).

Verdicts (see :meth:`CommandCheck.judge`): *bad* only when the check fails the way the original model
failed (its failure signature: the exit code and, with ``--fail-regex``, the matched text; or a timeout
when the original timed out); *good* when it exits 0 (or with an ``--ignore-fail-code``) and shows no
``--fail-regex`` match; anything else is *unresolved*: a check that crashed, timed out, could not find
its input or failed differently. Strategies never take a reduction step on an unresolved candidate and
never count it as passing (as in Zeller's ddmin).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parity.console import SETTINGS
from parity.debug import procs
from parity.errors import UsageError

GOOD, BAD, UNRESOLVED = "good", "bad", "unresolved"

# The ``parity`` program's entry function, ``main(args) -> exit code``, through which ``parity run`` checks run
# in this process. The engine never imports the CLI: whoever builds a :class:`CommandCheck` passes it.
Program = Callable[[list[str]], int]


@dataclass
class Iteration:
    """One check. ``artifact`` is where ``make_artifact`` must write (per job slot when ``--jobs`` > 1)."""

    index: int
    key: str
    artifact: str
    default_artifact: str
    slot: int = 0
    exclusive: bool = True  # only this check is running: in-process checks are allowed
    info: dict[str, Any] = field(default_factory=dict)
    substitutions: dict[str, str] = field(default_factory=dict)  # check argv token -> per-slot path
    payload: Any = None  # e.g. the candidate model, for Python predicates
    collect: list[str] = field(default_factory=list)  # files the check writes that the session sorts (--artifacts)

    def slot_path(self, name: str) -> str:
        """A companion file (``name`` as the check command spells it) private to this job slot."""
        path = slot_path(name, self.slot, not self.exclusive)
        self.substitutions[name] = path
        return path


def slot_path(name: str, slot: int, parallel: bool) -> str:
    if not parallel:
        return name
    p = Path(name)
    return str(p.with_name(f"{p.stem}.job{slot}{p.suffix}"))


@dataclass
class Outcome:
    """What one check did. ``bad``: the iteration still shows the failure; ``unresolved``: neither good nor
    bad (crashed, timed out, could not find its input, failed differently). ``signature`` identifies a
    failure: ``("exit", code, matched_text)`` or ``("timeout",)``."""

    bad: bool
    code: int | None = None
    output: str = ""
    seconds: float = 0.0
    timed_out: bool = False
    note: str = ""
    unresolved: bool = False
    signature: tuple | None = None
    show_output: bool = False  # the check asks the reporter to show ``output`` (--show-output, a bad check's output)

    @property
    def verdict(self) -> str:
        return UNRESOLVED if self.unresolved else BAD if self.bad else GOOD


def unresolved(note: str, **kw: Any) -> Outcome:
    return Outcome(False, note=note, unresolved=True, **kw)


def describe_signature(sig: tuple | None) -> str:
    if not sig:
        return "a failure"
    if sig[0] == "timeout":
        return "a timeout"
    text = f"exit code {sig[1]}" if sig[1] is not None and sig[1] >= 0 else f"killed by signal {-sig[1]}" if sig[1] is not None else "a failure"
    return text + (f" with '{sig[2]}'" if len(sig) > 2 and sig[2] else "")


# A line of the output saying a file is missing: the check could not find its input.
_MISSING = re.compile(r"no such file|not found|does not exist|cannot find|can't find|can't open|cannot open|could not open|NO_SUCHFILE|FileNotFoundError", re.I)
_ALWAYS_FILE = re.compile(r"no such file|FileNotFoundError|NO_SUCHFILE|\[Errno 2\]", re.I)


def missing_input(code: int | None, output: str, argv: Sequence[str], extra: Sequence[str] = ()) -> str | None:
    """The output line saying the check could not find a file it was given (or the command), else None.

    Exit codes 126/127 are a shell's "not executable"/"command not found"; "No such file or directory"
    (errno 2) is always about files; other phrases ("not found", "does not exist") count only when the
    line names a file the check command names (a missing plugin or kernel is a real failure)."""
    if code == 0 or code is None:
        return None
    names = {t for t in (*argv, *extra) if t and ("." in t or "/" in t) and not t.startswith("-")}
    names |= {Path(t).name for t in names}
    for line in output.splitlines():
        if not _MISSING.search(line):
            continue
        if _ALWAYS_FILE.search(line) or any(n in line for n in names if len(n) > 2):
            return line.strip()[:200]
    if code in (126, 127):
        lines = [ln for ln in output.strip().splitlines() if ln.strip()]
        return lines[-1].strip()[:200] if lines else f"exit code {code}: the command was not found or is not executable"
    return None


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

    def match(self, output: str) -> str | None:
        """The text the first matching ``--fail-regex`` matched (part of the failure signature)."""
        for r in self._compiled:
            m = r.search(output)
            if m:
                return m.group(0)[:200]
        return None

    def same_failure(self, sig: tuple | None, reference: tuple | None) -> bool:
        """Is ``sig`` the original failure? With ``--fail-code`` any of those codes; else the same code;
        with one ``--fail-regex`` the same matched text, with several a match of any (the user named each one
        the failure, as Polygraphy reads them); a timeout only if the original timed out."""
        if reference is None or sig is None:
            return True
        if sig[0] != reference[0]:
            return False
        if sig[0] == "timeout":
            return True
        code_ok = sig[1] in self.fail_codes if self.fail_codes else sig[1] == reference[1]
        text_ok = sig[2] is not None if len(self._compiled) > 1 else sig[2] == reference[2]
        return code_ok and text_ok

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


# Polygraphy's guides name these files in their checks: they get the iteration's artifact too.
POLYGRAPHY_ARTIFACTS = ("polygraphy_debug.onnx", "polygraphy_debug.engine")


@dataclass
class CommandCheck:
    """The ``--check`` command. ``argv`` tokens equal to ``artifact_name`` (or ``{artifact}``, or Polygraphy's
    ``polygraphy_debug.onnx``/``.engine``) are replaced by the iteration's own artifact path, so parallel
    jobs each check their own file. ``program``: the ``parity`` program's entry function (the CLI passes
    ``parity.cli.main``); with it a ``parity run`` check runs in this process (see ``in_process``), without it
    as a subprocess."""

    argv: list[str]
    verdict: Verdict = field(default_factory=Verdict)
    timeout: float | None = None
    show_output: bool = False
    hide_fail_output: bool = False
    in_process: bool = True
    env: dict[str, str] = field(default_factory=dict)
    reference: tuple | None = None  # the original failure's signature (set by the session)
    last_output: str = ""
    cwd: str | None = None  # where the check runs (default: here)
    program: Program | None = None

    def __post_init__(self) -> None:
        if not self.argv:
            raise UsageError("--check needs a command")

    def command_for(self, iteration: Iteration) -> list[str]:
        subs = {name: iteration.artifact for name in POLYGRAPHY_ARTIFACTS if Path(name).suffix == Path(iteration.default_artifact).suffix}
        subs.update({iteration.default_artifact: iteration.artifact, "{artifact}": iteration.artifact})
        subs.update(iteration.substitutions)
        return [subs.get(tok, tok) for tok in self.argv]

    def set_reference(self, outcome: Outcome) -> None:
        """The original model's outcome: its signature defines bad from now on."""
        self.reference = outcome.signature

    def job(self, iteration: Iteration) -> CheckJob:
        """What to run for this iteration, as plain data an executor can send to another process or machine:
        the command, its environment, where, the timeout, whether it may run in the worker's own process, and
        the iteration's files the command names (``files``: token -> path, for workers that cannot see them)."""
        argv = self.command_for(iteration)
        env = {**self.env, "PARITY_DEBUG_ITERATION": str(iteration.index), "PARITY_DEBUG_ARTIFACT": iteration.artifact}
        files = {tok: tok for tok in {iteration.artifact, *iteration.substitutions.values()} if tok in argv}
        in_process = self.in_process and self.program is not None and self.timeout is None and is_parity_run(argv)
        return CheckJob(argv, env, self.cwd, self.timeout, in_process, files, list(iteration.collect), self.program if in_process else None)

    def __call__(self, iteration: Iteration) -> Outcome:
        job = self.job(iteration)
        if not iteration.exclusive:  # other checks run in this process too: only a killable subprocess
            job.in_process = False
        return self.finish(job, run_check_job(job))

    def finish(self, job: CheckJob, run: CheckRun) -> Outcome:
        """The verdict of a :class:`CheckRun`, wherever it ran (judged here, so any executor gives the same)."""
        if run.error:
            raise UsageError(run.error)
        outcome = self.judge(run.code, run.output, run.timed_out, job.argv)
        outcome.seconds = run.seconds
        self.last_output = outcome.output
        outcome.show_output = bool(outcome.output) and (self.show_output or ((outcome.bad or outcome.unresolved) and not self.hide_fail_output))
        return outcome

    def judge(self, code: int | None, output: str, timed_out: bool, argv: Sequence[str] = ()) -> Outcome:
        """Good, bad or unresolved (see the module docstring). Without a reference (no original checked:
        ``debug repeat``/``build``) bad is Polygraphy's rule, and a timeout is bad."""
        if timed_out:
            sig: tuple = ("timeout",)
            note = f"timed out after {self.timeout:g}s; killed its process group"
            if self.reference is None or self.reference == sig:
                return Outcome(True, code, output, timed_out=True, note=note, signature=sig)
            return unresolved(note, code=code, output=output, timed_out=True, signature=sig)
        missing = missing_input(code, output, argv or self.argv, POLYGRAPHY_ARTIFACTS)
        if missing:
            return unresolved(f"cannot find its input: {missing}", code=code, output=output)
        assert code is not None
        if code in self.verdict.ignore_fail_codes:
            return Outcome(False, code, output)
        matched = self.verdict.match(output)
        sig = ("exit", code, matched)
        if not self.verdict.is_bad(code, output):
            if code == 0:
                return Outcome(False, code, output, signature=sig)
            return unresolved(f"{describe_signature(sig)}: not the failure (not a --fail-code / --fail-regex match)", code=code, output=output, signature=sig)
        if self.verdict.same_failure(sig, self.reference):
            return Outcome(True, code, output, signature=sig)
        return unresolved(f"{describe_signature(sig)}, not the original {describe_signature(self.reference)}", code=code, output=output, signature=sig)



@dataclass
class CheckJob:
    """One command check as plain (picklable) data: see :meth:`CommandCheck.job`. ``files`` maps the argv
    tokens that name the iteration's files to their paths where the job was made; ``collect`` names files the
    check writes that the session sorts afterwards (``--artifacts``); ``program``: the entry function an
    in-process ``parity run`` check calls (a module-level function, so it pickles by name to other processes)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout: float | None = None
    in_process: bool = False
    files: dict[str, str] = field(default_factory=dict)
    collect: list[str] = field(default_factory=list)
    program: Program | None = None


@dataclass
class CheckRun:
    """What a :class:`CheckJob` did: exit code (negative: killed by that signal; None: timed out), output,
    seconds. ``error``: the command could not start (a usage error). ``files``: collected files' bytes
    (from a worker that ran the check in a directory of its own)."""

    code: int | None
    output: str
    timed_out: bool = False
    seconds: float = 0.0
    error: str | None = None
    files: dict[str, bytes] = field(default_factory=dict)


def run_check_job(job: CheckJob) -> CheckRun:
    """Run a :class:`CheckJob` here: in this process when ``job.in_process`` (a ``parity run`` through
    ``job.program``), else as a subprocess in its own session and process group (killed with
    everything it started at the timeout, see :mod:`parity.debug.procs`). Executors' workers call this."""
    start = time.perf_counter()
    if job.in_process and job.program is not None and is_parity_run(job.argv):
        code, output = _run_in_process(job.program, job.argv[job.argv.index("run") :])
        return CheckRun(code, output, False, time.perf_counter() - start)
    run = _subprocess(job)
    run.seconds = time.perf_counter() - start
    return run


def _subprocess(job: CheckJob) -> CheckRun:
    argv = job.argv
    marks = procs.check_env()
    env = {**os.environ, **job.env, **marks}
    procs.prepare()
    try:
        # A new session makes the check the leader of its own process group: a timeout kills the whole tree.
        proc = procs.spawn(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=job.cwd,
            start_new_session=True,
            preexec_fn=procs.child_setup if sys.platform.startswith("linux") else None,
        )
    except OSError as exc:
        return CheckRun(None, "", error=f"--check: cannot run '{shlex.join(argv)}' ({exc.strerror or exc})")
    try:
        out, timed_out = _collect(proc, job.timeout)
        if timed_out:
            procs.kill_group(proc)
        out += _drain(proc)
    except BaseException:  # Ctrl-C, SIGTERM: leave nothing running behind us
        procs.kill_group(proc)
        procs.sweep(marks["PARITY_CHECK_ID"])
        raise
    finally:
        procs.unregister(proc)
        if proc.stdout:
            proc.stdout.close()
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):  # leftovers in its group
        os.killpg(proc.pid, signal.SIGKILL)
    procs.sweep(marks["PARITY_CHECK_ID"])  # ... and in other sessions (re-parented to us)
    if procs.stopping.is_set():
        raise KeyboardInterrupt  # Parity is being interrupted: this was killed, it is no verdict
    return CheckRun(proc.returncode, out.decode(errors="replace"), timed_out)


GRACE = 0.5  # seconds to keep reading after the check exits (output still in flight)


def _collect(proc: subprocess.Popen, timeout: float | None) -> tuple[bytes, bool]:
    """Read the check's output until it exits and the pipe closes, or the deadline passes (returns
    timed_out True), or GRACE after it exits (a leftover process holds the pipe open: stop reading)."""
    assert proc.stdout is not None
    if not hasattr(select, "poll"):  # pragma: no cover - not POSIX
        try:
            return proc.communicate(timeout=timeout)[0] or b"", False
        except subprocess.TimeoutExpired:
            return b"", True
    fd = proc.stdout.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    chunks: list[bytes] = []
    deadline = None if timeout is None else time.monotonic() + timeout
    exited_at: float | None = None
    eof = False
    while True:
        now = time.monotonic()
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and (eof or now - exited_at >= GRACE):
            return b"".join(chunks), False
        if deadline is not None and now >= deadline:
            return b"".join(chunks), True
        wait = 0.1 if exited_at is None else max(0.0, GRACE - (now - exited_at))
        if deadline is not None:
            wait = min(wait, max(0.0, deadline - now))
        if eof:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=wait)
            continue
        if poller.poll(wait * 1000):
            data = os.read(fd, 1 << 16)
            if data:
                chunks.append(data)
            else:
                eof = True


def _drain(proc: subprocess.Popen) -> bytes:
    """What is left in the pipe, without blocking (a leftover may hold it open)."""
    if proc.stdout is None or not hasattr(select, "poll"):
        return b""
    fd = proc.stdout.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    chunks = []
    end = time.monotonic() + 0.2
    while time.monotonic() < end and poller.poll(50):
        try:
            data = os.read(fd, 1 << 16)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the check's process group (children included), then reap it."""
    procs.kill_group(proc)


def indent_output(text: str) -> str:
    """A check's output as shown under its verdict: its last 40 lines, each behind a ``|``."""
    lines = text.rstrip().splitlines()[-40:]
    return "".join(f"    | {line}\n" for line in lines)


def _run_in_process(program: Program, args: list[str]) -> tuple[int, str]:
    """``parity run`` through ``program``, capturing what it prints (for ``--fail-regex``)."""
    saved = dict(SETTINGS)
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            code = program(list(args))
    finally:
        SETTINGS.update(saved)
    return code, buffer.getvalue()


@dataclass
class InteractiveCheck:
    """No ``--check``: ask the user whether the artifact passed or failed. ``prompt(question) -> answer``
    asks (the CLI passes its terminal prompt; default: :func:`input`)."""

    prompt: Callable[[str], str] | None = None

    def __call__(self, iteration: Iteration) -> Outcome:
        ask = self.prompt or (lambda text: input(text + " "))
        start = time.perf_counter()
        while True:
            answer = str(ask(f">>> Did '{iteration.artifact}' [p]ass or [f]ail? ([u]nresolved: neither)")).strip().lower()
            if answer in ("p", "pass", "g", "good"):
                return Outcome(False, seconds=time.perf_counter() - start)
            if answer in ("f", "fail", "b", "bad"):
                return Outcome(True, seconds=time.perf_counter() - start)
            if answer in ("u", "unresolved", "?"):
                return unresolved("answered unresolved", seconds=time.perf_counter() - start)


@dataclass
class PredicateCheck:
    """A Python function ``fn(iteration) -> bool`` (True: bad, still failing)."""

    fn: Callable[[Any], bool]

    def __call__(self, iteration: Iteration) -> Outcome:
        start = time.perf_counter()
        return Outcome(bool(self.fn(iteration)), seconds=time.perf_counter() - start)
