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


class PairComparison(Record):
    """``actual`` is checked against ``reference`` (the second runner of the pair)."""

    actual: str
    reference: str
    iterations: list[IterationComparison]

    def __init__(self, actual: str, reference: str, iterations: list[IterationComparison] = LIST) -> None:
        fill(self, locals())

    @property
    def passed(self) -> bool:
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
        from dataclasses import asdict  # here, not at the top: a plain ``parity run`` does not import dataclasses

        out = []
        for p in self:
            out.append(
                {
                    "actual": p.actual,
                    "reference": p.reference,
                    "passed": p.passed,
                    "iterations": [
                        {
                            "iteration": it.iteration,
                            "passed": it.passed,
                            "outputs": [{k: v for k, v in asdict(c).items() if k != "details"} for c in it.checks],
                        }
                        for it in p.iterations
                    ],
                }
            )
        return out
