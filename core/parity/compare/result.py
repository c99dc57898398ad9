"""Comparison results, and their JSON form (``--report``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class OutputCheck:
    """One metric's verdict on one output of one iteration."""

    name: str
    passed: bool
    metric: str = ""
    values: dict[str, float] = field(default_factory=dict)  # measured: max_abs, cosine, ...
    thresholds: dict[str, Any] = field(default_factory=dict)  # what it had to meet
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)  # statistics and histograms for the printed report


@dataclass
class IterationComparison:
    iteration: int
    checks: list[OutputCheck]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


@dataclass
class PairComparison:
    """``actual`` is checked against ``reference`` (the second runner of the pair)."""

    actual: str
    reference: str
    iterations: list[IterationComparison] = field(default_factory=list)

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
