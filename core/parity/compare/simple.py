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

import base64
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from parity.compare import stats
from parity.compare.dataset import average_values, iterations_text
from parity.compare.result import OutputCheck
from parity.compare.tolerance import ERROR_STATS, PerOutput, tolerances
from parity.data.parse import parse_per_name
from parity.errors import UsageError

TINY = np.finfo(np.float32).tiny
# What a comparison computes beyond its verdict and the values every line shows (max, mean, cosine, SQNR, counts):
# "all": the medians and, with ``details``, the details of every output, percentiles included (the API's default;
# ``parity run -v``); "report": the medians (``--report``'s values) and details for failing outputs only;
# "histogram": every output's details without medians or percentiles (both tensors' min/max/mean/std, the error
# histogram: what the HTML report and Model Explorer read); "shown": what ``parity run`` prints: details for
# failing outputs, no medians unless the checked statistic is one. Each median or percentile is an exact
# selection pass over a float32 copy of the values: most of a layerwise run's comparison time. Failing outputs
# get their full details (percentiles included) in every mode but "report"'s and "shown"'s passing outputs.
STATISTICS = ("all", "report", "histogram", "shown")
# what each level computes for an output that passes; statistics_level() picks the least that covers some needs
_COVERS = {"shown": frozenset(), "report": frozenset({"medians"}), "histogram": frozenset({"details"}), "all": frozenset({"medians", "details", "percentiles"})}


