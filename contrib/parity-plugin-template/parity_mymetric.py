"""parity-mymetric: one comparison metric, registered through one hook.

Use it as ``parity run model.onnx --onnxrt --onnx-ref --compare-func mymetric --mymetric-max 1e-4``.
Keep this module cheap to import (Parity imports it on every start): numpy is imported inside the factory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from parity.api import ComparatorSpec, hookimpl

DEFAULT_MAX = 1e-3


def make_compare(options: Mapping[str, Any]):
    """Called once per ``parity run`` with every parsed option; returns the per-output compare function."""
    import numpy as np

    from parity.api import OutputCheck

    limit = options.get("mymetric_max")
    limit = DEFAULT_MAX if limit is None else float(limit)
    if limit < 0:
        raise ValueError(f"--mymetric-max must be >= 0, got {limit:g}")  # Parity prints it as a usage error

    def compare(name: str, actual: np.ndarray, reference: np.ndarray) -> OutputCheck:
        if actual.shape != reference.shape:
            return OutputCheck(name, False, "mymetric", message=f"shape {list(actual.shape)} != {list(reference.shape)}")
        diff = np.abs(actual.astype(np.float64) - reference.astype(np.float64))
        worst = float(np.nanmax(diff, initial=0.0)) if not np.isnan(diff).any() else float("nan")
        passed = worst <= limit  # False for NaN
        return OutputCheck(name, passed, "mymetric", {"max_abs": worst}, {"max": limit}, "" if passed else f"{worst:.4g} > {limit:g}")

    return compare


@hookimpl
def parity_register_comparators(register):
    register(
        ComparatorSpec(
            "mymetric",
            make_compare,
            "largest absolute difference",
            options=(click.Option(["--mymetric-max"], type=float, default=None, help=f"mymetric: largest difference that passes [{DEFAULT_MAX:g}]."),),
        )
    )
