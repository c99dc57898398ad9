"""User code hooks: load ``file.py:func`` functions, and ``extend`` to wrap a loader with user code."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from parity.api import BaseLoader, invoke_if_callable, load_user_function
from parity_trt._trt import INSTALL_HINT


def load_function(spec: str, default_func: str, option: str) -> Callable[..., Any]:
    """Import ``file.py`` and return its ``func`` (``spec`` is ``file.py[:func]``); a script that imports
    TensorRT where it is not installed gets TensorRT's one-line missing-dependency error."""
    return load_user_function(spec, default_func, option, missing={"tensorrt": INSTALL_HINT})


def extend(loader: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: run ``loader`` (lazy or not), pass its results to the decorated function, return them.

    ``@extend(NetworkFromOnnxPath("m.onnx")) def load_network(builder, network, parser): network.name = "x"``
    makes ``load_network`` a loader returning ``(builder, network, parser)``; if the function returns
    something other than ``None``, that is returned instead.
    """

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            result = loader(*args, **kwargs) if isinstance(loader, BaseLoader) or callable(loader) else loader
            new = func(*result) if isinstance(result, tuple) else func(result)
            return result if new is None else new

        return wrapped

    return decorate


def resolve(obj: Any) -> Any:
    """A loader's value (calling it) or the object itself."""
    return invoke_if_callable(obj)[0]
