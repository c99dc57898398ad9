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
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from parity.compare import stats
from parity.compare.dataset import average_values, iterations_text
from parity.compare.result import OutputCheck
from parity.compare.tolerance import ERROR_STATS, PerOutput, tolerances
from parity.data.parse import parse_per_name

TINY = np.finfo(np.float32).tiny


class SimpleCompare:
    """``compare(name, actual, reference) -> OutputCheck``; reusable across outputs and iterations."""

    name = "simple"
    better_when_higher = frozenset({"cosine"})  # the data-set summary's worst cosine is the lowest

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

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SimpleCompare:
        """The metric its options configure (the registered factory, and ``CompareFunc.simple``): ``atol``, ``rtol``,
        ``check_error_stat`` as ``parity run`` parses them (``("1e-5", "y:1e-3")``: ``[OUT:]VALUE`` strings) or as
        Python gives them (a value, or ``{output: value, "": default}``), ``error_quantile``, ``tolerance_preset``,
        ``infinities_compare_equal``, ``nans_compare_equal``. Absent or None: the default."""
        quantile = options.get("error_quantile")
        return cls(
            _per_output(options.get("atol"), float, "--atol"),
            _per_output(options.get("rtol"), float, "--rtol"),
            _per_output(options.get("check_error_stat"), str, "--check-error-stat"),
            0.99 if quantile is None else quantile,
            bool(options.get("infinities_compare_equal")),
            bool(options.get("nans_compare_equal")),
            options.get("tolerance_preset"),
        )

    def __call__(self, name: str, actual: np.ndarray, reference: np.ndarray) -> OutputCheck:
        atol = float(self.atol.for_output(name))  # type: ignore[arg-type]
        rtol = float(self.rtol.for_output(name))  # type: ignore[arg-type]
        stat = str(self.check_error_stat.for_output(name))
        thresholds: dict[str, Any] = {"atol": atol, "rtol": rtol, "check_error_stat": stat}
        if actual.shape != reference.shape:
            return OutputCheck(name, False, self.name, {}, thresholds, f"shape {list(actual.shape)} != reference {list(reference.shape)}")
        a, b = stats.as_float(actual), stats.as_float(reference)
        # one fused pass: mismatches, the statistics of both tensors, cosine, and the absolute error kept in a
        # float32 scratch for its percentiles; then the scratch is reused for the relative error and the tensors
        err = _ErrorScan(a, b, atol, rtol, self.infinities_equal, self.nans_equal)
        scratch = np.empty(a.size, dtype=np.float32)
        err.scan(scratch, histogram=self.details)
        abs_s, rel_s = err.abs_acc.finish(), err.rel_acc.finish()
        if abs_s.finite:
            abs_s.percentiles = stats.percentiles_of(scratch, scratch, abs_s)
        if rel_s.finite:
            err.fill_rel(scratch)
            rel_s.percentiles = stats.percentiles_of(scratch, scratch, rel_s)
        abs_hist = err.histogram
        values: dict[str, Any] = {
            "max_abs": abs_s.max,
            "mean_abs": abs_s.mean,
            "median_abs": abs_s.median,
            "max_rel": rel_s.max,
            "mean_rel": rel_s.mean,
            "median_rel": rel_s.median,
            "cosine": err.cosine(),  # None when undefined; then "cosine_undefined" says why
            "sqnr_db": err.sqnr_db(),  # signal (reference) to error ratio in dB; None with NaN/Inf
            "mismatches": float(err.mismatches),
            "nan_actual": float(err.nan_a),
            "nan_reference": float(err.nan_b),
            "inf_mismatches": float(err.inf_bad),
            # the smallest tolerances that would have passed on their own (elemwise)
            "min_atol": err.needed_atol,
            "min_rtol": err.needed_rtol,
        }
        why_no_cosine = stats.cosine_undefined(err.dots[1], err.dots[2], a.size, atol)
        if why_no_cosine:
            values["cosine"] = None
            values["cosine_undefined"] = why_no_cosine
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
            a_s, b_s = err.a_acc.finish(), err.b_acc.finish()
            for flat, summary in ((a, a_s), (b, b_s)):
                if summary.finite:
                    summary.percentiles = stats.percentiles_of(flat, scratch if flat.dtype != np.float64 else None, summary)
            del scratch
            details = {
                "abs": abs_s.to_dict(),
                "rel": rel_s.to_dict(),
                "abs_histogram": abs_hist,
                "actual": a_s.to_dict(),
                "reference": b_s.to_dict(),
                "shape": list(actual.shape),
                "dtypes": [actual.dtype.name, reference.dtype.name],
            }
        return OutputCheck(name, passed, self.name, values, thresholds, "" if passed else why, details)


    def why_no_average(self) -> str | None:
        """``--check-average`` averages the checked statistic: ``elemwise`` (the default) has none."""
        stats_used = self.check_error_stat.values
        if "elemwise" in stats_used.values():
            where = "the default" if stats_used.get("") == "elemwise" else "for " + ", ".join(k for k, v in stats_used.items() if v == "elemwise")
            return (
                f"the simple metric checks each element (--check-error-stat elemwise, {where}), which has no statistic to average;"
                " choose one: --check-error-stat mean (or max, median, quantile)"
            )
        return None

    def average(self, name: str, checks: Mapping[int, OutputCheck]) -> OutputCheck:
        """The verdict on ``name``'s checked error statistic averaged over the iterations (``--check-average``, as
        Polygraphy defines it): the output fails iff the average absolute error exceeds atol AND the average
        relative error exceeds rtol. An iteration without the statistic (a shape mismatch) or with NaN/Inf
        mismatches fails the average: averaging over the rest would hide it."""
        first = next(iter(checks.values()))
        stat = str(first.thresholds.get("check_error_stat", "elemwise"))
        thresholds = dict(first.thresholds)
        atol, rtol = float(thresholds["atol"]), float(thresholds["rtol"])
        values = average_values(checks)
        n = len(checks)
        missing = [i for i, c in checks.items() if f"{stat}_abs" not in c.values]
        if missing:
            why = checks[missing[0]].message or "no error statistic"
            return OutputCheck(name, False, self.name, values, thresholds, f"iteration {iterations_text(missing)} has no {stat} error ({why}): no average")
        nonfinite = {i: int(c.values.get("nan_actual", 0) + c.values.get("nan_reference", 0) + c.values.get("inf_mismatches", 0)) for i, c in checks.items()}
        bad = [i for i, count in nonfinite.items() if count]
        if bad:
            return OutputCheck(name, False, self.name, values, thresholds, f"{sum(nonfinite.values())} NaN/Inf mismatches (iteration {iterations_text(bad)})")
        abs_v, rel_v = values[f"{stat}_abs"], values[f"{stat}_rel"]
        passed = not (_fails(abs_v, atol) and _fails(rel_v, rtol))
        why = "" if passed else f"average {stat} error over {n} iterations abs={abs_v:.4g} > {atol:g} and rel={rel_v:.4g} > {rtol:g}"
        return OutputCheck(name, passed, self.name, values, thresholds, why, {"average_of": n, "check_error_stat": stat})


