"""The first NaN/Inf: with one runner and no reference, the first node whose output holds NaN or Inf.

**Defined once**, as the first divergence is: every tensor a run marked is a row (:func:`finite_row`: its
NaN and Inf counts; integer and boolean tensors hold neither and are not rows), the rows sit in the model's
topological order (:meth:`parity.compare.divergence.GraphInfo.from_onnx`, ``Constant`` outputs included),
and the first one holding a NaN or an Inf is :func:`first_nonfinite`, which is
:func:`parity.compare.divergence.first_divergent` over those rows. ``parity run --onnx-outputs mark all
--validate`` and ``parity debug localize --validate`` (which marks tensors in budgeted batches) both build
rows this way and pick with this function, so on the same inputs they name the same tensor and node.

Every computed input of that node was scanned and was finite (it comes earlier in the order), so the node
made the NaN/Inf itself: :class:`NonFiniteReport` shows its op type and a summary of each input
(:func:`tensor_stats`: min/max/mean of the finite values, NaN/Inf counts, the few values of largest
magnitude) and, for inputs of the output's shape or broadcast to it, their values at the output's first
NaN/Inf element (``Log`` of -0.53, ``0 / 0``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from parity import onnx_models
from parity.compare import stats
from parity.compare.divergence import GraphInfo, Producer, _graph_for, _window, first_divergent
from parity.onnx_external import WeightReader, is_external

EXTREMES = 3  # values of largest magnitude shown per tensor


@dataclass
class FiniteRow:
    """One scanned tensor: its position in the order, NaN and Inf counts, and producer."""

    name: str
    position: int
    nan: int
    inf: int
    size: int
    node: str | None = None
    op_type: str | None = None
    inputs: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not (self.nan or self.inf)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "position": self.position,
            "passed": self.passed,
            "nan": self.nan,
            "inf": self.inf,
            "size": self.size,
            "node": self.node,
            "op_type": self.op_type,
            "inputs": list(self.inputs),
        }


def is_scanned(array: Any) -> bool:
    """Whether a tensor can hold NaN/Inf at all (floating point): the tensors a scan has rows for."""
    return np.issubdtype(np.asarray(array).dtype, np.floating)


def count_nonfinite(array: Any) -> tuple[int, int]:
    """(NaN count, Inf count), chunk by chunk (no full-size temporaries)."""
    flat = np.asarray(array).reshape(-1)
    acc = stats.Accumulator(flat.size)
    with np.errstate(invalid="ignore", over="ignore"):  # inf + -inf in a chunk's sum: counted, not warned about
        for sl in stats.chunks(flat.size):
            acc.add(flat[sl], sl.start)
    return acc.s.nan, acc.s.inf


def finite_row(name: str, array: Any, position: int, producer: Producer | None = None, counts: tuple[int, int] | None = None) -> FiniteRow:
    """The row of one floating tensor (``counts``: its NaN/Inf counts when the caller has them already)."""
    nan, inf = counts if counts is not None else count_nonfinite(array)
    return FiniteRow(
        name,
        position,
        int(nan),
        int(inf),
        int(np.asarray(array).size),
        producer.node if producer else None,
        producer.op_type if producer else None,
        producer.inputs if producer else (),
    )


def first_nonfinite(rows: Iterable[FiniteRow]) -> FiniteRow | None:
    """THE first NaN/Inf: the row earliest in topological order holding a NaN or an Inf (the first divergence's
    rule, :func:`parity.compare.divergence.first_divergent`, with "finite" as the check)."""
    return first_divergent(rows)  # type: ignore[arg-type, return-value]


def rows_in_order(rows: Iterable[FiniteRow]) -> list[FiniteRow]:
    return sorted(rows, key=lambda r: r.position)


# --- what the inputs of the node held ---------------------------------------------------------------------


@dataclass
class TensorStats:
    """A summary of one tensor: finite min/max/mean, NaN and Inf counts, the values of largest magnitude."""

    name: str
    dtype: str
    shape: list[int]
    nan: int
    inf: int
    min: float | None
    max: float | None
    mean: float | None
    extremes: list[tuple[list[int], float]]  # (index, value), largest magnitude first
    first_nonfinite: list[int] | None = None  # index of the first NaN/Inf element
    source: str = "computed"  # computed | input (a graph input) | constant (an initializer or a Constant's output)

    def line(self) -> str:
        what = {"input": "graph input", "constant": "constant"}.get(self.source, "")
        head = f"'{self.name}'" + (f" ({what})" if what else "") + f" {self.dtype} {self.shape}"
        body = "no finite values" if self.min is None else f"min {_g(self.min)} max {_g(self.max)} mean {_g(self.mean)}"
        body += f", {self.nan} NaN, {self.inf} Inf"
        if self.extremes:
            body += "; largest |x|: " + ", ".join(f"{_g(v)} at {list(i)}" for i, v in self.extremes)
        return f"{head}: {body}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "source": self.source,
            "nan": self.nan,
            "inf": self.inf,
            "min": _finite(self.min),
            "max": _finite(self.max),
            "mean": _finite(self.mean),
            "extremes": [{"index": list(i), "value": _finite(v)} for i, v in self.extremes],
            "first_nonfinite": self.first_nonfinite,
        }


def tensor_stats(name: str, array: Any, source: str = "computed", k: int = EXTREMES) -> TensorStats:
    """Summary of ``array``, chunk by chunk: statistics of its finite values and its ``k`` finite values of
    largest magnitude (ties: the earliest first)."""
    arr = np.asarray(array)
    flat = arr.reshape(-1)
    if flat.dtype.kind not in "fiub":
        flat = flat.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        s = stats.summarize(flat.view(np.uint8) if flat.dtype == np.bool_ else flat, percentiles=False)
    best_idx = np.empty(0, dtype=np.int64)
    best_mag = np.empty(0, dtype=np.float64)
    first_bad: int | None = None
    for sl in stats.chunks(flat.size):
        part = np.asarray(flat[sl], dtype=np.float64)
        finite = np.isfinite(part)
        if first_bad is None and not finite.all():
            first_bad = sl.start + int(np.flatnonzero(~finite)[0])
        mag = np.where(finite, np.abs(part), -1.0)
        idx = np.argpartition(mag, -k)[-k:] if part.size > k else np.arange(part.size)
        idx = idx[mag[idx] >= 0]
        best_idx = np.concatenate([best_idx, idx + sl.start])
        best_mag = np.concatenate([best_mag, mag[idx]])
        order = np.lexsort((best_idx, -best_mag))[:k]
        best_idx, best_mag = best_idx[order], best_mag[order]
    shape = tuple(arr.shape)
    extremes = [([int(d) for d in np.unravel_index(int(i), shape)] if shape else [], float(flat[int(i)])) for i in best_idx]
    finite = s.finite > 0
    return TensorStats(
        name,
        arr.dtype.name,
        [int(d) for d in shape],
        int(s.nan),
        int(s.inf),
        float(s.min) if finite else None,
        float(s.max) if finite else None,
        float(s.mean) if finite else None,
        extremes,
        [int(d) for d in np.unravel_index(first_bad, shape)] if first_bad is not None and shape else ([] if first_bad is not None else None),
        source,
    )


def value_at(array: Any, index: Sequence[int], shape: Sequence[int]) -> float | None:
    """The element of ``array`` that lands at ``index`` of an output of ``shape`` under NumPy broadcasting;
    None when ``array`` does not broadcast to that shape (a Conv's weights)."""
    arr = np.asarray(array)
    if arr.ndim > len(shape):
        return None
    offset = len(shape) - arr.ndim
    where = []
    for d, size in enumerate(arr.shape):
        if size == 1:
            where.append(0)
        elif size == shape[offset + d]:
            where.append(int(index[offset + d]))
        else:
            return None
    return float(arr[tuple(where)])


@dataclass
class NonFiniteReport:
    """Where one runner's first NaN/Inf appears: the scanned rows, and the first one's node and inputs."""

    runner: str
    iteration: int
    rows: list[FiniteRow]
    model: str | None = None
    output: TensorStats | None = None
    inputs: list[TensorStats] = field(default_factory=list)
    at_first: dict[str, float] = field(default_factory=dict)  # inputs' values at the output's first NaN/Inf element
    unavailable: list[str] = field(default_factory=list)  # inputs whose values could not be read

    @property
    def first(self) -> FiniteRow | None:
        return first_nonfinite(self.rows)

    @property
    def failing(self) -> int:
        return sum(1 for r in self.rows if not r.passed)

    def lines(self, max_rows: int = 40) -> list[str]:
        first = self.first
        head = f"NaN/Inf scan ({self.runner}, iteration {self.iteration}): {len(self.rows)} tensors in topological order"
        if first is None:
            return [f"{head}: no NaN or Inf."]
        out = [f"{head}, {self.failing} hold NaN or Inf."]
        out.append(f"  {'#':>5}  {'':7}  {'NaN':>9}  {'Inf':>9}  tensor <- node (op)")
        for row in _window(self.rows, self.rows.index(first), max_rows):  # type: ignore[arg-type]
            if row is None:
                out.append("  " + " " * 5 + "  ...")
                continue
            mark = ">>" if row is first else "  "
            where = f" <- {row.node} ({row.op_type})" if row.node else ""
            out.append(f"{mark}{row.position:>5}  {'ok' if row.passed else 'NaN/Inf':7}  {row.nan:>9}  {row.inf:>9}  {row.name}{where}")
        what = f"'{first.name}'"
        if first.node:
            what += f", produced by node '{first.node}' ({first.op_type}) from {list(first.inputs)}"
        where = ""
        if self.output is not None and self.output.first_nonfinite is not None:
            where = f" (first at {self.output.first_nonfinite})"
        out.append(f"First NaN/Inf: {what}: {first.nan} NaN, {first.inf} Inf of {first.size} elements{where}")
        for s in self.inputs:
            at = self.at_first.get(s.name)
            out.append("  input " + s.line() + (f"; at {self.output.first_nonfinite}: {_g(at)}" if at is not None and self.output else ""))
        for name in self.unavailable:
            out.append(f"  input '{name}': value not available")
        if self.output is not None:
            out.append("  output " + self.output.line())
        return out

    def to_json(self) -> dict[str, Any]:
        first = self.first
        return {
            "runner": self.runner,
            "iteration": self.iteration,
            "first": None if first is None else first.name,
            "node": None if first is None else first.node,
            "op_type": None if first is None else first.op_type,
            "output": None if self.output is None else self.output.to_json(),
            "inputs": [s.to_json() for s in self.inputs],
            "at_first": {k: _finite(v) for k, v in self.at_first.items()},
            "unavailable": list(self.unavailable),
            "tensors": [r.to_json() for r in self.rows],
        }


def describe_first(report: NonFiniteReport, values: Callable[[Sequence[str]], Mapping[str, Any]], sources: Mapping[str, str] | None = None) -> NonFiniteReport:
    """Fill in the first NaN/Inf's summaries: ``values(names)`` returns the arrays it can of those tensors
    (the output and its node's inputs); ``sources`` labels inputs as ``input`` or ``constant``."""
    first = report.first
    if first is None:
        return report
    names = [t for t in dict.fromkeys([first.name, *first.inputs]) if t]
    got = values(names)
    sources = sources or {}
    if first.name in got:
        report.output = tensor_stats(first.name, got[first.name])
    for name in [t for t in dict.fromkeys(first.inputs) if t]:
        if name not in got:
            report.unavailable.append(name)
            continue
        report.inputs.append(tensor_stats(name, got[name], sources.get(name, "computed")))
        out = report.output
        if out is not None and out.first_nonfinite is not None:
            at = value_at(got[name], out.first_nonfinite, out.shape)
            if at is not None:
                report.at_first[name] = at
    return report


def constant_values(proto: Any, names: Iterable[str], base_dir: Any = None) -> dict[str, Any]:
    """Values of initializers (and ``Constant`` node outputs) of an ``onnx.ModelProto`` among ``names``.
    Weights still in external data files are read from ``base_dir`` (the model's data folder) as read-only
    memory-mapped arrays (:class:`parity.onnx_external.WeightReader`): only the named ones, and no copy.
    The arrays stay valid after the call (each keeps its map open)."""
    from onnx import numpy_helper

    wanted = set(names)
    out: dict[str, Any] = {}
    reader = WeightReader(base_dir)  # not closed here: the arrays it returned keep their maps alive
    for init in proto.graph.initializer:
        if init.name in wanted:
            out[init.name] = reader.array(init) if is_external(init) else numpy_helper.to_array(init)
    scalars = {"value_float": lambda a: np.float32(a.f), "value_floats": lambda a: np.array(a.floats, np.float32),
               "value_int": lambda a: np.int64(a.i), "value_ints": lambda a: np.array(a.ints, np.int64)}  # fmt: skip
    for node in proto.graph.node:
        if node.op_type == "Constant" and node.output and node.output[0] in wanted:
            for attr in node.attribute:
                if attr.name == "value":
                    out[node.output[0]] = reader.array(attr.t) if is_external(attr.t) else numpy_helper.to_array(attr.t)
                elif attr.name in scalars:
                    out[node.output[0]] = np.asarray(scalars[attr.name](attr))
    return out


class NonFiniteLocator:
    """For ``parity run --validate`` of a layerwise run: each runner's first NaN/Inf, from the first iteration
    that had one. Called by :func:`parity.run_engine.run` while the iteration's outputs are still in memory."""

    def __init__(self, model: str | None, external_data_dir: Any = None) -> None:
        """``external_data_dir``: the folder of the model's external data (``--external-data-dir``)."""
        self.model = model
        self.external_data_dir = external_data_dir
        self.reports: list[NonFiniteReport] = []
        self._done: set[str] = set()
        self._graph: GraphInfo | None = None
        self._proto: Any = None

    @property
    def graph(self) -> GraphInfo:
        if self._graph is None:
            self._graph = _graph_for(self.model)
        return self._graph

    def __call__(self, runner: str, iteration: int, feed: Mapping[str, Any], result: Mapping[str, Any], issues: Sequence[Any]) -> None:
        if runner in self._done or not issues:
            return
        self._done.add(runner)
        graph = self.graph
        rank = {t: i for i, t in enumerate(graph.order)}
        counts = {i.output: (i.nan, i.inf) for i in issues}
        names = [n for n in result if is_scanned(result[n])]
        returned = {n: i for i, n in enumerate(names)}
        rows = [
            finite_row(n, result[n], rank.get(n, len(rank) + returned[n]), graph.producers.get(n), counts.get(n, (0, 0)))
            for n in names
        ]
        report = NonFiniteReport(runner, iteration, rows_in_order(rows), self.model)
        sources = {**{n: "constant" for n in graph.constants}, **{n: "input" for n in feed}}

        def values(wanted: Sequence[str]) -> dict[str, Any]:
            got = {n: result[n] for n in wanted if n in result}
            got.update({n: feed[n] for n in wanted if n in feed and n not in got})
            rest = [n for n in wanted if n not in got]
            if rest and self.model:
                try:
                    if self._proto is None:  # the graph; the few weights wanted are read from their files
                        self._proto = onnx_models.load(self.model, load_external_data=False, external_data_dir=self.external_data_dir)
                    found = constant_values(self._proto, rest, onnx_models.data_dir(self.model, self.external_data_dir))
                except Exception:  # not an ONNX model (an engine): weights are not readable
                    found = {}
                got.update(found)
            return got

        self.reports.append(describe_first(report, values, sources))


def _finite(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"
