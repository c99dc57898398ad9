"""Running runners over the same inputs and comparing what they return."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from parity.backend.base import BaseRunner
from parity.compare import streaming
from parity.compare.dataset import finish, refuse_unaveraged
from parity.compare.funcs import CompareFunc
from parity.compare.result import AccuracyResult, IterationComparison, OutputCheck, PairComparison
from parity.compare.streaming import runner_labels
from parity.errors import UsageError
from parity.plugins import get_registry
from parity.results.model import IterationResult, RunResults
from parity.util.text import names_preview

if TYPE_CHECKING:  # pragma: no cover
    from parity.registry import Registry


def default_pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """Each runner against the next: the later one is the reference (golden files come last)."""
    return [(names[i], names[i + 1]) for i in range(len(names) - 1)]


def resolve_compare_funcs(compare_func: Any, registry: Registry | None = None) -> list[CompareFunc]:
    """Accept a callable, a registered metric name, ``(name, options)`` (e.g. ``("cosine", {"cosine_min": 0.99})``,
    options named as on the CLI), or a list of these; default: ``simple``. Names are looked up in ``registry``, the
    caller's; a Python caller that passes none gets the installed plugins' (:func:`parity.plugins.get_registry`)."""
    from parity.compare.simple import SimpleCompare

    if compare_func is None:
        return [SimpleCompare()]
    items = [compare_func] if _named(compare_func) or not isinstance(compare_func, (list, tuple)) else list(compare_func)
    funcs: list[CompareFunc] = []
    for item in items:
        named = _named(item)
        if named is not None:
            registry = registry if registry is not None else get_registry()  # a public entry point's default, taken once
            item = registry.comparator(named[0]).factory(dict(named[1]))
        funcs.append(item)
    return funcs


def _named(item: Any) -> tuple[str, Mapping[str, Any]] | None:
    """``(name, options)`` for a registered metric given as ``"name"`` or ``("name", {options})``."""
    if isinstance(item, str):
        return item, {}
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], Mapping):
        return item
    return None


def compare_iteration(
    actual: IterationResult,
    reference: IterationResult,
    funcs: Sequence[CompareFunc],
    index: int,
    labels: tuple[str, str] | None = None,
    on_output: Callable[[int, int], None] | None = None,
) -> IterationComparison:
    """Compare the outputs both sides have; ``labels`` name the sides in messages (default: their runner names);
    ``on_output(done, total)`` after each output (a layerwise run compares hundreds)."""
    a_label, r_label = labels or (actual.runner_name or "actual", reference.runner_name or "reference")
    common = [n for n in actual if n in reference]
    if not common:
        raise UsageError(f"no common outputs to compare: {a_label} has {names_preview(actual)}; {r_label} has {names_preview(reference)}")
    checks = []
    for done, name in enumerate(common, 1):
        for func in funcs:
            checks.append(func(name, np.asarray(actual[name]), np.asarray(reference[name])))
        if on_output:
            on_output(done, len(common))
    for name in actual:
        if name not in reference:
            checks.append(OutputCheck(name, True, "missing", message=f"not in {r_label}: skipped"))
    return IterationComparison(index, checks)


class Comparator:
    """``Comparator.run(runners, data_loader=...)`` then ``Comparator.compare_accuracy(results)``."""

    @staticmethod
    def stream(
        runners: Sequence[BaseRunner],
        data_loader: Iterable[Mapping[str, np.ndarray]] | None = None,
        on_step: Callable[[int, str], None] | None = None,
    ) -> Iterator[tuple[int, dict[str, np.ndarray], dict[str, IterationResult]]]:
        """Run the runners over the data, one loaded at a time (:func:`parity.compare.streaming.stream`), yielding
        ``(index, feed, {label: result})`` per iteration. Labels are the runners' names, made distinct
        (:func:`runner_labels`). ``on_step(index, what)`` before each step (``"loading onnxrt"``, ``"onnxrt"``:
        its inference). While it runs, the objects alive when it started sit in gc's permanent generation
        (:func:`parity.api.frozen_heap`): close the iterator if you stop before its end."""
        return streaming.stream(runners, data_loader, on_step)

    @staticmethod
    def run(runners: Sequence[BaseRunner], data_loader: Iterable[Mapping[str, np.ndarray]] | None = None, save_inputs: list | None = None) -> RunResults:
        """Run all iterations and keep every result (use :meth:`stream` to bound memory)."""
        results = RunResults([(label, []) for label in runner_labels(runners)])
        with contextlib.closing(Comparator.stream(runners, data_loader)) as iterations:
            for _, feed, iteration in iterations:
                if save_inputs is not None:
                    save_inputs.append(feed)
                for name, res in iteration.items():
                    results[name].append(res)
        return results

    @staticmethod
    def compare_accuracy(
        results: RunResults,
        compare_func: Any = None,
        comparisons: Sequence[tuple[str, str]] | None = None,
        fail_fast: bool = False,
        check_average: bool = False,
        on_compared: Callable[[int, PairComparison, IterationResult, IterationResult], None] | None = None,
        registry: Registry | None = None,
    ) -> AccuracyResult:
        """Compare runner pairs (default: each with the next), iteration by iteration. ``check_average``
        (Polygraphy's ``check_average``, ``--check-average``): each output's metric averaged over the iterations
        must pass instead of every iteration (needs a compare function that averages: ``simple`` with a
        ``check_error_stat`` other than elemwise; refused with ``fail_fast``). Each pair also gets its data-set
        metrics (``pair.dataset``). ``on_compared(index, pair, actual, reference)`` after each iteration. ``registry``
        resolves metric names (default: the installed plugins')."""
        funcs = resolve_compare_funcs(compare_func, registry)
        if check_average:
            refuse_unaveraged(funcs, fail_fast)
        accuracy = AccuracyResult()
        for actual, reference in comparisons or default_pairs(results.runners()):
            if actual == reference:
                raise UsageError(f"comparison ({actual!r}, {reference!r}) compares a run with itself; name two different runs")
            pair = PairComparison(actual, reference, aggregation="average" if check_average else "per_iteration")
            a_iters, b_iters = results[actual], results[reference]
            if len(a_iters) != len(b_iters):
                b_iters = _repeat_golden(b_iters, len(a_iters), reference)
            for index, (a, b) in enumerate(zip(a_iters, b_iters)):
                pair.iterations.append(compare_iteration(a, b, funcs, index, (actual, reference)))
                if on_compared:
                    on_compared(index, pair, a, b)
                if fail_fast and not pair.iterations[-1].passed:
                    break
            accuracy.append(pair)
            if fail_fast and not pair.passed:
                break
        finish(accuracy, funcs, check_average)
        return accuracy


def _repeat_golden(iterations: list[IterationResult], count: int, name: str) -> list[IterationResult]:
    if len(iterations) == 1:
        return iterations * count  # one golden iteration checks every live iteration
    raise UsageError(f"{name} has {len(iterations)} iterations but {count} are being compared; use --iterations {len(iterations)}")