def statistics_level(needs: Iterable[str]) -> str:
    """The least level of :data:`STATISTICS` computing everything the given levels compute (``"shown"`` for none):
    a run whose HTML report reads the histograms (``"histogram"``) and whose ``--report`` needs medians
    (``"report"``) computes ``"all"``."""
    needs = list(needs)
    unknown = [need for need in needs if need not in _COVERS]
    if unknown:
        raise ValueError(f"unknown statistics level '{unknown[0]}' (choose from {', '.join(STATISTICS)})")
    wanted = frozenset().union(*(_COVERS[need] for need in needs))
    return next(level for level in reversed(STATISTICS) if wanted <= _COVERS[level])  # STATISTICS: most to least


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
        statistics: str = "all",
        threads: int | None = None,
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
        if statistics not in STATISTICS:
            raise ValueError(f"unknown statistics level '{statistics}' (choose from {', '.join(STATISTICS)})")
        self.statistics = statistics
        self.threads = threads
        compare_threads(threads)  # a malformed PARITY_COMPARE_THREADS is refused before any work

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SimpleCompare:
        """The metric its options configure (the registered factory, and ``CompareFunc.simple``): ``atol``, ``rtol``,
        ``check_error_stat`` as ``parity run`` parses them (``("1e-5", "y:1e-3")``: ``[OUT:]VALUE`` strings) or as
        Python gives them (a value, or ``{output: value, "": default}``), ``error_quantile``, ``tolerance_preset``,
        ``infinities_compare_equal``, ``nans_compare_equal``, ``compare_statistics`` (:data:`STATISTICS`; ``parity
        run`` sets it from what it shows) and ``compare_threads``. Absent or None: the default."""
        quantile = options.get("error_quantile")
        return cls(
            _per_output(options.get("atol"), float, "--atol"),
            _per_output(options.get("rtol"), float, "--rtol"),
            _per_output(options.get("check_error_stat"), str, "--check-error-stat"),
            0.99 if quantile is None else quantile,
            bool(options.get("infinities_compare_equal")),
            bool(options.get("nans_compare_equal")),
            options.get("tolerance_preset"),
            statistics=options.get("compare_statistics") or "all",
            threads=options.get("compare_threads"),
        )

    def __call__(self, name: str, actual: np.ndarray, reference: np.ndarray) -> OutputCheck:
        atol = float(self.atol.for_output(name))  # type: ignore[arg-type]
        rtol = float(self.rtol.for_output(name))  # type: ignore[arg-type]
        stat = str(self.check_error_stat.for_output(name))
        thresholds: dict[str, Any] = {"atol": atol, "rtol": rtol, "check_error_stat": stat}
        if actual.shape != reference.shape:
            return OutputCheck(name, False, self.name, {}, thresholds, f"shape {list(actual.shape)} != reference {list(reference.shape)}")
        a, b = stats.as_float(actual), stats.as_float(reference)
        computes = _COVERS[self.statistics]
        medians = "medians" in computes or stat == "median"
        # the main pass, parallel over chunks: mismatches, the smallest passing tolerances, both errors' max and
        # mean, cosine and SQNR; with the details, both tensors' statistics and the error histogram, and with the
        # percentiles the absolute error in a float32 scratch for its exact selections
        details = self.details and "details" in computes
        percentiles = medians or (details and "percentiles" in computes)
        err, abs_s, rel_s, scratch = self._scan(a, b, atol, rtol, details, percentiles)
        values: dict[str, Any] = {"max_abs": abs_s.max, "mean_abs": abs_s.mean}
        if medians:
            values["median_abs"] = abs_s.median
        values.update({"max_rel": rel_s.max, "mean_rel": rel_s.mean})
        if medians:
            values["median_rel"] = rel_s.median
        values.update(
            {
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
        )
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
        if self.details and not (details and percentiles) and not passed:
            # the CLI prints a failure's details: one more pass for them. Its values are the same numbers (the
            # same chunks and partials), so only its statistics of the tensors, histogram and percentiles are used
            details = percentiles = True
            err, abs_s, rel_s, scratch = self._scan(a, b, atol, rtol, True, True)
        out: dict[str, Any] = {}
        if details:
            a_s, b_s = err.a_acc.finish(), err.b_acc.finish()
            if percentiles:
                err.percentiles([(flat, work if flat.dtype != np.float64 else None, s) for flat, s, work in ((a, a_s, scratch[0]), (b, b_s, scratch[1])) if s.finite])
            del scratch
            out = {
                "abs": abs_s.to_dict(),
                "rel": rel_s.to_dict(),
                "abs_histogram": err.histogram,
                "actual": a_s.to_dict(),
                "reference": b_s.to_dict(),
                "shape": list(actual.shape),
                "dtypes": [actual.dtype.name, reference.dtype.name],
            }
        return OutputCheck(name, passed, self.name, values, thresholds, "" if passed else why, out)

    def _scan(
        self, a: np.ndarray, b: np.ndarray, atol: float, rtol: float, details: bool, percentiles: bool
    ) -> tuple[_ErrorScan, stats.Summary, stats.Summary, list[np.ndarray | None]]:
        """The main pass (:class:`_ErrorScan`), then, if asked, the exact percentiles of both errors by selection,
        each in a float32 scratch, the two selections side by side on two threads (returned: the tensors'
        percentiles reuse them)."""
        err = _ErrorScan(a, b, atol, rtol, self.infinities_equal, self.nans_equal, self.threads)
        scratch = np.empty(a.size, dtype=np.float32) if percentiles else None
        err.scan(scratch if details else None, details=details)
        abs_s, rel_s = err.abs_summary(), err.rel_summary()
        scratches: list[np.ndarray | None] = [scratch, None]
        if scratch is not None:
            jobs = []
            if abs_s.finite:
                if not details:  # the scan wrote the absolute errors there only with the details
                    err.fill_abs(scratch)
                jobs.append((scratch, scratch, abs_s))
            if rel_s.finite:
                rel = np.empty(a.size, dtype=np.float32) if abs_s.finite else scratch
                if rel is not scratch:
                    scratches[1] = rel  # the tensors' selections run side by side: never one scratch for both
                err.fill_rel(rel)
                jobs.append((rel, rel, rel_s))
            err.percentiles(jobs)
        return err, abs_s, rel_s, scratches

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


SCAN_CHUNK = 1 << 17  # elements per chunk (1 MiB of float64 temporaries each): fewer runs hand the GIL over less
PARALLEL_FROM = 4 * SCAN_CHUNK  # smaller tensors (a layerwise run's thousands) run inline, with no thread hand-offs
FLT_MAX = float(np.finfo(np.float32).max)


def compare_threads(threads: int | None = None) -> int:
    """Threads a comparison may use: ``threads``, else ``PARITY_COMPARE_THREADS``, else (or given 0) every core this
    process may run on (``os.sched_getaffinity``: a container's or ``taskset``'s limit, not the machine's count)."""
    if threads is None:
        env = os.environ.get("PARITY_COMPARE_THREADS", "").strip()
        if env:
            try:
                threads = int(env)
            except ValueError:
                raise UsageError(f"PARITY_COMPARE_THREADS must be a whole number (0: every core), not '{env}'") from None
    if threads is None or threads <= 0:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            return os.cpu_count() or 1
    return threads


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(threads: int) -> ThreadPoolExecutor:
    with _POOLS_LOCK:
        pool = _POOLS.get(threads)
        if pool is None:
            pool = _POOLS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="parity-compare")
        return pool


