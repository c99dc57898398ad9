"""User code hooks: load ``file.py:func`` functions; ``extend`` (wrap a loader with user code) is the core's
``parity.func.extend``, re-exported for scripts that import it from ``parity_trt``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parity.api import extend, invoke_if_callable, load_user_function
from parity_trt._trt import INSTALL_HINT

__all__ = ["extend", "load_function", "resolve"]


def load_function(spec: str, default_func: str, option: str) -> Callable[..., Any]:
    """Import ``file.py`` and return its ``func`` (``spec`` is ``file.py[:func]``); a script that imports
    TensorRT where it is not installed gets TensorRT's one-line missing-dependency error."""
    return load_user_function(spec, default_func, option, missing={"tensorrt": INSTALL_HINT})


def resolve(obj: Any) -> Any:
    """A loader's value (calling it) or the object itself."""
    return invoke_if_callable(obj)[0]
