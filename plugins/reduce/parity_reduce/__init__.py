"""Parity's reduce plugin: ``parity debug reduce`` and ``parity debug precision``, and their Python API.

    from parity_reduce import Reducer, PrecisionSearch

Heavy modules (onnx, onnxruntime) load on first use of these names.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Reducer": "parity_reduce.reducer",
    "ReduceResult": "parity_reduce.reducer",
    "PrecisionSearch": "parity_reduce.precision",
    "PrecisionResult": "parity_reduce.precision",
    "GraphIndex": "parity_reduce.graph",
    "write_bundle": "parity_reduce.bundle",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'parity_reduce' has no attribute '{name}'")
