"""Polygraphy's comparison functions as ``parity run`` metrics: ``--compare l2``, ``cosine_similarity``, ``psnr``,
``snr``, ``perceptual_metrics`` and the two Polygraphy aliases ``distance_metrics`` (l2 + cosine_similarity) and
``quality_metrics`` (psnr + snr), with Polygraphy's threshold flags and defaults.

Each metric is computed by the functions :mod:`parity_polygraphy.comparator.compare` uses for ``CompareFunc`` and
``L2CompareFunc`` & co. (one implementation for the Python API and the command line), on Polygraphy's operands:
the first runner's output is ``out0`` (PSNR's peak, SNR's signal), the later runner's (or the golden file's)
``out1``. A metric here is a Parity compare function, ``(output, actual, reference) -> OutputCheck``, whose values
carry Polygraphy's field names (``l2_norm``, ``cosine_similarity``, ``psnr``, ``snr``, ``lpips``), so
``--save-accuracy-results`` writes what ``polygraphy check accuracy`` reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from parity.api import OutputCheck, UsageError, parse_per_name
from parity_polygraphy.comparator.compare import _cosine, _l2, _psnr, _snr, _try_match_shape, cast_up


class Field:
    """One of Polygraphy's scalar metrics: its result field, whether a larger value passes, its default
    threshold, the flag that sets it, and how it is computed (``compute(out0, out1)`` on widened arrays)."""

    def __init__(
        self, field: str, label: str, higher_is_better: bool, default: float, flag: str, compute: Callable[[np.ndarray, np.ndarray], float | None], unit: str = ""
    ) -> None:
        self.field, self.label, self.higher_is_better, self.default, self.flag = field, label, higher_is_better, default, flag
        self.compute, self.unit = compute, unit

    @property
    def bound(self) -> str:
        """The key of the threshold in a check's ``thresholds``: ``min_cosine_similarity``, ``max_l2_norm``."""
        return f"{'min' if self.higher_is_better else 'max'}_{self.field}"

    def passed(self, value: float | None, limit: float) -> bool:
        """Polygraphy's verdict: a missing or NaN value fails (an LPIPS that could not be computed is an error
        before it gets here, never a pass)."""
        if value is None or math.isnan(value):
            return False
        return value >= limit if self.higher_is_better else value <= limit

    def describe(self, value: float | None, limit: float) -> str:
        """Polygraphy's summary line: ``L2 Norm: 0.0012 (tolerance: 1e-05) | FAILED``."""
        shown = "n/a" if value is None else f"{value:.5g}{self.unit}"
        what = "min required" if self.higher_is_better else "tolerance"
        return f"{self.label}: {shown} ({what}: {limit:.5g}{self.unit}) | {'PASSED' if self.passed(value, limit) else 'FAILED'}"






FIELDS: dict[str, Field] = {
    "l2": Field("l2_norm", "L2 Norm", False, 1e-5, "--l2-threshold", _l2),
    "cosine_similarity": Field("cosine_similarity", "Cosine Similarity", True, 0.997, "--cosine-similarity-threshold", _cosine),
    "psnr": Field("psnr", "PSNR", True, 30.0, "--psnr-threshold", _psnr, " dB"),
    "snr": Field("snr", "SNR", True, 20.0, "--snr-threshold", _snr, " dB"),
}

# the --compare names that run several of Polygraphy's functions (its aliases), and the parameter names of the flags
ALIASES: dict[str, tuple[str, ...]] = {"distance_metrics": ("l2", "cosine_similarity"), "quality_metrics": ("psnr", "snr")}
PARAMS: dict[str, str] = {part: f"{part}_threshold" for part in ("l2", "cosine_similarity", "psnr", "snr")} | {"perceptual_metrics": "lpips_threshold"}


def thresholds(value: Any, flag: str, default: float) -> dict[str, float]:
    """``("1e-5", "out0:1e-4")`` (the command line) or ``1e-5``/``{"out0": 1e-4, "": 1e-5}`` (Python) ->
    ``{"": 1e-5, "out0": 1e-4}``; ``""`` is every other output's."""
    if value is None or value == ():
        return {"": default}
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        table: dict[str, Any] = {"": value}
    elif isinstance(value, Mapping):
        table = dict(value)
    else:
        table = parse_per_name([value] if isinstance(value, str) else list(value), float, flag)
    out = {"": default}
    for name, number in table.items():
        try:
            out[str(name)] = float(number)
        except (TypeError, ValueError):
            raise UsageError(f"{flag}: cannot read '{number}'; write [name:]value") from None
        if math.isnan(out[str(name)]):
            raise UsageError(f"{flag}: a threshold cannot be NaN")
    return out


