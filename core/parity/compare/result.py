"""Comparison results, and their JSON form (``--report``)."""

from __future__ import annotations

from typing import Any

from parity.util.record import DICT, LIST, Record, fill


class OutputCheck(Record):
    """One metric's verdict on one output of one iteration."""

    name: str
    passed: bool
    metric: str
    values: dict[str, float]  # measured: max_abs, cosine, ...
    thresholds: dict[str, Any]  # what it had to meet
    message: str
    details: dict[str, Any]  # statistics and histograms for the printed report

    def __init__(
        self,
        name: str,
        passed: bool,
        metric: str = "",
        values: dict[str, float] = DICT,
        thresholds: dict[str, Any] = DICT,
        message: str = "",
        details: dict[str, Any] = DICT,
    ) -> None:
        fill(self, locals())


class IterationComparison(Record):
    """The checks of one iteration of a pair of runners."""

    iteration: int
    checks: list[OutputCheck]

    def __init__(self, iteration: int, checks: list[OutputCheck]) -> None:
        fill(self, locals())

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


class OutputDataset(Record):
    """One metric's results on one output over every iteration of a pair: the data-set view of a run.

    ``mean``: each measured value averaged over the iterations that have it; ``worst``: ``{value: {"value": v,
    "iteration": i}}``, the highest (the lowest for values the metric says are better higher, e.g. cosine);
    ``values``: what the metric itself computes over the whole data set (``indices``: the top-k agreement over
    every row of every iteration)."""

    output: str
    metric: str
    iterations: int
    passed_iterations: int
    mean: dict[str, Any]
    worst: dict[str, Any]
    values: dict[str, Any]

    def __init__(
        self,
        output: str,
        metric: str,
        iterations: int = 0,
        passed_iterations: int = 0,
        mean: dict[str, Any] = DICT,
        worst: dict[str, Any] = DICT,
        values: dict[str, Any] = DICT,
    ) -> None:
        fill(self, locals())


class PairComparison(Record):
    """``actual`` is checked against ``reference`` (the second runner of the pair).

    ``aggregation``: ``"per_iteration"`` (every iteration must pass) or ``"average"`` (``--check-average``: each
    output's metrics averaged over the iterations must pass; ``average`` holds those verdicts once the run is
    over). ``dataset``: each output's metrics over all iterations (:class:`OutputDataset`)."""

    actual: str
    reference: str
    iterations: list[IterationComparison]
    aggregation: str
    average: list[OutputCheck] | None
    dataset: list[OutputDataset]

    def __init__(
        self,
        actual: str,
        reference: str,
        iterations: list[IterationComparison] = LIST,
        aggregation: str = "per_iteration",
        average: list[OutputCheck] | None = None,
        dataset: list[OutputDataset] = LIST,
    ) -> None:
        fill(self, locals())

    @property
    def passed(self) -> bool:
        if self.aggregation == "average" and self.average is not None:
            return all(c.passed for c in self.average)
        return all(it.passed for it in self.iterations)


class AccuracyResult(list[PairComparison]):
    """What ``Comparator.compare_accuracy`` returns: truthy iff every pair passed."""

    def __bool__(self) -> bool:
        return all(p.passed for p in self)

    def pair(self, actual: str, reference: str) -> PairComparison:
        for p in self:
            if (p.actual, p.reference) == (actual, reference):
                return p
        raise KeyError((actual, reference))

    def to_json(self) -> list[dict[str, Any]]:
        out = []
        for p in self:
            entry: dict[str, Any] = {
                "actual": p.actual,
                "reference": p.reference,
                "passed": p.passed,
                "aggregation": p.aggregation,
                "iterations": [{"iteration": it.iteration, "passed": it.passed, "outputs": [check_json(c) for c in it.checks]} for it in p.iterations],
                "dataset": [
                    {
                        "output": d.output,
                        "metric": d.metric,
                        "iterations": d.iterations,
                        "passed_iterations": d.passed_iterations,
                        "mean": d.mean,
                        "worst": d.worst,
                        "values": d.values,
                    }
                    for d in p.dataset
                ],
            }
            if p.average is not None:
                entry["average"] = {"iterations": len(p.iterations), "passed": p.passed, "outputs": [check_json(c) for c in p.average]}
            out.append(entry)
        return out


def check_json(check: OutputCheck) -> dict[str, Any]:
    """An :class:`OutputCheck` as ``--report`` writes it: every field but ``details`` (statistics for printing)."""
    return {"name": check.name, "passed": check.passed, "metric": check.metric, "values": check.values, "thresholds": check.thresholds, "message": check.message}
