"""What the engines show, behind small interfaces: they call a reporter, never print.

* :class:`RunReporter`: a comparison run (:func:`parity.run_engine.run_comparison`), a base class whose
  methods all have defaults, so the engine calls each directly (:func:`run_reporter` completes a reporter that
  does not subclass it; :func:`debug_reporter` does the same for :class:`DebugReporter`). The CLI's (:class:`parity.cli.report.ReportPrinter`) prints Parity's lines; the
  Python API's default, :class:`QuietReporter`, shows warnings only.
* :class:`DebugReporter`: a debug session (:class:`parity.debug.DebugSession`). The CLI's
  (:class:`parity.cli.debug.DebugProgress`) shows a progress bar or a line per check; the default,
  :class:`QuietDebugReporter`, shows warnings only.
* :class:`RunWatcher`: what a plugin watching a comparison run implements (hook ``parity_watch_run``: the
  parity-reports plugin draws heatmaps and writes the HTML report and Model Explorer's node data this way);
  :class:`FinishedRun` is what it is told when the run is over.

:func:`write_report` writes the ``--report`` JSON file. This module imports no engine module (the run's
summary is typed by what is read of it), so the engine imports it and not the other way round.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from parity.util.fs import write_text_atomic
from parity.util.text import warn

R = TypeVar("R")

if TYPE_CHECKING:  # pragma: no cover
    from parity.compare.divergence import DivergenceReport
    from parity.compare.nonfinite import NonFiniteReport
    from parity.compare.result import PairComparison
    from parity.results.model import IterationResult


class RunReporter:
    """What :func:`parity.run_engine.run_comparison` calls as the run goes. Subclass it and override what you
    show; every method has a default (``warning`` writes to stderr, the others do nothing), so the engine calls
    each directly. A reporter that does not subclass it (one written before ``progress``, ``nonfinite`` or
    ``note`` existed) still works: :func:`run_reporter` wraps it once, filling the methods it lacks with these
    defaults."""

    #: whose comparison details (statistics of both tensors, percentiles, histogram) it shows: ``"all"`` outputs'
    #: or only ``"failures"``' (the comparison then skips them for passing outputs)
    details = "all"

    def warning(self, message: str) -> None:
        """Something the user should know that does not stop the run (default: one line on stderr)."""
        warn(message)

    def iteration(self, index: int, pairs: Sequence[PairComparison]) -> None:
        """Iteration ``index`` of each compared pair is done (``pair.iterations[index]``)."""

    def divergence(self, reports: Sequence[DivergenceReport]) -> None:
        """Outputs were marked (layerwise): where each pair starts to disagree."""

    def summary(self, summary: Any) -> None:
        """The run is over: runtimes, validation and the verdict (a :class:`parity.run_engine.RunSummary`)."""

    def nonfinite(self, reports: Sequence[NonFiniteReport]) -> None:
        """A layerwise run with ``--validate`` found NaN/Inf; each report names a runner's first node whose
        output holds one."""

    def note(self, message: str) -> None:
        """Something the run did worth a line (``wrote 8 PNG file(s) to maps``)."""

    def progress(self, task: str, done: int, total: int | None, status: str) -> None:
        """How far the run is. ``task`` ``"iterations"``: ``done`` of ``total`` (None: the data loader cannot
        say), ``status`` the step now running (``"loading onnxrt"``, ``"onnxrt"``, ``"comparing"``);
        ``"outputs"``: outputs compared in an iteration with many (layerwise); ``"heatmaps"``: pictures drawn."""


class QuietReporter(RunReporter):
    """Shows warnings (on stderr, as everywhere in Parity) and nothing else: the Python API's default."""


def _completed(reporter: Any, base: type[R]) -> R:
    """``reporter``, which does not subclass ``base``, as a ``base``: its own public methods where it has them,
    ``base``'s defaults where it does not (looked up once, here, not at each call)."""
    completed = base()
    for name in dir(base):
        method = getattr(reporter, name, None) if not name.startswith("_") else None
        if callable(method):
            setattr(completed, name, method)
    completed.wrapped = reporter  # type: ignore[attr-defined]
    return completed


def run_reporter(reporter: Any = None) -> RunReporter:
    """``reporter`` as a complete :class:`RunReporter`: itself when it subclasses it, :class:`QuietReporter`
    for None, else wrapped once so the methods it lacks do what the defaults do."""
    if reporter is None:
        return QuietReporter()
    if isinstance(reporter, RunReporter):
        return reporter
    return _completed(reporter, RunReporter)


class FinishedRun:
    """What :meth:`RunWatcher.on_finished` and :meth:`RunWatcher.on_reported` are told of a run that is over."""

    __slots__ = ("code", "layerwise", "model", "nonfinite", "summary")

    def __init__(self, summary: Any, code: int, model: str | None, layerwise: Sequence[DivergenceReport] | None, nonfinite: Sequence[NonFiniteReport] | None) -> None:
        self.summary = summary  # the parity.run_engine.RunSummary: comparisons (summary.accuracy), iterations, runtimes, validation, marking
        self.code = code  # the exit code the run means (parity.errors.ExitCode)
        self.model = model  # the model's path; None when only saved outputs were compared
        self.layerwise = layerwise  # outputs were marked: where each pair starts to disagree (None otherwise)
        self.nonfinite = nonfinite  # a layerwise run with --validate: each runner's first NaN/Inf (None otherwise)


