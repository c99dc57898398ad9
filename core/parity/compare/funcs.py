"""``CompareFunc``: the comparison functions a Python caller builds, under Polygraphy's factory names.

A compare function is any callable ``(output name, actual, reference) -> OutputCheck``; ``Comparator`` and
``run_comparison`` take one or a list. The factories build Parity's own::

    CompareFunc.simple(atol=1e-5, rtol=1e-5, check_error_stat="median")   # --compare-func simple, --atol, ...
    CompareFunc.indices(index_tolerance=1)                                # --compare-func indices
    CompareFunc.cosine(cosine_min=0.999)                                  # any registered metric, by its name

A registered metric's options are named as its CLI options are, without the dashes (``--cosine-min`` is
``cosine_min``). Polygraphy arguments Parity has no counterpart for fail with one line saying what to use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from parity.compare.result import OutputCheck
from parity.errors import UsageError
from parity.plugins import get_registry


class _Registered(type):
    """``CompareFunc.<metric>(**options)`` for every metric a plugin registers (``parity plugins`` lists them)."""

    def __getattr__(cls, name: str) -> Callable[..., Callable[[str, np.ndarray, np.ndarray], OutputCheck]]:
        if name.startswith("_"):
            raise AttributeError(name)
        registry = get_registry()  # a Python caller's entry point, with no caller to pass one: the installed plugins'
        if name.replace("_", "-") not in registry.comparators and name not in registry.comparators:
            known = ", ".join(sorted(registry.comparators))
            raise AttributeError(f"CompareFunc has no metric '{name}' (registered: {known})")
        spec = registry.comparator(name if name in registry.comparators else name.replace("_", "-"))
        return lambda **options: spec.factory(dict(options))


class CompareFunc(metaclass=_Registered):
    """Factories of compare functions; see the module docstring."""

    @staticmethod
    def simple(
        check_shapes: bool | None = None,
        rtol: Mapping[str, float] | float | None = None,
        atol: Mapping[str, float] | float | None = None,
        fail_fast: bool | None = None,
        find_output_func: Any = None,
        check_error_stat: Mapping[str, str] | str | None = None,
        infinities_compare_equal: bool | None = None,
        save_heatmaps: str | None = None,
        show_heatmaps: bool | None = None,
        save_error_metrics_plot: str | None = None,
        show_error_metrics_plot: bool | None = None,
        error_quantile: float | None = None,
        nans_compare_equal: bool | None = None,
        tolerance_preset: str | None = None,
    ) -> Callable[[str, np.ndarray, np.ndarray], OutputCheck]:
        """Element-wise tolerances: ``--compare-func simple`` with ``--atol``, ``--rtol``, ``--check-error-stat``,
        ``--error-quantile``, ``--infinities-compare-equal``, ``--nans-compare-equal``, ``--tolerance-preset``.
        ``atol``/``rtol``/``check_error_stat`` take one value or ``{output name: value}`` (``""``: the default).
        ``fail_fast`` is ``Comparator.compare_accuracy(fail_fast=True)`` in Parity and is accepted for that."""
        from parity.compare.simple import SimpleCompare

        _refuse(check_shapes is False, "check_shapes=False", "Parity always checks shapes: outputs whose shapes differ fail")
        _refuse(find_output_func is not None, "find_output_func", "Parity compares outputs of the same name: rename them first")
        no_plots = (
            "Parity draws pictures for a whole run, not inside a compare function: parity run MODEL ... --save-heatmaps DIR"
            " --save-error-metrics-plot DIR, or parity.run_comparison with those options in RunRequest.plugin_options under the"
            " plugin that declares them (needs pip install \"parity[plots]\")"
        )
        _refuse(bool(save_heatmaps or show_heatmaps), "save_heatmaps/show_heatmaps", no_plots)
        _refuse(bool(save_error_metrics_plot or show_error_metrics_plot), "save_error_metrics_plot/show_error_metrics_plot", no_plots)
        # the options under their CLI names, parsed as `--compare-func simple` parses them
        options = {
            "atol": atol,
            "rtol": rtol,
            "check_error_stat": check_error_stat,
            "error_quantile": error_quantile,
            "infinities_compare_equal": infinities_compare_equal,
            "nans_compare_equal": nans_compare_equal,
            "tolerance_preset": tolerance_preset,
        }
        return SimpleCompare.from_options(options)

    @staticmethod
    def indices(index_tolerance: int | None = None, fail_fast: bool | None = None, top_k: int = 1) -> Callable[[str, np.ndarray, np.ndarray], OutputCheck]:
        """Do the top-k classes agree: ``--compare-func indices --top-k K --index-tolerance T``. Integer outputs
        are taken as index lists already (after an ArgMax or TopK)."""
        from parity.compare.indices import IndicesCompare

        return IndicesCompare(top_k, index_tolerance or 0)


def _refuse(given: bool, argument: str, instead: str) -> None:
    if given:
        raise UsageError(f"CompareFunc.simple({argument}): {instead}")
