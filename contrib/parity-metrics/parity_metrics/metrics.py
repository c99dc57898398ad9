"""The metrics. Each is ``compare(name, actual, reference) -> OutputCheck``, where ``reference`` is the
later runner (or the golden file), as for the core's ``simple`` metric.

Thresholds are per output: a number for every output, or a mapping ``{output: value, "": default}``.
A NaN or Inf in either tensor fails every metric here, with the counts in the message: a statistic
would otherwise hide it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from parity.api import OutputCheck

Threshold = float | Mapping[str, float]


def _per_output(value: Threshold, what: str, lo: float = -math.inf, hi: float = math.inf) -> dict[str, float]:
    table = {"": float(value)} if not isinstance(value, Mapping) else {k: float(v) for k, v in value.items()}
    for key, number in table.items():
        if not lo <= number <= hi or math.isnan(number):
            raise ValueError(f"{what} {'for ' + key + ' ' if key else ''}must be in [{lo:g}, {hi:g}], got {number:g}")
    return table


class Metric:
    """Base class: subclasses set ``name``, ``key`` (the measured value's name) and ``higher_is_better`` and
    implement ``measure(actual, reference) -> float`` on finite float64 arrays of the same shape."""

    name = ""
    key = "value"
    higher_is_better = True
    option = ""  # the CLI option holding the threshold, for messages
    bounds = (-math.inf, math.inf)  # thresholds outside these can never pass or never fail: a usage error

    def __init__(self, threshold: Threshold) -> None:
        self.thresholds = _per_output(threshold, self.option or self.name, *self.bounds)

    @property
    def better_when_higher(self) -> frozenset[str]:
        """For Parity's data-set summary: the worst similarity is the lowest, the worst error the highest."""
        return frozenset({self.key}) if self.higher_is_better else frozenset()

    def average(self, name: str, checks: Mapping[int, OutputCheck]) -> OutputCheck:
        """``--check-average``: the measured value averaged over the iterations, judged once against the threshold.
        An iteration without it (a shape mismatch, NaN/Inf) fails the average, named by its message."""
        limit = self.threshold_for(name)
        thresholds: dict[str, Any] = {"min" if self.higher_is_better else "max": limit}
        missing = {i: c for i, c in checks.items() if self.key not in c.values and c.message != "empty output"}
        if missing:
            first, check = next(iter(missing.items()))
            return OutputCheck(name, False, self.name, {}, thresholds, f"iteration {first}: {check.message}: no average")
        values = [c.values[self.key] for c in checks.values() if self.key in c.values]
        if not values:
            return OutputCheck(name, True, self.name, {}, thresholds, "empty output")
        value = sum(values) / len(values)
        passed = value >= limit if self.higher_is_better else value <= limit
        sign = ">=" if self.higher_is_better else "<="
        message = "" if passed else f"average {self.key} {value:.6g} over {len(values)} iterations is not {sign} {self.option or 'threshold'} {limit:g}"
        return OutputCheck(name, passed, self.name, {self.key: value}, thresholds, message)

    def threshold_for(self, output: str) -> float:
        return self.thresholds.get(output, self.thresholds.get("", math.nan))

    def measure(self, actual: np.ndarray, reference: np.ndarray) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def extra(self, actual: np.ndarray, reference: np.ndarray) -> dict[str, float]:
        return {}

    def __call__(self, name: str, actual: np.ndarray, reference: np.ndarray) -> OutputCheck:
        limit = self.threshold_for(name)
        bound = "min" if self.higher_is_better else "max"
        thresholds: dict[str, Any] = {bound: limit}
        if actual.shape != reference.shape:
            return OutputCheck(name, False, self.name, {}, thresholds, f"shape {list(actual.shape)} != reference {list(reference.shape)}")
        a, b = np.asarray(actual, dtype=np.float64), np.asarray(reference, dtype=np.float64)
        bad_a, bad_b = int(np.count_nonzero(~np.isfinite(a))), int(np.count_nonzero(~np.isfinite(b)))
        if bad_a or bad_b:
            counts = {"nonfinite_actual": float(bad_a), "nonfinite_reference": float(bad_b)}
            return OutputCheck(name, False, self.name, counts, thresholds, f"NaN/Inf: {bad_a} in actual, {bad_b} in reference")
        if a.size == 0:
            return OutputCheck(name, True, self.name, {}, thresholds, "empty output")
        value = float(self.measure(a, b))
        passed = value >= limit if self.higher_is_better else value <= limit
        sign = ">=" if self.higher_is_better else "<="
        message = f"{sign} {limit:g}" if passed else f"{self.key} {value:.6g} is not {sign} {self.option or 'threshold'} {limit:g}"
        return OutputCheck(name, passed, self.name, {self.key: value, **self.extra(a, b)}, thresholds, message)


class Cosine(Metric):
    """Cosine similarity of the flattened tensors; two all-zero tensors are identical (1.0), one is 0.0."""

    name, key, option = "cosine", "similarity", "--cosine-min"
    bounds = (-1.0, 1.0)

    def __init__(self, min: Threshold = 0.999) -> None:  # noqa: A002 - reads well at the call site
        super().__init__(min)

    def measure(self, actual: np.ndarray, reference: np.ndarray) -> float:
        na, nb = np.linalg.norm(actual), np.linalg.norm(reference)
        if na == 0 or nb == 0:
            return 1.0 if na == nb else 0.0
        return float(np.clip(np.vdot(actual, reference) / (na * nb), -1.0, 1.0))


class RelativeL2(Metric):
    """``||actual - reference|| / ||reference||`` (Frobenius norms); 0 when both are all zero."""

    name, key, option, higher_is_better = "rel-l2", "error", "--rel-l2-max", False

    def __init__(self, max: Threshold = 1e-3) -> None:  # noqa: A002
        super().__init__(max)

    def measure(self, actual: np.ndarray, reference: np.ndarray) -> float:
        diff, norm = np.linalg.norm(actual - reference), np.linalg.norm(reference)
        if norm == 0:
            return 0.0 if diff == 0 else math.inf
        return float(diff / norm)


def _db(signal_power: float, noise_power: float) -> float:
    if noise_power == 0:
        return math.inf  # identical outputs
    if signal_power == 0:
        return -math.inf
    return 10.0 * math.log10(signal_power / noise_power)


class SNR(Metric):
    """Signal-to-noise ratio in dB: ``10 log10(mean(reference^2) / mean((actual - reference)^2))``."""

    name, key, option = "snr-db", "db", "--snr-min"

    def __init__(self, min_db: Threshold = 40.0) -> None:
        super().__init__(min_db)

    def measure(self, actual: np.ndarray, reference: np.ndarray) -> float:
        return _db(float(np.mean(reference**2)), float(np.mean((actual - reference) ** 2)))


class PSNR(Metric):
    """Peak signal-to-noise ratio in dB: ``10 log10(peak^2 / MSE)``; ``peak`` defaults to ``max|reference|``
    (give the data range, e.g. 1.0 or 255, for images)."""

    name, key, option = "psnr-db", "db", "--psnr-min"

    def __init__(self, min_db: Threshold = 40.0, peak: float | None = None) -> None:
        super().__init__(min_db)
        if peak is not None and not peak > 0:
            raise ValueError(f"--psnr-peak must be > 0, got {peak:g}")
        self.peak = peak

    def _peak(self, reference: np.ndarray) -> float:
        return self.peak if self.peak is not None else float(np.max(np.abs(reference)))

    def measure(self, actual: np.ndarray, reference: np.ndarray) -> float:
        return _db(self._peak(reference) ** 2, float(np.mean((actual - reference) ** 2)))

    def extra(self, actual: np.ndarray, reference: np.ndarray) -> dict[str, float]:
        return {"peak": self._peak(reference)}


class TopKAgreement(Metric):
    """Classifier outputs (classes on the last axis): the fraction of rows whose top-k class *sets* agree.

    Unlike the core's ``indices`` (every row must agree), this passes when at least ``min`` of the rows do,
    which is what accuracy budgets for quantised classifiers are written in.
    """

    name, key, option = "topk-agree", "agreement", "--topk-agree-min"
    bounds = (0.0, 1.0)

    def __init__(self, k: int = 1, min: Threshold = 1.0) -> None:  # noqa: A002
        super().__init__(min)
        if k < 1:
            raise ValueError(f"--topk-agree-k must be >= 1, got {k}")
        self.k = k

    @staticmethod
    def _top(rows: np.ndarray, k: int) -> np.ndarray:
        order = np.argsort(-rows, axis=-1, kind="stable")[:, :k]  # ties: the lower class index first
        return np.sort(order, axis=-1)

    def _rows(self, actual: np.ndarray, reference: np.ndarray) -> np.ndarray:
        classes = actual.shape[-1] if actual.ndim else 1
        a, b = actual.reshape(-1, classes), reference.reshape(-1, classes)
        k = min(self.k, classes)
        return np.all(self._top(a, k) == self._top(b, k), axis=-1)

    def measure(self, actual: np.ndarray, reference: np.ndarray) -> float:
        return float(np.mean(self._rows(actual, reference)))

    def extra(self, actual: np.ndarray, reference: np.ndarray) -> dict[str, float]:
        rows = self._rows(actual, reference)
        return {"rows": float(rows.size), "disagreeing_rows": float(np.count_nonzero(~rows)), "k": float(self.k)}
