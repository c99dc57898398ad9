"""What Polygraphy's base classes check about how they are called: ``*_impl`` methods called from outside
their public twin warn, and a constant method (a loader's ``__call__``) must not rebind the object's attributes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from parity_polygraphy.exception import PolygraphyInternalException
from parity_polygraphy.logger import G_LOGGER

_PACKAGE = __name__.split(".")[0]


def _warn(message: str) -> None:
    G_LOGGER.warning(message)


def warn_unless_called_by(method: Callable[..., Any], public: str) -> Callable[..., Any]:
    """Wrap ``method`` (an ``*_impl``) to warn when called by anything but ``public`` or this package."""
    if getattr(method, "_parity_checked", False):
        return method

    @functools.wraps(method)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1)
        module = caller.f_globals.get("__name__", "") or ""
        if module.split(".")[0] != _PACKAGE and caller.f_code.co_name != public:
            _warn(f"Calling '{method.__qualname__}()' directly is not recommended. Please use '{public}()' instead.")
        return method(*args, **kwargs)

    wrapped._parity_checked = True  # type: ignore[attr-defined]
    return wrapped


def wrap_impls(cls: type, impls: dict[str, str]) -> None:
    """Wrap the ``*_impl`` methods ``cls`` itself defines (``impls``: impl name -> public name)."""
    for impl, public in impls.items():
        if impl in cls.__dict__ and callable(cls.__dict__[impl]):
            setattr(cls, impl, warn_unless_called_by(cls.__dict__[impl], public))


def attribute_ids(obj: Any) -> dict[str, int]:
    """Which object each attribute is bound to (identity, not equality: cheap, and safe for arrays)."""
    return {name: id(value) for name, value in getattr(obj, "__dict__", {}).items()}


def check_unchanged(obj: Any, before: dict[str, int], method: str) -> None:
    after = attribute_ids(obj)
    if after != before:
        changed = sorted(set(before) ^ set(after) | {k for k in before.keys() & after.keys() if before[k] != after[k]})
        raise PolygraphyInternalException(f"{type(obj).__name__} was mutated in a constant method ({method}): attributes {', '.join(changed)} changed")
