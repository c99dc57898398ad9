"""Polygraphy's compare functions (``polygraphy.comparator.compare``): ``CompareFunc.simple(...)``,
``.indices``, ``.distance_metrics``, ``.quality_metrics`` each build a callable taking two
:class:`IterationResult` s and returning ``OrderedDict[output name, result]``, with Polygraphy's result objects
(``OutputCompareResult`` with ``max_absdiff``... fields, ``DistanceMetricsResult``, ``QualityMetricsResult``).

The statistics follow Polygraphy's definitions, which differ from Parity's ``simple`` metric in two places a
Polygraphy user can see: the relative error divides by ``|reference|`` with zeros replaced by float64's epsilon
(Parity: float32's smallest normal), and integer outputs are compared in integers (``1`` vs ``0``: relative
error ``inf``). So they are computed here, in NumPy, as Polygraphy computes them.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from parity_polygraphy.comparator.struct import IterationResult
from parity_polygraphy.exception import PolygraphyException
from parity_polygraphy.logger import G_LOGGER

__all__ = [
    "SimpleThreshold",
    "OutputCompareResult",
    "DistanceMetricsResult",
    "QualityMetricsResult",
    "CompareFunc",
    "BaseCompareFunc",
    "SimpleCompareFunc",
    "IndicesCompareFunc",
    "L2CompareFunc",
    "CosineSimilarityCompareFunc",
    "PsnrCompareFunc",
    "SnrCompareFunc",
    "L2Result",
    "CosineSimilarityResult",
    "PsnrResult",
    "SnrResult",
]

EPSILON = 2.220446049250313e-16  # float64's machine epsilon: stands in for zeros in the relative error's divisor
ERROR_STATS = ["max", "mean", "median", "elemwise", "quantile"]


class SimpleThreshold:
    """What ``CompareFunc.simple`` checked an output against: ``check_error_stat``, ``atol``, ``rtol``. Checks
    statistics (an averaged result's): fails iff the statistic of the absolute error exceeds ``atol`` and that of
    the relative error exceeds ``rtol``. ``elemwise`` has no statistic to check."""

    def __init__(self, check_error_stat: str, atol: float, rtol: float) -> None:
        self.check_error_stat, self.atol, self.rtol = check_error_stat, atol, rtol

    def passed(self, metric_values: Mapping[str, float | None]) -> bool:
        stat = self.check_error_stat
        if stat == "elemwise":
            raise PolygraphyException(
                "check_average is not supported with check_error_stat='elemwise': it checks each element and has no statistic to average.\n"
                "Note: Choose an explicit statistic: check_error_stat='max', 'mean', 'median' or 'quantile'."
            )
        return not (_stat_failed(metric_values.get(f"{stat}_absdiff"), self.atol) and _stat_failed(metric_values.get(f"{stat}_reldiff"), self.rtol))


class OutputCompareResult:
    """One output of one iteration under ``CompareFunc.simple``: the verdict (``bool(result)``) and the error
    statistics (``max_absdiff`` is the smallest absolute tolerance that would have passed, and so on);
    ``thresholds`` is what it was checked against."""

    METRIC_FIELDS = ("max_absdiff", "max_reldiff", "mean_absdiff", "mean_reldiff", "median_absdiff", "median_reldiff", "quantile_absdiff", "quantile_reldiff")

    def __init__(
        self,
        passed: bool,
        max_absdiff: float,
        max_reldiff: float,
        mean_absdiff: float,
        mean_reldiff: float,
        median_absdiff: float,
        median_reldiff: float,
        quantile_absdiff: float | None = None,
        quantile_reldiff: float | None = None,
        thresholds: SimpleThreshold | None = None,
    ) -> None:
        self.thresholds = thresholds
        self.passed = passed
        self.max_absdiff = max_absdiff
        self.max_reldiff = max_reldiff
        self.mean_absdiff = mean_absdiff
        self.mean_reldiff = mean_reldiff
        self.median_absdiff = median_absdiff
        self.median_reldiff = median_reldiff
        self.quantile_absdiff = quantile_absdiff
        self.quantile_reldiff = quantile_reldiff

    def __bool__(self) -> bool:
        return bool(self.passed)

    def metric_values(self) -> dict[str, float | None]:
        return {field: getattr(self, field) for field in self.METRIC_FIELDS}

    def averaged(self, values: Mapping[str, float | None]) -> OutputCompareResult:
        """A result holding ``values`` (statistics averaged over iterations), judged by these thresholds."""
        passed = self.thresholds.passed(values) if self.thresholds is not None else False
        return OutputCompareResult(passed, *(values.get(field) for field in self.METRIC_FIELDS), thresholds=self.thresholds)

    def __str__(self) -> str:
        return f"(atol={self.max_absdiff}, rtol={self.max_reldiff})"

    __repr__ = __str__


class DistanceMetricsResult:
    """``CompareFunc.distance_metrics``' verdict with the ``l2_norm`` and ``cosine_similarity`` measured."""

    def __init__(self, passed: bool, l2_norm: float, cosine_similarity: float) -> None:
        self.passed, self.l2_norm, self.cosine_similarity = passed, l2_norm, cosine_similarity

    def __bool__(self) -> bool:
        return bool(self.passed)


class QualityMetricsResult:
    """``CompareFunc.quality_metrics``' verdict with the ``psnr`` and ``snr`` (dB) measured (None: not checked)."""

    def __init__(self, passed: bool, psnr: float | None = None, snr: float | None = None) -> None:
        self.passed, self.psnr, self.snr = passed, psnr, snr

    def __bool__(self) -> bool:
        return bool(self.passed)


# --- arrays ---------------------------------------------------------------------------------------------


def to_numpy(arr: Any) -> np.ndarray:
    """A NumPy view of a NumPy array or a (CPU) torch tensor."""
    if isinstance(arr, np.ndarray):
        return arr
    if hasattr(arr, "detach") and hasattr(arr, "numpy"):
        return arr.detach().cpu().numpy()
    return np.asarray(arr)


def cast_up(arr: np.ndarray) -> np.ndarray:
    """Polygraphy's widening before arithmetic: fp16 -> fp32, 8/16-bit ints -> int32, uint32 -> int64."""
    if arr.dtype == np.float16:
        return arr.astype(np.float32)
    if arr.dtype in (np.int8, np.uint8, np.int16, np.uint16):
        return arr.astype(np.int32)
    if arr.dtype == np.uint32:
        return arr.astype(np.int64)
    return arr


def _stat(func: Callable[[np.ndarray], Any], arr: np.ndarray) -> float:
    """A statistic of an error array; 0 for an empty one (nothing differs)."""
    return 0.0 if arr.size == 0 else float(func(arr))


def value_or_from_dict(obj: Any, key: str, default: Any = None) -> Any:
    """``obj`` itself, or its entry for ``key`` when it is a per-output dict (``""``: the default entry)."""
    if not isinstance(obj, dict):
        return obj
    if key in obj:
        return obj[key]
    return obj.get("", default)


def find_str_in_iterable(name: str, seq: Any, index: int | None = None) -> str | None:
    """An exact match, else a case-insensitive substring match, else the entry at ``index``."""
    seq = list(seq)
    if name in seq:
        return name
    for elem in seq:
        if name.lower() in elem.lower() or elem.lower() in name.lower():
            return elem
    if index is not None and index < len(seq):
        return seq[index]
    return None


def default_find_output_func(output_name: str, index: int, iter_result: IterationResult, base_iter_result: IterationResult) -> list[str] | None:
    """The output of ``iter_result`` to compare ``output_name`` with: its namesake, else a near name that has no
    namesake of its own in ``base_iter_result``, else the output at the same position."""
    found = find_str_in_iterable(output_name, iter_result.keys(), index)
    if found is None:
        return None
    if found != output_name:
        if find_str_in_iterable(found, base_iter_result.keys()) == found:
            return None  # that output is compared with its own namesake already
        G_LOGGER.warning(f"Output names did not match exactly. Assuming {iter_result.runner_name} output: {found} corresponds to output: {output_name}")
    return [found]


def run_comparison(func: Callable, fail_fast: bool, iter_result0: IterationResult, iter_result1: IterationResult, find_output_func: Callable) -> OrderedDict:
    """Compare each output of ``iter_result0`` with the one(s) ``find_output_func`` names in ``iter_result1``."""
    status: OrderedDict[str, Any] = OrderedDict()
    for index, (out0_name, output0) in enumerate(iter_result0.items()):
        for out1_name in find_output_func(out0_name, index, iter_result1) or []:
            if out1_name is None or out1_name not in iter_result1:
                G_LOGGER.warning(
                    f"For output: '{out0_name}' [{iter_result0.runner_name}], skipping corresponding output: '{out1_name}' [{iter_result1.runner_name}],"
                    " since the output was not found"
                )
                continue
            status[out0_name] = func(out0_name, output0, out1_name, iter_result1[out1_name])
            if fail_fast and not status[out0_name]:
                return status
    mismatched = [name for name, matched in status.items() if not matched]
    if mismatched:
        G_LOGGER.error(f"FAILED | Mismatched outputs: {mismatched}")
    else:
        G_LOGGER.finish(f"PASSED | All outputs matched | Outputs: {list(status)}")
    if not status and (len(iter_result0) or len(iter_result1)):
        raise PolygraphyException(
            "All outputs were skipped, no common outputs found! Note:\n"
            f"{iter_result0.runner_name} outputs: {list(iter_result0.keys())}\n{iter_result1.runner_name} outputs: {list(iter_result1.keys())}"
        )
    return status


def _check_dict(dct: Any, name: str, iter_result0: IterationResult, iter_result1: IterationResult) -> None:
    if isinstance(dct, dict):
        valid = set(iter_result0.keys()) | set(iter_result1.keys()) | {""}
        unknown = [key for key in dct if key not in valid]
        if unknown:
            G_LOGGER.warning(f"{name} has entries for outputs that do not exist: {unknown}")


def _try_match_shape(arr: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``check_shapes=False``: reshape ``arr`` to ``shape`` when the sizes agree, else permute its axes when its
    dims are those of ``shape`` in another order; otherwise leave it."""
    if arr.shape == tuple(shape):
        return arr
    if arr.size == math.prod(shape):
        return arr.reshape(shape)
    if sorted(arr.shape) == sorted(shape):
        remaining = dict(enumerate(arr.shape))
        perm = []
        for dim in shape:
            axis = next(i for i, d in remaining.items() if d == dim)
            del remaining[axis]
            perm.append(axis)
        return np.transpose(arr, perm)
    return arr


def _aligned(out0_name: str, output0: Any, output1: Any, check_shapes: bool) -> tuple[np.ndarray, np.ndarray] | None:
    a, b = to_numpy(output0), to_numpy(output1)
    if a.shape != b.shape:
        if check_shapes:
            G_LOGGER.error(f"FAILED | Output: `{out0_name}` | Will not compare outputs of different shapes.\nNote: Output shapes are {a.shape} and {b.shape}.")
            return None
        b = _try_match_shape(b, a.shape)
        a = a.reshape(b.shape) if a.size == b.size else a
    return a, b


# --- the simple metric -------------------------------------------------------------------------------


def simple_errors(out0: np.ndarray, out1: np.ndarray, infinities_compare_equal: bool) -> tuple[np.ndarray, np.ndarray]:
    """Polygraphy's absolute and relative error arrays (``out1`` is the reference)."""
    if out0.dtype == np.bool_ and out1.dtype == np.bool_:
        absdiff = np.logical_xor(out0, out1)
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            absdiff = np.abs(np.subtract(cast_up(out0), cast_up(out1)))
        if infinities_compare_equal:
            absdiff = np.where(np.isinf(out0) & (out0 == out1), 0, absdiff)
    reference = np.array(cast_up(out1), copy=True)
    if np.issubdtype(reference.dtype, np.floating):
        reference[reference == 0] += EPSILON
    with np.errstate(divide="ignore", invalid="ignore"):
        reldiff = np.divide(absdiff, np.abs(reference))
    return absdiff, reldiff


def _stat_failed(diff: float | None, tol: float) -> bool:
    return diff is None or math.isnan(diff) or diff > tol


def check_simple(out0: np.ndarray, out1: np.ndarray, atol: float, rtol: float, error_stat: str, quantile: float, infinities_compare_equal: bool) -> OutputCompareResult:
    """``CompareFunc.simple``'s verdict on one pair of same-shaped arrays: ``elemwise`` fails an element that
    exceeds both tolerances (or is NaN); ``max``/``mean``/``median``/``quantile`` fail when that statistic of the
    absolute error exceeds ``atol`` and the same statistic of the relative error exceeds ``rtol``."""
    if error_stat not in ERROR_STATS:
        raise PolygraphyException(f"Invalid choice for check_error_stat: {error_stat}.\nNote: Valid choices are: {ERROR_STATS}")
    absdiff, reldiff = simple_errors(out0, out1, infinities_compare_equal)
    stats = {}
    for kind, diff in (("abs", absdiff), ("rel", reldiff)):
        stats[f"max_{kind}diff"] = _stat(np.max, diff)
        stats[f"mean_{kind}diff"] = _stat(lambda d: np.mean(d, dtype=np.float32), diff)
        stats[f"median_{kind}diff"] = _stat(np.median, diff)
        stats[f"quantile_{kind}diff"] = _stat(lambda d: np.quantile(d, quantile), diff) if error_stat == "quantile" else None
    if error_stat == "elemwise":
        with np.errstate(invalid="ignore"):
            mismatches = ((absdiff > atol) | np.isnan(absdiff)) & ((reldiff > rtol) | np.isnan(reldiff))
        failed = bool(np.any(mismatches))
    else:
        failed = _stat_failed(stats[f"{error_stat}_absdiff"], atol) and _stat_failed(stats[f"{error_stat}_reldiff"], rtol)
    req = {"elemwise": "max"}.get(error_stat, error_stat)
    G_LOGGER.info(f"Minimum Required Tolerance: {error_stat} error | [abs={stats[f'{req}_absdiff']:.5g}] OR [rel={stats[f'{req}_reldiff']:.5g}]")
    return OutputCompareResult(not failed, **stats, thresholds=SimpleThreshold(error_stat, atol, rtol))


def _l2(a: np.ndarray, b: np.ndarray) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.sqrt(np.sum(np.square(cast_up(a).astype(np.float64) - cast_up(b).astype(np.float64)))))


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity as Polygraphy defines it at the edges: two zero vectors are identical (1.0), one zero
    vector is orthogonal to anything (0.0)."""
    x, y = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    nx, ny = float(np.sqrt(np.dot(x, x))), float(np.sqrt(np.dot(y, y)))
    if nx == 0 and ny == 0:
        return 1.0
    if nx == 0 or ny == 0:
        return 0.0
    cosine = float(np.dot(x, y)) / (nx * ny)
    if math.isnan(cosine):  # NaN/Inf in an output: a NaN that fails, never clamped into a 1.0 that passes
        return cosine
    return max(-1.0, min(1.0, cosine))


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean(np.square(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
    if mse == 0:
        return math.inf
    peak = float(np.max(a)) if a.size else 1.0
    peak = peak if peak > 0 else 1.0
    return 20 * math.log10(peak) - 10 * math.log10(mse)


def _snr(a: np.ndarray, b: np.ndarray) -> float:
    x = a.astype(np.float64)
    noise = float(np.mean(np.square(x - b.astype(np.float64)))) if a.size else 0.0
    signal = float(np.mean(np.square(x))) if a.size else 0.0
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return 10 * math.log10(signal / noise)


class _CompareOutputs:
    """The callable each factory returns: ``(iter_result0, iter_result1) -> OrderedDict[output, result]``."""

    def __init__(
        self, match: Callable[[str, np.ndarray, np.ndarray], Any], check_shapes: bool, fail_fast: bool, find_output_func: Callable | None, options: Mapping[str, Any]
    ) -> None:
        self.match, self.check_shapes, self.fail_fast, self.find_output_func = match, check_shapes, fail_fast, find_output_func
        self.options = dict(options)  # per-output dicts, checked against the outputs of each call

    def __call__(self, iter_result0: IterationResult, iter_result1: IterationResult) -> OrderedDict:
        for name, value in self.options.items():
            _check_dict(value, f"the {name} dictionary", iter_result0, iter_result1)

        def compare(out0_name: str, output0: Any, out1_name: str, output1: Any) -> Any:
            aligned = _aligned(out0_name, output0, output1, self.check_shapes)
            if aligned is None:
                return False
            return self.match(out0_name, *aligned)

        def find(name: str, index: int, iter_result: IterationResult) -> Any:
            if self.find_output_func is not None:
                return self.find_output_func(name, index, iter_result)
            return default_find_output_func(name, index, iter_result, iter_result0)

        return run_comparison(compare, self.fail_fast, iter_result0, iter_result1, find)


class CompareFunc:
    """Factories of functions that compare two ``IterationResult`` s (``Comparator.compare_accuracy``'s
    ``compare_func``)."""

    @staticmethod
    def simple(
        check_shapes: bool | None = None,
        rtol: float | dict[str, float] | None = None,
        atol: float | dict[str, float] | None = None,
        fail_fast: bool | None = None,
        find_output_func: Callable | None = None,
        check_error_stat: str | dict[str, str] | None = None,
        infinities_compare_equal: bool | None = None,
        save_heatmaps: str | None = None,
        show_heatmaps: bool | None = None,
        save_error_metrics_plot: str | None = None,
        show_error_metrics_plot: bool | None = None,
        error_quantile: float | dict[str, float] | None = None,
    ) -> Callable[[IterationResult, IterationResult], OrderedDict]:
        """Absolute/relative tolerances (default 1e-5 each) on an error statistic (default ``"elemwise"``);
        ``rtol``, ``atol``, ``check_error_stat`` and ``error_quantile`` (default 0.99) may be per-output dicts
        (``""``: the default). Returns ``OutputCompareResult`` per output (``False`` where shapes differ)."""
        given = {
            "save_heatmaps": save_heatmaps,
            "show_heatmaps": show_heatmaps,
            "save_error_metrics_plot": save_error_metrics_plot,
            "show_error_metrics_plot": show_error_metrics_plot,
        }
        plots = [name for name, value in given.items() if value]
        if plots:  # refused, never silently ignored
            raise PolygraphyException(
                f"CompareFunc.simple({', '.join(plots)}): parity_polygraphy draws no plots inside a compare function; "
                "use `parity run --save-heatmaps DIR` or `--save-error-metrics-plot DIR` (pip install \"parity[plots]\")"
            )
        atol = 1e-5 if atol is None else atol
        rtol = 1e-5 if rtol is None else rtol
        check_error_stat = "elemwise" if check_error_stat is None else check_error_stat
        error_quantile = 0.99 if error_quantile is None else error_quantile
        infinities = bool(infinities_compare_equal)

        def match(name: str, out0: np.ndarray, out1: np.ndarray) -> OutputCompareResult:
            per_atol = value_or_from_dict(atol, name, 1e-5)
            per_rtol = value_or_from_dict(rtol, name, 1e-5)
            stat = value_or_from_dict(check_error_stat, name, "elemwise")
            quantile = value_or_from_dict(error_quantile, name, 0.99)
            G_LOGGER.info(f"Tolerance: [abs={per_atol:.5g}, rel={per_rtol:.5g}] | Checking {stat} error")
            result = check_simple(out0, out1, per_atol, per_rtol, stat, quantile, infinities)
            verdict = "PASSED" if result else "FAILED"
            G_LOGGER.info(f"{verdict} | Output: '{name}' | Difference {'is within' if result else 'exceeds'} tolerance (rel={per_rtol}, abs={per_atol})")
            return result

        options = {"rtol": rtol, "atol": atol, "check_error_stat": check_error_stat, "quantile": error_quantile}
        return _CompareOutputs(match, check_shapes is not False, bool(fail_fast), find_output_func, options)

    @staticmethod
    def indices(index_tolerance: int | dict[str, int] | None = None, fail_fast: bool | None = None) -> Callable[[IterationResult, IterationResult], OrderedDict]:
        """Index outputs (e.g. a TopK's): each value of each row of the first output must sit within
        ``index_tolerance`` positions of the same value in the second; the last ``index_tolerance`` values of each
        row are not checked. Returns a bool per output."""
        index_tolerance = 0 if index_tolerance is None else index_tolerance
        fail_fast = bool(fail_fast)

        def match(name: str, out0: np.ndarray, out1: np.ndarray) -> bool:
            tol = value_or_from_dict(index_tolerance, name, 0)
            passed = True
            rows0 = out0.reshape(-1, out0.shape[-1]) if out0.ndim else out0.reshape(1, 1)
            rows1 = out1.reshape(-1, out1.shape[-1]) if out1.ndim else out1.reshape(1, 1)
            for row0, row1 in zip(rows0, rows1):
                checked = row0[: len(row0) - tol] if tol > 0 else row0
                for index0, val0 in enumerate(checked):
                    if val0 == row1[index0]:
                        continue
                    where = np.flatnonzero(row1 == val0)
                    if where.size < 1 or abs(int(where[0]) - index0) > tol:
                        G_LOGGER.error(f"FAILED | Value: {val0} not found in output" if where.size < 1 else f"FAILED | Difference exceeds index tolerance ({tol})")
                        passed = False
                        if fail_fast:
                            return False
            return passed

        return _CompareOutputs(match, True, fail_fast, None, {"index_tolerance": index_tolerance})

    @staticmethod
    def distance_metrics(
        l2_tolerance: float | dict[str, float] | None = None,
        cosine_similarity_threshold: float | dict[str, float] | None = None,
        check_shapes: bool | None = None,
        fail_fast: bool | None = None,
        find_output_func: Callable | None = None,
    ) -> Callable[[IterationResult, IterationResult], OrderedDict]:
        """The L2 distance must be at most ``l2_tolerance`` (default 1e-5) and the cosine similarity at least
        ``cosine_similarity_threshold`` (default 0.997). Returns ``DistanceMetricsResult`` per output."""
        l2_tolerance = 1e-5 if l2_tolerance is None else l2_tolerance
        cosine_similarity_threshold = 0.997 if cosine_similarity_threshold is None else cosine_similarity_threshold

        def match(name: str, out0: np.ndarray, out1: np.ndarray) -> DistanceMetricsResult:
            l2 = _l2(out0, out1)
            cosine = _cosine(out0, out1)
            passed = l2 <= value_or_from_dict(l2_tolerance, name, 1e-5) and cosine >= value_or_from_dict(cosine_similarity_threshold, name, 0.997)
            return DistanceMetricsResult(passed, l2, cosine)

        options = {"l2_tolerance": l2_tolerance, "cosine_similarity_threshold": cosine_similarity_threshold}
        return _CompareOutputs(match, check_shapes is not False, bool(fail_fast), find_output_func, options)

    @staticmethod
    def quality_metrics(
        psnr_tolerance: float | dict[str, float] | None = None,
        snr_tolerance: float | dict[str, float] | None = None,
        check_shapes: bool | None = None,
        fail_fast: bool | None = None,
        find_output_func: Callable | None = None,
    ) -> Callable[[IterationResult, IterationResult], OrderedDict]:
        """The PSNR must be at least ``psnr_tolerance`` dB (default 30) and the SNR at least ``snr_tolerance`` dB
        (default 20). Returns ``QualityMetricsResult`` per output."""
        psnr_tolerance = 30.0 if psnr_tolerance is None else psnr_tolerance
        snr_tolerance = 20.0 if snr_tolerance is None else snr_tolerance

        def match(name: str, out0: np.ndarray, out1: np.ndarray) -> QualityMetricsResult:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                psnr, snr = _psnr(cast_up(out0), cast_up(out1)), _snr(cast_up(out0), cast_up(out1))
            passed = psnr >= value_or_from_dict(psnr_tolerance, name, 30.0) and snr >= value_or_from_dict(snr_tolerance, name, 20.0)
            return QualityMetricsResult(passed, psnr, snr)

        options = {"psnr_tolerance": psnr_tolerance, "snr_tolerance": snr_tolerance}
        return _CompareOutputs(match, check_shapes is not False, bool(fail_fast), find_output_func, options)


class BaseCompareFunc:
    """Polygraphy 0.53's base of compare functors: ``func(iter_result0, iter_result1) -> OrderedDict[output,
    result]``; subclasses implement ``__call__``."""

    def __call__(self, iter_result0: IterationResult, iter_result1: IterationResult) -> OrderedDict:
        raise NotImplementedError()


class SimpleCompareFunc(BaseCompareFunc):
    """Polygraphy 0.53's class form of :meth:`CompareFunc.simple` (same arguments, same results)."""

    def __init__(self, **options: Any) -> None:
        self._func = CompareFunc.simple(**options)
        for name, value in options.items():
            setattr(self, name, value)

    def __call__(self, iter_result0: IterationResult, iter_result1: IterationResult) -> OrderedDict:
        return self._func(iter_result0, iter_result1)


class IndicesCompareFunc(BaseCompareFunc):
    """Polygraphy 0.53's class form of :meth:`CompareFunc.indices`."""

    def __init__(self, index_tolerance: int | dict[str, int] | None = None, fail_fast: bool | None = None) -> None:
        self.index_tolerance, self.fail_fast = index_tolerance, fail_fast
        self._func = CompareFunc.indices(index_tolerance=index_tolerance, fail_fast=fail_fast)

    def __call__(self, iter_result0: IterationResult, iter_result1: IterationResult) -> OrderedDict:
        return self._func(iter_result0, iter_result1)


# --- Polygraphy 0.53's single-metric compare functions ----------------------------------------------------


_Tolerance = float | dict[str, float] | None  # one value, or one per output ("": the default)


class _MetricThreshold:
    """One metric's bound: at most ``threshold`` (an error) or at least it (a similarity); a missing value fails."""

    def __init__(self, field: str, threshold: float, higher_is_better: bool) -> None:
        self.field, self.threshold, self.higher_is_better = field, threshold, higher_is_better

    def passed(self, metric_values: Mapping[str, float | None]) -> bool:
        value = metric_values.get(self.field)
        if value is None:
            return False
        return bool(value >= self.threshold if self.higher_is_better else value <= self.threshold)


class _MetricResult:
    """One output's value of one metric and the threshold it was checked against; truthy iff it passes."""

    FIELD = ""

    def __init__(self, value: float, thresholds: _MetricThreshold | None = None) -> None:
        setattr(self, self.FIELD, None if value is None else float(value))
        self.thresholds = thresholds

    @property
    def METRIC_FIELDS(self) -> tuple[str, ...]:  # noqa: N802 - the name OutputCompareResult's class attribute has
        return (self.FIELD,)

    def metric_values(self) -> dict[str, float | None]:
        return {self.FIELD: getattr(self, self.FIELD)}

    def __bool__(self) -> bool:
        return self.thresholds is not None and self.thresholds.passed(self.metric_values())

    def averaged(self, values: Mapping[str, float | None]) -> _MetricResult:
        return type(self)(values.get(self.FIELD), self.thresholds)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.FIELD}={getattr(self, self.FIELD)})"


