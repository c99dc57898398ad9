"""Verdicts and metrics over a whole data set: every iteration of a run, not one at a time.

Two things are computed when a run (or :meth:`parity.compare.comparator.Comparator.compare_accuracy`) is over:

* **data-set metrics** (always): for each pair, output and metric, each measured value averaged over the
  iterations and its worst value with the iteration it came from (:class:`parity.compare.result.OutputDataset`),
  plus what the metric computes over the data set itself (``dataset_values``; ``indices``: the top-k agreement
  over every row of every iteration, not the mean of the iterations' agreements);
* **averaged verdicts** (``--check-average``, Polygraphy's flag): each output's metric averaged over the
  iterations and judged once against the thresholds, instead of every iteration being judged.

A compare function takes part through optional members (plain callables without them still get the data-set
means and worsts, every value taken as an error: higher is worse):

* ``better_when_higher``: the value names for which higher is better (``{"cosine"}``), so "worst" is the lowest;
* ``dataset_values(checks) -> dict``: values of its own over the data set, from ``{iteration: OutputCheck}``;
* ``average(name, checks) -> OutputCheck``: the verdict on the averaged metric, from ``{iteration: OutputCheck}``
  of one output; a function without it cannot be used with ``--check-average``;
* ``why_no_average() -> str | None``: why this configuration of the function cannot average (``simple`` with the
  ``elemwise`` statistic: a per-element verdict has no scalar to average).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from parity.compare.result import OutputCheck, OutputDataset, PairComparison
from parity.errors import UsageError


def metric_name(func: Any) -> str:
    return str(getattr(func, "name", "") or getattr(func, "__name__", "") or type(func).__name__)


def refuse_unaveraged(funcs: Sequence[Any], fail_fast: bool = False) -> None:
    """Before any work: ``--check-average`` needs every compare function to average its metric, and every
    iteration (so no ``--fail-fast``). A usage error (exit 2) saying what to change."""
    if fail_fast:
        raise UsageError("--check-average judges the average over every iteration: it cannot be combined with --fail-fast")
    for func in funcs:
        why = func.why_no_average() if hasattr(func, "why_no_average") else None
        if why is None and not callable(getattr(func, "average", None)):
            why = f"the {metric_name(func)} metric has no averaged verdict (its compare function defines no average())"
        if why:
            raise UsageError(f"--check-average: {why}")


def finish(pairs: Iterable[PairComparison], funcs: Sequence[Any], check_average: bool = False) -> None:
    """Fill each pair's ``dataset`` and, with ``check_average``, its ``average`` verdicts (the pair's verdict from
    then on); called when the run's iterations are done."""
    for pair in pairs:
        groups = _groups(pair)
        pair.dataset = [dataset_of(output, metric, checks, _func(funcs, metric)) for (output, metric), checks in groups.items()]
        if check_average:
            pair.aggregation = "average"
            pair.average = [_average(output, checks, _func(funcs, metric)) for (output, metric), checks in groups.items()]


def _groups(pair: PairComparison) -> dict[tuple[str, str], dict[int, OutputCheck]]:
    """``{(output, metric): {iteration: check}}`` in the order outputs were first compared; outputs one side
    lacks (metric ``missing``) are left out: they were not compared."""
    groups: dict[tuple[str, str], dict[int, OutputCheck]] = {}
    for it in pair.iterations:
        for check in it.checks:
            if check.metric != "missing":
                groups.setdefault((check.name, check.metric), {})[it.iteration] = check
    return groups


def _func(funcs: Sequence[Any], metric: str) -> Any:
    return next((f for f in funcs if metric_name(f) == metric), None)


def dataset_of(output: str, metric: str, checks: Mapping[int, OutputCheck], func: Any = None) -> OutputDataset:
    """The data-set view of one output's checks by one metric (see the module's docstring)."""
    higher_better = set(getattr(func, "better_when_higher", ()) or ())
    series: dict[str, list[tuple[int, float]]] = {}
    for iteration, check in checks.items():
        for key, value in check.values.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                series.setdefault(key, []).append((iteration, float(value)))
    mean, worst = {}, {}
    for key, points in series.items():
        mean[key] = sum(v for _, v in points) / len(points)  # a NaN stays a NaN: it is never averaged away
        nan = next(((i, v) for i, v in points if math.isnan(v)), None)
        if nan is not None:
            at, value = nan
        else:
            pick = min if key in higher_better else max
            at, value = pick(points, key=lambda p: p[1])
        worst[key] = {"value": value, "iteration": at}
    own = func.dataset_values(checks) if func is not None and hasattr(func, "dataset_values") else {}
    return OutputDataset(output, metric, len(checks), sum(c.passed for c in checks.values()), mean, worst, dict(own))


def _average(output: str, checks: Mapping[int, OutputCheck], func: Any) -> OutputCheck:
    if func is None or not callable(getattr(func, "average", None)):  # refused before the run: kept honest anyway
        return OutputCheck(output, False, "", message="no averaged verdict for this metric")
    return func.average(output, checks)


def average_values(checks: Mapping[int, OutputCheck]) -> dict[str, Any]:
    """Every numeric value of the checks averaged over the iterations that have it (``None`` is left out; a NaN
    stays a NaN): the values an averaged check reports. For compare functions' ``average``."""
    sums: dict[str, list[float]] = {}
    for check in checks.values():
        for key, value in check.values.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                sums.setdefault(key, []).append(float(value))
    return {key: sum(values) / len(values) for key, values in sums.items()}


def iterations_text(iterations: Iterable[int]) -> str:
    shown = list(iterations)
    text = ", ".join(map(str, shown[:5]))
    return text + (f", ... ({len(shown)} in all)" if len(shown) > 5 else "")
