"""Runners and loaders: the two halves of every backend.

A *loader* is a lazy, composable callable (``EngineFromNetwork(NetworkFromOnnxPath("m.onnx"))``): nothing
happens until it is called. Each loader has an immediately-evaluated twin function written out by hand
in its plugin (``session_from_onnx(...)``). A *runner* owns an inference session and is used as a context
manager: ``with OnnxrtRunner(SessionFromOnnx("m.onnx")) as r: r.infer({"x": x})``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np

from parity.data.meta import TensorMeta
from parity.errors import BackendError, UsageError
from parity.util.text import did_you_mean, names_preview

T = TypeVar("T")


class BaseLoader:
    """A lazy step: subclasses implement ``__call__`` and may take other loaders as arguments."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - interface
        raise NotImplementedError


def invoke_if_callable(obj: T | Callable[[], T]) -> tuple[T, bool]:
    """Resolve a loader or a ready object; the bool says whether we built it (and so must free it)."""
    if callable(obj) and not isinstance(obj, (bytes, str)):
        return obj(), True
    return obj, False  # type: ignore[return-value]


class BaseRunner:
    """Runs one model on one backend. Subclasses implement the ``*_impl`` methods."""

    prefix = "runner"

    def __init__(self, name: str | None = None) -> None:
        self.name = name or self.prefix
        self.is_active = False
        self.last_inference_time: float | None = None

    # --- lifecycle -----------------------------------------------------------------------------------
    def activate(self) -> BaseRunner:
        if not self.is_active:
            self.activate_impl()
            self.is_active = True
        return self

    def deactivate(self) -> None:
        if self.is_active:
            try:
                self.deactivate_impl()
            finally:
                self.is_active = False

    def __enter__(self) -> BaseRunner:
        return self.activate()

    def __exit__(self, *exc: object) -> None:
        self.deactivate()

    # --- inference ---------------------------------------------------------------------------------
    def get_input_metadata(self) -> dict[str, TensorMeta]:
        self._require_active()
        return self.get_input_metadata_impl()

    def infer(self, feed_dict: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one inference; checks names, then records ``last_inference_time`` in seconds."""
        self._require_active()
        feed = coerce_feed(feed_dict, self.get_input_metadata(), self.name)
        start = time.perf_counter()
        outputs = self.infer_impl(feed)
        self.last_inference_time = time.perf_counter() - start
        return outputs

    def _require_active(self) -> None:
        if not self.is_active:
            raise BackendError(f"runner {self.name} is not active: use it as a context manager or call activate()")

    # --- to implement ------------------------------------------------------------------------------
    def activate_impl(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def deactivate_impl(self) -> None:
        pass

    def get_input_metadata_impl(self) -> dict[str, TensorMeta]:  # pragma: no cover - interface
        raise NotImplementedError

    def infer_impl(self, feed_dict: dict[str, np.ndarray]) -> dict[str, np.ndarray]:  # pragma: no cover
        raise NotImplementedError


def coerce_feed(feed: Mapping[str, np.ndarray], meta: Mapping[str, TensorMeta], who: str) -> dict[str, np.ndarray]:
    """Check names, ranks and static dims; cast between float types (fp32 inputs for an fp16 model, as saved
    inputs often are) with a warning; reject any other dtype mismatch. One line per problem."""
    extra = [name for name in feed if name not in meta]
    missing = [name for name in meta if name not in feed]
    if missing:  # the cause, named first: the extra tensors are often the missing inputs under other names
        also = f"; the data has {names_preview(repr(n) for n in extra)} instead, which the model does not take" if extra else ""
        what = f"input '{missing[0]}' (expected {meta[missing[0]]})" if len(missing) == 1 else f"inputs {names_preview(repr(n) for n in missing)}"
        raise UsageError(f"{who}: no data for {what}{also}")
    for name in extra:
        raise UsageError(f"{who}: the model has no input '{name}'{did_you_mean(name, meta)}; inputs: {names_preview(meta)}")
    out: dict[str, np.ndarray] = {}
    for name, m in meta.items():
        array = np.asarray(feed[name])
        if m.dtype is not None and array.dtype != m.dtype and np.issubdtype(array.dtype, np.floating) and np.issubdtype(m.dtype, np.floating):
            cast = array.astype(m.dtype)
            overflow = bool(np.isinf(cast).sum() > np.isinf(array).sum())
            warnings.warn(
                f"{who}: casting input '{name}' from {array.dtype.name} to {m.dtype.name} as the model expects" + (" (some values overflow to inf)" if overflow else ""),
                stacklevel=3,
            )
            array = cast
        problem = m.mismatch(array)
        if problem:
            raise UsageError(f"{who}: input '{name}' {problem}")
        out[name] = array
    return out
