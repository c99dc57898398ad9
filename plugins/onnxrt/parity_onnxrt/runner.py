"""``OnnxrtRunner``: runs an ONNX Runtime session behind Parity's runner interface."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from parity.api import BackendError, BaseRunner, TensorMeta, UsageError, invoke_if_callable, onnx_models
from parity_onnxrt.messages import reason

_ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int8)": np.int8, "tensor(int16)": np.int16, "tensor(int32)": np.int32, "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16, "tensor(uint32)": np.uint32, "tensor(uint64)": np.uint64,
    "tensor(bool)": np.bool_,
}  # fmt: skip
# onnxruntime's messages for a feed it refuses before running (InferenceSession::ValidateInputs); a pattern that
# re compiles when an inference fails, not at import
_BAD_INPUT = r"Invalid rank for input|Got invalid dimensions for input|Unexpected input data type|Missing Input|Invalid input name|Invalid Feed Input Name"


def _unknown_rank(session: Any, names: list[str]) -> set[str]:
    """Which of ``names`` have no shape in the model. onnxruntime reports shape [] both for a scalar and for an
    input without a shape (unknown rank), and checks neither's rank at run time: only the model tells them apart."""
    if not names:
        return set()
    path, data = getattr(session, "_model_path", None), getattr(session, "_model_bytes", None)
    try:
        if isinstance(path, str):
            meta = onnx_models.read_inputs(path)
        elif data:
            import onnx

            meta = onnx_models.graph_inputs(onnx.ModelProto.FromString(bytes(data)))
        else:
            return set()
    except Exception:  # noqa: BLE001 - the session loaded it; without the model's word, [] stays a scalar
        return set()
    return {n for n in names if n in meta and meta[n].shape is None}


class OnnxrtRunner(BaseRunner):
    prefix = "onnxrt"

    def __init__(self, session: Any, name: str | None = None) -> None:
        super().__init__(name)
        self._session_source = session
        self.session: Any = None
        self._meta: dict[str, TensorMeta] | None = None

    def activate_impl(self) -> None:
        self.session, _ = invoke_if_callable(self._session_source)
        unknown = _unknown_rank(self.session, [i.name for i in self.session.get_inputs() if not i.shape])
        self._meta = {
            i.name: TensorMeta(np.dtype(_ORT_TYPES[i.type]) if i.type in _ORT_TYPES else None, None if i.name in unknown else tuple(i.shape))
            for i in self.session.get_inputs()
        }

    def deactivate_impl(self) -> None:
        self.session = None

    def get_input_metadata_impl(self) -> dict[str, TensorMeta]:
        assert self._meta is not None
        return self._meta

    def infer_impl(self, feed_dict: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [o.name for o in self.session.get_outputs()]
        try:
            values = self.session.run(names, feed_dict)
        except Exception as exc:  # onnxruntime's pybind errors
            if re.search(_BAD_INPUT, str(exc)):  # onnxruntime's own checks of the feed: bad input, not a backend failure
                raise UsageError(f"{self.name}: bad input: {reason(exc)}") from None
            raise BackendError(f"{self.name}: inference failed: {reason(exc)}") from None
        return dict(zip(names, values))