class L2Result(_MetricResult):
    FIELD = "l2_norm"


class CosineSimilarityResult(_MetricResult):
    FIELD = "cosine_similarity"


class PsnrResult(_MetricResult):
    FIELD = "psnr"


class SnrResult(_MetricResult):
    FIELD = "snr"


class _SingleMetricCompareFunc(BaseCompareFunc):
    RESULT: type[_MetricResult] = _MetricResult
    DEFAULT = 0.0
    HIGHER_IS_BETTER = False
    ARGUMENT = "threshold"

    def __init__(
        self, threshold: float | dict[str, float] | None, check_shapes: bool | None, fail_fast: bool | None, find_output_func: Callable | None
    ) -> None:
        self.threshold = self.DEFAULT if threshold is None else threshold
        self.check_shapes = check_shapes is not False
        self.fail_fast = bool(fail_fast)
        self.find_output_func = find_output_func

    @staticmethod
    def compute(out0: np.ndarray, out1: np.ndarray) -> float:
        raise NotImplementedError()

    def thresholds_for(self, output_name: str) -> _MetricThreshold:
        return _MetricThreshold(self.RESULT.FIELD, value_or_from_dict(self.threshold, output_name, self.DEFAULT), self.HIGHER_IS_BETTER)

    def __call__(self, iter_result0: IterationResult, iter_result1: IterationResult) -> OrderedDict:
        def match(name: str, out0: np.ndarray, out1: np.ndarray) -> _MetricResult:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                return self.RESULT(self.compute(cast_up(out0), cast_up(out1)), self.thresholds_for(name))

        return _CompareOutputs(match, self.check_shapes, self.fail_fast, self.find_output_func, {self.ARGUMENT: self.threshold})(iter_result0, iter_result1)


