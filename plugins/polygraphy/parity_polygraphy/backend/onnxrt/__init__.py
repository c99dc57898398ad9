"""``polygraphy.backend.onnxrt``: ONNX Runtime sessions and their runner."""

from parity_polygraphy.backend.onnxrt.loader import SessionFromOnnx, session_from_onnx
from parity_polygraphy.backend.onnxrt.runner import OnnxrtRunner

__all__ = ["OnnxrtRunner", "SessionFromOnnx", "session_from_onnx"]
