"""The ``simple`` metric: absolute/relative error against tolerances, Polygraphy-compatible.

Rule (same as Polygraphy's, so thresholds carry over): with ``--check-error-stat elemwise`` an element is
a mismatch iff ``abs_err > atol AND rel_err > rtol`` (either tolerance alone suffices to pass it), where
``rel_err = abs_err / |reference|``; with ``max|mean|median|quantile`` the output fails iff that statistic
of the absolute error exceeds atol AND the same statistic of the relative error exceeds rtol.

NaN and Inf are handled deliberately: a NaN in either tensor is a mismatch (unless both have NaN at the
same place and ``nans_equal``); equal infinities are a mismatch unless ``infinities_equal``. Counts are
reported so a NaN never hides inside a statistic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from parity.compare import stats
from parity.compare.result import OutputCheck
from parity.compare.tolerance import ERROR_STATS, PerOutput, tolerances

TINY = np.finfo(np.float32).tiny


class SimpleCompare:
    """``compare(name, actual, reference) -> OutputCheck``; reusable across outputs and iterations."""

    name = "simple"

    def __init__(
        self,
        atol: Mapping[str, float] | float | None = None,
        rtol: Mapping[str, float] | float | None = None,
        check_error_stat: Mapping[str, str] | str | None = None,
        error_quantile: float = 0.99,
        infinities_equal: bool = False,
        nans_equal: bool = False,
        preset: str | None = None,
        details: bool = True,
    ) -> None:
        self.atol, self.rtol = tolerances(atol, rtol, preset)
        if not isinstance(check_error_stat, Mapping):
            check_error_stat = {"": check_error_stat or "elemwise"}
        for stat in check_error_stat.values():
            if stat not in ERROR_STATS:
                raise ValueError(f"unknown error statistic '{stat}' (choose from {', '.join(ERROR_STATS)})")
        self.check_error_stat = PerOutput({"": "elemwise", **check_error_stat})
        self.error_quantile = error_quantile
        self.infinities_equal = infinities_equal
        self.nans_equal = nans_equal
        self.details = details

    def __call__(self, name: str, actual: np.ndarray, reference: np.ndarray) -> OutputCheck:
        atol = float(self.atol.for_output(name))  # type: ignore[arg-type]
        rtol = float(self.rtol.for_output(name))  # type: ignore[arg-type]
        stat = str(self.check_error_stat.for_output(name))
        thresholds: dict[str, Any] = {"atol": atol, "rtol": rtol, "check_error_stat": stat}
        if actual.shape != reference.shape:
            return OutputCheck(name, False, self.name, {}, thresholds, f"shape {list(actual.shape)} != reference {list(reference.shape)}")
        a, b = stats.as_float(actual), stats.as_float(reference)
        err = _ErrorScan(a, b, atol, rtol, self.infinities_equal, self.nans_equal)
        scratch = np.empty(a.size, dtype=np.float32)
        # absolute error statistics, then the same buffer reused for the relative error
        err.fill_abs(scratch)
        abs_hist = stats.decade_histogram(scratch) if self.details else []
        abs_s = stats.summarize(scratch, scratch)
        err.fill_rel(scratch)
        rel_s = stats.summarize(scratch, scratch)
        del scratch
        values: dict[str, float] = {
            "max_abs": abs_s.max,
            "mean_abs": abs_s.mean,
            "median_abs": abs_s.median,
            "max_rel": rel_s.max,
            "mean_rel": rel_s.mean,
            "median_rel": rel_s.median,
            "cosine": stats.cosine_similarity(a, b),
            "mismatches": float(err.mismatches),
            "nan_actual": float(err.nan_a),
            "nan_reference": float(err.nan_b),
            "inf_mismatches": float(err.inf_bad),
            # the smallest tolerances that would have passed on their own (elemwise)
            "min_atol": err.needed_atol,
            "min_rtol": err.needed_rtol,
        }
        if stat == "elemwise":
            passed = err.mismatches == 0
            why = f"{err.mismatches} of {a.size} elements exceed atol={atol:g} and rtol={rtol:g}"
        else:
            q = self.error_quantile
            if stat == "quantile":
                abs_v, rel_v = _quantile(err, q, a.size, absolute=True), _quantile(err, q, a.size, absolute=False)
                thresholds["error_quantile"] = q
            else:
                abs_v = {"max": abs_s.max, "mean": abs_s.mean, "median": abs_s.median}[stat]
                rel_v = {"max": rel_s.max, "mean": rel_s.mean, "median": rel_s.median}[stat]
            values[f"{stat}_abs"], values[f"{stat}_rel"] = abs_v, rel_v
            nonfinite = err.nan_a + err.nan_b + err.inf_bad
            passed = nonfinite == 0 and not (_fails(abs_v, atol) and _fails(rel_v, rtol))
            why = f"{stat} error abs={abs_v:.4g} > {atol:g} and rel={rel_v:.4g} > {rtol:g}"
            if nonfinite:
                why = f"{nonfinite} NaN/Inf mismatches"
        details = {}
        if self.details:
            details = {
                "abs": abs_s.to_dict(),
                "rel": rel_s.to_dict(),
                "abs_histogram": abs_hist,
                "actual": stats.summarize(a).to_dict(),
                "reference": stats.summarize(b).to_dict(),
                "shape": list(actual.shape),
                "dtypes": [actual.dtype.name, reference.dtype.name],
            }
        return OutputCheck(name, passed, self.name, values, thresholds, "" if passed else why, details)


def _fails(value: float, tol: float) -> bool:
    return math.isnan(value) or value > tol


class _ErrorScan:
    """One chunked pass over both tensors that counts mismatches and the tolerances that would pass."""

    def __init__(self, a: np.ndarray, b: np.ndarray, atol: float, rtol: float, inf_equal: bool, nan_equal: bool) -> None:
        self.a, self.b, self.inf_equal, self.nan_equal = a, b, inf_equal, nan_equal
        self.mismatches = self.nan_a = self.nan_b = self.inf_bad = 0
        self.needed_atol = 0.0
        self.needed_rtol = 0.0
        for sl in stats.chunks(a.size):
            absd, rel, x, y = self._chunk(sl)
            nan_x, nan_y = np.isnan(x), np.isnan(y)
            self.nan_a += int(np.count_nonzero(nan_x))
            self.nan_b += int(np.count_nonzero(nan_y))
            both_nan = nan_x & nan_y
            special = (~np.isfinite(absd)) & ~(both_nan if nan_equal else False)
            self.inf_bad += int(np.count_nonzero(special & ~nan_x & ~nan_y))
            bad = ((absd > atol) & (rel > rtol)) | special
            self.mismatches += int(np.count_nonzero(bad))
            finite = np.isfinite(absd)
            if finite.any():
                self.needed_atol = max(self.needed_atol, float(absd[finite].max()))
                rel_f = rel[finite]
                self.needed_rtol = max(self.needed_rtol, float(rel_f.max()) if rel_f.size else 0.0)
            if special.any():
                self.needed_atol = self.needed_rtol = math.inf

    def _chunk(self, sl: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        x = np.asarray(self.a[sl], dtype=np.float64)
        y = np.asarray(self.b[sl], dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            absd = np.abs(x - y)
            if self.inf_equal:
                absd[np.isinf(x) & (x == y)] = 0.0
            if self.nan_equal:
                absd[np.isnan(x) & np.isnan(y)] = 0.0
            rel = absd / np.maximum(np.abs(y), TINY)
        return absd, rel, x, y

    def fill_abs(self, out: np.ndarray) -> None:
        for sl in stats.chunks(self.a.size):
            out[sl] = self._chunk(sl)[0]

    def fill_rel(self, out: np.ndarray) -> None:
        for sl in stats.chunks(self.a.size):
            out[sl] = self._chunk(sl)[1]


def _quantile(err: _ErrorScan, q: float, n: int, absolute: bool) -> float:
    buf = np.empty(n, dtype=np.float64)
    (err.fill_abs if absolute else err.fill_rel)(buf)
    buf = buf[np.isfinite(buf)]
    return float(np.quantile(buf, q)) if buf.size else math.nan
