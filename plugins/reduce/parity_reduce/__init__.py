"""Parity's reduce plugin: ``parity debug reduce`` and ``parity debug precision``, and their Python API.

    from parity_reduce import Reducer, PrecisionSearch

Heavy modules (onnx, onnxruntime) load on first use of these names.
"""

from __future__ import annotations

from parity.api import lazy_attributes

_LAZY = {
    "Reducer": "parity_reduce.reducer",
    "ReduceResult": "parity_reduce.reducer",
    "PrecisionSearch": "parity_reduce.precision",
    "PrecisionResult": "parity_reduce.precision",
    "GraphIndex": "parity_reduce.graph",
    "write_bundle": "parity_reduce.bundle",
}

__all__ = list(_LAZY)

__getattr__ = lazy_attributes(__name__, _LAZY)