class L2CompareFunc(_SingleMetricCompareFunc):
    """The L2 distance between the outputs must be at most ``l2_threshold`` (default 1e-5)."""

    RESULT, DEFAULT, ARGUMENT = L2Result, 1e-5, "l2_threshold"
    compute = staticmethod(_l2)

    def __init__(
        self, l2_threshold: _Tolerance = None, check_shapes: bool | None = None, fail_fast: bool | None = None, find_output_func: Callable | None = None
    ) -> None:
        super().__init__(l2_threshold, check_shapes, fail_fast, find_output_func)


class CosineSimilarityCompareFunc(_SingleMetricCompareFunc):
    """The cosine similarity of the outputs must be at least ``cosine_similarity_threshold`` (default 0.997)."""

    RESULT, DEFAULT, HIGHER_IS_BETTER, ARGUMENT = CosineSimilarityResult, 0.997, True, "cosine_similarity_threshold"
    compute = staticmethod(_cosine)

    def __init__(
        self, cosine_similarity_threshold: _Tolerance = None, check_shapes: bool | None = None, fail_fast: bool | None = None, find_output_func: Callable | None = None
    ) -> None:
        super().__init__(cosine_similarity_threshold, check_shapes, fail_fast, find_output_func)


class PsnrCompareFunc(_SingleMetricCompareFunc):
    """The peak signal-to-noise ratio must be at least ``psnr_threshold`` dB (default 30)."""

    RESULT, DEFAULT, HIGHER_IS_BETTER, ARGUMENT = PsnrResult, 30.0, True, "psnr_threshold"
    compute = staticmethod(_psnr)

    def __init__(
        self, psnr_threshold: _Tolerance = None, check_shapes: bool | None = None, fail_fast: bool | None = None, find_output_func: Callable | None = None
    ) -> None:
        super().__init__(psnr_threshold, check_shapes, fail_fast, find_output_func)


class SnrCompareFunc(_SingleMetricCompareFunc):
    """The signal-to-noise ratio must be at least ``snr_threshold`` dB (default 20)."""

    RESULT, DEFAULT, HIGHER_IS_BETTER, ARGUMENT = SnrResult, 20.0, True, "snr_threshold"
    compute = staticmethod(_snr)

    def __init__(
        self, snr_threshold: _Tolerance = None, check_shapes: bool | None = None, fail_fast: bool | None = None, find_output_func: Callable | None = None
    ) -> None:
        super().__init__(snr_threshold, check_shapes, fail_fast, find_output_func)