_BUFFERS = threading.local()


def _buffers() -> dict[str, np.ndarray]:
    """This thread's float64 chunk buffers (reused: a fresh 512 KiB array costs page faults every time)."""
    bufs = getattr(_BUFFERS, "bufs", None)
    if bufs is None:
        bufs = _BUFFERS.bufs = {k: np.empty(SCAN_CHUNK) for k in ("x", "y", "abs", "rel")}
        bufs["abs32"], bufs["rel32"] = np.empty(SCAN_CHUNK, np.float32), np.empty(SCAN_CHUNK, np.float32)
    return bufs


USE_ONNXRUNTIME = True  # tests switch it off to check the numpy path
_KERNEL: Any = None  # the statistics graph's onnxruntime session; False where onnxruntime is absent
_KERNEL_LOCK = threading.Lock()
KERNEL_OUTPUTS = ("max_abs", "sum_abs", "max_rel", "sum_rel", "xy", "xx", "yy", "dd")


def _kernel() -> Any:
    """One onnxruntime session computing a float32 chunk's statistics in float64 (the exact errors, their max and
    sum, the relative errors' max and sum, x.y, x.x, y.y, d.d), on the calling thread. Why onnxruntime: a numpy
    call releases the GIL only while its loop runs, and the ~20 calls per chunk contend for it on many threads
    (16 threads measured no faster than 1); one ``run`` per chunk releases it once. Built once per process."""
    global _KERNEL
    if _KERNEL is None:
        with _KERNEL_LOCK:
            if _KERNEL is None:
                _KERNEL = _build_kernel()
    return _KERNEL or None


