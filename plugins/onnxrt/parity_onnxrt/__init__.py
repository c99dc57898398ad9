"""ONNX Runtime backend for Parity.

Lazy loaders (``OnnxFromPath``, ``ModifyOnnxOutputs``, ``SessionFromOnnx``), their immediately-evaluated
twins (``onnx_from_path``, ``modify_onnx_outputs``, ``session_from_onnx``) and ``OnnxrtRunner``::

    from parity_onnxrt import OnnxrtRunner, SessionFromOnnx
    with OnnxrtRunner(SessionFromOnnx("model.onnx")) as runner:
        outputs = runner.infer({"x": x})

Names resolve on first use, so Parity's plugin discovery (which imports ``parity_onnxrt.hooks``) stays
free of numpy and onnxruntime. Another plugin that builds on this one imports :mod:`parity_onnxrt.api`.
"""

from __future__ import annotations

from parity.api import lazy_attributes

_LAZY = {
    "ModifyOnnxOutputs": "parity_onnxrt.loaders",
    "OnnxFromPath": "parity_onnxrt.loaders",
    "SessionFromOnnx": "parity_onnxrt.loaders",
    "modify_onnx_outputs": "parity_onnxrt.loaders",
    "onnx_from_path": "parity_onnxrt.loaders",
    "session_from_onnx": "parity_onnxrt.loaders",
    "OnnxrtRunner": "parity_onnxrt.runner",
    "SegmentedSession": "parity_onnxrt.segments",
    "release_freed_memory": "parity_onnxrt.loaders",
}
__all__ = sorted(_LAZY)
__getattr__ = lazy_attributes(__name__, _LAZY)
