"""``BaseRunner``: Polygraphy's runner interface (activate, infer, get_input_metadata, last_inference_time)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from parity_polygraphy.backend.base._calls import wrap_impls
from parity_polygraphy.backend.base.util import check_inputs
from parity_polygraphy.common import TensorMetadata
from parity_polygraphy.datatype import DataType
from parity_polygraphy.exception import PolygraphyException
from parity_polygraphy.logger import G_LOGGER

_IMPLS = {
    "activate_impl": "activate",
    "deactivate_impl": "deactivate",
    "get_input_metadata_impl": "get_input_metadata",
    "infer_impl": "infer",
}


class BaseRunner:
    """Base class for runners: subclasses implement ``activate_impl``, ``get_input_metadata_impl``,
    ``infer_impl`` (which sets ``self.inference_time``) and ``deactivate_impl``; users call the public twins,
    best through a context manager (``with Runner(...) as runner: runner.infer(feed)``)."""

    RUNNER_COUNTS: defaultdict[str, int] = defaultdict(int)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrap_impls(cls, _IMPLS)

    def __init__(self, name: str | None = None, prefix: str | None = None) -> None:
        prefix = prefix or "Runner"
        if name is None:  # unique per process, as Polygraphy names them: prefix, count, date and time
            count = BaseRunner.RUNNER_COUNTS[prefix]
            BaseRunner.RUNNER_COUNTS[prefix] += 1
            name = f"{prefix}-N{count}-{time.strftime('%x')}-{time.strftime('%X')}"
        self.name = name
        self.inference_time: float | None = None
        self.is_active = False

    def __enter__(self) -> BaseRunner:
        self.activate()
        return self

    def __exit__(self, exc_type: object, exc_value: object, traceback: object) -> None:
        self.deactivate()

    # --- lifecycle ---------------------------------------------------------------------------------
    def activate_impl(self) -> None:
        pass

    def activate(self) -> None:
        if self.is_active:
            G_LOGGER.warning(f"{self.name:35} | Already active; will not activate again. If you really want to activate this runner again, call activate_impl() directly")
            return
        self.activate_impl()
        self.is_active = True

    def deactivate_impl(self) -> None:
        pass

    def deactivate(self) -> None:
        if not self.is_active:
            G_LOGGER.warning(f"{self.name:35} | Not active; will not deactivate. If you really want to deactivate this runner, call deactivate_impl() directly")
            return
        self.inference_time = None
        self.is_active = None  # type: ignore[assignment] - neither active nor inactive while tearing down
        try:
            self.deactivate_impl()
        finally:
            self.is_active = False

    def __del__(self) -> None:
        if getattr(self, "is_active", False):
            print(f"[W] {self.name:35} | Was activated but never deactivated. This could cause a memory leak!")

    # --- inference ---------------------------------------------------------------------------------
    def get_input_metadata_impl(self) -> Any:
        raise NotImplementedError("BaseRunner is an abstract class")

    def get_input_metadata(self, use_numpy_dtypes: bool | None = None) -> Any:
        """The inputs' names, dtypes and shapes (a ``TensorMetadata``; dynamic dims are None or names).

        ``use_numpy_dtypes`` (default True, deprecated in Polygraphy): NumPy dtypes instead of ``DataType``."""
        self._require_active("get_input_metadata")
        use_numpy_dtypes = True if use_numpy_dtypes is None else use_numpy_dtypes
        out = TensorMetadata()
        for name, (dtype, shape) in self.get_input_metadata_impl().items():
            dtype = DataType.from_dtype(dtype) if dtype is not None else None
            out.add(name, dtype=dtype, shape=shape)
            if use_numpy_dtypes and dtype is not None:
                # TensorMetadata stores DataTypes; as in Polygraphy, the NumPy dtype is set past that conversion
                out[name]._dtype = DataType.to_dtype(dtype, "numpy")
        return out

    def infer_impl(self, feed_dict: Mapping[str, Any]) -> Any:
        raise NotImplementedError("BaseRunner is an abstract class")

    def infer(self, feed_dict: Mapping[str, Any], check_inputs: bool = True, *args: Any, **kwargs: Any) -> Any:
        """Run one inference: the outputs by name. ``check_inputs``: check names, dtypes and shapes first
        (a ``PolygraphyException`` naming the problem)."""
        self._require_active("infer")
        if check_inputs:
            _check(feed_dict, self.get_input_metadata(use_numpy_dtypes=False))
        return self.infer_impl(feed_dict, *args, **kwargs)

    def last_inference_time(self) -> float | None:
        """Seconds the last ``infer()`` took, or None when the runner did not measure it."""
        if self.inference_time is None:
            G_LOGGER.warning(
                f"{self.name:35} | `inference_time` was not set. Inference time will be incorrect! "
                "To correctly compare runtimes, please set the `inference_time` attribute in `infer_impl()`"
            )
        return self.inference_time

    def _require_active(self, method: str) -> None:
        if not self.is_active:
            raise PolygraphyException(f"{self.name:35} | Must be activated prior to calling {method}()")


_check = check_inputs  # infer's parameter shadows the module-level name
