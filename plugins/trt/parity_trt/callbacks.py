"""Exceptions raised inside Python callbacks that TensorRT calls.

TensorRT calls Parity's callback objects (calibrator, algorithm selector, output allocator, debug listener,
progress monitor) from C++ through pybind11 trampolines; an exception raised there is caught by the trampoline,
logged, and replaced by a default return value (see ``python/src/infer/pyCore.cpp`` and ``pyInt8.cpp`` in
NVIDIA/TensorRT), so the build or inference goes on and the user never sees Parity's message.

So each callback method is wrapped with :func:`guard`: it catches the exception itself, keeps the first one on
the callback object, and returns the default TensorRT would have used. After the build or inference the caller
calls :func:`raise_pending` with the callback objects, which re-raises the kept exception as Parity's one-line
error (a :class:`~parity.errors.ParityError` as it was, anything else as a :class:`~parity.errors.BackendError`
that names the callback)::

    class Selector(trt.IAlgorithmSelector):
        @guard("the algorithm selector's select_algorithms", default=list)
        def select_algorithms(self, context, choices): ...

    data = builder.build_serialized_network(network, config)
    raise_pending(selector)   # before looking at data: a callback failure explains a failed build
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from parity.api import BackendError, ParityError

F = TypeVar("F", bound=Callable[..., Any])

_ATTR = "_parity_callback_error"


class CallbackError:
    """The first exception a callback object raised, and which callback raised it."""

    def __init__(self, what: str, exc: BaseException) -> None:
        self.what = what
        self.exc = exc
        self.more = 0  # later exceptions, not kept

    def error(self) -> BaseException:
        exc = self.exc
        if isinstance(exc, (ParityError, KeyboardInterrupt, SystemExit)):
            return exc
        text = " ".join(str(exc).split()) or "(no message)"
        more = f" (and {self.more} more time(s))" if self.more else ""
        error = BackendError(f"{self.what} raised {type(exc).__name__}: {text}{more}")
        error.__cause__ = exc
        return error


def keep(owner: Any, what: str, exc: BaseException) -> None:
    """Record ``exc`` on ``owner`` unless an earlier exception is already kept there."""
    kept = getattr(owner, _ATTR, None)
    if kept is None:
        try:
            object.__setattr__(owner, _ATTR, CallbackError(what, exc))
        except AttributeError:  # an object without a __dict__: nothing can be kept, so do not hide it
            raise exc from None
    else:
        kept.more += 1


def guard(what: str, default: Any = None) -> Callable[[F], F]:
    """Decorate a callback method: exceptions are kept on ``self`` and ``default`` is returned instead.

    ``default`` is the value TensorRT would use when the callback fails; a callable (e.g. ``list``) is called
    for a fresh value each time. ``what`` names the callback in the error the user sees.
    """

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - TensorRT would swallow it; we keep it for later
                keep(self, what, exc)
                return default() if callable(default) else default

        return wrapper  # type: ignore[return-value]

    return decorate


def pending(owner: Any) -> CallbackError | None:
    """The exception kept on ``owner``, if any (left in place)."""
    return getattr(owner, _ATTR, None)


def clear(*owners: Any) -> None:
    for owner in owners:
        if owner is not None and getattr(owner, _ATTR, None) is not None:
            object.__setattr__(owner, _ATTR, None)


def raise_pending(*owners: Any) -> None:
    """Raise the first exception kept on any of ``owners`` (``None`` entries are skipped), clearing them all."""
    first = next((kept for owner in owners if owner is not None and (kept := pending(owner)) is not None), None)
    clear(*owners)
    if first is not None:
        raise first.error()
