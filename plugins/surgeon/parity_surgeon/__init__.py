"""ONNX graph surgery and layerwise debugging for Parity.

Immediately-evaluated functions (each returns a new model; the input is never modified) and lazy loaders::

    from parity_surgeon import sanitize, extract, insert_node, convert_to_fp16, lint, localize
    model, report = sanitize("model.onnx", fold_constants=True)
    sub = extract("model.onnx", inputs=["x"], outputs=["y"])
    result = localize("model.onnx", ["onnxrt", "onnxrt"], reference_model="model_fp16.onnx")
    print(result.first.node, result.suspect.verdict)

Names resolve on first use so that plugin discovery (which imports ``parity_surgeon.hooks``) stays light.
Another plugin that builds on this one imports :mod:`parity_surgeon.api`.
"""

from __future__ import annotations

from parity.api import lazy_attributes

_NAMES = {
    "sanitize": "sanitizer", "SanitizeOnnx": "sanitizer", "SanitizeReport": "sanitizer",
    "extract": "extractor", "extract_node": "extractor", "ExtractSubgraph": "extractor", "TensorSpec": "extractor",
    "insert_node": "inserter",
    "convert_to_fp16": "fp16", "Fp16FromOnnx": "fp16", "Fp16Report": "fp16",
    "lint": "linter", "LintReport": "linter",
    "localize": "localizer", "LocalizeResult": "localizer", "RunnerSpec": "localizer", "NodeVerdict": "localizer",
    "QuantizationReport": "localizer", "pair_models": "qdq", "Pairing": "qdq",
}  # fmt: skip
__all__ = sorted(_NAMES)

__getattr__ = lazy_attributes(__name__, {name: f"parity_surgeon.{module}" for name, module in _NAMES.items()})
