"""``EvaluatorFromOnnx`` (lazy loader) and ``OnnxReferenceRunner`` around ``onnx.reference.ReferenceEvaluator``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from parity.api import BackendError, BaseLoader, BaseRunner, ModelError, TensorMeta, WeightReader, first_line, invoke_if_callable, onnx_external, onnx_models


class EvaluatorFromOnnx(BaseLoader):
    """Builds a ``ReferenceEvaluator`` from a path, a ``ModelProto`` or a loader of one.

    ``outputs``/``exclude`` mark other tensors as outputs first (``--onnx-outputs``, ``'mark all'``).
    A model's external data is never loaded into the proto: the graph is parsed with its weights left in their
    files (in ``external_data_dir``, default the model's folder; ``base_dir`` for a ModelProto) and each
    weight is fed to the evaluator at each run as a read-only memory-mapped array
    (:class:`parity.api.WeightReader`), so a weight is held once, by the page cache.
    """

    def __init__(
        self, model: Any, outputs: Sequence[str] = (), exclude: Sequence[str] = (), external_data_dir: Any = None, base_dir: Any = None
    ) -> None:
        self.model, self.outputs, self.exclude = model, list(outputs), list(exclude)
        self.external_data_dir, self.base_dir = external_data_dir, base_dir

    def __call__(self) -> Any:
        from onnx.reference import ReferenceEvaluator

        model, _ = invoke_if_callable(self.model)
        base = self.base_dir
        if isinstance(model, str):
            base = onnx_models.data_dir(model, self.external_data_dir)
            model = onnx_models.load(model, load_external_data=False, external_data_dir=self.external_data_dir)
        if self.outputs:
            onnx_models.mark_outputs(model, self.outputs, self.exclude)
        meta = onnx_models.graph_inputs(model)
        weights = _feed_weights(model, base)
        try:
            evaluator = ReferenceEvaluator(model)
        except Exception as exc:  # unsupported ops and malformed graphs surface here, as many exception types
            raise ModelError(f"onnx.reference cannot load the model: {type(exc).__name__}: {first_line(exc, 300)}") from None
        return _WithWeights(evaluator, weights, meta) if weights else evaluator


def _feed_weights(model: Any, base_dir: Any) -> dict[str, np.ndarray]:
    """Turn the main graph's external initializers into graph inputs and return their values (memory-mapped,
    read-only, no copy); external tensors elsewhere (a Constant's value, a subgraph's initializer) are
    brought inside the proto, as the evaluator reads those itself."""
    import onnx

    reader = WeightReader(base_dir)  # not closed: the arrays it returns keep their maps open while alive
    graph = model.graph
    moved = [t for t in graph.initializer if onnx_external.is_external(t)]
    weights = {t.name: reader.array(t) for t in moved}
    if moved:
        kept = [t for t in graph.initializer if not onnx_external.is_external(t)]
        del graph.initializer[:]
        graph.initializer.extend(kept)
        listed = {vi.name for vi in graph.input}
        graph.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in moved if t.name not in listed)
    for tensor in onnx_external.tensors(model):
        if onnx_external.is_external(tensor):
            tensor.CopyFrom(reader.inline_copy(tensor))
    return weights


class _WithWeights:
    """A ``ReferenceEvaluator`` whose weights are graph inputs, fed from their memory maps at each run; it
    shows the model's own inputs only."""

    def __init__(self, evaluator: Any, weights: dict[str, np.ndarray], meta: dict[str, TensorMeta]) -> None:
        self.evaluator, self.weights, self.input_metadata = evaluator, weights, meta
        self.input_names = [n for n in evaluator.input_names if n not in weights]
        self.output_names = evaluator.output_names

    def run(self, outputs: Any, feed: dict[str, Any]) -> Any:
        return self.evaluator.run(outputs, {**feed, **self.weights})


def evaluator_from_onnx(model: Any, outputs: Sequence[str] = (), exclude: Sequence[str] = (), external_data_dir: Any = None, base_dir: Any = None) -> Any:
    return EvaluatorFromOnnx(model, outputs, exclude, external_data_dir, base_dir)()


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
        if isinstance(self.evaluator, _WithWeights):
            self._meta = dict(self.evaluator.input_metadata)
        elif proto is not None and hasattr(proto, "graph"):
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
