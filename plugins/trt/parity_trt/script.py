"""User code hooks: load ``file.py:func`` functions, and ``extend`` to wrap a loader with user code."""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from parity.api import BaseLoader, UsageError, did_you_mean, invoke_if_callable
from parity_trt.options import parse_script


def load_function(spec: str, default_func: str, option: str) -> Callable[..., Any]:
    """Import ``file.py`` and return its ``func`` (``spec`` is ``file.py[:func]``)."""
    path, func = parse_script(spec, default_func, option)
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{option}: no such file '{path}'")
    mod_spec = importlib.util.spec_from_file_location(f"parity_trt_user_{file.stem}", file)
    assert mod_spec and mod_spec.loader
    module = importlib.util.module_from_spec(mod_spec)
    sys.path.insert(0, str(file.parent.resolve()))
    try:
        mod_spec.loader.exec_module(module)
    except Exception as exc:
        raise UsageError(f"{option}: {path} failed to import: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(file.parent.resolve()))
    obj = getattr(module, func, None)
    if not callable(obj):
        names = [n for n in dir(module) if not n.startswith("_")]
        raise UsageError(f"{option}: {path} has no function '{func}'{did_you_mean(func, names)}")
    return obj


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