def align(actual: np.ndarray, reference: np.ndarray, check_shapes: bool) -> tuple[np.ndarray, np.ndarray] | str:
    """Both arrays, the same shape: as given, or (``check_shapes=False``, ``--no-shape-check``) the reference
    reshaped or its axes permuted as Polygraphy does; else why not."""
    if actual.shape == reference.shape:
        return actual, reference
    if check_shapes:
        return f"shape {list(actual.shape)} != reference {list(reference.shape)}"
    matched = _try_match_shape(reference, actual.shape)
    if matched.shape != actual.shape:
        return f"shape {list(actual.shape)} != reference {list(reference.shape)} (no reshape or permutation matches)"
    return actual, matched


class PolygraphyMetric:
    """``--compare NAME``: each of ``fields`` measured on each output and checked against its threshold; the
    output passes when every one does (an alias runs two of Polygraphy's functions: both must pass)."""

    def __init__(self, name: str, fields: Sequence[Field], limits: Sequence[Mapping[str, float]], check_shapes: bool = True) -> None:
        self.name, self.fields, self.limits, self.check_shapes = name, list(fields), list(limits), check_shapes

    @property
    def better_when_higher(self) -> frozenset[str]:
        """For Parity's data-set summary: the worst similarity is the lowest, the worst error the highest."""
        return frozenset(f.field for f in self.fields if f.higher_is_better)

    def _limits(self, output: str) -> list[float]:
        return [table.get(output, table[""]) for table in self.limits]

    def _thresholds(self, output: str) -> dict[str, float]:
        return {f.bound: limit for f, limit in zip(self.fields, self._limits(output))}

    def _judge(self, output: str, values: Mapping[str, float | None]) -> OutputCheck:
        limits = self._limits(output)
        verdicts = [f.passed(values.get(f.field), limit) for f, limit in zip(self.fields, limits)]
        # what failed, in Polygraphy's words (a passing output's line would repeat its values)
        lines = [f.describe(values.get(f.field), limit) for f, limit, ok in zip(self.fields, limits, verdicts) if not ok]
        shown = {k: v for k, v in values.items() if v is not None}
        return OutputCheck(output, all(verdicts), self.name, shown, self._thresholds(output), "; ".join(lines))

    def measure(self, actual: np.ndarray, reference: np.ndarray) -> dict[str, float | None]:
        a, b = cast_up(actual), cast_up(reference)
        values: dict[str, float | None] = {}
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for f in self.fields:
                value = f.compute(a, b)
                values[f.field] = None if value is None else float(value)
        return values

    def __call__(self, name: str, actual: np.ndarray, reference: np.ndarray) -> OutputCheck:
        aligned = align(np.asarray(actual), np.asarray(reference), self.check_shapes)
        if isinstance(aligned, str):
            return OutputCheck(name, False, self.name, {}, self._thresholds(name), aligned)
        return self._judge(name, self.measure(*aligned))

    def average(self, name: str, checks: Mapping[int, OutputCheck]) -> OutputCheck:
        """``--check-average``: each field averaged over the iterations (a NaN stays a NaN), judged once. An
        iteration that measured nothing (a shape mismatch) fails the average, as Polygraphy's does."""
        empty = next((i for i, c in checks.items() if not c.values), None)
        if empty is not None:
            return OutputCheck(name, False, self.name, {}, self._thresholds(name), f"iteration {empty}: {checks[empty].message}: no average")
        values: dict[str, float | None] = {}
        for f in self.fields:
            got = [c.values[f.field] for c in checks.values() if f.field in c.values]
            values[f.field] = sum(got) / len(got) if got else None
        return self._judge(name, values)


def _check_shapes(options: Mapping[str, Any]) -> bool:
    return not options.get("no_shape_check") and options.get("check_shapes") is not False