# The statistics graph, serialized (building it would import onnx: 200 ms of a run); tests/test_compare_parallel.py
# builds it with onnx.helper and checks these bytes. float32 a, b [n] -> x, y = Cast(a, b, double); d = Abs(x - y);
# r = d / Max(Abs(y), tiny); outputs (KERNEL_OUTPUTS) ReduceMax(d), ReduceSum(d), ReduceMax(r), ReduceSum(r),
# ReduceSum(x * y), ReduceSumSquare(x), ReduceSumSquare(y), ReduceSumSquare(d); opset 17, IR 8.
KERNEL_MODEL = base64.b64decode(
    "CAg6uwUKFwoBYRIBeCIEQ2FzdCoJCgJ0bxgLoAECChcKAWISAXkiBENhc3QqCQoCdG8YC6ABAgoOCgF4CgF5EgFzIgNTdWIKCwoBcxIBZCID"
    "QWJzCgwKAXkSAmF5IgNBYnMKFAoCYXkKBHRpbnkSA2RlbiIDTWF4ChAKAWQKA2RlbhIBciIDRGl2CigKAWQSB21heF9hYnMiCVJlZHVjZU1h"
    "eCoPCghrZWVwZGltcxgAoAECCigKAWQSB3N1bV9hYnMiCVJlZHVjZVN1bSoPCghrZWVwZGltcxgAoAECCigKAXISB21heF9yZWwiCVJlZHVj"
    "ZU1heCoPCghrZWVwZGltcxgAoAECCigKAXISB3N1bV9yZWwiCVJlZHVjZVN1bSoPCghrZWVwZGltcxgAoAECChEKAXgKAXkSBHh5X20iA011"
    "bAomCgR4eV9tEgJ4eSIJUmVkdWNlU3VtKg8KCGtlZXBkaW1zGACgAQIKKQoBeBICeHgiD1JlZHVjZVN1bVNxdWFyZSoPCghrZWVwZGltcxgA"
    "oAECCikKAXkSAnl5Ig9SZWR1Y2VTdW1TcXVhcmUqDwoIa2VlcGRpbXMYAKABAgopCgFkEgJkZCIPUmVkdWNlU3VtU3F1YXJlKg8KCGtlZXBk"
    "aW1zGACgAQISFHBhcml0eV9jb21wYXJlX2NodW5rKhIQC0IEdGlueVIIAAAAAAAAEDhaEAoBYRILCgkIARIFCgMSAW5aEAoBYhILCgkIARIF"
    "CgMSAW5iEQoHbWF4X2FicxIGCgQICxIAYhEKB3N1bV9hYnMSBgoECAsSAGIRCgdtYXhfcmVsEgYKBAgLEgBiEQoHc3VtX3JlbBIGCgQICxIA"
    "YgwKAnh5EgYKBAgLEgBiDAoCeHgSBgoECAsSAGIMCgJ5eRIGCgQICxIAYgwKAmRkEgYKBAgLEgBCBAoAEBE="
)


def _build_kernel() -> Any:
    try:
        import onnxruntime as ort  # optional (the onnxrt plugin's dependency): numpy computes the same values without it
    except ImportError:
        return False
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1  # one chunk per run, on the caller's thread
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the arithmetic as written
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(KERNEL_MODEL, options, providers=["CPUExecutionProvider"])
    except Exception:  # an onnxruntime without these double kernels: numpy does it
        return False


class _Part:
    """One chunk's partial results. Sums are combined in chunk order, maxima and counts in any: the chunks'
    boundaries are fixed (``SCAN_CHUNK``), so every thread count adds the same numbers in the same order."""

    __slots__ = ("mismatches", "nan_a", "nan_b", "inf_bad", "needed_atol", "needed_rtol", "dots", "err_sq", "abs", "rel", "full")

    def __init__(self) -> None:
        self.mismatches = self.nan_a = self.nan_b = self.inf_bad = 0
        self.needed_atol = self.needed_rtol = 0.0
        self.err_sq = 0.0
        self.dots: tuple[float, float, float] = (0.0, 0.0, 0.0)
        self.abs: tuple[int, int, int, float, float] = (0, 0, 0, 0.0, -math.inf)  # finite, NaN, Inf, sum, max
        self.rel = self.abs
        self.full: tuple[Any, ...] | None = None  # with details: the Accumulators of a, b, abs, rel; histogram counts


def _light(part64: np.ndarray, top: float) -> tuple[int, int, int, float, float]:
    """(finite, NaN, Inf, sum, max) of a finite chunk of errors whose largest, ``top``, fits float32: the sum of
    the float64 errors and the max rounded to float32 (rounding is monotonic: the max of the float32 errors), the
    numbers :func:`_err_acc`'s accumulator gives too."""
    return part64.size, 0, 0, float(np.add.reduce(part64, dtype=np.float64)), float(np.float32(top))


