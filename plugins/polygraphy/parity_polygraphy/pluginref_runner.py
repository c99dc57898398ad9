"""The Parity runner behind ``parity run --pluginref`` (:mod:`parity_polygraphy.pluginref_backend` registers it):
Polygraphy's :class:`parity_polygraphy.backend.pluginref.PluginRefRunner` as a :class:`parity.api.BaseRunner`."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from parity.api import BaseRunner, TensorMeta


class PluginRefBackendRunner(BaseRunner):
    """A Parity runner around :class:`parity_polygraphy.backend.pluginref.PluginRefRunner`."""

    prefix = "pluginref"

    def __init__(self, model: str, outputs: list[str] | None = None, exclude: list[str] | None = None, external_data_dir: str | None = None) -> None:
        super().__init__()
        self.model, self.outputs, self.exclude, self.external_data_dir = model, outputs, exclude, external_data_dir
        self._inner: Any = None

    def activate_impl(self) -> None:
        from parity_polygraphy.backend.onnx import GsFromOnnx, ModifyOutputs, OnnxFromPath  # here: onnx loads on activation
        from parity_polygraphy.backend.pluginref import PluginRefRunner  # here: onnx_graphsurgeon, likewise

        model: Any = OnnxFromPath(self.model, external_data_dir=self.external_data_dir)
        if self.outputs:  # --onnx-outputs, as the other ONNX backends mark them
            model = ModifyOutputs(model, outputs=self.outputs, exclude_outputs=self.exclude or None)
        self._inner = PluginRefRunner(GsFromOnnx(model), name=self.name)
        self._inner.activate()

    def deactivate_impl(self) -> None:
        if self._inner is not None:
            self._inner.deactivate()
            self._inner = None

    def get_input_metadata_impl(self) -> dict[str, TensorMeta]:
        # from the graph itself: PluginRefRunner's own metadata holds NumPy dtypes, which Polygraphy's internal
        # checks (POLYGRAPHY_INTERNAL_CORRECTNESS_CHECKS) reject in a TensorMetadata
        def numpy(dtype: Any) -> Any:
            if dtype is None:
                return None
            return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(dtype) if isinstance(dtype, int) else dtype)

        return {t.name: TensorMeta(numpy(t.dtype), None if t.shape is None else tuple(t.shape)) for t in self._inner.graph.inputs}

    def infer_impl(self, feed_dict: dict[str, Any]) -> dict[str, Any]:
        return dict(self._inner.infer(feed_dict, check_inputs=False))  # Parity's infer has checked the feed
