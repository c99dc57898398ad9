"""Polygraphy's post-processing functions (``polygraphy.comparator.postprocess``): ``PostprocessFunc.top_k``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from parity_polygraphy.comparator.compare import value_or_from_dict
from parity_polygraphy.comparator.struct import IterationResult

__all__ = ["PostprocessFunc", "BasePostprocessFunc", "TopKPostprocessFunc"]


def top_k_indices(arr: Any, k: int, axis: int = -1) -> Any:
    """The indices of the ``k`` largest values along ``axis``, largest first (ties: the lower index first); ``k``
    is clamped to the axis length. A torch tensor gives a torch tensor."""
    if not isinstance(arr, np.ndarray) and hasattr(arr, "topk"):  # torch
        k = min(k, arr.shape[axis])
        return arr.topk(k, dim=axis).indices
    arr = np.asarray(arr)
    k = min(k, arr.shape[axis])
    order = np.argsort(-arr.astype(np.float64) if arr.dtype != np.float64 else -arr, axis=axis, kind="stable")
    return np.take(order, np.arange(k), axis=axis)


class PostprocessFunc:
    """Factories of functions that transform an ``IterationResult`` before it is compared
    (``Comparator.postprocess``)."""

    @staticmethod
    def top_k(k: Any = None) -> Callable[[IterationResult], IterationResult]:
        """Replace each output by the indices of its ``k`` largest values (default 10) along the last axis, or
        along ``axis`` with ``k=(K, axis)``; ``k`` may be a per-output dict (``""``: the default; outputs
        with no entry and no default are left as they are). The result is changed in place and returned."""
        k = 10 if k is None else k

        def top_k(iter_result: IterationResult) -> IterationResult:
            for name, output in list(iter_result.items()):
                k_val = value_or_from_dict(k, name)
                if k_val:
                    axis = -1
                    if isinstance(k_val, (tuple, list)):
                        k_val, axis = k_val
                    iter_result[name] = top_k_indices(output, k_val, axis)
            return iter_result

        return top_k


class BasePostprocessFunc:
    """Polygraphy 0.53's base of post-processing functors: ``func(iter_result) -> IterationResult``."""

    def __call__(self, iter_result: IterationResult) -> IterationResult:
        raise NotImplementedError()


class TopKPostprocessFunc(BasePostprocessFunc):
    """Polygraphy 0.53's class form of :meth:`PostprocessFunc.top_k`."""

    def __init__(self, k: Any = None) -> None:
        self.k = 10 if k is None else k
        self._func = PostprocessFunc.top_k(self.k)

    def __call__(self, iter_result: IterationResult) -> IterationResult:
        return self._func(iter_result)
