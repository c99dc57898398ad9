"""Whether marking tensors as outputs changed a runner's real outputs (``--onnx-outputs mark all``, ``--trt-outputs``).

A tensor marked as an output must be kept as computed, so a backend cannot fuse the nodes around it
(onnxruntime's fusions, TensorRT's layer fusion): a marked run can compute the model's own outputs
differently from the run the user cares about (an fp16 model's error vs fp32 outputs went from 0.23 to 8.6
with NaN). ``parity run`` therefore runs each runner with marked outputs once more without the marks, on
the same inputs (:func:`parity.run_engine.run`'s ``unmarked``), and :class:`MarkingCheck` compares the real
outputs of the two runs with the run's own compare functions: where they differ beyond the tolerance, one
:class:`MarkingEffect` per runner says so, with both runs' errors against the runner's comparison partner.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from parity.compare.funcs import CompareFunc
from parity.util.record import LIST, Record, fill
from parity.util.text import names_preview

_CHUNK = 1 << 20  # elements: a big output's difference is taken a slice at a time (float64 copies stay small)


class MarkingEffect(Record):
    """Marking changed ``runner``'s output ``output`` (the most changed one, at ``iteration``): ``shift`` is
    the max abs difference between its marked and unmarked values; ``marked_error``/``unmarked_error`` its max
    abs error vs ``reference`` (the runner it is compared with; None when it is compared with none), with
    ``*_nan`` elements NaN in that difference; ``outputs``: every output marking changed on this runner."""

    runner: str
    output: str
    iteration: int
    marking: str
    shift: float
    shift_nan: int
    reference: str | None
    unmarked_error: float | None
    unmarked_nan: int
    marked_error: float | None
    marked_nan: int
    outputs: list[str]

    def __init__(
        self,
        runner: str,
        output: str,
        iteration: int,
        marking: str,
        shift: float,
        shift_nan: int = 0,
        reference: str | None = None,
        unmarked_error: float | None = None,
        unmarked_nan: int = 0,
        marked_error: float | None = None,
        marked_nan: int = 0,
        outputs: list[str] = LIST,
    ) -> None:
        fill(self, locals())

    def message(self) -> str:
        """One line: what changed, both errors, why, and what to trust."""
        others = f" (and {len(self.outputs) - 1} more: {names_preview(o for o in self.outputs if o != self.output)})" if len(self.outputs) > 1 else ""
        if self.reference is not None and self.marked_error is not None and self.unmarked_error is not None:
            errors = f"max abs error vs {self.reference} {_number(self.unmarked_error, self.unmarked_nan)} unmarked, {_number(self.marked_error, self.marked_nan)} marked"
        else:
            errors = f"marked and unmarked values differ by up to {_number(self.shift, self.shift_nan)}"
        return (
            f"{self.marking} changed {self.runner}'s output {self.output}{others}: {errors}; the marked run keeps every marked tensor "
            "as computed, so the backend does not fuse nodes across it: judge the model's outputs by an unmarked run"
        )

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in type(self)._fields}


def _number(value: float, nan: int) -> str:
    text = f"{value:.4g}" if math.isfinite(value) else ("NaN" if math.isnan(value) else str(value))
    return f"{text} (NaN)" if nan and text != "NaN" else text


def max_abs(actual: Any, reference: Any) -> tuple[float, int] | None:
    """``(max abs difference ignoring NaN, NaN count)`` of two numeric arrays of one shape, a slice at a time;
    None when they cannot be subtracted (shapes or dtypes differ). All NaN gives ``(nan, count)``."""
    a, b = np.asarray(actual), np.asarray(reference)
    if a.shape != b.shape or not (_numeric(a) and _numeric(b)):
        return None
    a, b = a.reshape(-1), b.reshape(-1)
    worst, nan = -math.inf, 0
    for start in range(0, a.size, _CHUNK):
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(a[start : start + _CHUNK].astype(np.float64) - b[start : start + _CHUNK].astype(np.float64))
        bad = np.isnan(diff)
        nan += int(bad.sum())
        kept = diff[~bad]
        if kept.size:
            worst = max(worst, float(kept.max()))
    if worst == -math.inf:
        return (math.nan if nan else 0.0), nan
    return worst, nan


def _numeric(array: np.ndarray) -> bool:
    return np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_


class MarkingCheck:
    """Compares, iteration by iteration, each marked runner's real outputs with its unmarked twin's.

    ``twins``: marked runner label -> its twin's label; ``marking``: label -> what marked it
    (``"--onnx-outputs mark all"``); ``pairs``: the run's compared ``(actual, reference)`` labels, whose
    partner gives the errors the message shows. :attr:`effects` after the run: one per changed runner."""

    def __init__(self, funcs: Sequence[CompareFunc], twins: Mapping[str, str], marking: Mapping[str, str], pairs: Sequence[tuple[str, str]]) -> None:
        self.funcs = list(funcs)
        self.twins = dict(twins)
        self.marking = dict(marking)
        self.pairs = list(pairs)
        self._worst: dict[str, MarkingEffect] = {}

    def partner(self, label: str) -> str | None:
        """The runner ``label`` is compared with: its reference, else the runner that has it as reference."""
        for actual, reference in self.pairs:
            if actual == label:
                return reference
        for actual, reference in self.pairs:
            if reference == label:
                return actual
        return None

    def on_iteration(self, index: int, results: Mapping[str, Mapping[str, Any]]) -> None:
        """``results``: every label's outputs of iteration ``index``, the twins' included."""
        for label, twin in self.twins.items():
            marked, plain = results.get(label), results.get(twin)
            if marked is None or plain is None:
                continue
            for name in plain:  # the twin's outputs are the model's own
                if name not in marked or all(func(name, np.asarray(marked[name]), np.asarray(plain[name])).passed for func in self.funcs):
                    continue
                self._record(index, label, name, marked, plain, results)

    def _record(self, index: int, label: str, name: str, marked: Mapping[str, Any], plain: Mapping[str, Any], results: Mapping[str, Mapping[str, Any]]) -> None:
        shift, shift_nan = max_abs(marked[name], plain[name]) or (math.nan, 0)
        known = self._worst.get(label)
        outputs = list(dict.fromkeys([*(known.outputs if known else []), name]))
        if known is not None and _rank(known.shift, known.shift_nan) >= _rank(shift, shift_nan):
            known.outputs = outputs
            return
        effect = MarkingEffect(label, name, index, self.marking.get(label, "marking outputs"), shift, shift_nan, outputs=outputs)
        other = self.partner(label)
        if other is not None:
            against_marked = results.get(other, {})
            against_plain = results.get(self.twins.get(other, other), {})  # a marked partner is judged unmarked too
            if name in against_marked and name in against_plain:
                m = max_abs(marked[name], against_marked[name])
                u = max_abs(plain[name], against_plain[name])
                if m is not None and u is not None:
                    effect.reference = other
                    effect.marked_error, effect.marked_nan = m
                    effect.unmarked_error, effect.unmarked_nan = u
        self._worst[label] = effect

    @property
    def effects(self) -> list[MarkingEffect]:
        return list(self._worst.values())


def _rank(shift: float, nan: int) -> tuple[int, float]:
    """NaN first, then the larger shift."""
    return (nan, -math.inf if math.isnan(shift) else shift)
