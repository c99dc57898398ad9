"""What a run shows, behind a small interface: the engine calls a :class:`RunReporter`, never prints.

The CLI's reporter (:class:`parity.cli.report.ReportPrinter`) prints Parity's lines; the Python API's default,
:class:`QuietReporter`, shows warnings only. :func:`write_report` writes the ``--report`` JSON file.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from parity.util.text import warn

if TYPE_CHECKING:  # pragma: no cover
    from parity.compare.divergence import DivergenceReport
    from parity.compare.result import PairComparison
    from parity.runflow import RunSummary


class RunReporter(Protocol):
    """Called by :func:`parity.runflow.run_comparison` as the run goes."""

    def warning(self, message: str) -> None:
        """Something the user should know that does not stop the run."""

    def iteration(self, index: int, pairs: Sequence[PairComparison]) -> None:
        """Iteration ``index`` of each compared pair is done (``pair.iterations[index]``)."""

    def divergence(self, reports: Sequence[DivergenceReport]) -> None:
        """Outputs were marked (layerwise): where each pair starts to disagree."""

    def summary(self, summary: RunSummary) -> None:
        """The run is over: runtimes, validation and the verdict."""


class QuietReporter:
    """Shows warnings (on stderr, as everywhere in Parity) and nothing else."""

    def warning(self, message: str) -> None:
        warn(message)

    def iteration(self, index: int, pairs: Sequence[Any]) -> None:
        pass

    def divergence(self, reports: Sequence[Any]) -> None:
        pass

    def summary(self, summary: Any) -> None:
        pass


def write_report(path: str, summary: Any, code: int, layerwise: Sequence[Any] | None = None) -> None:
    """``layerwise``: the run's first-divergence reports, when outputs were marked."""
    from parity.util.fs import write_text_atomic

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
