"""A second, independent ONNX backend for Parity: ``onnx.reference.ReferenceEvaluator`` (pure NumPy).

    from parity_onnx_reference import EvaluatorFromOnnx, OnnxReferenceRunner
    with OnnxReferenceRunner(EvaluatorFromOnnx("model.onnx")) as runner:
        outputs = runner.infer({"x": x})

Names resolve on first use, so plugin discovery (which imports ``parity_onnx_reference.hooks``) stays
free of onnx and numpy.
"""

from __future__ import annotations

from parity.api import lazy_attributes

_NAMES = {"EvaluatorFromOnnx": "runner", "evaluator_from_onnx": "runner", "OnnxReferenceRunner": "runner"}
__all__ = sorted(_NAMES)

__getattr__ = lazy_attributes(__name__, {name: f"parity_onnx_reference.{module}" for name, module in _NAMES.items()})
