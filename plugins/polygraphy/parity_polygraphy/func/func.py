"""Polygraphy's ``func``: ``extend`` (add code after any loader or function) and ``constantmethod``."""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable
from typing import Any

from parity_polygraphy import config
from parity_polygraphy.logger import G_LOGGER

__all__ = ["constantmethod", "extend"]


def extend(extend_func: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: calling the decorated ``y`` calls ``extend_func`` with the same arguments, then ``y`` with what
    it returned (a tuple spread into parameters). Where ``y`` also takes ``extend_func``'s parameters first, the
    arguments are forwarded to it too. ``y`` returning None returns ``extend_func``'s value; else ``y``'s.
    ``extend_func`` may also be a ready value (not callable): it is used as its own result, as Parity's loaders allow."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def extended(*args: Any, **kwargs: Any) -> Any:
            result = extend_func(*args, **kwargs) if callable(extend_func) else extend_func
            results = result if isinstance(result, tuple) else (result,)
            params = len(inspect.signature(func).parameters)
            if params == 0 and results == (None,):
                new = func()
            elif params == len(results):
                new = func(*results)
            elif params == len(results) + len(args) + len(kwargs):
                # y(x's arguments..., x's results...): the results go to y's last parameters by name
                names = list(inspect.signature(func).parameters)[-len(results) :]
                new = func(*args, **kwargs, **dict(zip(names, results)))
            else:
                G_LOGGER.critical(
                    f"Function: {_name(func)} accepts {params} parameter(s), but needs to accept {len(results)} parameter(s) from: {_name(extend_func)} instead."
                    f"\nNote: Parameters should be: {tuple(map(type, results))}"
                )
            return result if new is None else new

        return extended

    return decorate


def _name(obj: Any) -> str:
    return getattr(obj, "__name__", None) or str(obj)


def constantmethod(func: Callable[..., Any]) -> Callable[..., Any]:
    """Marks a method that must not change its object's attributes. Checked only with internal checks on
    (POLYGRAPHY_INTERNAL_CORRECTNESS_CHECKS=1, read at import): then a change raises PolygraphyInternalException."""
    if not config.INTERNAL_CORRECTNESS_CHECKS:
        return func

    @functools.wraps(func)
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = copy.copy(vars(self))
        try:
            return func(self, *args, **kwargs)
        finally:
            if vars(self) != before:
                G_LOGGER.internal_error(f"{self} was mutated in a constant method! Note:\nOld state: {before}\nNew state: {vars(self)}")

    return checked