def _per_output(value: Any, cast: Callable[[str], Any], option: str) -> Any:
    """``("1e-5", "y:1e-3")`` (the CLI's strings) -> ``{"": 1e-05, "y": 0.001}``; a number, a mapping or None as given."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return value
    return parse_per_name(value, cast, option) or None


def _fails(value: float, tol: float) -> bool:
    return math.isnan(value) or value > tol


class _ErrorScan:
    """Chunked passes over both tensors: mismatch counts, the tolerances that would pass, and statistics."""

    def __init__(self, a: np.ndarray, b: np.ndarray, atol: float, rtol: float, inf_equal: bool, nan_equal: bool) -> None:
        self.a, self.b, self.atol, self.rtol, self.inf_equal, self.nan_equal = a, b, atol, rtol, inf_equal, nan_equal
        self.mismatches = self.nan_a = self.nan_b = self.inf_bad = 0
        self.needed_atol = 0.0
        self.needed_rtol = 0.0
        n = a.size
        self.a_acc, self.b_acc = stats.Accumulator(n), stats.Accumulator(n)
        self.abs_acc, self.rel_acc = stats.Accumulator(n), stats.Accumulator(n)
        self.dots = [0.0, 0.0, 0.0]  # x.y, x.x, y.y for the cosine similarity
        self.err_sq = 0.0  # sum of squared errors, for the SQNR (NaN once a NaN/Inf error is seen)
        self.histogram: list[tuple[str, int]] = []
        size = min(stats.CHUNK, n)
        self._x, self._y = np.empty(size), np.empty(size)  # float64 copies of one chunk
        self._abs, self._rel = np.empty(size), np.empty(size)

    def scan(self, abs_out: np.ndarray, histogram: bool = True) -> None:
        """The main pass; writes the absolute error (float32) into ``abs_out``."""
        hist = np.zeros(len(stats.DECADES) + 3, dtype=np.int64)
        rel32 = np.empty(len(self._rel), dtype=np.float32)
        for sl in stats.chunks(self.a.size):
            with np.errstate(invalid="ignore", over="ignore"):  # NaN/Inf are counted, not warned about
                self._scan_chunk(sl, abs_out, rel32, hist, histogram)
        self.histogram = stats.decade_labels(hist) if histogram else []

    def _scan_chunk(self, sl: slice, abs_out: np.ndarray, rel32: np.ndarray, hist: np.ndarray, histogram: bool) -> None:
        x, y, absd, rel, finite = self._chunk(sl)
        self.a_acc.add(self.a[sl], sl.start, x)
        self.b_acc.add(self.b[sl], sl.start, y)
        self.dots[0] += stats.dot(x, y)
        self.dots[1] += stats.dot(x, x)
        self.dots[2] += stats.dot(y, y)
        if finite:  # no NaN/Inf anywhere in the chunk: no masks needed
            self.err_sq += stats.dot(absd, absd)
            self.mismatches += int(np.count_nonzero((absd > self.atol) & (rel > self.rtol)))
            self.needed_atol = max(self.needed_atol, float(absd.max()))
            self.needed_rtol = max(self.needed_rtol, float(rel.max()))
        else:
            self.err_sq = math.nan
            self._special(x, y, absd, rel)
        out = abs_out[sl]
        out[...] = absd
        self.abs_acc.add(out, sl.start)
        r32 = rel32[: len(rel)]
        r32[...] = rel
        self.rel_acc.add(r32, sl.start)
        if histogram:
            stats.decade_counts(out, hist)

    def _special(self, x: np.ndarray, y: np.ndarray, absd: np.ndarray, rel: np.ndarray) -> None:
        nan_x, nan_y = np.isnan(x), np.isnan(y)
        self.nan_a += int(np.count_nonzero(nan_x))
        self.nan_b += int(np.count_nonzero(nan_y))
        both_nan = nan_x & nan_y
        special = (~np.isfinite(absd)) & ~(both_nan if self.nan_equal else False)
        self.inf_bad += int(np.count_nonzero(special & ~nan_x & ~nan_y))
        bad = ((absd > self.atol) & (rel > self.rtol)) | special
        self.mismatches += int(np.count_nonzero(bad))
        finite = np.isfinite(absd)
        if finite.any():
            self.needed_atol = max(self.needed_atol, float(absd[finite].max()))
            rel_f = rel[finite]
            self.needed_rtol = max(self.needed_rtol, float(rel_f.max()) if rel_f.size else 0.0)
        if special.any():
            self.needed_atol = self.needed_rtol = math.inf

    def _chunk(self, sl: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
        """float64 copies of both chunks, |x - y| (exact for float32 inputs), the relative error, and whether
        everything was finite. The arrays are reused buffers, valid until the next call."""
        n = sl.stop - sl.start
        x, y, absd, rel = self._x[:n], self._y[:n], self._abs[:n], self._rel[:n]
        np.copyto(x, self.a[sl], casting="unsafe")
        np.copyto(y, self.b[sl], casting="unsafe")
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            np.subtract(x, y, out=absd)
            np.abs(absd, out=absd)
            finite = math.isfinite(float(np.add.reduce(absd)))  # NaN/Inf in x or y make the sum non-finite
            if not finite:
                if self.inf_equal:
                    absd[np.isinf(x) & (x == y)] = 0.0
                if self.nan_equal:
                    absd[np.isnan(x) & np.isnan(y)] = 0.0
            np.abs(y, out=rel)
            np.maximum(rel, TINY, out=rel)
            np.divide(absd, rel, out=rel)
        return x, y, absd, rel, finite

    def cosine(self) -> float:
        return stats.cosine_from_dots(*self.dots)

    def sqnr_db(self) -> float | None:
        """``20 log10(|reference| / |actual - reference|)``, each norm at least float64's epsilon: onnxruntime's
        ``compute_signal_to_quantization_noice_ratio`` (qdq_loss_debug), the quantization tools' measure."""
        return stats.sqnr_db(self.dots[2], self.err_sq)

    def fill_abs(self, out: np.ndarray) -> None:
        for sl in stats.chunks(self.a.size):
            with np.errstate(over="ignore"):  # a float32 scratch holds huge errors as inf, as before
                out[sl] = self._chunk(sl)[2]

    def fill_rel(self, out: np.ndarray) -> None:
        for sl in stats.chunks(self.a.size):
            with np.errstate(over="ignore"):
                out[sl] = self._chunk(sl)[3]


def _quantile(err: _ErrorScan, q: float, n: int, absolute: bool) -> float:
    """Exact linearly interpolated quantile from one float32 scratch buffer, selected in place rather than
    with ``np.quantile``'s float64 copies."""
    buf = np.empty(n, dtype=np.float32)
    (err.fill_abs if absolute else err.fill_rel)(buf)
    finite = np.isfinite(buf)
    if not finite.all():
        buf = buf[finite]
    if buf.size == 0:
        return math.nan
    return stats.order_statistics(buf, {q: (buf.size - 1) * q})[q]