def _err_acc(part32: np.ndarray, part64: np.ndarray, top: float, start: int) -> stats.Accumulator:
    """The accumulator of a chunk of errors (float32, as percentiles take them), summed from their float64 values
    (exact) where they fit float32, else from the float32 ones (where an overflow counts as Inf)."""
    return _acc(part32, start, part64 if top <= FLT_MAX else None)


def _acc(part: np.ndarray, start: int, part64: np.ndarray | None = None) -> stats.Accumulator:
    acc = stats.Accumulator(part.size)
    acc.add(part, start, part64)
    return acc


def _from_acc(acc: stats.Accumulator) -> tuple[int, int, int, float, float]:
    s = acc.s
    return s.finite, s.nan, s.inf, acc.total, acc.hi


class _ErrorScan:
    """One pass over both tensors: mismatch counts, the tolerances that would pass, and statistics.

    Algorithm: a chunked parallel reduction. The tensors are cut into fixed ``SCAN_CHUNK``-element chunks;
    each chunk is reduced on its own (float64 copies in cache-sized buffers, numpy releasing the GIL) to a
    :class:`_Part`, by a pool of threads taking groups of consecutive chunks; the parts are then combined in
    chunk order. Chunk boundaries never depend on the thread count, so 1 thread and N threads give bit-identical
    values (one question, one answer).
    """

    def __init__(self, a: np.ndarray, b: np.ndarray, atol: float, rtol: float, inf_equal: bool, nan_equal: bool, threads: int | None = None) -> None:
        self.a, self.b, self.atol, self.rtol, self.inf_equal, self.nan_equal = a, b, atol, rtol, inf_equal, nan_equal
        self.threads = threads
        self.mismatches = self.nan_a = self.nan_b = self.inf_bad = 0
        self.needed_atol = 0.0
        self.needed_rtol = 0.0
        n = a.size
        self._abs = self._rel = (0, 0, 0, 0.0, -math.inf)
        self.dots = [0.0, 0.0, 0.0]  # x.y, x.x, y.y for the cosine similarity
        self.err_sq = 0.0  # sum of squared errors, for the SQNR (NaN once a NaN/Inf error is seen)
        self.histogram: list[tuple[str, int]] = []
        self._details = False
        self._small = a.dtype.itemsize <= 4 and b.dtype.itemsize <= 4
        f32 = a.dtype == np.float32 and b.dtype == np.float32
        # the kernel where threads share the work (a layerwise run's small tensors never load onnxruntime)
        self._kernel = _kernel() if f32 and USE_ONNXRUNTIME and n >= PARALLEL_FROM else None

    def scan(self, abs_out: np.ndarray | None, details: bool = True) -> None:
        """The main pass; with ``details``, also both tensors' statistics, the histogram, and the absolute error
        (float32) written into ``abs_out`` where one is given (for its percentiles)."""
        self._details, self._out = details, abs_out
        if details:  # made only when needed: four Summary records cost a layerwise run ~30 us a tensor
            n = self.a.size
            self.a_acc, self.b_acc = stats.Accumulator(n), stats.Accumulator(n)
            self.abs_acc, self.rel_acc = stats.Accumulator(n), stats.Accumulator(n)
        parts = self._map(self._parts)
        hist = np.zeros(len(stats.DECADES) + 3, dtype=np.int64)
        for p in parts:  # in chunk order
            self.mismatches += p.mismatches
            self.nan_a += p.nan_a
            self.nan_b += p.nan_b
            self.inf_bad += p.inf_bad
            self.needed_atol = max(self.needed_atol, p.needed_atol)
            self.needed_rtol = max(self.needed_rtol, p.needed_rtol)
            self.dots = [d + e for d, e in zip(self.dots, p.dots)]
            self.err_sq += p.err_sq
            self._abs, self._rel = _combine(self._abs, p.abs), _combine(self._rel, p.rel)
            if p.full is not None:
                a_acc, b_acc, abs_acc, rel_acc, counts = p.full
                self.a_acc.merge(a_acc)
                self.b_acc.merge(b_acc)
                self.abs_acc.merge(abs_acc)
                self.rel_acc.merge(rel_acc)
                hist += counts
        self.histogram = stats.decade_labels(hist) if details else []

    def _parts(self, starts: range) -> list[_Part]:
        return [self._part(s) for s in starts]

    def _part(self, start: int) -> _Part:
        sl = slice(start, min(start + SCAN_CHUNK, self.a.size))
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # NaN/Inf are counted, not warned about
            if self._kernel is not None:
                p = self._kernel_part(sl)
                if p is not None:
                    return p
            return self._chunk_part(start)

    def _chunk_part(self, start: int) -> _Part:
        sl = slice(start, min(start + SCAN_CHUNK, self.a.size))
        bufs = _buffers()
        x, y, absd, rel = self._chunk(sl, bufs)
        p = _Part()
        p.dots = (stats.block_dot(x, y), stats.block_dot(x, x), stats.block_dot(y, y))
        finite = None
        if self._small:  # inputs of at most 32 bits: their squares cannot overflow, so x.x and y.y say it
            finite = math.isfinite(p.dots[1]) and math.isfinite(p.dots[2])
        finite = self._errors(x, y, absd, rel, finite)
        if finite:  # no NaN/Inf anywhere in the chunk: no masks needed
            p.err_sq = stats.block_dot(absd, absd)
            p.needed_atol = float(absd.max())
            p.needed_rtol = float(rel.max())
            if p.needed_atol > self.atol and p.needed_rtol > self.rtol:  # else no element can exceed both
                p.mismatches = int(np.count_nonzero((absd > self.atol) & (rel > self.rtol)))
        else:
            p.err_sq = math.nan
            self._special(p, x, y, absd, rel)
        n = absd.size
        if self._details or not finite or p.needed_atol > FLT_MAX or p.needed_rtol > FLT_MAX:
            # the errors as float32, as their statistics (and percentiles) have always been taken
            abs32 = self._abs32(sl, bufs)
            rel32 = bufs["rel32"][:n]
            abs32[...] = absd
            rel32[...] = rel
        if self._details:
            hist = np.zeros(len(stats.DECADES) + 3, dtype=np.int64)
            stats.decade_counts(abs32, hist)
            abs_acc = _err_acc(abs32, absd, p.needed_atol if finite else math.inf, start)
            rel_acc = _err_acc(rel32, rel, p.needed_rtol if finite else math.inf, start)
            p.full = (_acc(self.a[sl], start, x), _acc(self.b[sl], start, y), abs_acc, rel_acc, hist)
            p.abs, p.rel = _from_acc(abs_acc), _from_acc(rel_acc)
        elif finite:
            p.abs = _light(absd, p.needed_atol) if p.needed_atol <= FLT_MAX else _from_acc(_acc(abs32, 0))
            p.rel = _light(rel, p.needed_rtol) if p.needed_rtol <= FLT_MAX else _from_acc(_acc(rel32, 0))
        else:
            p.abs, p.rel = _from_acc(_acc(abs32, 0)), _from_acc(_acc(rel32, 0))
        return p

    def _kernel_part(self, sl: slice) -> _Part | None:
        """A finite chunk's values from :func:`_kernel`; numpy adds the mismatch count where some element may exceed
        both tolerances, and the details. None (numpy does it all) for a chunk with NaN/Inf or errors past float32."""
        a, b = self.a[sl], self.b[sl]
        max_abs, sum_abs, max_rel, sum_rel, xy, xx, yy, dd = (float(v) for v in self._kernel.run(None, {"a": a, "b": b}))
        if not (math.isfinite(xx) and math.isfinite(yy)) or max_abs > FLT_MAX or max_rel > FLT_MAX:
            return None
        p = _Part()
        n = a.size
        p.dots, p.err_sq, p.needed_atol, p.needed_rtol = (xy, xx, yy), dd, max_abs, max_rel
        p.abs, p.rel = (n, 0, 0, sum_abs, float(np.float32(max_abs))), (n, 0, 0, sum_rel, float(np.float32(max_rel)))
        count = max_abs > self.atol and max_rel > self.rtol  # else no element can exceed both
        if not (count or self._details):
            return p
        bufs = _buffers()
        x, y, absd, rel = self._chunk(sl, bufs)
        self._errors(x, y, absd, rel, True)
        if count:
            p.mismatches = int(np.count_nonzero((absd > self.atol) & (rel > self.rtol)))
        if self._details:
            abs32, rel32 = self._abs32(sl, bufs), bufs["rel32"][:n]
            abs32[...] = absd
            rel32[...] = rel
            hist = np.zeros(len(stats.DECADES) + 3, dtype=np.int64)
            stats.decade_counts(abs32, hist)
            abs_acc, rel_acc = _acc(abs32, sl.start, absd), _acc(rel32, sl.start, rel)
            abs_acc.total, rel_acc.total = sum_abs, sum_rel  # the kernel's sums: the same mean in every mode
            p.full = (_acc(a, sl.start, x), _acc(b, sl.start, y), abs_acc, rel_acc, hist)
        return p

    def _abs32(self, sl: slice, bufs: dict[str, np.ndarray]) -> np.ndarray:
        """Where a chunk's absolute errors go as float32: the caller's scratch (kept for its percentiles), else
        this thread's buffer."""
        return self._out[sl] if self._out is not None else bufs["abs32"][: sl.stop - sl.start]

    def _special(self, p: _Part, x: np.ndarray, y: np.ndarray, absd: np.ndarray, rel: np.ndarray) -> None:
        nan_x, nan_y = np.isnan(x), np.isnan(y)
        p.nan_a = int(np.count_nonzero(nan_x))
        p.nan_b = int(np.count_nonzero(nan_y))
        both_nan = nan_x & nan_y
        special = (~np.isfinite(absd)) & ~(both_nan if self.nan_equal else False)
        p.inf_bad = int(np.count_nonzero(special & ~nan_x & ~nan_y))
        bad = ((absd > self.atol) & (rel > self.rtol)) | special
        p.mismatches = int(np.count_nonzero(bad))
        finite = np.isfinite(absd)
        if finite.any():
            p.needed_atol = float(absd[finite].max())
            rel_f = rel[finite]
            p.needed_rtol = float(rel_f.max()) if rel_f.size else 0.0
        if special.any():
            p.needed_atol = p.needed_rtol = math.inf

    def _chunk(self, sl: slice, bufs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """float64 copies of both chunks, and buffers for |x - y| and the relative error (:meth:`_errors` fills
        them). The arrays are the thread's reused buffers, valid until its next call."""
        n = sl.stop - sl.start
        x, y, absd, rel = bufs["x"][:n], bufs["y"][:n], bufs["abs"][:n], bufs["rel"][:n]
        np.copyto(x, self.a[sl], casting="unsafe")
        np.copyto(y, self.b[sl], casting="unsafe")
        return x, y, absd, rel

    def _errors(self, x: np.ndarray, y: np.ndarray, absd: np.ndarray, rel: np.ndarray, finite: bool | None) -> bool:
        """|x - y| (exact for float32 inputs) into ``absd``, the relative error ``absd / max(|y|, tiny)`` into
        ``rel``; returns whether everything was finite (``finite``, if the caller knew)."""
        np.subtract(x, y, out=absd)
        np.abs(absd, out=absd)
        if finite is None:
            finite = math.isfinite(float(np.add.reduce(absd)))  # NaN/Inf in x or y make the sum non-finite
        if not finite:
            if self.inf_equal:
                absd[np.isinf(x) & (x == y)] = 0.0
            if self.nan_equal:
                absd[np.isnan(x) & np.isnan(y)] = 0.0
        np.abs(y, out=rel)
        np.maximum(rel, TINY, out=rel)
        np.divide(absd, rel, out=rel)
        return finite

    def _filled(self, sl: slice, bufs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        x, y, absd, rel = self._chunk(sl, bufs)
        self._errors(x, y, absd, rel, None)
        return absd, rel

    def abs_summary(self) -> stats.Summary:
        return self.abs_acc.finish() if self._details else _summary(self._abs, self.a.size)

    def rel_summary(self) -> stats.Summary:
        return self.rel_acc.finish() if self._details else _summary(self._rel, self.a.size)

    def cosine(self) -> float:
        return stats.cosine_from_dots(*self.dots)

    def sqnr_db(self) -> float | None:
        """``20 log10(|reference| / |actual - reference|)``, each norm at least float64's epsilon: onnxruntime's
        ``compute_signal_to_quantization_noice_ratio`` (qdq_loss_debug), the quantization tools' measure."""
        return stats.sqnr_db(self.dots[2], self.err_sq)

    def _fill(self, out: np.ndarray, which: int) -> None:
        def fill(starts: range) -> list[None]:
            bufs = _buffers()
            for start in starts:
                sl = slice(start, min(start + SCAN_CHUNK, self.a.size))
                with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # a float32 scratch holds huge errors as inf, as before
                    out[sl] = self._filled(sl, bufs)[which]
            return []

        self._map(fill)

    def _parallel(self) -> int:
        """Threads for this comparison: 1 (inline) for tensors under ``PARALLEL_FROM`` elements."""
        threads = compare_threads(self.threads)  # a malformed PARITY_COMPARE_THREADS is refused, small tensors or not
        return 1 if self.a.size < PARALLEL_FROM else min(threads, -(-self.a.size // SCAN_CHUNK))

    def _map(self, func: Callable[[range], list[Any]]) -> list[Any]:
        """``func`` over groups of consecutive chunk starts, on the pool; its results concatenated in chunk order."""
        starts = range(0, self.a.size, SCAN_CHUNK)
        threads = self._parallel()
        if threads <= 1:
            return func(starts)
        per_task = max(1, len(starts) // (threads * 4))  # a few tasks per thread: balanced, cheap to hand out
        groups = [starts[i : i + per_task] for i in range(0, len(starts), per_task)]
        return [p for group in _pool(threads).map(func, groups) for p in group]

    def percentiles(self, jobs: list[tuple[np.ndarray, np.ndarray | None, stats.Summary]]) -> None:
        """``summary.percentiles`` of each ``(flat, scratch, summary)``: exact selections, side by side on the pool
        when the tensors are large (each ``partition`` releases the GIL for its whole run)."""
        if self._parallel() > 1 and len(jobs) > 1:
            pool = _pool(self._parallel())
            futures = [pool.submit(stats.percentiles_of, *job) for job in jobs]
            for (_, _, summary), future in zip(jobs, futures):
                summary.percentiles = future.result()
        else:
            for flat, scratch, summary in jobs:
                summary.percentiles = stats.percentiles_of(flat, scratch, summary)

    def fill_abs(self, out: np.ndarray) -> None:
        self._fill(out, 0)

    def fill_rel(self, out: np.ndarray) -> None:
        self._fill(out, 1)


def _combine(total: tuple[int, int, int, float, float], part: tuple[int, int, int, float, float]) -> tuple[int, int, int, float, float]:
    return total[0] + part[0], total[1] + part[1], total[2] + part[2], total[3] + part[3], max(total[4], part[4])


def _summary(light: tuple[int, int, int, float, float], count: int) -> stats.Summary:
    """The values-only summary (count, NaN, Inf, mean, max) of combined :func:`_light` parts."""
    finite, nan, inf, total, top = light
    s = stats.Summary(count=count, finite=finite, nan=nan, inf=inf)
    if finite:
        s.mean, s.max = total / finite, top
    return s


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