def make(name: str, options: Mapping[str, Any]) -> PolygraphyMetric:
    """The metric ``--compare NAME`` chooses, its thresholds read from ``options`` (parameter names as the
    flags', or Polygraphy's keyword arguments: ``l2_threshold``, ``l2_tolerance``...)."""
    parts = ALIASES.get(name, (name,))
    fields = [FIELDS[p] for p in parts]
    limits = []
    for part, f in zip(parts, fields):
        param = PARAMS[part]
        value = options.get(param)
        if value is None and name in ALIASES:  # Polygraphy's CompareFunc.distance_metrics(l2_tolerance=...)
            value = options.get(param.replace("_threshold", "_tolerance"))
        limits.append(thresholds(value, f.flag, f.default))
    return PolygraphyMetric(name, fields, limits, _check_shapes(options))


# --- perceptual_metrics: LPIPS, with torch and the lpips package ------------------------------------------------


LPIPS_INSTALL = "pip install torch lpips"


def lpips_modules() -> tuple[Any, Any]:
    """``(torch, lpips)``, or a one-line refusal saying what to install."""
    try:
        import lpips  # noqa: PLC0415 - optional: only perceptual_metrics needs it
        import torch  # noqa: PLC0415
    except ImportError as exc:
        raise UsageError(f"--compare perceptual_metrics needs torch and the lpips package ({exc.name} is not installed): {LPIPS_INSTALL}") from None
    return torch, lpips


def as_lpips_image(arr: np.ndarray) -> np.ndarray:
    """Polygraphy's preparation of an output for LPIPS: NCHW (an HWC/NHWC layout, channels <= 3 last, is
    transposed), float32, scaled to [-1, 1] (values above 1 are taken as 0..255), three channels."""
    if arr.ndim < 3:
        raise UsageError(f"--compare perceptual_metrics: LPIPS compares images (3 or 4 dimensions); an output has shape {list(arr.shape)}")
    if arr.ndim == 3:
        arr = arr.transpose(2, 0, 1)[None, ...] if arr.shape[2] <= 3 else arr[None, ...]
    elif arr.ndim == 4 and arr.shape[3] <= 3:
        arr = arr.transpose(0, 3, 1, 2)
    elif arr.ndim > 4:
        raise UsageError(f"--compare perceptual_metrics: LPIPS compares images (3 or 4 dimensions); an output has shape {list(arr.shape)}")
    arr = arr.astype(np.float32)
    if arr.size and arr.max() > 1.0:
        arr = arr / 255.0
    if arr.size and arr.max() <= 1.0 and arr.min() >= 0.0:
        arr = arr * 2.0 - 1.0
    if arr.shape[1] == 1:
        arr = np.repeat(arr, 3, axis=1)
    elif arr.shape[1] == 2:
        arr = np.concatenate([arr, arr[:, 1:2]], axis=1)
    elif arr.shape[1] > 3:
        arr = arr[:, :3]
    return arr


class _Lpips:
    """LPIPS (AlexNet, version 0.1, on the CPU) as ``compute(out0, out1)``; the network loads on first use."""

    def __init__(self) -> None:
        self.torch, self.lpips = lpips_modules()
        self.model: Any = None

    def __call__(self, out0: np.ndarray, out1: np.ndarray) -> float:
        if self.model is None:
            try:
                self.model = self.lpips.LPIPS(net="alex", version="0.1", verbose=False).eval()
            except Exception as exc:  # noqa: BLE001 - its weights download on first use: say why it failed, in one line
                raise UsageError(f"--compare perceptual_metrics: the LPIPS network could not be loaded ({type(exc).__name__}: {exc})") from None
        img0, img1 = self.torch.from_numpy(as_lpips_image(out0)), self.torch.from_numpy(as_lpips_image(out1))
        with self.torch.no_grad():
            return float(self.model(img0, img1).mean().item())


def make_perceptual(options: Mapping[str, Any]) -> PolygraphyMetric:
    """``--compare perceptual_metrics``: the LPIPS score must be at most ``--lpips-threshold`` [0.1]. Refused in
    one line where torch or lpips is missing (Polygraphy skips the check and passes: Parity never passes an
    output it did not compare)."""
    field = Field("lpips", "LPIPS", False, 0.1, "--lpips-threshold", _Lpips())
    return PolygraphyMetric("perceptual_metrics", [field], [thresholds(options.get("lpips_threshold"), field.flag, field.default)], _check_shapes(options))