class RunWatcher:
    """Watches one comparison run for a plugin: return one from the hook ``parity_watch_run`` when the run's
    options ask for it. :func:`parity.run_engine.run_comparison` calls these methods in this order; each does
    nothing unless overridden. Raise :class:`parity.errors.UsageError` from the ``check`` methods to refuse a
    request before any work (one line, exit 2)."""

    #: the comparison statistics this watcher reads (a level of ``parity.api.STATISTICS``): ``"all"`` (the
    #: default: every value, every output's details with percentiles), ``"report"`` (the medians), ``"histogram"``
    #: (every output's details without medians or percentiles) or ``"shown"`` (the values every line shows). The
    #: run computes the least level covering its watchers' and its reporter's: say less, and runs get faster
    #: (exact medians and percentiles are most of a layerwise run's comparison time)
    statistics = "all"

    def check(self) -> None:
        """Before any work, once the model's path is checked: refuse what cannot be done (a library that is
        missing, a folder that is a file, no display to show on)."""

    def check_model(self, model: str | None, kind: str | None) -> None:
        """The model's kind is known (``"onnx"``, ...; None without a model), no runner is built yet: refuse what
        this model does not allow."""

    def on_compared(self, index: int, pair: PairComparison, actual: IterationResult, reference: IterationResult) -> None:
        """Iteration ``index`` of ``pair`` was just compared (``pair.iterations[-1]``), while both sides' outputs are
        in memory: look at the arrays now, they are gone after the call."""

    def on_finished(self, run: FinishedRun) -> None:
        """The run is over, before its summary is shown: draw what belongs beside the summary (heatmaps' plots),
        tell the user with the reporter's ``note``."""

    def on_reported(self, run: FinishedRun) -> None:
        """The summary is shown and the ``--report`` file written: write your files."""


class DebugReporter:
    """What :class:`parity.debug.DebugSession` calls as checks finish. Subclass it and override what you show;
    every method has a default (``warn`` writes to stderr, the others do nothing), so the session calls each
    directly; a reporter that does not subclass it is completed once by :func:`debug_reporter`."""

    def iteration(self, index: int, verdict: str, seconds: float, info: Mapping[str, Any], resumed: bool = False, note: str = "") -> None:
        """Check ``index`` gave ``verdict`` (``"good"``, ``"bad"`` or ``"unresolved"``); ``resumed``: taken
        from the state file, not run; ``info``: the iteration's info (``label`` names the candidate)."""

    def check_output(self, text: str) -> None:
        """What the check printed, to be shown (``--show-output``, or a check that did not pass)."""

    def note(self, message: str) -> None:
        """Something worth a line: resuming from a state file, the last output of a stopped search."""

    def warn(self, message: str) -> None:
        """Something the user should know: an ignored state file, a termination signal (default: stderr)."""
        warn(message)

    def close(self) -> None:
        """The session is finished."""

    def expect(self, remaining: int | None) -> None:
        """About ``remaining`` more checks are coming (``--until N``, a binary search's steps), None when the
        command cannot tell; a display shows the time left from it."""


class QuietDebugReporter(DebugReporter):
    """Shows warnings (on stderr) and nothing else: the Python API's default."""


def debug_reporter(reporter: Any = None) -> DebugReporter:
    """``reporter`` as a complete :class:`DebugReporter` (see :func:`run_reporter`)."""
    if reporter is None:
        return QuietDebugReporter()
    if isinstance(reporter, DebugReporter):
        return reporter
    return _completed(reporter, DebugReporter)


def write_report(path: str, summary: Any, code: int, layerwise: Sequence[Any] | None = None, nonfinite: Sequence[Any] | None = None) -> None:
    """``layerwise``: the run's first-divergence reports, when outputs were marked; ``nonfinite``: each runner's
    first NaN/Inf (a layerwise run with ``--validate``; empty when there was none)."""
    report = {
        "format": "parity-report",
        "version": 1,
        "command": sys.argv,
        "passed": summary.passed,
        "exit_code": int(code),
        "iterations": summary.iterations,
        "runtimes_ms": {k: [t * 1000 for t in v] for k, v in summary.runtimes.items()},
        "validation": [v.__dict__ for v in summary.validation] if summary.validated else None,
        "comparisons": summary.accuracy.to_json(),
    }
    if layerwise is not None:
        report["layerwise"] = [r.to_json() for r in layerwise]
    if nonfinite is not None:
        report["nonfinite"] = [r.to_json() for r in nonfinite]
    if getattr(summary, "marking", None):  # marking outputs changed a runner's real outputs (compare/marking.py)
        report["marking"] = [m.to_json() for m in summary.marking]
    write_text_atomic(path, json.dumps(_strict(report), indent=1, default=json_default, allow_nan=False))


def _strict(value: Any) -> Any:
    """NaN/Inf become null, so the report is strict JSON (an empty tensor has no max error, a NaN output no
    cosine; the check's message or ``cosine_undefined`` says why)."""
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_default(value: Any) -> Any:
    """``json.dumps(default=...)`` for Parity's reports: NumPy scalars as numbers, sets as lists, else ``str``."""
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)
