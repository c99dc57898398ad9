"""A second, independent ONNX backend for Parity: ``onnx.reference.ReferenceEvaluator`` (pure NumPy).

    from parity_onnx_reference import EvaluatorFromOnnx, OnnxReferenceRunner
    with OnnxReferenceRunner(EvaluatorFromOnnx("model.onnx")) as runner:
        outputs = runner.infer({"x": x})

Names resolve on first use, so plugin discovery (which imports ``parity_onnx_reference.hooks``) stays
free of onnx and numpy.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {"EvaluatorFromOnnx": "runner", "evaluator_from_onnx": "runner", "OnnxReferenceRunner": "runner"}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(importlib.import_module(f"parity_onnx_reference.{_NAMES[name]}"), name)
    raise AttributeError(f"module 'parity_onnx_reference' has no attribute '{name}'")
