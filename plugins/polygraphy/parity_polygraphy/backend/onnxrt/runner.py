"""``OnnxrtRunner``: Polygraphy's ONNX Runtime runner (NumPy arrays in and out; torch tensors in give torch
tensors out where torch is installed)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from parity.api import invoke_if_callable
from parity_polygraphy.backend.base import BaseRunner
from parity_polygraphy.common import TensorMetadata

# onnxruntime's type strings -> NumPy dtype names
_ORT_TYPES = {
    "tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64", "tensor(bool)": "bool",
    "tensor(int8)": "int8", "tensor(int16)": "int16", "tensor(int32)": "int32", "tensor(int64)": "int64",
    "tensor(uint8)": "uint8", "tensor(uint16)": "uint16", "tensor(uint32)": "uint32", "tensor(uint64)": "uint64",
    "tensor(string)": "object",
}  # fmt: skip


def _is_torch(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "torch"


class OnnxrtRunner(BaseRunner):
    """Runs inference with an ``onnxruntime.InferenceSession`` (or a loader of one, built on activation and
    released on deactivation)."""

    def __init__(self, sess: Any, name: str | None = None) -> None:
        super().__init__(name=name, prefix="onnxrt-runner")
        self._sess = sess
        self.sess: Any = None

    def activate_impl(self) -> None:
        self.sess, _ = invoke_if_callable(self._sess)

    def get_input_metadata_impl(self) -> Any:
        import numpy as np

        meta = TensorMetadata()
        for node in self.sess.get_inputs():
            dtype = np.dtype(_ORT_TYPES[node.type]) if node.type in _ORT_TYPES else None
            meta.add(node.name, dtype=dtype, shape=list(node.shape))  # dynamic dims keep their names (or None)
        return meta

    def infer_impl(self, feed_dict: Mapping[str, Any]) -> OrderedDict[str, Any]:
        feed = {name: value.detach().cpu().numpy() if _is_torch(value) else value for name, value in feed_dict.items()}
        start = time.perf_counter()
        values = self.sess.run(None, feed)
        self.inference_time = time.perf_counter() - start
        names = [out.name for out in self.sess.get_outputs()]
        outputs = OrderedDict(zip(names, values))
        if any(_is_torch(value) for value in feed_dict.values()):
            import torch

            outputs = OrderedDict((name, torch.from_numpy(value)) for name, value in outputs.items())
        return outputs

    def deactivate_impl(self) -> None:
        self.sess = None
