"""ONNX Runtime backend for Parity.

Lazy loaders (``OnnxFromPath``, ``ModifyOnnxOutputs``, ``SessionFromOnnx``), their immediately-evaluated
twins (``onnx_from_path``, ``modify_onnx_outputs``, ``session_from_onnx``) and ``OnnxrtRunner``::

    from parity_onnxrt import OnnxrtRunner, SessionFromOnnx
    with OnnxrtRunner(SessionFromOnnx("model.onnx")) as runner:
        outputs = runner.infer({"x": x})

Names resolve on first use, so Parity's plugin discovery (which imports ``parity_onnxrt.hooks``) stays
free of numpy and onnxruntime.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "ModifyOnnxOutputs": "loaders",
    "OnnxFromPath": "loaders",
    "SessionFromOnnx": "loaders",
    "modify_onnx_outputs": "loaders",
    "onnx_from_path": "loaders",
    "session_from_onnx": "loaders",
    "OnnxrtRunner": "runner",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(importlib.import_module(f"parity_onnxrt.{_NAMES[name]}"), name)
    raise AttributeError(f"module 'parity_onnxrt' has no attribute '{name}'")
