"""The ``indices`` metric: do two classifiers agree on their top-k classes?

Integer outputs are taken as index lists already (e.g. after an ArgMax/TopK); float outputs are reduced to
the indices of their ``k`` largest values along the last axis. Each of ``actual``'s top-k indices must
appear in the reference's top-(k + index_tolerance) indices.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from parity.compare.result import OutputCheck


def top_k(array: np.ndarray, k: int) -> np.ndarray:
    if np.issubdtype(array.dtype, np.integer):
        return array.reshape(-1, array.shape[-1] if array.ndim else 1)[:, :k] if array.ndim else array.reshape(1, 1)
    flat = np.asarray(array, dtype=np.float64).reshape(-1, array.shape[-1])
    k = min(k, flat.shape[-1])
    part = np.argpartition(-flat, k - 1, axis=-1)[:, :k]
    order = np.take_along_axis(-flat, part, axis=-1).argsort(axis=-1, kind="stable")
    return np.take_along_axis(part, order, axis=-1)


class IndicesCompare:
    name = "indices"
    better_when_higher = frozenset({"agreement"})

    def __init__(self, k: int = 1, index_tolerance: int = 0) -> None:
        self.k, self.index_tolerance = k, index_tolerance

    def __call__(self, name: str, actual: np.ndarray, reference: np.ndarray) -> OutputCheck:
        thresholds = {"top_k": self.k, "index_tolerance": self.index_tolerance}
        if actual.shape != reference.shape:
            return OutputCheck(name, False, self.name, {}, thresholds, f"shape {list(actual.shape)} != reference {list(reference.shape)}")
        mine = top_k(actual, self.k)
        theirs = top_k(reference, self.k + self.index_tolerance)
        rows_ok = np.array([set(m.tolist()) <= set(t.tolist()) for m, t in zip(mine, theirs)])
        agree = float(rows_ok.mean()) if rows_ok.size else 1.0
        passed = bool(rows_ok.all())
        msg = "" if passed else f"top-{self.k} classes differ in {int((~rows_ok).sum())} of {rows_ok.size} rows"
        return OutputCheck(name, passed, self.name, {"agreement": agree}, thresholds, msg, {"rows": int(rows_ok.size), "agreeing_rows": int(rows_ok.sum())})

    def dataset_values(self, checks: Mapping[int, OutputCheck]) -> dict[str, float]:
        """The top-k agreement over the data set: agreeing rows of every iteration over all their rows (not the
        mean of the iterations' agreements, which would weigh a 1-row iteration like a 1000-row one)."""
        rows = sum(int(c.details.get("rows", 0)) for c in checks.values())
        agreeing = sum(int(c.details.get("agreeing_rows", 0)) for c in checks.values())
        if not rows:
            return {}
        return {"agreement": agreeing / rows, "rows": float(rows), "agreeing_rows": float(agreeing), "top_k": float(self.k)}

    def why_no_average(self) -> str:
        return (
            "the indices metric has no averaged verdict (every row's top-k classes must agree);"
            " without --check-average the top-k agreement over the data set is in the summary and in --report"
        )
