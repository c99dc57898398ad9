"""Helpers for composing loaders (Polygraphy's ``polygraphy.func``: plugins take ``extend`` from ``parity.api``,
Polygraphy scripts ``parity_polygraphy.func``).

``extend`` adds your code to any loader, lazy or not, of any backend::

    @func.extend(NetworkFromOnnxPath("model.onnx"))
    def load_network(builder, network, parser):
        network.name = "renamed"          # returns None: load_network returns what the loader returned

    @func.extend(SessionFromOnnx("model.onnx"))
    def load_session(session):
        return session                    # not None: load_network returns this instead
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from parity.backend.base import invoke_if_callable

__all__ = ["extend", "invoke_if_callable"]


def extend(loader: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the decorated function becomes a loader that calls ``loader`` (with the arguments it is called
    with; a ready value is used as it is), passes its result to the function (a tuple is spread into
    arguments), and returns what the function returns, or ``loader``'s result when the function returns None."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def extended(*args: Any, **kwargs: Any) -> Any:
            result = loader(*args, **kwargs) if callable(loader) else loader
            new = func(*result) if isinstance(result, tuple) else func(result)
            return result if new is None else new

        return extended

    return decorate
