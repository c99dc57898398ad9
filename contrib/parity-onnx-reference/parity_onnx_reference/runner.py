"""``EvaluatorFromOnnx`` (lazy loader) and ``OnnxReferenceRunner`` around ``onnx.reference.ReferenceEvaluator``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from parity.api import BackendError, BaseLoader, BaseRunner, ModelError, TensorMeta, first_line, invoke_if_callable, onnx_models


class EvaluatorFromOnnx(BaseLoader):
    """Builds a ``ReferenceEvaluator`` from a path, a ``ModelProto`` or a loader of one.

    ``outputs``/``exclude`` mark other tensors as outputs first (``--onnx-outputs``, ``'mark all'``).
    """

    def __init__(self, model: Any, outputs: Sequence[str] = (), exclude: Sequence[str] = ()) -> None:
        self.model, self.outputs, self.exclude = model, list(outputs), list(exclude)

    def __call__(self) -> Any:
        from onnx.reference import ReferenceEvaluator

        model, _ = invoke_if_callable(self.model)
        if isinstance(model, str):
            model = onnx_models.load(model)
        if self.outputs:
            onnx_models.mark_outputs(model, self.outputs, self.exclude)
        try:
            return ReferenceEvaluator(model)
        except Exception as exc:  # unsupported ops and malformed graphs surface here, as many exception types
            raise ModelError(f"onnx.reference cannot load the model: {type(exc).__name__}: {first_line(exc, 300)}") from None


def evaluator_from_onnx(model: Any, outputs: Sequence[str] = (), exclude: Sequence[str] = ()) -> Any:
    return EvaluatorFromOnnx(model, outputs, exclude)()


class OnnxReferenceRunner(BaseRunner):
    """Runs ONNX models with the pure-NumPy reference implementation of every operator."""

    prefix = "onnx-ref"

    def __init__(self, evaluator: Any, name: str | None = None) -> None:
        super().__init__(name)
        self._source = evaluator
        self.evaluator: Any = None
        self._meta: dict[str, TensorMeta] = {}

    def activate_impl(self) -> None:
        self.evaluator, _ = invoke_if_callable(self._source)
        # ReferenceEvaluator keeps the proto it was built from; its inputs give dtype and shape
        proto = getattr(self.evaluator, "proto_", None)
        if proto is not None and hasattr(proto, "graph"):
            self._meta = onnx_models.graph_inputs(proto)
        else:
            self._meta = {name: TensorMeta(None, None) for name in self.evaluator.input_names}

    def deactivate_impl(self) -> None:
        self.evaluator = None

    def get_input_metadata_impl(self) -> dict[str, TensorMeta]:
        return self._meta

    def infer_impl(self, feed_dict: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = list(self.evaluator.output_names)
        try:
            values = self.evaluator.run(None, feed_dict)
        except Exception as exc:  # an operator's NumPy code can raise anything
            raise BackendError(f"{self.name}: inference failed: {type(exc).__name__}: {first_line(exc, 300)}") from None
        # some reference kernels return Python scalars or 0-d views: hand back real arrays
        return {name: np.asarray(value) for name, value in zip(names, values)}
